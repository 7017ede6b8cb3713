//! The project's second n8n lab (`fixtures/n8n-real/lab2/`: a real n8n 2.41.1 on one 2-core
//! host, main and 1–3 workers of concurrency 5 with runner 5, Postgres 15, Redis 7; truths in
//! `fixtures/README.md`): what an older n8ncap saved and the same hour's Prometheus TSDB, judged
//! by today's. The truth at 3 workers is the host's CPU (about 28/s), never a runner limit.

use crate::common::{bin, have_command, run_json, ChildGuard};
use std::path::PathBuf;
use std::process::Command;

fn lab() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/n8n-real/lab2")
}

/// The host's CPU bound the truth gives: n8n's processes about 1.7 of 2 cores at 27.2/s.
const HOST_BOUND: f64 = 28.0;

/// The scale sweep an older n8ncap saved (main's metrics only, the host's busy CPU per stage):
/// the host's CPU is the shared limit reached, its bound within 30 % of 28/s, and 3 workers are
/// named CPU (the old reading: 212/s from main's share, and no limit at 3).
#[test]
fn the_saved_scale_sweep_names_the_host_s_cpu_at_three_workers() {
    let l = lab().join("scale");
    let s = run_json(&[
        "scale",
        l.join("w1").to_str().unwrap(),
        l.join("w2").to_str().unwrap(),
        l.join("w3").to_str().unwrap(),
        "--json",
    ]);
    host_reached_near_its_bound(&s);
    let at3 = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["workers"] == 3)
        .unwrap();
    assert_eq!(at3["limit"], "CPU", "{at3}");
}

/// The host's CPU among a scale judgement's shared limits, reached, its bound within 30 % of
/// the truth's.
fn host_reached_near_its_bound(s: &serde_json::Value) {
    let host = crate::sweep_scale::shared(s, "host_cpu");
    assert_eq!(host["reached"], true, "{host}");
    let bound = host["bound_per_s"].as_f64().unwrap();
    assert!((bound / HOST_BOUND - 1.0).abs() <= 0.3, "{bound}");
}

/// 0 ms jobs on 2 workers (25.7/s at 2–4 in flight, the host 1.92 of 2 cores busy) are the
/// host's CPU, not "a limit of about 1 concurrent executions".
#[test]
fn the_saved_zero_ms_run_is_named_cpu() {
    let d = run_json(&[
        "diagnose",
        lab().join("zero-jobs").to_str().unwrap(),
        "--json",
    ]);
    let d = &d["diagnosis"];
    assert_eq!(d["capping_limit"], "cpu", "{}", d["verdict"]);
    let site = &d["cpu_limit"];
    assert_eq!(site["site"], "host", "{site}");
    let bound = site["bound_per_s"].as_f64().unwrap();
    // 85 ms of CPU an execution over 2 cores: about 23.5/s; measured 25.7/s.
    assert!((20.0..=32.0).contains(&bound), "{bound}");
}

/// A Prometheus of its own over a copy of the lab's TSDB, on a free port.
async fn lab_prometheus(dir: &std::path::Path) -> (ChildGuard, u16) {
    let tsdb = dir.join("tsdb");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(lab().join("prom-data"))
        .arg(&tsdb)
        .status()
        .unwrap();
    assert!(copied.success());
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, "scrape_configs: []\n").unwrap();
    // A TSDB of 2026 is older than Prometheus' default 15 days' retention.
    crate::common::prometheus_on(&config, &tsdb, &["--storage.tsdb.retention.time=100y"]).await
}

/// The lab's hour read from a real Prometheus with the host's 2 cores given (no node_exporter
/// was scraped): each worker count judged from its own windows — 1, 2 and 3 workers at the
/// ceilings wrk measured (11.6, 21.6, 27.2/s) within 15 %, 1 and 2 capped by worker
/// concurrency, 3 by the host's CPU as the shared limit reached; `diagnose --prometheus` gives
/// one verdict at 3 workers — `capping_limit` cpu, its first finding the job time's growth, no
/// runner limit inferred, no plan (the old reading: "runner limit 3 (inferred)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_s_prometheus_history_names_the_host_s_cpu_per_worker_count() {
    if !have_command("prometheus", "--version", "apt-get install prometheus") {
        return;
    }
    let dir = crate::common::fresh_dir("lab2-prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let (_prom, port) = lab_prometheus(&dir).await;
    let range = [
        "--prometheus",
        &format!("http://127.0.0.1:{port}"),
        "--start",
        "2026-12-05T23:21:00Z",
        "--end",
        "2026-12-05T23:34:30Z",
        "--host-cores",
        "2",
        "--window",
        "30s",
        "--json",
    ]
    .map(String::from);
    let mut args = vec!["scale".to_string()];
    args.extend(range.iter().cloned());
    let s = json(&args);
    for (n, truth, limit) in [
        (1, 11.6, "worker concurrency"),
        (2, 21.6, "worker concurrency"),
        (3, 27.2, "CPU"),
    ] {
        let p = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["workers"] == n)
            .unwrap_or_else(|| panic!("{s}"));
        let x = p["ceiling"][0].as_f64().unwrap_or_else(|| panic!("{p}"));
        assert!(
            (x / truth - 1.0).abs() <= 0.15,
            "{n} workers: {x} for {truth}"
        );
        assert_eq!(p["limit"], limit, "{p}");
    }
    host_reached_near_its_bound(&s);
    assert!(
        s["shared"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["kind"] != "host_cpu")
            .all(|l| l["reached"] == false),
        "{s}"
    );

    let mut args = vec!["diagnose".to_string()];
    args.extend(range.iter().cloned());
    let saved = dir.join("judged");
    args.extend(["--out".to_string(), saved.to_str().unwrap().to_string()]);
    let h = json(&args);
    let d = &h["diagnosis"];
    assert_eq!(d["capping_limit"], "cpu", "{}", d["verdict"]);
    assert_eq!(
        d["findings"][0]["id"], "job-time-grows",
        "{}",
        d["findings"]
    );
    assert!(d["settings"]["runner_limit"].is_null(), "{}", d["settings"]);
    assert_eq!(
        d["settings"]["worker_concurrency"]["value"], 5,
        "{}",
        d["settings"]
    );
    assert!(h["recommendation"].is_null(), "{}", h["recommendation"]);
    let shown: Vec<u64> = h["by_workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["shown"] == true)
        .map(|c| c["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, vec![3], "{}", h["by_workers"]);
    // Saved with the windows it read (the count of 3's): judged again, the same verdict.
    let again = json(&[
        "diagnose".to_string(),
        saved.to_str().unwrap().to_string(),
        "--json".to_string(),
    ]);
    let again = again.get("diagnosis").unwrap_or(&again);
    assert_eq!(again["capping_limit"], "cpu", "{}", again["verdict"]);
    let x = |d: &serde_json::Value| d["measured_ceiling"]["mean"].as_f64().unwrap();
    assert!((x(again) - x(d)).abs() < 1e-6, "{} and {}", x(again), x(d));
}

fn json(args: &[String]) -> serde_json::Value {
    let o = Command::new(bin()).args(args).output().unwrap();
    crate::common::json_of_success(&o)
}
