//! `n8ncap compare`: runs of the simulator saved by `sweep --out`, compared as a user does — the
//! same stack twice (noise), the runner limit raised (a new ceiling and another limit), a CI
//! gate (`--fail-if`, exit 99) and the Markdown a pull request renders.

use crate::common::*;
use n8ncap::sim::{Stack, StackConfig};
use std::process::Command;

/// A stack of 15 slots and `runner_limit` runner tasks, swept at 1 and 30 in flight, three times each
/// (200 ms jobs), saved under `dir`.
async fn saved_sweep(runner_limit: u32, dir: &std::path::Path) {
    saved_sweep_at(runner_limit, "1,30", dir).await
}

/// The same at the levels `vus`.
async fn saved_sweep_at(runner_limit: u32, vus: &str, dir: &std::path::Path) {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let (url, dir, vus) = (
        stack.webhook_url.clone(),
        dir.to_path_buf(),
        vus.to_string(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(bin())
            .args(["sweep", "--url", &url, "--body", r#"{"sleep_ms":200}"#])
            .args(["--vus", &vus, "--repeat", "3", "--warmup", "1s"])
            .args(["--stage-duration", "3s", "--worker-concurrency", "15"])
            .args([
                "--runner-limit",
                &runner_limit.to_string(),
                "--no-preflight",
            ])
            .args(["--out", dir.to_str().unwrap()])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        matches!(out.status.code(), Some(0)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn compare(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 73 s): a simulated stack under load"]
async fn the_same_stack_is_noise_and_a_raised_runner_limit_a_change_of_verdict() {
    let root = scratch().join(format!("n8ncap-compare-{}", std::process::id()));
    let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
    saved_sweep(5, &a).await;
    saved_sweep(5, &b).await;
    saved_sweep(20, &c).await;
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );

    // The same stack twice: its ceilings' intervals overlap.
    let (code, out, err) = compare(&[a, b, "--json", "--fail-if", "ceiling<-5%"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let vs = &v["versus"][0];
    assert_eq!(v["baseline"]["capping_limit"], "runner_limit");
    assert!(vs["verdict_changed"].is_null(), "{vs}");
    assert_eq!(vs["ceiling"]["beyond_noise"], false, "{}", vs["ceiling"]);
    assert!(vs["failed"].as_array().unwrap().is_empty());
    assert!(vs["settings_differ"].as_array().unwrap().is_empty());

    // Runner limit 5 → 20: the slots cap now, the ceiling rises beyond noise (25/s → 15 slots
    // ÷ 0.22 s ≈ 68/s on an idle machine), and the settings that differ are named.
    let (code, out, err) = compare(&[a, c, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let vs = &v["versus"][0];
    assert_eq!(vs["run"]["capping_limit"], "worker_concurrency", "{vs}");
    assert!(vs["verdict_changed"]
        .as_str()
        .unwrap()
        .contains("runner limit"));
    let ch = &vs["ceiling"];
    assert_eq!(ch["beyond_noise"], true, "{ch}");
    let (x0, x1) = (
        ch["baseline"]["mean"].as_f64().unwrap(),
        ch["candidate"]["mean"].as_f64().unwrap(),
    );
    assert!((ch["change_pct"].as_f64().unwrap() - (x1 / x0 - 1.0) * 100.0).abs() < 1e-6);
    assert!(x1 > x0 * 1.5, "{x0} → {x1}");
    let [lo, hi] = [0, 1].map(|i| ch["interval_pct"][i].as_f64().unwrap());
    assert!(lo <= ch["change_pct"].as_f64().unwrap() && ch["change_pct"].as_f64().unwrap() <= hi);
    assert!(vs["settings_differ"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s.as_str().unwrap().starts_with("runner limit 5 → 20")));
    // Matched levels: both runs measured 1 and 30 in flight.
    assert_eq!(
        vs["levels"].as_array().unwrap().len(),
        2,
        "{}",
        vs["levels"]
    );

    // The CI gate: the new run is the baseline here, so its ceiling falls beyond noise.
    let (code, out, _) = compare(&[c, a, "--fail-if", "ceiling<-5%", "--fail-if", "verdict"]);
    assert_eq!(code, Some(99), "{out}");
    assert!(out.contains("FAILED --fail-if ceiling<-5%"), "{out}");
    // Issue #63: the fix driven only to 10 in flight reaches no ceiling, yet carries about
    // 45/s against the baseline's 25/s beyond noise: the verdict gate passes and says the new
    // ceiling was not reached (before: "runner limit → no limit named", exit 99).
    let d = root.join("d");
    saved_sweep_at(20, "1,10", &d).await;
    let (code, out, err) = compare(&[a, d.to_str().unwrap(), "--json", "--fail-if", "verdict"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let vs = &v["versus"][0];
    assert!(vs["run"]["ceiling"].is_null(), "{vs}");
    assert_eq!(vs["carried"]["beyond_noise"], true, "{}", vs["carried"]);
    assert!(
        vs["carried"]["change_pct"].as_f64().unwrap() > 30.0,
        "{}",
        vs["carried"]
    );
    assert!(vs["failed"].as_array().unwrap().is_empty(), "{vs}");
    // A threshold written wrong is refused before any work, with exit 2.
    let (code, _, err) = compare(&[a, b, "--fail-if", "ceiling<-5"]);
    assert_eq!(code, Some(2), "{err}");

    // Markdown: a table a pull request renders (checked by a CommonMark parser with GitHub's
    // tables), one row per run.
    let (code, md, _) = compare(&[a, c, "--format", "markdown"]);
    assert_eq!(code, Some(0));
    let html = markdown_to_html(&md);
    assert_eq!(html.matches("<table>").count(), 2, "{html}");
    assert_eq!(html.matches("<tr>").count(), 3 + 3, "{html}");
    assert!(html.contains("<strong>Another limit caps now"), "{html}");

    // HTML: both runs' curves on one chart.
    let (code, page, _) = compare(&[a, c, "--format", "html"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        page.matches("class=\"point\"").count(),
        4,
        "two levels per run"
    );
    let _ = std::fs::remove_dir_all(&root);
}

fn markdown_to_html(md: &str) -> String {
    use pulldown_cmark::{html, Options, Parser};
    let mut out = String::new();
    html::push_html(&mut out, Parser::new_ext(md, Options::ENABLE_TABLES));
    out
}

#[test]
#[ignore = "stack tier (≈ 33 s): a simulated stack under load"]
fn runs_of_another_model_or_body_are_refused_with_the_reason() {
    // Two saved summaries that differ only in their request body.
    let root = scratch().join(format!("n8ncap-compare-refused-{}", std::process::id()));
    let demo = Command::new(bin())
        .args(["demo", "--json"])
        .output()
        .unwrap();
    assert_eq!(demo.status.code(), Some(0));
    let mut s: serde_json::Value = serde_json::from_slice(&demo.stdout).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let a = root.join("a.json");
    std::fs::write(&a, serde_json::to_vec(&s).unwrap()).unwrap();
    s["body"] = serde_json::json!({"sleep_ms": 9999});
    let b = root.join("b.json");
    std::fs::write(&b, serde_json::to_vec(&s).unwrap()).unwrap();
    let (code, _, err) = compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("request body"), "{err}");
    s["body"] = serde_json::json!({"sleep_ms": 500});
    s["model"] = serde_json::json!("open");
    std::fs::write(&b, serde_json::to_vec(&s).unwrap()).unwrap();
    let (code, _, err) = compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("model"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}
