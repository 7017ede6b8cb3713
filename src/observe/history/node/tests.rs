use super::*;
use crate::record::history::Process;
use crate::record::Role;

fn history_of(instances: &[&str]) -> History {
    let mut h: History = serde_json::from_value(serde_json::json!({
        "source": "test", "start": 0.0, "end": 60.0, "matchers": [],
        "step_s": crate::model::settings::Sourced::new(
            15.0,
            crate::model::settings::Provenance::Assumed("test".into()),
        ),
        "scrape_interval_s": null, "queue_refresh_s": null, "queue_refresh_by": "",
        "tick_half_width_s": null, "window_s": 60.0, "processes": [], "windows": [],
        "gap_steps": 0, "gaps": [], "resets": [], "warnings": [], "exporter": null,
        "workers_by": null
    }))
    .expect("a history");
    h.processes = instances
        .iter()
        .map(|i| Process {
            job: "n8n".into(),
            instance: (*i).into(),
            role: Role::Worker,
            role_by: "test".into(),
        })
        .collect();
    h
}

#[test]
fn an_instance_s_host_is_its_name_without_the_port() {
    assert_eq!(host_of("10.0.0.5:5678"), "10.0.0.5");
    assert_eq!(host_of("[::1]:9100"), "::1");
    assert_eq!(host_of("n8n-worker"), "n8n-worker");
    assert!(same_host("localhost", "127.0.0.1"));
    assert!(!same_host("10.0.0.5", "10.0.0.6"));
}

#[test]
fn the_node_on_most_of_n8n_s_hosts_is_read_else_the_only_one_else_none() {
    let nodes: BTreeMap<String, f64> = [("10.0.0.5:9100", 2.0), ("10.0.0.6:9100", 8.0)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let h = history_of(&["10.0.0.6:5678", "10.0.0.6:5679", "10.0.0.5:5678"]);
    assert_eq!(choose(&nodes, &h).unwrap().0, "10.0.0.6:9100");
    // No n8n process on either host: two nodes are no answer, one is (said to be maybe another
    // machine).
    let elsewhere = history_of(&["10.0.0.9:5678"]);
    assert!(choose(&nodes, &elsewhere).is_none());
    let one: BTreeMap<String, f64> = [("10.0.0.5:9100".to_string(), 2.0)].into();
    let (n, why) = choose(&one, &elsewhere).unwrap();
    assert_eq!(n, "10.0.0.5:9100");
    assert!(why.contains("only one"), "{why}");
    assert!(choose(&BTreeMap::new(), &h).is_none());
}

#[test]
fn a_window_takes_the_evaluation_nearest_its_end() {
    let points = [(100.0, 1.0), (115.003, 2.0), (130.0, 3.0)];
    assert_eq!(nearest(&points, 115.0, 3.75), Some(2.0));
    assert_eq!(nearest(&points, 129.9996, 3.75), Some(3.0));
    assert_eq!(nearest(&points, 160.0, 3.75), None);
    assert_eq!(nearest(&[], 1.0, 1.0), None);
}
