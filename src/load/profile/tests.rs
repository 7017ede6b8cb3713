use super::*;

#[test]
fn every_builtin_profile_parses_and_resolves() {
    for (name, _) in BUILTIN {
        let p = Profile::load(name).unwrap();
        let stages = p.resolve_stages().unwrap();
        assert!(!stages.is_empty(), "{name}");
    }
    let bp = Profile::load("breakpoint").unwrap();
    let vus: Vec<u32> = bp
        .resolve_stages()
        .unwrap()
        .iter()
        .filter_map(|s| s.vus)
        .collect();
    assert_eq!(vus, vec![15, 30, 50, 80, 120]);
    let arrival = Profile::load("arrival").unwrap();
    assert_eq!(arrival.model, LoadModel::Open);
    let mut mix = Profile::load("mix").unwrap();
    // No built-in profile names a target: the user's --url does.
    assert!(mix.require_target().is_err());
    assert!(Profile::load("steady").unwrap().require_target().is_err());
    mix.apply(&Overrides {
        url: Some("http://127.0.0.1:5678".into()),
        ..Default::default()
    })
    .unwrap();
    mix.require_target().unwrap();
    let mix = mix.scenarios().unwrap();
    assert_eq!(mix.len(), 2);
    assert!((mix[0].share - 0.7).abs() < 1e-12);
    assert_eq!(mix[1].request.url, "http://127.0.0.1:5678/webhook/load");
    assert_eq!(mix[0].code_time_s, Some(0.0));
}

#[test]
fn scenario_paths_join_the_origin_of_the_profile_s_url() {
    assert_eq!(origin("http://h:5678/webhook/load"), "http://h:5678");
    assert_eq!(origin("https://h?x=1"), "https://h");
    assert_eq!(origin("http://h"), "http://h");
    let p = Profile::parse(
        "model: closed\nrequest: {url: 'http://n8n:5678/webhook/x', headers: {a: '1'}}\n\
         stages: [{vus: 1}]\nscenarios:\n\
         - {name: one, request: {url: /webhook/one, headers: {b: '2'}}}\n\
         - {name: two, weight: 3, request: {url: 'http://other:1/y'}}\n",
        "t",
    )
    .unwrap();
    let sc = p.scenarios().unwrap();
    assert_eq!(sc[0].request.url, "http://n8n:5678/webhook/one");
    assert_eq!(sc[0].request.headers.len(), 2);
    assert_eq!(sc[1].request.url, "http://other:1/y");
    assert_eq!((sc[0].share, sc[1].share), (0.25, 0.75));
}

#[test]
fn a_five_step_ramp_becomes_windows_and_held_steps() {
    let stages = Profile::load("ramp").unwrap().resolve_stages().unwrap();
    let held: Vec<u32> = stages
        .iter()
        .filter(|s| s.ramp.is_none())
        .filter_map(|s| s.vus)
        .collect();
    assert_eq!(held, [5, 10, 20, 40, 60]);
    // 30 s ramps in 10 s windows: 3 up to each step, 3 down.
    assert_eq!(stages.iter().filter(|s| s.ramp.is_some()).count(), 18);
    let first = stages[0].ramp.unwrap();
    assert_eq!((first.from, first.to), (0, 2));
    let last = stages.last().unwrap().ramp.unwrap();
    assert_eq!((last.from, last.to), (20, 0));
    let total: Duration = stages.iter().map(|s| s.duration).sum();
    assert_eq!(total, Duration::from_secs(480));
    // Ramps and fixed levels do not mix; ramps are closed-model.
    let bad = "model: closed\nstages: [{target: 3, duration: 1s}, {vus: 2}]";
    assert!(Profile::parse(bad, "b").unwrap().resolve_stages().is_err());
    let open = "model: open\nstages: [{target: 3, duration: 1s}]";
    assert!(Profile::parse(open, "o").unwrap().resolve_stages().is_err());
}

#[test]
fn overrides_replace_fields() {
    let mut p = Profile::load("steady").unwrap();
    p.apply(&Overrides {
        vus: Some(vec![2, 4]),
        stage_duration: Some("3s".into()),
        body: Some(r#"{"sleep_ms": 10}"#.into()),
        url: Some("http://127.0.0.1:9/webhook/x".into()),
        ..Default::default()
    })
    .unwrap();
    let st = p.resolve_stages().unwrap();
    assert_eq!(st.len(), 2);
    assert_eq!(st[1].vus, Some(4));
    assert_eq!(st[0].duration, Duration::from_secs(3));
    assert_eq!(p.request.body.unwrap()["sleep_ms"], 10);
}

#[test]
fn bad_profiles_are_rejected_with_a_reason() {
    let err = Profile::parse("model: closed\nstages: [", "x.yaml").unwrap_err();
    assert!(err.to_string().contains("x.yaml"), "{err}");
    let err = Profile::parse("model: sideways\nrequest: {}\nstages: []", "y.yaml").unwrap_err();
    assert!(err.to_string().contains("y.yaml"));
    let p = Profile::parse("model: closed\nrequest: {}\nstages: [{rate: 3}]", "z").unwrap();
    assert!(p.resolve_stages().unwrap_err().to_string().contains("vus"));
    assert!(Profile::load("no-such-profile").is_err());
    let mut p = Profile::load("smoke").unwrap();
    assert!(p
        .apply(&Overrides {
            body: Some("{nope".into()),
            ..Default::default()
        })
        .is_err());
}
