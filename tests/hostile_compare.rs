//! The CI gate (`compare --fail-if`) as a hostile reviewer meets it: runs it cannot judge, a
//! level that failed in one run only, one-sample ceilings, thresholds written wrong. A gate
//! never passes what it cannot judge (exit 99, "cannot compare: …") and never shows an
//! interval of zero width. The runs are saved summaries the test writes.

use crate::common::*;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

fn template() -> Value {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string("fixtures/hostile/summary-valid.json").unwrap(),
    )
    .unwrap();
    v
}

/// A closed stage of `vus` users over a `window` s steady window: `rate` good answers/s at a
/// mean response of `mean_ms`, `errors` the share of requests that got HTTP 500.
fn stage(index: usize, vus: u32, rate: f64, mean_ms: f64, window: f64, errors: f64) -> Value {
    let mut s = template()["stages"][1].clone();
    let requests = (vus as f64 / (mean_ms / 1000.0) * window).round() as u64;
    let failed = (requests as f64 * errors).round() as u64;
    s["index"] = json!(index);
    s["label"] = json!(format!("{vus} in flight"));
    s["vus"] = json!(vus);
    s["duration_s"] = json!(window + 0.5);
    s["window_s"] = json!(window);
    s["requests"] = json!(requests);
    s["ok"] = json!(requests - failed);
    s["throughput_rps"] = json!(rate * (1.0 - errors));
    s["request_rate"] = json!(requests as f64 / window);
    for (k, f) in [
        ("mean_ms", 1.0),
        ("min_ms", 0.98),
        ("p50_ms", 1.0),
        ("p90_ms", 1.01),
        ("p95_ms", 1.02),
        ("p99_ms", 1.03),
        ("max_ms", 1.04),
    ] {
        s["latency"][k] = json!(mean_ms * f);
    }
    s["error_rate"] = json!(errors);
    s["checks"] = json!([]);
    s["thresholds"] = json!([]);
    s["check_pass_rate"] = json!(1.0 - errors);
    if failed > 0 {
        s["errors"]["http_status"] = json!({ "500": failed });
    }
    let valid = errors < 0.01;
    s["valid"] = json!(valid);
    s["invalid_reasons"] = if valid {
        json!([])
    } else {
        json!([format!("http_req_failed rate {errors} ≥ 0.01")])
    };
    s
}

