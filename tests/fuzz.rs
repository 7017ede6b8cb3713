//! Property-based fuzzing of every parser that reads user input: Prometheus text, compose YAML,
//! profile YAML, k6's summary and JSON output, saved summaries. Each takes random and mutated
//! real input and must answer Ok or a clear error — never panic. CI runs proptest's default
//! (256 cases per property); run longer with e.g.
//! `PROPTEST_CASES=20000 cargo test --release --test integration fuzz::`. The HTTP response parser's
//! properties live next to it (src/load/client.rs, same variable).

use n8ncap::model::settings::Provenance;
use proptest::prelude::*;
use std::path::PathBuf;

const REAL_METRICS: &str = include_str!("../fixtures/n8n-real/metrics-main-allflags-load.txt");

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = crate::common::scratch().join(format!("n8ncap-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Real text with random bytes overwritten, inserted and cut: most of it stays well formed,
/// so the parser goes deep before it meets the damage.
fn mutated(real: &'static str) -> impl Strategy<Value = String> {
    (
        proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 0..12),
        any::<usize>(),
    )
        .prop_map(move |(edits, cut)| {
            let mut b = real.as_bytes().to_vec();
            for (at, byte, kind) in edits {
                if b.is_empty() {
                    break;
                }
                let i = at % b.len();
                match kind {
                    0 => b[i] = byte,
                    1 => b.insert(i, byte),
                    _ => {
                        b.remove(i);
                    }
                }
            }
            if !b.is_empty() && cut % 4 == 0 {
                b.truncate(cut % b.len());
            }
            String::from_utf8_lossy(&b).to_string()
        })
}

proptest! {
    #[test]
    fn prometheus_text_never_panics(text in mutated(REAL_METRICS)) {
        let _ = n8ncap::wire::prometheus::parse(&text);
    }

    #[test]
    fn prometheus_random_lines_never_panic(text in "(# (HELP|TYPE) [a-z_:]{0,8} .{0,20}\n|[a-z_:{}=\",. 0-9eE+-]{0,40}\n){0,20}") {
        if let Err(e) = n8ncap::wire::prometheus::parse(&text) {
            // Errors quote a bounded part of the line.
            prop_assert!(e.to_string().chars().count() < 300);
        }
    }

    #[test]
    fn compose_yaml_never_panics(text in mutated(COMPOSE)) {
        let p = temp_file("compose.yml", text.as_bytes());
        let _ = n8ncap::topology::compose::load(&[p]);
    }

    #[test]
    fn profile_yaml_never_panics(text in mutated(PROFILE)) {
        if let Ok(p) = n8ncap::load::profile::Profile::parse(&text, "fuzz") {
            let _ = p.resolve_stages();
            let _ = p.timeout();
        }
    }

    #[test]
    fn k6_summaries_never_panic(text in mutated(K6_SUMMARY)) {
        let p = temp_file("k6-summary.json", text.as_bytes());
        let _ = n8ncap::load::k6::from_summary(&p);
    }

    #[test]
    fn k6_json_output_never_panics(text in mutated(K6_JSON), warmup in 0.0f64..10.0) {
        let p = temp_file("k6-out.json", text.as_bytes());
        if let Ok(stages) = n8ncap::load::k6series::from_json(&p, Some(warmup)) {
            for (i, s) in stages.iter().enumerate() {
                prop_assert!(s.check(&format!("stages[{i}]")).is_ok(), "{s:?}");
            }
        }
    }

    #[test]
    fn saved_summaries_never_panic(text in mutated(SUMMARY)) {
        let p = temp_file("summary.json", text.as_bytes());
        let _ = n8ncap::record::dir::load_summary(&p);
    }
}

const COMPOSE: &str = include_str!("../examples/compose/minimal-clean.yml");
const PROFILE: &str = include_str!("../profiles/arrival.yaml");
const SUMMARY: &str = include_str!("../fixtures/hostile/summary-valid.json");
const K6_SUMMARY: &str = r#"{"metrics":{"http_reqs":{"count":120,"rate":3.9},"vus_max":{"value":8,"min":8,"max":8},"http_req_failed":{"value":0.01,"passes":1,"fails":119},"checks":{"value":0.99,"passes":119,"fails":1},"http_req_duration":{"avg":2012.5,"min":1990.1,"med":2003.2,"max":2100.7,"p(90)":2050.3,"p(95)":2070.8}}}"#;
const K6_JSON: &str = concat!(
    r#"{"type":"Point","metric":"vus","data":{"time":"2026-11-30T07:38:23.4Z","value":2,"tags":{}}}"#,
    "\n",
    r#"{"type":"Point","metric":"http_req_duration","data":{"time":"2026-11-30T07:38:24.4Z","value":1002.5,"tags":{"scenario":"a"}}}"#,
    "\n",
    r#"{"type":"Point","metric":"http_req_failed","data":{"time":"2026-11-30T07:38:24.4Z","value":0,"tags":{}}}"#,
    "\n",
    r#"{"type":"Point","metric":"checks","data":{"time":"2026-11-30T07:38:24.4Z","value":1,"tags":{}}}"#,
    "\n",
    r#"{"type":"Point","metric":"http_req_duration","data":{"time":"2026-11-30T07:38:25.4Z","value":1001.5,"tags":{"scenario":"b"}}}"#,
    "\n",
);

proptest! {
    /// Any upload n8ncap builds — files of any content (boundary look-alikes included), any
    /// fields — is read back by the simulated webhook with the same files and bytes; any damage
    /// to it is a refusal or a reading, never a panic.
    #[test]
    fn uploads_round_trip_through_the_simulated_webhook(
        files in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..4),
        // Not one of the workflow's own fields (sleep_ms, code, …), which must be numbers.
        field in "x[a-z]{1,7}",
        value in "[ -~]{0,40}",
        cut in any::<usize>(),
    ) {
        use n8ncap::load::body::{build, BodySource, FileSpec};
        let dir = crate::common::fresh_dir("fuzz-up");
        std::fs::create_dir_all(&dir).unwrap();
        let mut specs = Vec::new();
        for (i, f) in files.iter().enumerate() {
            // Some content holds what a boundary looks like.
            let mut content = f.clone();
            if i == 0 {
                content.extend_from_slice(b"\r\n--n8ncap-boundary-00000000");
            }
            let name = format!("f{i}.bin");
            std::fs::write(dir.join(&name), &content).unwrap();
            specs.push(FileSpec {
                field: "data".into(),
                path: Some(name),
                size: None,
                filename: None,
                content_type: "application/octet-stream".into(),
            });
        }
        let fields = std::collections::BTreeMap::from([(field.clone(), value.clone())]);
        let body = build(&BodySource {
            json: None,
            file: None,
            files: &specs,
            fields: &fields,
            base: &dir,
            at: "fuzz",
        })
        .unwrap();
        let total: u64 = body.info.files.iter().map(|f| f.bytes).sum();
        let got = n8ncap::sim::intake::parse(
            body.content_type.as_deref(),
            &body.bytes,
            &serde_json::Map::new(),
        )
        .unwrap();
        prop_assert_eq!(got.files, files.len() as u64);
        prop_assert_eq!(got.binary_bytes, total);
        // Cut anywhere: an answer either way, no panic.
        let at = cut % body.bytes.len();
        let _ = n8ncap::sim::intake::parse(
            body.content_type.as_deref(),
            &body.bytes[..at],
            &serde_json::Map::new(),
        );
    }
}

