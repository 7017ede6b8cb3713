//! `recommend RUN --format prometheus-rules|prometheus-operator` (issue #64): the rules pass
//! `promtool check rules`, their own `promtool test rules` cases pass for runs capped by the
//! runner limit, by worker concurrency and by both, a threshold moved makes those cases fail,
//! and the PrometheusRule validates against prometheus-operator's CRD (v0.93.0, kept in
//! fixtures/prometheus-operator).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn promtool() -> bool {
    have_command("promtool", "--version", "apt-get install prometheus")
}

/// The rules for `run` written as `DIR/alerts.yml` with their cases in `DIR/alerts.test.yml`.
fn rules(run: &str, dir: &Path, extra: &[&str]) -> String {
    let out = Command::new(bin())
        .current_dir(root())
        .args(["recommend", run, "--format", "prometheus-rules", "--tests"])
        .arg(dir.join("alerts.test.yml"))
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    std::fs::write(dir.join("alerts.yml"), &text).unwrap();
    text
}

fn promtool_run(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new("promtool")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn ceiling(run: &str) -> f64 {
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(run).join("summary.json")).unwrap(),
    )
    .unwrap();
    s["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap()
}

const RUNS: [&str; 6] = [
    "examples/runs/before",
    "examples/runs/after",
    "examples/scale/w1",
    "examples/scale/w8",
    // Main's intake caps (main's 40 ms of CPU per request, 20 slots): no slots-full alert.
    "examples/runs/main-intake",
    // The database pool caps (a pool of 2, 50 ms of Postgres per execution: 35.9 of its 40/s).
    "examples/runs/pool",
];

#[test]
fn the_rules_pass_promtool_and_their_own_cases_for_each_capping_limit() {
    if !promtool() {
        return;
    }
    for run in RUNS {
        let dir = fresh_dir(&format!("alerts-{}", run.replace('/', "-")));
        std::fs::create_dir_all(&dir).unwrap();
        let text = rules(run, &dir, &[]);
        // The operating point is 2/3 of the ceiling the run measured, to the digits written.
        let op = 2.0 / 3.0 * ceiling(run);
        let written: f64 = text
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("expr: n8ncap:executions_completed:rate5m > ")
            })
            .unwrap()
            .parse()
            .unwrap();
        assert!((written - op).abs() < 1e-5, "{run}: {written} against {op}");
        let (ok, said) = promtool_run(&["check", "rules", "alerts.yml"], &dir);
        assert!(ok, "{run}: {said}");
        // Main's intake caps before the workers: their slots are free at its ceiling, so the
        // slots-full alert is left out there.
        let before_workers = run.ends_with("main-intake");
        let count = if before_workers { 14 } else { 15 };
        assert!(
            said.contains(&format!("{count} rules found")),
            "{run}: {said}"
        );
        assert_eq!(
            text.contains("alert: N8nSlotsFullAtCeiling"),
            !before_workers,
            "{run}"
        );
        let (ok, said) = promtool_run(&["test", "rules", "alerts.test.yml"], &dir);
        assert!(ok, "{run}: {said}");
        // The cases are not vacuous: the operating point moved above the ceiling fails them.
        let moved = text.replace(
            &format!(
                "rate5m > {}",
                text.lines()
                    .find_map(|l| l
                        .trim()
                        .strip_prefix("expr: n8ncap:executions_completed:rate5m > "))
                    .unwrap()
            ),
            &format!("rate5m > {}", 2.0 * ceiling(run)),
        );
        std::fs::write(dir.join("alerts.yml"), moved).unwrap();
        let (ok, said) = promtool_run(&["test", "rules", "alerts.test.yml"], &dir);
        assert!(
            !ok && said.contains("N8nOperatingPointPassed"),
            "{run}: {said}"
        );
    }
}

