//! `n8ncap drain` against simulated workers that stop as n8n 2.41 does (no job taken after
//! SIGTERM, Code tasks aborted when the task budget — 0.8 × N8N_GRACEFUL_SHUTDOWN_TIMEOUT —
//! runs out and answered HTTP 500 then; a killed worker's jobs failed by Bull's stalled check).
//! The lost-job cases run 6 s jobs against a 1 s window on workers of 8 slots: at the signal
//! the stopped worker holds about 6 jobs spread over their 6 s, so some always outlast the
//! budget: through the Docker API on a compose-like project, and killed with --stop-cmd on
//! processes whose queue is a real Redis and whose executions are in a real PostgreSQL. The
//! loss measured is held to the tasks the stopped worker said it aborted, and to the
//! prediction. `drain_compose.rs` runs the real n8n's three stops on the compose stack.

use crate::common::*;
use crate::docker::{docker, Stack};
use std::process::Command;

/// The Code tasks a worker's log says it aborted at shutdown (n8n's line, one per task).
pub(crate) fn aborted_in(log: &str) -> u64 {
    n8ncap::actuate::docker_stop::aborted_in_log(log)
}

/// `tag` names the project and its image: tests side by side must not share them.
fn two_workers(tag: &str, graceful: &'static str) -> Stack {
    let mut s = Stack::empty(tag);
    s.run(
        "n8n",
        &[
            ("N8N_METRICS", "true"),
            ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true"),
            ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1"),
        ],
        None,
        &["sim", "main"],
        true,
    );
    for w in ["n8n-worker-1", "n8n-worker-2"] {
        s.run(
            w,
            &[
                ("QUEUE_BULL_REDIS_HOST", "n8n"),
                ("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", graceful),
            ],
            Some("256m"),
            &["sim", "worker", "--concurrency", "8"],
            false,
        );
    }
    s
}

/// [`two_workers`] once main answers and both workers are on its queue (their
/// `/healthz/readiness` at their container address): main's published port and the worker to
/// stop.
async fn ready_two_workers(tag: &str, graceful: &'static str) -> (Stack, String, String) {
    let stack = two_workers(tag, graceful);
    let port = stack.main_port();
    wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")).await;
    for w in ["n8n-worker-1", "n8n-worker-2"] {
        let name = format!("{}-{w}", stack.project);
        let ip = docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &name,
        ]);
        wait_http_ok(&format!("http://{ip}:5678/healthz/readiness")).await;
    }
    let worker = format!("{}-n8n-worker-1", stack.project);
    (stack, port, worker)
}

pub(crate) fn drain(args: &[&str]) -> serde_json::Value {
    let o = Command::new(bin())
        .arg("drain")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

pub(crate) fn lost(d: &serde_json::Value) -> u64 {
    let f = &d["in_flight"];
    let by_status: u64 = f["failed_by_status"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    by_status + f["broken"].as_u64().unwrap() + f["unanswered"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 18 s): Docker containers"]
async fn jobs_shorter_than_the_shutdown_window_are_not_lost() {
    if !have_docker() {
        return;
    }
    let (stack, port, worker) = ready_two_workers("drainshort", "5").await;
    let d = drain(&[
        "--url",
        &format!("http://127.0.0.1:{port}/webhook/load"),
        "--rate",
        "6",
        "--body",
        r#"{"sleep_ms":400}"#,
        "--duration",
        "14s",
        "--stop-after",
        "6s",
        "--warmup",
        "2s",
        "--project",
        &stack.project,
        "--worker",
        &worker,
        "--grace",
        "10s",
        "--timeout",
        "20s",
    ]);
    // The worker's own N8N_GRACEFUL_SHUTDOWN_TIMEOUT, read through the Docker API.
    assert_eq!(d["window_s"]["value"], 5.0, "{d}");
    assert_eq!(d["stop"]["what"], worker.as_str());
    assert_eq!(d["stop"]["exit_code"], 0, "{d}");
    assert!(d["in_flight"]["total"].as_u64().unwrap() >= 1, "{d}");
    assert_eq!(lost(&d), 0, "{d}");
    assert_eq!(d["predicted"]["lost"], 0.0, "{d}");
    assert_eq!(d["agrees"], true);
    // Started again: the project keeps the workers it had.
    assert!(d["stop"]["restarted_s"].as_f64().is_some(), "{d}");
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.Running}}", &worker]),
        "true"
    );
}

