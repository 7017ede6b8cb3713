//! Hardening, round 5 (issue #61), in part: what n8ncap runs and reads beside a deployment is
//! bounded and honest — an arrival file that is a FIFO is refused at once instead of waiting
//! for a writer for ever, a worker count to restore is held to the bounds of --workers, a drain
//! needs a request timeout above 0, and a stop that failed is never reported as a clean
//! scale-down. Each input is built by the test.

use crate::common::hostile::*;
use crate::common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs n8ncap; a run that does not end within `limit` is killed and fails the test. Its
/// output is read while it runs (a full pipe would hold it).
fn run_within(args: &[&str], limit: Duration) -> std::process::Output {
    let child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    output_within(child, limit, &format!("n8ncap {args:?}"))
}

#[test]
fn an_arrival_curve_that_is_a_fifo_is_refused_not_waited_for() {
    let d = dir("fifo");
    let fifo = d.join("arrivals.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = root.join("examples/runs/after");
    let manifest = root.join("fixtures/k8s/rendered/official-keda-autoscaling.yaml");
    let out = run_within(
        &[
            "replay",
            run.to_str().unwrap(),
            "--arrivals",
            fifo.to_str().unwrap(),
            "-f",
            manifest.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    refused(&out, &["arrivals.csv", "not a regular file"]);
}

#[test]
fn a_worker_count_to_restore_is_held_to_the_bounds_of_workers() {
    let out = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--workers",
        "1,2",
        "--scale-cmd",
        "true",
        "--restore-workers",
        "4000000000",
    ]);
    refused(&out, &["--restore-workers"]);
}

#[test]
fn a_drain_needs_a_request_timeout_above_zero() {
    let out = run(&[
        "drain",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--rate",
        "2",
        "--stop-cmd",
        "true",
        "--timeout",
        "0s",
    ]);
    refused(&out, &["--timeout"]);
}

/// A stop command that failed (exit 7) stopped nothing: the drain says so, predicts and advises
/// nothing, and exits 1 — never "a scale-down loses nothing here".
#[test]
fn a_stop_that_failed_is_not_reported_as_a_clean_scale_down() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec(),
        false,
    );
    let out = run_within(
        &[
            "drain",
            "--url",
            &url,
            "--rate",
            "4",
            "--duration",
            "4s",
            "--stop-after",
            "2s",
            "--warmup",
            "1s",
            "--stop-cmd",
            "exit 7",
            "--shutdown-timeout",
            "1s",
            "--timeout",
            "5s",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stop"]["exit_code"], 7, "{v}");
    assert!(
        v["stop_failed"].as_str().is_some_and(|s| s.contains('7')),
        "{v}"
    );
    assert!(v["advice"].is_null() && v["predicted"].is_null(), "{v}");
}

/// A password holding `/`, `#`, `?` or a space never reaches an error message, whatever flag
/// carries the URL (the userinfo hidden before the URL is parsed).
#[test]
fn a_password_with_url_punctuation_is_never_printed() {
    let cases: [&[&str]; 4] = [
        &[
            "sweep",
            "--url",
            "http://u:se#cret9@127.0.0.1:9/webhook/load",
            "--vus",
            "1",
        ],
        &[
            "drain",
            "--url",
            "http://u:se?cret9@127.0.0.1:9/webhook/load",
            "--rate",
            "1",
            "--stop-cmd",
            "true",
        ],
        &[
            "sweep",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--metrics",
            "main=http://a:se cret9@127.0.0.1:1/metrics",
            "--vus",
            "1",
        ],
        &[
            "sweep",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--redis",
            "redis://:se/cret9@127.0.0.1:1:2",
            "--vus",
            "1",
        ],
    ];
    for args in cases {
        let out = run(args);
        let text = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(!text.contains("cret9"), "{args:?}: {text}");
    }
}

/// `replay` of `arrivals` (a file the test wrote) against the official chart's KEDA object.
fn replay_of(arrivals: &std::path::Path) -> std::process::Output {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = root.join("examples/runs/after");
    let manifest = root.join("fixtures/k8s/rendered/official-keda-autoscaling.yaml");
    run_within(
        &[
            "replay",
            run.to_str().unwrap(),
            "--arrivals",
            arrivals.to_str().unwrap(),
            "-f",
            manifest.to_str().unwrap(),
            "--json",
        ],
        // A week of seconds replayed twice in a debug build, beside a hog: tens of seconds;
        // the quadratic read this guards against took hours.
        Duration::from_secs(300),
    )
}

/// One history window of 5 arrivals a second from `start` to `end` (Unix seconds).
fn window(start: f64, end: f64) -> serde_json::Value {
    let n = 5.0 * (end - start);
    serde_json::json!({
        "start": start, "end": end, "covered_s": end - start, "completions": n, "failures": 0.0,
        "throughput_per_s": 5.0, "throughput_interval": [4.5, 5.5], "active_mean": 2.0,
        "active_max": 3.0, "waiting_mean": 0.0, "waiting_start": 0.0, "waiting_end": 0.0,
        "waiting_max": 0.0, "samples": 12, "gaps": 0, "cpu": [], "busy": false
    })
}

/// A history window whose end is a million years away is a counted gap, not terabytes of
/// seconds (before: the replay aborted, exit 134, allocating them).
#[test]
fn a_history_window_ending_far_away_is_a_gap_not_an_allocation() {
    let d = dir("far-window");
    let t0 = 1.8e9;
    let mut windows: Vec<serde_json::Value> = (0..10)
        .map(|i| window(t0 + 60.0 * i as f64, t0 + 60.0 * (i + 1) as f64))
        .collect();
    windows.push(window(t0 + 600.0, t0 + 3.2e13));
    let history = serde_json::json!({
        "source": "test", "start": t0, "end": t0 + 3.2e13, "matchers": [],
        "step_s": {"value": 15.0, "source": "flag: --step"}, "window_s": 60.0,
        "processes": [], "windows": windows, "gap_steps": 0, "gaps": [], "resets": [],
        "warnings": []
    });
    let file = d.join("history.json");
    std::fs::write(&file, serde_json::to_vec(&history).unwrap()).unwrap();
    let out = replay_of(&file);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seconds"], 600, "{}", v["arrival_gaps"]);
    let gaps = v["arrival_gaps"].to_string();
    assert!(gaps.contains("1 windows"), "{gaps}");
}

/// 300 000 `seconds,rate` points over a week: read in one walk (before: each second searched
/// every point, about 9·10¹⁰ steps here; a 1.8 MB file took 33 s).
#[test]
fn an_arrival_csv_of_many_points_is_read_in_one_walk() {
    let d = dir("many-points");
    let mut text = String::from("seconds,rate\n");
    for i in 0..300_000u32 {
        text.push_str(&format!("{},{}\n", 2 * i, 1 + i % 3));
    }
    let file = d.join("arrivals.csv");
    std::fs::write(&file, text).unwrap();
    let out = replay_of(&file);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seconds"], 599_999, "{}", stderr(&out));
}

/// The official chart's manifests with its ScaledObject's triggers and bounds replaced by
/// `spec_tail` (YAML under `spec:` after maxReplicaCount), and `more` documents appended.
fn chart_with(name: &str, spec_tail: &str, more: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("fixtures/k8s/rendered/official-keda-autoscaling.yaml"))
            .unwrap();
    let old = "  triggers:\n    - type: redis\n      metadata:\n        address: \"your-redis-host.com:6379\"\n        listLength: \"5\"\n        listName: \"bull:jobs:wait\"\n";
    assert!(text.contains(old));
    let d = dir(name);
    let file = d.join("chart.yaml");
    std::fs::write(
        &file,
        format!("{}---\n{more}", text.replace(old, spec_tail)),
    )
    .unwrap();
    file
}