/// A matcher reaches every selector and the cases' series; one the cases cannot meet (a
/// regex) is refused with --tests, and a malformed one always.
#[test]
fn matchers_reach_every_selector_and_bad_ones_are_refused() {
    if !promtool() {
        return;
    }
    let dir = fresh_dir("alerts-match");
    std::fs::create_dir_all(&dir).unwrap();
    let text = rules(RUNS[1], &dir, &["--match", r#"namespace="n8n-prod""#]);
    let selectors = text.matches("n8n_scaling_mode_queue_jobs_").count();
    assert!(selectors >= 4, "{text}");
    assert_eq!(
        text.matches(r#"namespace="n8n-prod""#).count(),
        selectors + 2,
        "{text}"
    );
    let (ok, said) = promtool_run(&["test", "rules", "alerts.test.yml"], &dir);
    assert!(ok, "{said}");
    // Flags that belong to other formats are refused, not ignored.
    for args in [
        &["--format", "prometheus-operator", "--tests", "x.test.yml"][..],
        &["--format", "compose", "--match", r#"a="b""#],
        &[
            "--format",
            "compose",
            "--arrivals",
            "examples/scale/arrivals-step.csv",
        ],
    ] {
        let out = Command::new(bin())
            .current_dir(root())
            .args(["recommend", RUNS[1]])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    for (matcher, with_tests) in [(r#"namespace=~"n8n.*""#, true), ("namespace", false)] {
        let mut c = Command::new(bin());
        c.current_dir(root()).args([
            "recommend",
            RUNS[1],
            "--format",
            "prometheus-rules",
            "--match",
            matcher,
        ]);
        if with_tests {
            c.arg("--tests").arg(dir.join("x.test.yml"));
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{matcher}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--"),
            "{matcher}"
        );
    }
}

#[test]
fn the_prometheus_rule_validates_against_its_crd() {
    if !have_command(
        "python3",
        "-cimport jsonschema, kubernetes_validate, yaml",
        "pip install jsonschema kubernetes-validate pyyaml",
    ) {
        return;
    }
    let dir = fresh_dir("alerts-crd");
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(bin())
        .current_dir(root())
        .args([
            "recommend",
            RUNS[0],
            "--format",
            "prometheus-operator",
            "-f",
        ])
        .arg(root().join("fixtures/k8s/rendered/official-keda-autoscaling.yaml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file: PathBuf = dir.join("rule.yaml");
    std::fs::write(&file, &out.stdout).unwrap();
    let v = Command::new("python3")
        .arg(root().join("fixtures/keda/validate.py"))
        .arg(root().join("fixtures/prometheus-operator/v0.93.0"))
        .arg(&file)
        .output()
        .unwrap();
    let said: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(
        said["validated"],
        serde_json::json!(["PrometheusRule/n8n-capacity"]),
        "{said}"
    );
    // The namespace comes from the deployment read.
    assert!(String::from_utf8_lossy(&out.stdout).contains("namespace: n8n"));
}

/// A run that read Postgres' connections (`sweep --postgres-env`) gets the connections alert:
/// 90 % of max_connections − reserved, its promtool case firing at the budget and quiet at a
/// quarter of it.
#[test]
fn a_run_that_read_postgres_gets_the_connections_alert() {
    if !promtool() {
        return;
    }
    let dir = fresh_dir("alerts-postgres");
    std::fs::create_dir_all(&dir).unwrap();
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(RUNS[1]).join("summary.json")).unwrap(),
    )
    .unwrap();
    s["stages"][0]["database"] = serde_json::json!({
        "postgres": {"samples": 10, "refused": 0, "gaps": 0, "max_connections": 100,
                     "reserved": 3, "open_max": 12}
    });
    std::fs::write(run.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    let text = rules(run.to_str().unwrap(), &dir, &[]);
    assert!(
        text.contains("alert: N8nPostgresConnectionsNearBudget"),
        "{text}"
    );
    // YAML may fold a long expression over lines: compared with its spaces collapsed.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("(sum(n8n_db_pool_connections_idle) or vector(0)) > 87"),
        "{text}"
    );
    let (ok, said) = promtool_run(&["test", "rules", "alerts.test.yml"], &dir);
    assert!(ok, "{said}");
    let cases = std::fs::read_to_string(dir.join("alerts.test.yml")).unwrap();
    assert!(
        cases.contains("Postgres connections near the budget"),
        "{cases}"
    );
}

/// The first timestamp of `ALERTS{alertname=…, alertstate=…}` between `from` and `to` (Unix s)
/// as Prometheus recorded it at its evaluations; None when it never was in that state.
async fn alert_first(prom: u16, alert: &str, state: &str, (from, to): (f64, f64)) -> Option<f64> {
    let q = format!("ALERTS{{alertname=\"{alert}\",alertstate=\"{state}\"}}");
    let url = format!(
        "http://127.0.0.1:{prom}/api/v1/query_range?query={}&start={from:.3}&end={to:.3}&step=1",
        q.replace('{', "%7B")
            .replace('}', "%7D")
            .replace('"', "%22")
            .replace('=', "%3D")
            .replace(',', "%2C")
    );
    let (status, body) = n8ncap::wire::http::http_get(&url, std::time::Duration::from_secs(10))
        .await
        .expect("Prometheus answers");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["values"].as_array().unwrap().iter())
        .filter_map(|p| p[0].as_f64())
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))))
}

/// An open load at `rate`/s for `secs` on the simulator's webhook.
fn drive(url: &str, rate: f64, secs: u32) {
    let o = Command::new(bin())
        .args(["sweep", "--url", url, "--rates", &format!("{rate:.2}")])
        .args(["--body", r#"{"sleep_ms":200}"#, "--warmup", "0s"])
        .args([
            "--stage-duration",
            &format!("{secs}s"),
            "--no-out",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The rules loaded into a real Prometheus scraping a simulated stack (every second, main's
/// queue figures refreshed every second): the rules as generated from the stack's own sweep,
/// their windows and `for:` scaled from minutes to seconds (5m → 5 s, 10m → 10 s: a 1 s scrape
/// and refresh hold as many samples per window as a 60 s scrape does over minutes). At half the
/// operating point the operating-point alert never leaves inactive; past it, it goes pending and
/// fires its `for:` later, at Prometheus' own evaluations (measured: 10 s after pending, quiet and
/// beside `stress-ng --cpu 0`; the threshold 11.9/s of a 17.9/s ceiling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 82 s): a live Prometheus"]
async fn a_real_prometheus_fires_the_operating_point_alert_past_it_and_not_at_half() {
    if !promtool() || !have_command("prometheus", "--version", "apt-get install prometheus") {
        return;
    }
    let dir = fresh_dir("alerts-live");
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let env = [
        ("N8N_LISTEN_ADDRESS", "127.0.0.1".to_string()),
        ("N8N_METRICS", "true".into()),
        ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true".into()),
        ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1".into()),
    ];
    let _n8n = spawn_role(
        &[
            "sim",
            "all",
            "--port",
            &port.to_string(),
            "--concurrency",
            "4",
        ],
        &env,
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_http_ok(&format!("{base}/healthz")).await;
    let webhook = format!("{base}/webhook/load");
    // The stack's ceiling, measured: 4 slots of 0.2 s jobs.
    let run = dir.join("run");
    let o = Command::new(bin())
        .args(["sweep", "--url", &webhook, "--vus", "2,8,16"])
        .args(["--body", r#"{"sleep_ms":200}"#, "--warmup", "1s"])
        .args(["--stage-duration", "4s", "--worker-concurrency", "4"])
        .args(["--metrics", &format!("main={base}/metrics")])
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = rules(run.to_str().unwrap(), &dir, &[]);
    let scaled = text
        .replace("[5m]", "[5s]")
        .replace("[10m]", "[10s]")
        .replace("for: 5m", "for: 5s")
        .replace("for: 10m", "for: 10s");
    let minutes = regex_free_minutes(&scaled);
    assert!(minutes.is_empty(), "windows left in minutes: {minutes:?}");
    std::fs::write(dir.join("live.yml"), &scaled).unwrap();
    let (ok, said) = promtool_run(&["check", "rules", "live.yml"], &dir);
    assert!(ok, "{said}");
    let threshold: f64 = scaled
        .lines()
        .skip_while(|l| !l.contains("alert: N8nOperatingPointPassed"))
        .find_map(|l| {
            l.trim()
                .strip_prefix("expr: n8ncap:executions_completed:rate5m > ")
        })
        .expect("the operating point's threshold")
        .parse()
        .unwrap();
    let prom = free_port();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: ['{}']\n\
             scrape_configs:\n  - job_name: n8n\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n",
            dir.join("live.yml").display()
        ),
    )
    .unwrap();
    let _prom = ChildGuard(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus"),
    );
    wait_http_ok(&format!("http://127.0.0.1:{prom}/-/ready")).await;
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    // Half the operating point, for twice the window and the `for:` together.
    let t_half = now();
    let w = webhook.clone();
    tokio::task::spawn_blocking(move || drive(&w, threshold * 0.5, 30))
        .await
        .unwrap();
    let alert = "N8nOperatingPointPassed";
    let quiet = (t_half, now());
    assert_eq!(alert_first(prom, alert, "pending", quiet).await, None);
    assert_eq!(alert_first(prom, alert, "firing", quiet).await, None);
    // Past it (below the ceiling: 1.25 × 2/3 of it), until it fires.
    let t0 = now();
    let w = webhook.clone();
    tokio::task::spawn_blocking(move || drive(&w, threshold * 1.25, 35))
        .await
        .unwrap();
    let span = (t0, now() + 2.0);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let pending = alert_first(prom, alert, "pending", span).await;
    let firing = alert_first(prom, alert, "firing", span).await;
    let (Some(p), Some(f)) = (pending, firing) else {
        panic!(
            "pending {pending:?}, firing {firing:?} at {:.2}/s past {threshold:.2}/s",
            threshold * 1.25
        );
    };
    // Never before its `for:` (10 s), and at an evaluation soon after (1 s apart).
    assert!(
        f - p >= 9.9 && f - p <= 10.0 + 5.0,
        "pending at {p}, firing at {f}"
    );
}

/// Durations in minutes left in a rules text (`[Nm]`, `for: Nm`).
fn regex_free_minutes(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let t = l.trim();
            t.starts_with("for:") && t.ends_with('m')
                || t.contains("m])")
                || t.contains("m]) ")
                || t.contains("m] ")
        })
        .map(str::to_string)
        .collect()
}

/// Round 6: flags the rules cannot honour are refused (exit 2), never written into rules that
/// promtool refuses or that never match, never ignored: a matcher on `job` or `__name__`, a
/// regex Prometheus does not take, a caller who gives up before the p99 job, the autoscaler's
/// tuning flags; a good regex matcher's rules pass promtool. A run of 10⁶ workers × 10⁶ slots
/// (each within what a saved run may hold) is refused, not a panic.
#[test]
fn rules_refuse_what_they_cannot_honour_and_take_a_good_regex() {
    let run = |args: &[&str]| {
        Command::new(bin())
            .current_dir(root())
            .args(["recommend", RUNS[1], "--format", "prometheus-rules"])
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        &["--match", r#"job="n8n""#][..],
        &["--match", r#"__name__=~"n8n_.*""#],
        &["--match", r#"namespace=~"(n8n""#],
        &["--match", r#"namespace=~"*n8n""#],
        &["--caller-timeout", "100ms"],
        &["--arrivals", "examples/scale/arrivals-step.csv"],
        &["--max-wait", "5s"],
        &["--pod-start", "10s"],
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // --max-wait with an autoscaler but no arrivals to replay is refused too.
    let out = Command::new(bin())
        .current_dir(root())
        .args(["recommend", RUNS[1], "--format", "keda", "--max-wait", "5s"])
        .args(["-f", "fixtures/k8s/rendered/community-queue-external.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--match", r#"namespace=~"n8n-(prod|staging)""#]);
    assert_eq!(out.status.code(), Some(0));
    if promtool() {
        let dir = fresh_dir("alerts-regex");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("alerts.yml"), &out.stdout).unwrap();
        let (ok, said) = promtool_run(&["check", "rules", "alerts.yml"], &dir);
        assert!(ok, "{said}");
    }
    // A million workers of a million slots each.
    let dir = fresh_dir("alerts-slots");
    std::fs::create_dir_all(&dir).unwrap();
    let mut s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(RUNS[1]).join("summary.json")).unwrap(),
    )
    .unwrap();
    for k in ["workers", "worker_concurrency"] {
        s["settings"][k] = serde_json::json!({"value": 1_000_000, "source": "hand edit"});
    }
    std::fs::write(dir.join("summary.json"), s.to_string()).unwrap();
    let out = Command::new(bin())
        .args([
            "recommend",
            dir.to_str().unwrap(),
            "--format",
            "prometheus-rules",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(matches!(out.status.code(), Some(1) | Some(2)), "{err}");
}