/// A saved sweep of 100 ms jobs whose levels are (users, rate, mean ms, error share), each one
/// stage of `window` s.
fn saved(name: &str, levels: &[(u32, f64, f64, f64)], window: f64) -> String {
    let mut v = template();
    v["stages"] = Value::Array(
        levels
            .iter()
            .enumerate()
            .map(|(i, &(n, x, r, e))| stage(i, n, x, r, window, e))
            .collect(),
    );
    v["diagnosis"] = Value::Null;
    let d = scratch().join(format!("n8ncap-gate-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("summary.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

/// A stack of 4 slots for 100 ms jobs: 40/s from 4 in flight on.
const HEALTHY: &[(u32, f64, f64, f64)] = &[
    (1, 10.0, 100.0, 0.0),
    (4, 39.5, 101.0, 0.0),
    (8, 40.0, 200.0, 0.0),
];

const GATES: &[&str] = &[
    "--fail-if",
    "ceiling<-5%",
    "--fail-if",
    "error-rate>+1",
    "--fail-if",
    "p95>+10%",
];

fn gate(base: &str, new: &str, gates: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(bin())
        .args(["compare", base, new, "--json"])
        .args(gates)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, err)
}

fn failed(v: &Value) -> Vec<String> {
    v["versus"][0]["failed"]
        .as_array()
        .map(|a| a.iter().map(|f| f.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn a_run_where_every_request_failed_cannot_pass_the_gate() {
    let base = saved("all500-base", HEALTHY, 8.0);
    let broken: Vec<_> = HEALTHY.iter().map(|&(n, x, r, _)| (n, x, r, 1.0)).collect();
    let new = saved("all500-new", &broken, 8.0);
    let (code, v, err) = gate(&base, &new, GATES);
    assert_eq!(code, Some(99), "{err}");
    let f = failed(&v);
    assert!(
        f.iter()
            .any(|f| f.starts_with("cannot compare") && f.contains("no valid level")),
        "{f:?}"
    );
    // Every level both runs measured is in the table, none dropped for failing.
    assert_eq!(v["versus"][0]["levels"].as_array().unwrap().len(), 3);
    // The error-rate threshold judges it too: +100 points, beyond noise.
    assert!(
        f.iter().any(|f| f.contains("error rate +100.0 points")),
        "{f:?}"
    );
}

#[test]
fn a_level_that_failed_in_one_run_only_fails_the_gate_naming_it() {
    let base = saved("top10-base", HEALTHY, 8.0);
    let mut top = HEALTHY.to_vec();
    top[2].3 = 0.10;
    let new = saved("top10-new", &top, 8.0);
    for gates in [GATES, &["--fail-if", "ceiling<-5%"][..]] {
        let (code, v, err) = gate(&base, &new, gates);
        assert_eq!(code, Some(99), "{gates:?}: {err}");
        let f = failed(&v);
        assert!(
            f.iter()
                .any(|f| f.starts_with("cannot compare at 8 in flight") && f.contains("10.0 %")),
            "{f:?}"
        );
        let row = &v["versus"][0]["levels"][2];
        assert_eq!(row["valid"], json!([true, false]), "{row}");
    }
    // The text says FAILED, with the level's row still in the table.
    let out = Command::new(bin())
        .args(["compare", &base, &new, "--fail-if", "ceiling<-5%"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAILED cannot compare at 8 in flight"),
        "{text}"
    );
    assert!(text.contains("0.0 → 10.0"), "{text}");
}

#[test]
fn one_sample_ceilings_get_counting_intervals_and_a_37_percent_drop_fails() {
    // Runner limit 8 then 5, 200 ms jobs: 40/s then 25/s, one 8 s stage per level.
    let base = saved(
        "runner8",
        &[(1, 5.0, 200.0, 0.0), (16, 40.0, 400.0, 0.0)],
        8.0,
    );
    let new = saved(
        "runner5",
        &[(1, 5.0, 200.0, 0.0), (16, 25.0, 640.0, 0.0)],
        8.0,
    );
    let (code, v, err) = gate(&base, &new, &["--fail-if", "ceiling<-5%"]);
    assert_eq!(code, Some(99), "{err}");
    let ch = &v["versus"][0]["ceiling"];
    assert_eq!(ch["beyond_noise"], true, "{ch}");
    assert!(
        (ch["change_pct"].as_f64().unwrap() + 37.5).abs() < 0.1,
        "{ch}"
    );
    // 320 answers in 8 s: 40 ± 1.96 × √320 ÷ 8 = ± 4.38; never an interval of zero width.
    let b = &ch["baseline"];
    let half = (b["high"].as_f64().unwrap() - b["low"].as_f64().unwrap()) / 2.0;
    assert!((half - 1.96 * 320f64.sqrt() / 8.0).abs() < 0.05, "{b}");
    let out = Command::new(bin())
        .args(["compare", &base, &new])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("40.00 (40.00–40.00)"), "{text}");
    assert!(!text.contains("noise unknown"), "{text}");
}

#[test]
fn two_runs_of_one_stack_pass_every_gate() {
    let a = saved("same-a", HEALTHY, 8.0);
    let jitter: Vec<_> = HEALTHY
        .iter()
        .map(|&(n, x, r, e)| (n, x * 0.99, r * 1.01, e))
        .collect();
    let b = saved("same-b", &jitter, 8.0);
    let (code, v, err) = gate(&a, &b, GATES);
    assert_eq!(code, Some(0), "{err} {v}");
    // A threshold below zero on a rise: two runs with 0 % errors are no change.
    let (code, _, err) = gate(&a, &b, &["--fail-if", "error-rate>-1"]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn thresholds_written_twice_or_with_no_number_are_refused() {
    let a = saved("parse", HEALTHY, 8.0);
    for bad in ["p95>+10%%", "ceiling<-5%%", "error-rate>+1%", "ceiling<%"] {
        let (code, _, err) = gate(&a, &a, &["--fail-if", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("--fail-if"), "{err}");
    }
}

#[test]
fn the_comparison_fits_80_and_100_columns() {
    let base = saved("fit-base", HEALTHY, 8.0);
    let broken: Vec<_> = HEALTHY.iter().map(|&(n, x, r, _)| (n, x, r, 1.0)).collect();
    let new = saved("fit-new", &broken, 8.0);
    for cols in ["80", "100"] {
        let out = Command::new(bin())
            .args(["compare", &base, &new, "--fail-if", "ceiling<-5%"])
            .env("COLUMNS", cols)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= cols.parse().unwrap(), "{cols}: {widest}\n{text}");
        assert!(text.contains("FAILED"), "{text}");
    }
}

/// A saved run whose every answer took `ms` to the histogram's precision (p50 … max equal), one
/// stage per level: the order statistics of its p95 span nothing.
fn constant(name: &str, levels: &[(u32, f64, f64, f64)], window: f64, ms: f64) -> String {
    let p = saved(name, levels, window);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    for s in v["stages"].as_array_mut().unwrap() {
        for k in [
            "mean_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms",
        ] {
            s["latency"][k] = json!(ms);
        }
    }
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// A level measured once still has a p95 interval: from its answers' order statistics, at
/// least the recording's 0.1 %; with too few answers for one (under 73), the count is said.
/// Neither prints "noise unknown" or passes a p95 gate on a change it cannot judge.
#[test]
fn a_one_sample_p95_change_is_judged_against_its_own_interval_or_its_count() {
    // 4 users, 100 ms answers, 20 s: 800 answers a level; the candidate 1 % slower.
    let base = constant("p95-many-a", &[(4, 40.0, 100.0, 0.0)], 20.0, 100.0);
    let new = constant("p95-many-b", &[(4, 40.0, 101.0, 0.0)], 20.0, 101.0);
    let (code, v, err) = gate(&base, &new, &["--fail-if", "p95>+0.5%"]);
    let p95 = &v["versus"][0]["levels"][0]["p95"];
    assert_eq!(p95["answers"], json!([800, 792]), "{v}");
    // 100 ± 0.1 against 101 ± 0.101: beyond noise, +1 %, and the gate fails on it.
    assert_eq!(p95["beyond_noise"], true, "{p95}");
    let [lo, hi] = [0, 1].map(|i| p95["interval_pct"][i].as_f64().unwrap());
    assert!(lo > 0.7 && hi < 1.3 && lo < 1.0 && hi > 1.0, "{p95}");
    assert_eq!(code, Some(99), "{err}");
    // 1 user, 1 s answers, 8 s: 8 answers a level, 2 % slower: too few for the p95's interval.
    let base = constant("p95-few-a", &[(1, 1.0, 1000.0, 0.0)], 8.0, 1000.0);
    let new = constant("p95-few-b", &[(1, 1.0, 1020.0, 0.0)], 8.0, 1020.0);
    let (code, v, err) = gate(&base, &new, &["--fail-if", "p95>+1%"]);
    let p95 = &v["versus"][0]["levels"][0]["p95"];
    assert_eq!(p95["answers"], json!([8, 8]), "{v}");
    assert_eq!(p95["beyond_noise"], false, "{p95}");
    assert_eq!(code, Some(0), "{err}");
    let out = Command::new(bin())
        .args(["compare", &base, &new])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("noise unknown"), "{text}");
    assert!(text.contains(" 8 and 8 "), "{text}");
}