/// Any observation a stage can hold, sane or not: finite, huge, negative, NaN or infinite.
fn observation() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0f64..1e10,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1e308),
        -1e6f64..0.0,
    ]
}

proptest! {
    /// Whatever a run writes, n8ncap reads back: a stage with arbitrary observations goes
    /// through summary.json as the results directory writes it, and is diagnosed again — or,
    /// when a value is one no run can record (negative), is refused naming its field.
    #[test]
    fn stage_results_round_trip_through_summary_json_and_are_diagnosed_again(
        v in proptest::collection::vec(observation(), 14),
        vus in 1u32..50,
    ) {
        use n8ncap::record::stage::*;
        use n8ncap::record::{LoadModel, Role, StageResult, Summary};
        let mut st = StageResult::empty(0, format!("{vus} in flight"), LoadModel::Closed);
        st.vus = Some(vus);
        st.requests = 100;
        st.ok = 100;
        st.duration_s = 10.0;
        st.window_s = 8.0;
        st.throughput_rps = v[0];
        st.client_cpu_percent = v[1];
        st.queue = Some(QueueObserved {
            source: QueueSource::Metrics,
            active_mean: v[2],
            active_max: v[3],
            waiting_mean: v[4],
            waiting_max: v[5],
            active_while_waiting: Some(v[3]),
            samples: 4,
            gaps: 0,
            coarse: false,
            ..Default::default()
        });
        st.endpoints = vec![EndpointObserved {
            url: "http://127.0.0.1:5678/metrics".into(),
            role: Some(Role::Worker),
            samples: 4,
            cpu_percent_mean: v[6],
            rss_max_bytes: v[7],
            eventloop_lag_max_s: v[8],
            ..EndpointObserved::default()
        }];
        st.containers = vec![ContainerObserved {
            name: "runner".into(),
            role: Role::Runner,
            samples: 4,
            memory_max_bytes: v[9],
            memory_peak_bytes: v[10],
            cpu_percent_mean: v[11],
            ..ContainerObserved::default()
        }];
        st.memory_by_role = vec![RoleMemory {
            role: Role::Runner,
            containers: 1,
            baseline_bytes: v[12],
            mean_bytes: v[13],
            max_bytes: v[13],
        }];
        let mut s = Summary::new("fuzz", LoadModel::Closed, "http://127.0.0.1:5678/webhook/load", None, std::time::SystemTime::now());
        s.stages = vec![st];
        let text = serde_json::to_vec_pretty(&s).unwrap();
        let p = temp_file("roundtrip.json", &text);
        match n8ncap::record::dir::load_summary(&p) {
            Ok(mut back) => {
                let (d, _) = n8ncap::recommend::analyze::analyze(&mut back, Default::default(), None);
                prop_assert!(!d.verdict.is_empty());
                // And what the diagnosis wrote reads back too.
                let again = temp_file("roundtrip2.json", &serde_json::to_vec_pretty(&back).unwrap());
                prop_assert!(n8ncap::record::dir::load_summary(&again).is_ok());
            }
            Err(e) => {
                let e = e.to_string();
                // Only a value no run records is refused, and it is named.
                let negative = v.iter().any(|x| *x < 0.0 && x.is_finite());
                prop_assert!(negative || e.contains("stages[0]"), "refused: {}", e);
                prop_assert!(e.contains("stages[0]"), "{}", e);
            }
        }
    }
}