/// Two redis triggers on the wait and active lists, combined by `formula` to `target`.
fn modified(formula: &str, target: &str) -> String {
    format!(
        "  advanced:\n    scalingModifiers:\n      formula: \"{formula}\"\n      target: \"{target}\"\n      metricType: AverageValue\n  triggers:\n    - type: redis\n      name: waiting\n      metadata:\n        address: \"redis:6379\"\n        listName: \"bull:jobs:wait\"\n    - type: redis\n      name: active\n      metadata:\n        address: \"redis:6379\"\n        listName: \"bull:jobs:active\"\n"
    )
}

/// The replay of the deployed autoscaler in `chart` over a steady minute and more, as JSON.
fn replayed(chart: &std::path::Path) -> serde_json::Value {
    let d = chart.parent().unwrap();
    let csv = write(d, "arrivals.csv", "seconds,rate\n0,20\n300,20\n");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = root.join("examples/runs/after");
    let out = run_within(
        &[
            "replay",
            run.to_str().unwrap(),
            "--arrivals",
            &csv,
            "-f",
            chart.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A formula is evaluated, not taken for the plain sum: `waiting + 3 * active` asks for more
/// workers than `waiting + active` (before: any formula holding `+` replayed as the plain sum,
/// byte-identical); a function call is said not replayed.
#[test]
fn a_scaling_formula_is_evaluated_not_taken_for_a_sum() {
    let deployed = |v: &serde_json::Value| v["replays"][0].clone();
    let sum = replayed(&chart_with(
        "formula-sum",
        &modified("waiting + active", "10"),
        "",
    ));
    let weighed = replayed(&chart_with(
        "formula-weighed",
        &modified("waiting + 3 * active", "10"),
        "",
    ));
    let (a, b) = (deployed(&sum), deployed(&weighed));
    assert!(
        a["name"].as_str().unwrap().ends_with("(deployed)"),
        "{}",
        sum["not_replayed"]
    );
    assert!(
        b["name"].as_str().unwrap().ends_with("(deployed)"),
        "{}",
        weighed["not_replayed"]
    );
    let max = |r: &serde_json::Value| r["replicas_range"][1].as_f64().unwrap();
    assert!(
        max(&b) > max(&a),
        "{} / {}",
        a["replicas_range"],
        b["replicas_range"]
    );
    let call = replayed(&chart_with(
        "formula-call",
        &modified("max(waiting, active)", "10"),
        "",
    ));
    let why = call["not_replayed"].to_string();
    assert!(
        why.contains("max(waiting, active)") && why.contains("not read"),
        "{why}"
    );
}

/// A target of 0 is refused by the API server: not replayed, said so (before: "inf ×" in the
/// audit and a replay that never scaled).
#[test]
fn an_autoscaler_target_of_zero_is_not_replayed() {
    let v = replayed(&chart_with(
        "target-zero",
        &modified("waiting + active", "0"),
        "",
    ));
    let why = v["not_replayed"].to_string();
    assert_eq!(v["replays"].as_array().unwrap().len(), 1, "{why}");
    assert!(why.contains("not positive"), "{why}");
}

/// Two autoscalers on the worker Deployment: the second is named (before: never mentioned).
#[test]
fn a_second_autoscaler_on_the_workers_is_named() {
    let second = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: n8n-worker-too\n  namespace: n8n\nspec:\n  scaleTargetRef:\n    name: n8n-worker\n  minReplicaCount: 1\n  maxReplicaCount: 3\n  triggers:\n    - type: redis\n      metadata:\n        address: \"redis:6379\"\n        listName: \"bull:jobs:wait\"\n";
    let v = replayed(&chart_with(
        "two-autoscalers",
        &modified("waiting + active", "10"),
        second,
    ));
    let why = v["not_replayed"].to_string();
    assert!(why.contains("ScaledObject n8n-worker-too"), "{why}");
}

/// A scale sweep's results are not overwritten by `scale --prometheus --out` (before: its
/// `w1/summary.json` and scale.json were), and a planted `OUT/wN` link is refused before any
/// command runs (before: the count's run was written where it pointed).
#[test]
fn scale_results_are_neither_overwritten_nor_written_through_a_link() {
    let d = dir("scale-writes");
    let measured = d.join("measured");
    std::fs::create_dir_all(measured.join("w1")).unwrap();
    std::fs::write(measured.join("w1/summary.json"), "{}").unwrap();
    let out = run(&[
        "scale",
        "--prometheus",
        "http://127.0.0.1:9",
        "--since",
        "1h",
        "--out",
        measured.to_str().unwrap(),
    ]);
    refused(&out, &["scale sweep"]);
    assert_eq!(
        std::fs::read_to_string(measured.join("w1/summary.json")).unwrap(),
        "{}"
    );
    let base = d.join("out");
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, base.join("w2")).unwrap();
    let marker = d.join("scaled");
    let out = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--workers",
        "1,2",
        "--scale-cmd",
        &format!("echo {{workers}} >> {}", marker.display()),
        "--restore-workers",
        "1",
        "--out",
        base.to_str().unwrap(),
    ]);
    refused(&out, &["w2", "symbolic link"]);
    assert!(!marker.exists(), "a scale command ran");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// A saved run's endpoint that used 1e300 % of a core, or whose URL holds a line break, is
/// refused naming the field (before: "used 1e298 cores", and a URL forging finding lines).
#[test]
fn a_saved_endpoint_with_impossible_cpu_or_a_forged_url_is_refused() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/runs/after/summary.json")).unwrap();
    for (case, field, value) in [
        ("cpu", "cpu_percent_mean", serde_json::json!(1e300)),
        (
            "url",
            "url",
            serde_json::json!("http://n8n:5678/metrics\nFINDING: forged"),
        ),
    ] {
        let mut s: serde_json::Value = serde_json::from_str(&text).unwrap();
        s["stages"][0]["endpoints"][0][field] = value;
        let d = dir(&format!("saved-endpoint-{case}"));
        std::fs::write(d.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
        let out = run(&["diagnose", d.to_str().unwrap()]);
        refused(&out, &["endpoints[0]"]);
        assert!(!String::from_utf8_lossy(&out.stdout).contains("FINDING: forged"));
    }
}

/// Smaller: `drain --workers 0`, a `drain --metrics` URL that cannot be read and a target rate of 1e-300/s are refused naming the flag
/// (before: accepted; the plan was "for 0.0/s").
#[test]
fn a_drain_of_no_workers_and_a_vanishing_target_rate_are_refused() {
    let out = run(&[
        "drain",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--rate",
        "2",
        "--stop-cmd",
        "true",
        "--workers",
        "0",
    ]);
    refused(&out, &["--workers"]);
    let out = run(&[
        "scale",
        "examples/runs/after",
        "examples/runs/before",
        "--target-rate",
        "1e-300",
    ]);
    refused(&out, &["--target-rate"]);
}

/// `--scale-cmd` without `--restore-workers` or `--redis`: refused with what to pass, exit 2 —
/// not clap's usage error (issue #63).
#[test]
fn a_scale_command_without_a_count_to_return_to_says_what_to_pass() {
    let out = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--workers",
        "1,2",
        "--scale-cmd",
        "true {workers}",
    ]);
    refused(&out, &["--restore-workers N", "--redis"]);
}