/// The statuses the requests in flight failed with.
fn failed_statuses(d: &serde_json::Value) -> Vec<String> {
    d["in_flight"]["failed_by_status"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 35 s): Docker containers"]
async fn code_tasks_past_the_task_budget_fail_with_http_500_when_it_runs_out() {
    if !have_docker() {
        return;
    }
    let (stack, port, worker) = ready_two_workers("drainlong", "1").await;
    let d = drain(&[
        "--url",
        &format!("http://127.0.0.1:{port}/webhook/load"),
        "--rate",
        "2",
        "--body",
        r#"{"sleep_ms":6000}"#,
        "--duration",
        "20s",
        "--stop-after",
        "12s",
        "--warmup",
        "2s",
        "--project",
        &stack.project,
        "--worker",
        &worker,
        "--timeout",
        "20s",
        "--metrics",
        &format!("http://127.0.0.1:{port}/metrics"),
    ]);
    let log = docker(&["logs", &worker]);
    let aborted = aborted_in(&log);
    assert!(aborted >= 1, "the worker aborted no task: {log}\n{d}");
    // What the drain counted is what the worker aborted, each answered HTTP 500 — none left
    // unanswered, and none in n8n's failed counter (measured on n8n 2.41.1: it stays 0).
    assert_eq!(lost(&d), aborted, "{log}\n{d}");
    assert_eq!(failed_statuses(&d), vec!["500".to_string()], "{d}");
    assert_eq!(d["in_flight"]["unanswered"], 0, "{d}");
    assert_eq!(d["n8n_failed"].as_f64(), Some(0.0), "{d}");
    // Answered by the task budget, not by a stalled check (90 s on main's queue by default).
    let last = d["in_flight"]["last_failure_after_s"].as_f64().unwrap();
    assert!(
        last < d["stalled_answer_s"][0]["value"].as_f64().unwrap(),
        "{d}"
    );
    // The held count read back from the worker's log ("Waiting for N active executions").
    let held = d["stop"]["held_logged"]
        .as_u64()
        .expect("held from the log");
    assert!(held >= aborted, "{d}");
    // The prediction from that count: 6 s jobs whose Code gets 0.8 of a 1 s window.
    assert_eq!(d["budget_s"]["value"], 0.8, "{d}");
    let p = d["predicted"]["lost"].as_f64().unwrap();
    let job = d["job_p50_s"]["value"].as_f64().unwrap();
    assert!((p - held as f64 * (1.0 - 0.8 / job)).abs() < 1e-6, "{d}");
    assert_eq!(d["window_s"]["value"], 1.0);
    // The advice: a window whose 0.8 covers the p99 job, above the 1 s set.
    assert_eq!(d["advice"]["kind"], "raise_window", "{d}");
    let to = d["advice"]["to_s"].as_f64().unwrap();
    assert!(
        0.8 * to >= d["job_p99_s"]["value"].as_f64().unwrap() && to > 1.0,
        "{d}"
    );
}

/// Real Redis for the queue and real PostgreSQL for the executions (each process's pool): a
/// worker killed (SIGKILL, as an OOM kill) loses every job it held, and the other worker's
/// stalled check fails them once their lease lapsed — answered HTTP 500, never re-run, not in
/// n8n's failed counter, as n8n 2.41.1 did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 36 s): a PostgreSQL cluster, a real Redis"]
async fn on_redis_the_jobs_a_killed_worker_held_fail_by_bull_s_stalled_check() {
    if !have_command("redis-server", "--version", "apt-get install redis-server") {
        return;
    }
    let Some(pg) = crate::postgres::start_postgres(40).await else {
        return;
    };
    let db_env = [
        ("DB_TYPE", "postgresdb".to_string()),
        ("DB_POSTGRESDB_HOST", "127.0.0.1".into()),
        ("DB_POSTGRESDB_PORT", pg.port.to_string()),
        ("DB_POSTGRESDB_USER", "postgres".into()),
        ("DB_POSTGRESDB_POOL_SIZE", "4".into()),
    ];
    let dir = fresh_dir("drain-redis");
    std::fs::create_dir_all(&dir).unwrap();
    let rport = free_port();
    let _redis = ChildGuard(
        Command::new("redis-server")
            .args([
                "--port",
                &rport.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--bind", "127.0.0.1"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let redis = format!("redis://127.0.0.1:{rport}");
    let http = free_port();
    let _main = ChildGuard(
        Command::new(bin())
            .args(["sim", "main", "--cpu-ms", "0", "--redis", &redis])
            .env("N8N_PORT", http.to_string())
            .env("N8N_LISTEN_ADDRESS", "127.0.0.1")
            .env("N8N_METRICS", "true")
            .env("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true")
            .envs(db_env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut workers = Vec::new();
    let mut health = Vec::new();
    for i in 0..2 {
        let log = std::fs::File::create(dir.join(format!("w{i}.log"))).unwrap();
        let port = free_port();
        health.push(port);
        workers.push(ChildGuard(
            Command::new(bin())
                .args(["sim", "worker", "--concurrency", "8", "--redis", &redis])
                // CPU-free: the drain's timing is the jobs' sleep, not the simulator's CPU.
                .args(["--cpu-ms", "0"])
                .env("SIM_RUNNER_CPU_MS", "0")
                .env("QUEUE_HEALTH_CHECK_PORT", port.to_string())
                .env("N8N_RUNNERS_BROKER_PORT", free_port().to_string())
                .env("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", "1")
                .env("QUEUE_WORKER_LOCK_DURATION", "2000")
                .env("QUEUE_WORKER_LOCK_RENEW_TIME", "500")
                .env("QUEUE_WORKER_STALLED_INTERVAL", "1000")
                .env("HOSTNAME", format!("w{i}"))
                .envs(db_env.iter().map(|(k, v)| (*k, v.as_str())))
                .stderr(log.try_clone().unwrap())
                .stdout(log)
                .spawn()
                .unwrap(),
        ));
    }
    wait_http_ok(&format!("http://127.0.0.1:{http}/healthz")).await;
    // Both workers on the queue (readiness: Redis connected) before the load; one that exited
    // is shown with what it wrote.
    for (i, port) in health.iter().enumerate() {
        let url = format!("http://127.0.0.1:{port}/healthz/readiness");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
        loop {
            if let Ok((200, _)) =
                n8ncap::wire::http::http_get(&url, std::time::Duration::from_secs(1)).await
            {
                break;
            }
            if let Ok(Some(status)) = workers[i].0.try_wait() {
                let log = std::fs::read_to_string(dir.join(format!("w{i}.log"))).unwrap();
                panic!("worker {i} exited ({status}) before it was ready: {log}");
            }
            assert!(std::time::Instant::now() < deadline, "{url} never ready");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let pid = workers[0].0.id();
    // Until it exited: it stays this process's zombie until reaped, which `kill -0` still finds.
    let stop = format!(
        "kill -KILL {pid}; while kill -0 {pid} 2>/dev/null && ! grep -q '^State:.*Z' /proc/{pid}/status; do sleep 0.1; done"
    );
    let d = drain(&[
        "--url",
        &format!("http://127.0.0.1:{http}/webhook/load"),
        "--rate",
        "2",
        "--body",
        r#"{"sleep_ms":6000}"#,
        "--duration",
        "20s",
        "--stop-after",
        "12s",
        "--warmup",
        "2s",
        "--stop-cmd",
        &stop,
        "--signal",
        "KILL",
        "--workers",
        "2",
        "--shutdown-timeout",
        "1s",
        "--timeout",
        "25s",
        "--metrics",
        &format!("http://127.0.0.1:{http}/metrics"),
    ]);
    // Every failure an HTTP 500 from the other worker's stalled check, none left unanswered,
    // none counted by n8n's failed counter.
    assert!(lost(&d) >= 1, "{d}");
    assert_eq!(failed_statuses(&d), vec!["500".to_string()], "{d}");
    assert_eq!(d["in_flight"]["unanswered"], 0, "{d}");
    assert_eq!(d["n8n_failed"].as_f64(), Some(0.0), "{d}");
    // Not before the lease (2 s here) lapsed: the stalled check, not the task budget.
    let last = d["in_flight"]["last_failure_after_s"].as_f64().unwrap();
    assert!(last >= 2.0, "{d}");
    assert_eq!(d["killed_before_budget"], true, "{d}");
    // A kill loses every held execution: predicted lost = predicted held.
    assert_eq!(d["predicted"]["lost"], d["predicted"]["held"], "{d}");
    assert_eq!(d["advice"]["kind"], "avoid_kill", "{d}");
    // Every execution main wrote before it was queued: the finished ones saved by their worker.
    assert!(d["in_flight"]["finished"].as_u64().unwrap() >= 1, "{d}");
    drop(pg);
}

/// Bad input is refused with exit 2 before any request or stop: no rate, the stop inside the
/// warm-up, no way to stop a worker, an --out that cannot be created.
#[test]
fn a_drain_that_cannot_run_is_refused_before_it_starts() {
    let url = "http://127.0.0.1:9/webhook/load";
    let kept = fresh_dir("drain-kept");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("drain.json"), "{}").unwrap();
    let kept = kept.to_str().unwrap().to_string();
    for args in [
        vec!["--url", url, "--stop-cmd", "true"],
        vec![
            "--url",
            url,
            "--rate",
            "2",
            "--stop-after",
            "3s",
            "--warmup",
            "5s",
            "--stop-cmd",
            "true",
        ],
        vec!["--url", url, "--rate", "2"],
        vec![
            "--url",
            url,
            "--rate",
            "2",
            "--stop-cmd",
            "true",
            "--out",
            "/proc/n8ncap-drain",
        ],
        // Docker's stop waits whole seconds: 0.5 s would be a kill at once.
        vec![
            "--url",
            url,
            "--rate",
            "2",
            "--project",
            "p",
            "--grace",
            "0.5s",
        ],
        // A kill has no grace to give.
        vec![
            "--url",
            url,
            "--rate",
            "2",
            "--project",
            "p",
            "--signal",
            "kill",
            "--grace",
            "20s",
        ],
        // An earlier drain's record is not overwritten without --force.
        vec![
            "--url",
            url,
            "--rate",
            "2",
            "--stop-cmd",
            "true",
            "--out",
            &kept,
        ],
    ] {
        let o = Command::new(bin())
            .arg("drain")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&kept).join("drain.json")).unwrap(),
        "{}"
    );
}

/// Two simulated workers of `concurrency` slots (and runner tasks) on main's queue, with a
/// shutdown window of `graceful` s, and the command that stops the first with SIGTERM and
/// waits until it exited (it stays this process's zombie until reaped, which `kill -0` finds).
fn two_sim_workers(queue: u16, concurrency: &str, graceful: &str) -> (Vec<ChildGuard>, String) {
    let workers: Vec<ChildGuard> = (0..2)
        .map(|_| {
            spawn_role(
                &["sim", "worker", "--concurrency", concurrency],
                &[
                    ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
                    ("QUEUE_HEALTH_CHECK_PORT", free_port().to_string()),
                    ("N8N_RUNNERS_BROKER_PORT", free_port().to_string()),
                    ("N8N_RUNNERS_MAX_CONCURRENCY", concurrency.to_string()),
                    ("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", graceful.to_string()),
                ],
            )
        })
        .collect();
    let pid = workers[0].0.id();
    let stop = format!("kill -TERM {pid}; while kill -0 {pid} 2>/dev/null && ! grep -q '^State:.*Z' /proc/{pid}/status; do sleep 0.1; done");
    (workers, stop)
}

/// `drain --metrics` takes main's /metrics as `sweep --metrics` does, `URL` or `main=URL`, and
/// reads n8n's failed counter through either; a worker's endpoint is refused (exit 2, the
/// counter is main's). Simulated processes, a 4 s drain each: the fast tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_reads_main_s_metrics_given_as_url_or_main_url() {
    let (http, queue) = (free_port(), free_port());
    let _main = spawn_sim_main(http, queue);
    wait_http_ok(&format!("http://127.0.0.1:{http}/healthz")).await;
    let metrics = format!("http://127.0.0.1:{http}/metrics");
    for (i, form) in [metrics.clone(), format!("main={metrics}")]
        .iter()
        .enumerate()
    {
        let (mut workers, stop) = two_sim_workers(queue, "4", "2");
        let d = drain(&[
            "--url",
            &format!("http://127.0.0.1:{http}/webhook/load"),
            "--rate",
            "4",
            "--body",
            r#"{"sleep_ms":200}"#,
            "--duration",
            "4s",
            "--stop-after",
            "2s",
            "--warmup",
            "1s",
            "--stop-cmd",
            &stop,
            "--workers",
            "2",
            "--shutdown-timeout",
            "2s",
            "--timeout",
            "5s",
            "--metrics",
            form,
        ]);
        // Read through either form: n8n's failed counter over the drain (0: 200 ms jobs end
        // inside the 2 s window).
        assert_eq!(d["n8n_failed"].as_f64(), Some(0.0), "form {i}: {d}");
        assert_eq!(lost(&d), 0, "form {i}: {d}");
        workers.clear();
    }
    let o = Command::new(bin())
        .args([
            "drain",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--rate",
            "2",
        ])
        .args([
            "--stop-cmd",
            "true",
            "--metrics",
            &format!("worker={metrics}"),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("main=URL"),
        "{o:?}"
    );
}

/// `drain --run RUN` sends the run's body, whose job times its prediction uses: a sweep of
/// 500 ms jobs (examples/runs/before, ceiling 19.9/s) drained at its operating point, 13.3/s,
/// holds about 13.3 × 0.5 ≈ 6.6 requests in flight at the signal (an empty body's jobs, which
/// the drain sent before, held none). Simulated processes, a 4 s drain: the fast tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_of_a_run_sends_the_run_s_body() {
    let (http, queue) = (free_port(), free_port());
    let _main = spawn_sim_main(http, queue);
    wait_http_ok(&format!("http://127.0.0.1:{http}/healthz")).await;
    let (workers, stop) = two_sim_workers(queue, "20", "3");
    let d = drain(&[
        "--url",
        &format!("http://127.0.0.1:{http}/webhook/load"),
        "--run",
        "examples/runs/before",
        "--duration",
        "4s",
        "--stop-after",
        "2s",
        "--warmup",
        "1s",
        "--stop-cmd",
        &stop,
        "--workers",
        "2",
        "--shutdown-timeout",
        "3s",
        "--timeout",
        "5s",
    ]);
    let rate = d["rate_per_s"]["value"].as_f64().unwrap();
    assert!((rate - 19.91 * 2.0 / 3.0).abs() < 0.1, "{d}");
    // Little's law at the signal: 13.3/s × 0.5 s ≈ 6.6 in flight; at least half of it.
    let total = d["in_flight"]["total"].as_u64().unwrap();
    assert!(total as f64 >= 0.5 * rate * 0.5, "{total} in flight: {d}");
    // The 500 ms jobs end inside the 3 s window: nothing lost.
    assert_eq!(lost(&d), 0, "{d}");
    drop(workers);
}