/// A window of a history as `observe::history` can produce it: finite, non-negative figures,
/// a mean under its max.
fn window() -> impl Strategy<Value = n8ncap::record::history::Window> {
    (
        (0.0f64..200.0, 0.0f64..50.0, 0.0f64..100.0, 0.0f64..500.0),
        (0.0f64..5.0, 0.0f64..2.0, any::<bool>(), 0u32..30),
    )
        .prop_map(
            |((x, active, waiting, slack), (slot, cores, ticks, samples))| {
                let covered = 60.0;
                n8ncap::record::history::Window {
                    start: 0.0,
                    end: covered,
                    covered_s: covered,
                    completions: x * covered,
                    failures: (x * covered * 0.01).floor(),
                    between_ticks: ticks,
                    throughput_per_s: x,
                    throughput_interval: [(x - slack / 100.0).max(0.0), x + slack / 100.0],
                    active_mean: active,
                    active_max: active * 1.1,
                    waiting_mean: waiting,
                    waiting_start: waiting * 0.5,
                    waiting_end: waiting,
                    waiting_max: waiting * 1.2,
                    active_while_waiting: (waiting >= 1.0).then_some(active * 1.1),
                    waited_samples: samples / 2,
                    samples,
                    gaps: 0,
                    cpu: vec![n8ncap::record::history::ProcessCpu {
                        process: "w:9100 (n8n-worker)".into(),
                        role: n8ncap::record::Role::Worker,
                        cores,
                        rss_max_bytes: Some(1e8),
                        eventloop_lag_max_s: Some(0.01),
                        db_pool: None,
                    }],
                    execution_s: (slot > 0.01).then_some(slot),
                    executions: x * covered,
                    busy: false,
                    evidence: Vec::new(),
                    idle_workers: Vec::new(),
                    workers: None,
                    host: (cores > 0.5).then_some(n8ncap::record::history::HostCpu {
                        busy_cores: cores * 1.2,
                        cores: 2.0,
                        processes_only: cores > 1.0,
                    }),
                }
            },
        )
}