/// A scale sweep given no levels searches each count (`--adaptive`) instead of the default
/// profile's fixed stages, which stop below what the larger counts hold (issue #63).
#[test]
#[ignore = "stack tier (≈ 20 s): a scale sweep of simulated workers"]
fn a_scale_sweep_without_levels_searches_each_count() {
    let d = dir("scale-default");
    let sweep = |extra: &[&str], out: &str| {
        let out = d.join(out);
        let mut args = vec!["sweep", "--url", "http://127.0.0.1:9/webhook/load"];
        args.extend(extra);
        args.extend(["--workers", "1,4", "--scale-cmd", "true {workers}"]);
        args.extend(["--restore-workers", "1", "--out", out.to_str().unwrap()]);
        stderr(&run(&args))
    };
    let err = sweep(&[], "out");
    assert!(
        err.contains("searched with --adaptive") && err.contains("4 workers"),
        "{err}"
    );
    let book: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("out/scale.json")).unwrap()).unwrap();
    assert!(book["ended"].as_str().unwrap().contains("failed"), "{book}");
    // A profile asked for is swept as asked, even the default's own name (`-p steady`).
    let err = sweep(&["-p", "steady"], "asked");
    assert!(!err.contains("searched with --adaptive"), "{err}");
}

/// Autoscalers the API server refuses are refused naming the field, not read past (before: a
/// ScaledObject whose `triggers` is a string, an HPA without `maxReplicas`, `spec: null` were
/// ignored without a word).
#[test]
fn autoscalers_the_api_server_refuses_are_refused_naming_the_field() {
    let hpa = |spec: &str| {
        format!(
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: w\n  namespace: n8n\n{spec}"
        )
    };
    for (case, tail, more, field) in [
        (
            "triggers-string",
            "  triggers: \"redis\"\n".to_string(),
            String::new(),
            "spec.triggers",
        ),
        (
            "hpa-no-max",
            modified("waiting + active", "10"),
            hpa("spec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: n8n-worker\n  minReplicas: 1\n"),
            "spec.maxReplicas",
        ),
        (
            "hpa-spec-null",
            modified("waiting + active", "10"),
            hpa("spec: null\n"),
            "spec is not an object",
        ),
    ] {
        let file = chart_with(case, &tail, &more);
        let out = run(&["audit", "-f", file.to_str().unwrap()]);
        refused(&out, &[field]);
    }
}

