//! `n8ncap postgres-restart` on the simulator with a real PostgreSQL (Debian's, stopped and
//! started again with its own `pg_ctl` through `--stop-cmd`/`--start-cmd`). What a real n8n
//! 2.41.1 did in the project's third lab, which the simulator plays (docs/sim.md "A Postgres
//! restart") and the drill must measure: webhook calls answered 503 at once from the stop, n8n
//! answering OK again at its recovery's first try past Postgres' return (inside the interval
//! `model::db_recovery` predicts), the requests in flight at the stop never answered and their
//! executions left `running` in n8n's table, no process exiting.

use crate::common::*;
use crate::postgres::{db_env, start_postgres, Postgres};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `pg_ctl` on the test's cluster as its owner (`runuser -u postgres` when the tests run as
/// root), as one shell command.
fn pg_ctl(pg: &Postgres, args: &str) -> String {
    let ctl = format!(
        "{} -D {} {args}",
        pg.bin.join("pg_ctl").display(),
        pg.data.display()
    );
    if pg.as_postgres {
        format!("runuser -u postgres -- {ctl}")
    } else {
        ctl
    }
}

/// The restarted server is pg_ctl's, not the test's child: stopped at once when dropped.
struct Restarted(String);

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .args(["-c", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Main's webhook answers (the stack is up).
async fn answering(http: u16, log: &std::path::Path) {
    let url = format!("http://127.0.0.1:{http}/metrics");
    for _ in 0..150 {
        if n8ncap::wire::http::http_get(&url, Duration::from_secs(1))
            .await
            .is_ok_and(|(s, _)| s == 200)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "main never answered: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn f(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 30 s): a PostgreSQL cluster stopped and started again"]
async fn a_postgres_restart_is_answered_503_then_back_at_the_recovery_s_next_try() {
    let Some(pg) = start_postgres(100).await else {
        return;
    };
    let start_cmd = pg_ctl(
        &pg,
        &format!(
            "-w -l {} -o '-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off' start",
            pg.socket_dir.join("restarted.log").display(),
            pg.port,
            pg.socket_dir.display()
        ),
    );
    let stop_cmd = pg_ctl(&pg, "-w -m fast stop");
    let _restarted = Restarted(pg_ctl(&pg, "-m immediate stop"));
    let dir = fresh_dir("pg-restart");
    std::fs::create_dir_all(&dir).unwrap();
    let (http, queue) = (free_port(), free_port());
    let mut main_env = db_env(pg.port, 4, 0);
    main_env.extend([
        ("N8N_PORT", http.to_string()),
        ("N8N_LISTEN_ADDRESS", "127.0.0.1".into()),
        ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
        ("N8N_METRICS", "true".into()),
    ]);
    let log = |name: &str| Stdio::from(std::fs::File::create(dir.join(name)).unwrap());
    let _main = spawn_role_logged(&["sim", "main"], &main_env, log("main.log"));
    let mut worker_env = db_env(pg.port, 4, 0);
    worker_env.extend([
        ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".to_string()),
        ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
        ("QUEUE_HEALTH_CHECK_PORT", free_port().to_string()),
        ("N8N_WORKER_SERVER_ADDRESS", "127.0.0.1".into()),
        ("N8N_RUNNERS_BROKER_PORT", free_port().to_string()),
        ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "127.0.0.1".into()),
    ]);
    let _worker = spawn_role_logged(
        &["sim", "worker", "--concurrency", "10"],
        &worker_env,
        log("worker.log"),
    );
    answering(http, &dir.join("main.log")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 5 calls a second of 0.8 s jobs: 4 in flight at the stop, as the lab's 4 callers.
    let out = dir.join("out");
    let dsn = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let run = tokio::task::spawn_blocking({
        let (out, url) = (out.clone(), format!("http://127.0.0.1:{http}/webhook/load"));
        move || {
            Command::new(bin())
                .args(["postgres-restart", "--url", &url, "--rate", "5"])
                .args(["--duration", "26s", "--stop-after", "5s", "--down", "6s"])
                .args(["--stop-cmd", &stop_cmd, "--start-cmd", &start_cmd])
                .args(["--postgres-env", "N8N_TEST_PG_DSN", "--timeout", "14s"])
                .args(["--body", r#"{"sleep_ms": 800}"#, "--json", "--out"])
                .arg(&out)
                .env("N8N_TEST_PG_DSN", &dsn)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let main_log = std::fs::read_to_string(dir.join("main.log")).unwrap_or_default();
    assert_eq!(run.status.code(), Some(0), "{stderr}\n{main_log}");
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    eprintln!("{}", r["verdict"]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("postgres-restart.json")).unwrap())
            .unwrap();
    assert_eq!(saved, r, "the saved record is the one printed");
    let stopped = f(&r, "/stop/stopped_s");
    let started = f(&r, "/stop/started_s");
    assert!(
        (6.0..9.0).contains(&(started - stopped)),
        "down {stopped}..{started}"
    );

    // 503s at once from the stop.
    assert!(f(&r, "/not_ready") >= 20.0, "{r}");
    assert!(
        f(&r, "/first_not_ready_after_stop_s") < 1.5,
        "{}",
        r["verdict"]
    );
    // The requests in flight at the stop were never answered, as n8n 2.41.1 left them, and
    // predicted so; their executions stay `running`.
    let total = f(&r, "/in_flight/total");
    let unanswered = f(&r, "/in_flight/unanswered");
    assert!((3.0..=5.0).contains(&total), "{}", r["in_flight"]);
    assert!(
        unanswered >= total - 1.0 && unanswered >= 2.0,
        "{}",
        r["in_flight"]
    );
    assert_eq!(f(&r, "/predicted/in_flight_lost"), total);
    let running = f(&r, "/executions_left/running");
    let new = f(&r, "/executions_left/new");
    assert!(running >= 1.0 && running + new >= unanswered, "{r}");

    // Back at the recovery's next try past Postgres' return, within the predicted interval.
    let back = f(&r, "/back_after_start_s");
    let lo = f(&r, "/predicted/back_after_start_s/0");
    let hi = f(&r, "/predicted/back_after_start_s/1");
    assert_eq!(
        r["back_agrees"],
        serde_json::json!(true),
        "{back} against {lo}..{hi}"
    );
    assert!(hi - lo <= 2.0 + 1e-6, "{lo}..{hi}");
    assert!(r["recovered_after_start_s"].is_f64(), "{}", r["verdict"]);

    // main said its recovery as n8n does, after 3 failed pings.
    let attempts: Vec<u32> = main_log
        .lines()
        .filter_map(|l| l.strip_prefix("Database connection recovered after "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(attempts.len(), 1, "{main_log}");
    assert!((1..=4).contains(&attempts[0]), "{main_log}");
    let failed_pings = main_log
        .lines()
        .filter(|l| l.starts_with("Database ping failed ("))
        .count();
    assert!(failed_pings >= 3, "{main_log}");
}

/// Postgres, Redis, main, a worker and its runner, the executions on Postgres; no restart
/// policy (a Postgres restart must not need one).
fn compose_file(tag: &str, port: u16) -> String {
    format!(
        r#"x-n8n-env: &n8n-env
  EXECUTIONS_MODE: queue
  QUEUE_BULL_REDIS_HOST: redis
  N8N_RUNNERS_MODE: external
  N8N_RUNNERS_AUTH_TOKEN: pg-restart-not-a-secret
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0
  N8N_METRICS: "true"
  SIM_MAIN_CPU_MS: "0"
  SIM_WORKER_CPU_MS: "0"
  SIM_RUNNER_CPU_MS: "0"
  DB_TYPE: postgresdb
  DB_POSTGRESDB_HOST: postgres
  DB_POSTGRESDB_DATABASE: n8n
  DB_POSTGRESDB_USER: n8n
  DB_POSTGRESDB_PASSWORD: simulated-stack-not-a-secret
services:
  postgres:
    image: n8ncap-sim/postgres:{tag}
  redis:
    image: n8ncap-sim/redis:{tag}
  n8n:
    image: n8ncap-sim/n8n:{tag}
    depends_on: [redis, postgres]
    ports:
      - "127.0.0.1:{port}:5678"
    environment:
      <<: *n8n-env
  n8n-worker:
    image: n8ncap-sim/n8n:{tag}
    command: worker --concurrency=10
    depends_on: [redis, postgres]
    environment:
      <<: *n8n-env
  n8n-worker-runner:
    image: n8ncap-sim/runners:{tag}
    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_AUTH_TOKEN: pg-restart-not-a-secret
      N8N_RUNNERS_MAX_CONCURRENCY: "10"
"#
    )
}

/// Through the Docker API (`--project`): the project's Postgres stopped (the image's SIGINT, a
/// fast shutdown) and started again, the n8n containers read back with n8n's last line about
/// their database, none exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 70 s): a compose project, a real Postgres and Redis"]
async fn a_postgres_restart_through_docker_reads_the_n8n_containers_back() {
    if !have_docker()
        || !have_command(
            "docker-compose",
            "version",
            "apt-get install docker-compose",
        )
    {
        return;
    }
    let id = std::process::id();
    let tag = format!("pgr{id}");
    let dir = scratch().join(format!("n8ncap-pg-restart-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (project, file, port) = (
        format!("n8ncap-pgr{id}"),
        dir.join("stack.yml"),
        free_port(),
    );
    std::fs::write(&file, compose_file(&tag, port)).unwrap();
    let mut stacks = crate::common::compose::SimStacks::build(&tag);
    stacks.up(&project, &file);
    let url = format!("http://127.0.0.1:{port}/webhook/load");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !n8ncap::wire::http::http_get(
        &format!("http://127.0.0.1:{port}/healthz"),
        Duration::from_secs(2),
    )
    .await
    .is_ok_and(|(s, _)| s == 200)
    {
        assert!(std::time::Instant::now() < deadline, "main never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The worker and its runner attached: a job answers.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let run = tokio::task::spawn_blocking(move || {
        Command::new(bin())
            .args(["postgres-restart", "--url", &url, "--rate", "4"])
            .args(["--duration", "30s", "--stop-after", "6s", "--down", "6s"])
            .args(["--project", &project, "--timeout", "14s", "--json"])
            .args(["--body", r#"{"sleep_ms": 500}"#])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    eprintln!("{}", r["verdict"]);
    assert_eq!(r["stop"]["how"], "docker", "{r}");
    assert!(f(&r, "/not_ready") >= 10.0, "{r}");
    assert!(f(&r, "/in_flight/unanswered") >= 1.0, "{}", r["in_flight"]);
    // Main and the worker read back: none exited; main's last word is its recovery.
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{r}");
    assert!(processes.iter().all(|p| p["exited"] == false), "{r}");
    let main = processes.iter().find(|p| p["role"] == "main").unwrap();
    let line = main["db_line"].as_str().unwrap_or_default();
    let attempts = line
        .strip_prefix("Database connection recovered after ")
        .and_then(|l| l.split_whitespace().next()?.parse::<u32>().ok());
    assert!(attempts.is_some_and(|a| (1..=5).contains(&a)), "{line}");
    // Docker's start returns before Postgres accepts connections: n8n's return is measured
    // from it, within a second and an arrival of the prediction, or later.
    let back = f(&r, "/back_after_start_s");
    assert!(
        back >= f(&r, "/predicted/back_after_start_s/0") - 1.25,
        "{r}"
    );
}