proptest! {
    /// Any history window set the code can produce round-trips through what `--out` writes,
    /// and is diagnosed again without error, naming the same limit.
    #[test]
    fn history_windows_round_trip_through_out_and_are_diagnosed_again(
        ws in proptest::collection::vec(window(), 1..12),
        refresh in proptest::option::of(1.0f64..60.0),
    ) {
        use n8ncap::model::settings::Sourced;
        use n8ncap::record::history::History;
        let mut windows = ws;
        for (i, w) in windows.iter_mut().enumerate() {
            w.start = 1.8e9 + 60.0 * i as f64;
            w.end = w.start + 60.0;
        }
        let h = History {
            source: "fuzz".into(),
            start: 1.8e9,
            end: 1.8e9 + 60.0 * windows.len() as f64,
            matchers: Vec::new(),
            step_s: Sourced::new(15.0, Provenance::Assumed("fuzz".into())),
            scrape_interval_s: Some(15.0),
            queue_refresh_s: refresh,
            queue_refresh_by: String::new(),
            tick_half_width_s: refresh.map(|r| r / 8.0),
            window_s: 60.0,
            processes: Vec::new(),
            windows,
            gap_steps: 0,
            gaps: Vec::new(),
            resets: Vec::new(),
            warnings: Vec::new(),
            exporter: None,
            workers_by: None,
            host_by: None,
        };
        let flags = n8ncap::model::settings::Settings::default();
        // As `diagnose --prometheus --out` makes, judges and writes it.
        let ev = n8ncap::observe::history::evidence(h, flags.clone(), "prometheus: fuzz");
        let d = n8ncap::diagnose::history::judge_windows(&ev, &flags, None);
        let h = ev.windows.clone().unwrap();
        let mut s = ev.summary;
        s.diagnosis = Some(d.clone());
        let p = temp_file("history-summary.json", &serde_json::to_vec_pretty(&s).unwrap());
        let back = n8ncap::record::dir::load_summary(&p);
        prop_assert!(back.is_ok(), "{:?}", back.err().map(|e| e.to_string()));
        let mut back = back.unwrap();
        let (again, _) = n8ncap::recommend::analyze::analyze(&mut back, Default::default(), None);
        prop_assert_eq!(again.capping_limit, d.capping_limit, "{} / {}", again.verdict, d.verdict);
        let h2 = temp_file("history.json", &serde_json::to_vec_pretty(&h).unwrap());
        let text = std::fs::read_to_string(h2).unwrap();
        prop_assert!(serde_json::from_str::<History>(&text).is_ok());
    }
}