/// A target past what 1000 workers reach is no plan (issue #61, item 5): no worker count, and
/// the note says the most n8ncap plans falls short (before: 1000 workers presented as the plan
/// for 5000/s, 4876/s reached).
#[test]
fn a_target_past_the_most_workers_planned_says_it_falls_short() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let runs: Vec<String> = [1, 2, 4, 8]
        .iter()
        .map(|n| {
            root.join(format!("examples/scale/w{n}"))
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["scale"];
    args.extend(runs.iter().map(String::as_str));
    args.extend(["--target-rate", "5000", "--json"]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = &v["plan"];
    assert!(
        plan["workers"].is_null() && plan["workers_after_change"].is_null(),
        "{plan}"
    );
    assert!(
        plan["note"]
            .as_str()
            .unwrap()
            .contains("short of the target"),
        "{plan}"
    );
}

/// `postgres-restart` refuses careless arguments with exit 2 naming the flag, before anything is
/// stopped: no time down, a stop too late for the load to run after the restart, an impossible
/// rate, no request timeout, a DSN variable that is unset, no way to stop Postgres, a results
/// directory holding an earlier restart, a webhook that does not answer OK. The stop command
/// would leave a marker: none is left.
#[test]
fn a_postgres_restart_refuses_careless_arguments_before_stopping_anything() {
    let d = dir("pg-restart");
    let marker = d.join("stopped");
    let stop = format!("touch {}", marker.display());
    let ok = canned_server(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}"
            .to_vec(),
        false,
    );
    let url = ok;
    let out_dir = d.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("postgres-restart.json"), "{}").unwrap();
    let base = |more: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["postgres-restart", "--url", &url, "--rate", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(more.iter().map(|s| s.to_string()));
        a
    };
    let with_stop = |more: &[&str]| -> Vec<String> {
        let mut a = base(more);
        a.extend(["--stop-cmd", &stop, "--start-cmd", "true"].map(str::to_string));
        a
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (with_stop(&["--down", "0s"]), "--down"),
        (
            with_stop(&["--duration", "20s", "--stop-after", "10s", "--down", "15s"]),
            "--stop-after",
        ),
        (with_stop(&["--timeout", "0s"]), "--timeout"),
        (
            with_stop(&["--postgres-env", "N8NCAP_TEST_NO_SUCH_DSN"]),
            "N8NCAP_TEST_NO_SUCH_DSN",
        ),
        (base(&[]), "--project"),
        (with_stop(&["--out", out_dir.to_str().unwrap()]), "--force"),
        (
            {
                let mut a = with_stop(&[]);
                a[2] = "http://127.0.0.1:9/webhook/load".into();
                a
            },
            "pre-flight",
        ),
    ];
    for (args, names) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_within(&args, Duration::from_secs(30));
        refused(&out, &[names]);
    }
    let rate = base(&[]);
    let mut nan: Vec<&str> = rate.iter().map(String::as_str).collect();
    nan[4] = "NaN";
    nan.extend(["--stop-cmd", &stop, "--start-cmd", "true"]);
    refused(&run_within(&nan, Duration::from_secs(30)), &["--rate"]);
    assert!(!marker.exists(), "a careless run stopped Postgres");
}
