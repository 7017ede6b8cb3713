//! The Prometheus parser reads real n8n captures without loss, and the simulator's /metrics
//! uses the real names, types and HELP texts.

use n8ncap::observe::scrape::{queue_gauges, scrape};
use n8ncap::sim::{Stack, StackConfig};
use n8ncap::wire::prometheus::{parse, MetricKind};
use std::time::Duration;

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/n8n-real/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn main_capture_under_load_reads_as_seen_by_eye() {
    let e = parse(&fixture("metrics-main-load.txt")).unwrap();
    // Values read from the file by eye.
    let q = queue_gauges(&e, "n8n_").expect("queue gauges on main");
    assert_eq!(q.active, 15.0);
    assert_eq!(q.waiting, 2.0);
    assert_eq!(q.completed, Some(178.0));
    assert_eq!(q.failed, Some(0.0));
    assert_eq!(
        e.value("n8n_process_resident_memory_bytes"),
        Some(477_900_800.0)
    );
    assert_eq!(e.value("n8n_process_cpu_seconds_total"), Some(7.62791));
    assert_eq!(
        e.value("n8n_nodejs_eventloop_lag_seconds"),
        Some(0.008099946)
    );
    assert_eq!(
        e.value("n8n_nodejs_heap_size_used_bytes"),
        Some(226_356_976.0)
    );
    let h = e.family("n8n_workflow_execution_duration_seconds").unwrap();
    assert_eq!(h.kind, MetricKind::Histogram);
    assert_eq!(
        e.value("n8n_workflow_execution_duration_seconds_count"),
        Some(182.0)
    );
    assert_eq!(
        e.value("n8n_workflow_execution_duration_seconds_sum"),
        Some(259.23299999999995)
    );
    let b = e
        .series("n8n_workflow_execution_duration_seconds_bucket")
        .find(|s| s.label("le") == Some("2.5"))
        .unwrap();
    assert_eq!(b.value, 182.0);
    assert_eq!(b.label("mode"), Some("webhook"));
    let v = e.series("n8n_version_info").next().unwrap();
    assert_eq!(v.label("version"), Some("v2.41.1"));
}

#[test]
fn every_family_of_every_capture_is_kept() {
    // metric-names.tsv lists each family with its type, from the captures themselves.
    let names = fixture("metric-names.tsv");
    for (file, col) in [
        ("metrics-main-idle.txt", 2),
        ("metrics-main-load.txt", 3),
        ("metrics-worker-idle.txt", 4),
        ("metrics-worker-load.txt", 5),
        ("metrics-main-allflags-load.txt", 6),
        ("metrics-worker-allflags-load.txt", 8),
    ] {
        let e = parse(&fixture(file)).unwrap_or_else(|err| panic!("{file}: {err}"));
        let mut checked = 0;
        for line in names.lines().skip(2) {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() < 9 || f[col] == "-" {
                continue;
            }
            let fam = e
                .family(f[0])
                .unwrap_or_else(|| panic!("{file}: family {} lost", f[0]));
            let kind = format!("{:?}", fam.kind).to_lowercase();
            assert_eq!(kind, f[1], "{file}: {} type", f[0]);
            assert_eq!(
                fam.help.as_deref(),
                Some(f[f.len() - 1]),
                "{file}: {} help",
                f[0]
            );
            if f[col] == "S" {
                assert!(!fam.samples.is_empty(), "{file}: {} has samples", f[0]);
            }
            checked += 1;
        }
        assert!(checked > 50, "{file}: only {checked} families checked");
    }
}

#[test]
fn worker_capture_has_runner_counters_with_event_bus_metrics() {
    let e = parse(&fixture("metrics-worker-allflags-load.txt")).unwrap();
    assert_eq!(e.value("n8n_runner_task_requested_total"), Some(124.0));
    assert_eq!(e.value("n8n_runner_response_received_total"), Some(114.0));
    let w = parse(&fixture("metrics-worker-load.txt")).unwrap();
    assert!(
        queue_gauges(&w, "n8n_").is_none(),
        "queue gauges are on main only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_metrics_use_the_real_names_types_and_help() {
    let real_main = parse(&fixture("metrics-main-allflags-load.txt")).unwrap();
    let real_worker = parse(&fixture("metrics-worker-allflags-load.txt")).unwrap();
    let stack = Stack::start(StackConfig {
        event_bus_metrics: true,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let main = scrape(
        &format!("{}/metrics", stack.main_url),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let worker = scrape(&stack.worker_metrics_urls[0], Duration::from_secs(2))
        .await
        .unwrap();
    for (sim, real, role) in [
        (&main, &real_main, "main"),
        (&worker, &real_worker, "worker"),
    ] {
        assert!(
            sim.families.len() >= 20,
            "{role}: {} families",
            sim.families.len()
        );
        for fam in &sim.families {
            let r = real
                .family(&fam.name)
                .unwrap_or_else(|| panic!("{role}: {} is not a real n8n metric", fam.name));
            assert_eq!(fam.kind, r.kind, "{role}: {} type", fam.name);
            assert_eq!(fam.help, r.help, "{role}: {} help", fam.name);
        }
    }
    assert!(queue_gauges(&main, "n8n_").is_some());
    assert!(
        queue_gauges(&worker, "n8n_").is_none(),
        "queue gauges are on main only"
    );
    assert!(worker.value("n8n_runner_task_requested_total").is_some());
    let rss = main.value("n8n_process_resident_memory_bytes").unwrap();
    assert!(rss > 1_000_000.0, "real RSS expected, got {rss}");
}
