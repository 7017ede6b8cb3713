//! Postgres out of connections as a real n8n 2.41.1 showed it (the project's reference facts: main and
//! two workers with `DB_POSTGRESDB_POOL_SIZE=10`, connecting as a non-superuser, against
//! `max_connections=20` with 3 reserved; 0 ms Code jobs): the callers get HTTP 500 `{"message":
//! "Error in workflow"}` and HTTP 200 "…did not return any data", **no answer names Postgres**,
//! the logs say "Problem with execution N: … Aborting.", the failed-jobs counter counts the
//! failures and executions stay `new` or `running` in n8n's table. The simulator's processes
//! on a real PostgreSQL must do the same, and a sweep must name Postgres from what is really
//! there (Postgres through a DSN), or say that nothing it watched names the cause.

use crate::common::*;
use crate::postgres::start_postgres;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PASSWORD: &str = "NOT-SHOWN-c41d";

/// A simulator role as a process whose standard error goes to `log`.
fn spawn_logged(args: &[&str], env: &[(&str, String)], log: &std::path::Path) -> ChildGuard {
    spawn_role_logged(args, env, Stdio::from(std::fs::File::create(log).unwrap()))
}

/// One webhook call: its status and body (None when no answer came within 30 s).
async fn post(port: u16) -> Option<(u16, String)> {
    let work = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let body = r#"{"sleep_ms":0}"#;
        let req = format!(
            "POST /webhook/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer).to_string();
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .ok()
        .flatten()
}

fn counter(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("n8n_scaling_mode_queue_jobs_{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 29 s): a PostgreSQL cluster"]
async fn out_of_connections_n8n_answers_generically_and_the_sweep_names_postgres() {
    let Some(pg) = start_postgres(20).await else {
        return;
    };
    let superuser = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let (admin, conn) = tokio_postgres::connect(&superuser, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!(
            "CREATE ROLE n8n LOGIN PASSWORD '{PASSWORD}'; ALTER DATABASE n8n OWNER TO n8n; \
             GRANT ALL ON SCHEMA public TO n8n"
        ))
        .await
        .unwrap();
    let dir = fresh_dir("pg-refused");
    std::fs::create_dir_all(&dir).unwrap();
    let (http, queue) = (free_port(), free_port());
    let db = || {
        vec![
            ("DB_TYPE", "postgresdb".to_string()),
            ("DB_POSTGRESDB_HOST", "127.0.0.1".into()),
            ("DB_POSTGRESDB_PORT", pg.port.to_string()),
            ("DB_POSTGRESDB_USER", "n8n".into()),
            ("DB_POSTGRESDB_PASSWORD", PASSWORD.into()),
            ("DB_POSTGRESDB_POOL_SIZE", "10".into()),
            ("N8N_METRICS", "true".into()),
        ]
    };
    let mut main_env = db();
    main_env.extend([
        ("N8N_PORT", http.to_string()),
        ("N8N_LISTEN_ADDRESS", "127.0.0.1".into()),
        ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
        ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true".into()),
        ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1".into()),
    ]);
    let _main = spawn_logged(&["sim", "main"], &main_env, &dir.join("main.log"));
    let mut workers = Vec::new();
    for w in 0..2 {
        let mut env = db();
        env.extend([
            ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".to_string()),
            ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
            ("QUEUE_HEALTH_CHECK_PORT", free_port().to_string()),
            ("N8N_WORKER_SERVER_ADDRESS", "127.0.0.1".into()),
            ("N8N_RUNNERS_BROKER_PORT", free_port().to_string()),
            ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "127.0.0.1".into()),
        ]);
        workers.push(spawn_logged(
            &["sim", "worker", "--concurrency", "10"],
            &env,
            &dir.join(format!("worker{w}.log")),
        ));
    }
    let metrics = format!("http://127.0.0.1:{http}/metrics");
    let mut up = false;
    for _ in 0..150 {
        if n8ncap::wire::http::http_get(&metrics, Duration::from_secs(1))
            .await
            .is_ok_and(|(s, _)| s == 200)
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        up,
        "main never answered: {}",
        std::fs::read_to_string(dir.join("main.log")).unwrap_or_default()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 80 at once, three times, as the real stack was called.
    let mut answers = Vec::new();
    for _ in 0..3 {
        let mut sent = tokio::task::JoinSet::new();
        for _ in 0..80 {
            sent.spawn(post(http));
        }
        while let Some(a) = sent.join_next().await {
            answers.push(a.unwrap().expect("every call is answered"));
        }
    }
    let failed = answers.iter().filter(|(s, _)| *s == 500).count();
    assert!(failed > 0, "nothing failed: the pools fit");
    for (status, body) in &answers {
        // No answer names Postgres, and every one is n8n's.
        assert!(matches!(status, 200 | 500), "{status} {body}");
        for word in [
            "53300",
            "too many clients",
            "remaining connection",
            "Postgres",
            "database",
        ] {
            assert!(!body.contains(word), "{body}");
        }
        if *status == 500 {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(v, serde_json::json!({"message": "Error in workflow"}));
        }
    }
    // The logs name Postgres; the failed-jobs counter counts what failed on the workers.
    let logs: String = ["main.log", "worker0.log", "worker1.log"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect();
    let problems = logs
        .lines()
        .filter(|l| l.starts_with("Problem with execution ") && l.ends_with(". Aborting."))
        .filter(|l| l.contains("remaining connection slots are reserved"))
        .count();
    assert!(problems > 0, "{logs}");
    // Main's queue counters are refreshed every second.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, text) = n8ncap::wire::http::http_get(&metrics, Duration::from_secs(2))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&text);
    let jobs_failed = counter(&text, "failed").unwrap();
    assert!(
        jobs_failed > 0.0,
        "{failed} failed, {problems} problem lines; {}",
        text.lines()
            .filter(|l| l.contains("jobs_"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Executions whose final write was refused stay new or running in n8n's own table.
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM execution_entity WHERE status IN ('new', 'running')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(left > 0, "no execution was left unfinished");

    // A sweep with n8n's own DSN names Postgres first, with the budget it read.
    let n8n_dsn = format!(
        "host=127.0.0.1 port={} user=n8n dbname=n8n password={PASSWORD}",
        pg.port
    );
    let sweep = |extra: &[&str], out: &str| {
        let o = Command::new(bin())
            .args([
                "sweep",
                "--url",
                &format!("http://127.0.0.1:{http}/webhook/load"),
                "--vus",
                "10,30",
                "--warmup",
                "1s",
                "--stage-duration",
                "4s",
                "--body",
                r#"{"sleep_ms":0}"#,
                "--metrics",
                &format!("main={metrics}"),
                "--out",
                dir.join(out).to_str().unwrap(),
                "--json",
            ])
            .args(extra)
            .env("PG_DSN", &n8n_dsn)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!text.contains(PASSWORD), "{text}");
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
        v
    };
    let v = sweep(&["--postgres-env", "PG_DSN"], "with-dsn");
    let findings = v["diagnosis"]["findings"].as_array().unwrap();
    let f = &findings[0];
    assert_eq!(f["id"], "postgres-connections-exhausted", "{v}");
    assert!(
        f["figures"]["failed_responses"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    // Postgres named itself: a refusal of n8ncap's own connection, or every usable slot open.
    let refused_rounds = f["figures"]["postgres_refused_rounds"].as_f64().unwrap();
    let full = f["figures"]["open_at_most"].as_f64().unwrap_or(0.0) >= 17.0;
    assert!(refused_rounds > 0.0 || full, "{f}");
    if let Some(usable) = f["figures"]["usable_connections"].as_f64() {
        assert_eq!(usable, 17.0, "{f}");
    }
    assert!(
        v["diagnosis"]["verdict"]
            .as_str()
            .unwrap()
            .starts_with("Postgres refused connections"),
        "{}",
        v["diagnosis"]["verdict"]
    );
    // What the run left behind is counted, or said why it could not be.
    let left = findings
        .iter()
        .find(|f| f["id"] == "executions-left-running")
        .unwrap_or_else(|| panic!("{v}"));
    let saved = n8ncap::record::dir::load_summary(&dir.join("with-dsn")).unwrap();
    let counted = saved.executions_left.expect("counted with a DSN");
    match &counted.not_counted {
        None => {
            assert!(counted.new + counted.running > 0, "{counted:?}");
            assert_eq!(left["figures"]["running"], counted.running as f64);
        }
        Some(why) => assert!(why.contains("53300") || why.contains("reserved"), "{why}"),
    }

    // Without Docker or a DSN the failures are n8n's generic ones, and the sweep says what to give.
    let v = sweep(&[], "without");
    let ids: Vec<&str> = v["diagnosis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"failures-without-cause"), "{ids:?}");
    assert!(!ids.contains(&"postgres-connections-exhausted"), "{ids:?}");
    drop(workers);
    drop(admin);
    drop(pg);
}

/// The same cause named from n8n's own log through the Docker API, with no DSN: a simulated n8n
/// in a container (host network, to reach the test's PostgreSQL on loopback) whose pools cannot
/// grow because every other non-reserved slot is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 8 s): Docker containers, a PostgreSQL cluster"]
async fn the_sweep_names_postgres_from_n8n_s_logs_through_the_docker_api() {
    if !have_docker() {
        return;
    }
    let Some(pg) = start_postgres(12).await else {
        return;
    };
    let superuser = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let (admin, conn) = tokio_postgres::connect(&superuser, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!(
            "CREATE ROLE n8n LOGIN PASSWORD '{PASSWORD}'; ALTER DATABASE n8n OWNER TO n8n; \
             GRANT ALL ON SCHEMA public TO n8n"
        ))
        .await
        .unwrap();
    let project = format!("pglogs{}", std::process::id());
    let image = format!("n8ncap-sim-pglogs:{}", std::process::id());
    build_image(&image, &["/n8ncap"]);
    let port = free_port();
    let name = format!("{project}-n8n");
    let env = [
        "DB_TYPE=postgresdb".to_string(),
        "DB_POSTGRESDB_HOST=127.0.0.1".into(),
        format!("DB_POSTGRESDB_PORT={}", pg.port),
        "DB_POSTGRESDB_USER=n8n".into(),
        format!("DB_POSTGRESDB_PASSWORD={PASSWORD}"),
        "DB_POSTGRESDB_POOL_SIZE=5".into(),
        "SIM_MAIN_CPU_MS=0".into(),
        "N8N_LISTEN_ADDRESS=127.0.0.1".into(),
        format!("QUEUE_BULL_REDIS_PORT={}", free_port()),
    ];
    let mut args: Vec<String> = [
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "host",
        "--label",
        &format!("com.docker.compose.project={project}"),
        "--label",
        "com.docker.compose.service=n8n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for e in &env {
        args.push("-e".into());
        args.push(e.clone());
    }
    args.push(image.clone());
    args.extend(
        [
            "sim",
            "all",
            "--port",
            &port.to_string(),
            "--workers",
            "1",
            "--concurrency",
            "10",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let run = Command::new("docker").args(&args).output().unwrap();
    struct Gone(String, String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
            let _ = Command::new("docker").args(["rmi", "-f", &self.1]).output();
        }
    }
    let _gone = Gone(name.clone(), image.clone());
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let mut up = false;
    for _ in 0..200 {
        if n8ncap::wire::http::http_get(&metrics, Duration::from_secs(1))
            .await
            .is_ok_and(|(s, _)| s == 200)
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logs = || {
        let o = Command::new("docker")
            .args(["logs", &name])
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(up, "the container never answered: {}", logs());
    // Every other non-reserved slot (12 less 3 reserved, less what the container opened) held.
    let n8n = format!(
        "host=127.0.0.1 port={} user=n8n dbname=n8n password={PASSWORD}",
        pg.port
    );
    let mut held = Vec::new();
    while let Ok((c, conn)) = tokio_postgres::connect(&n8n, tokio_postgres::NoTls).await {
        held.push((c, tokio::spawn(conn)));
        assert!(held.len() <= 12, "Postgres never refused");
    }
    // A worker that cannot connect at start exits with Postgres' words, as n8n's did.
    let dir = fresh_dir("pg-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let late = dir.join("late-worker.log");
    let mut worker = spawn_logged(
        &["sim", "worker"],
        &[
            ("DB_TYPE", "postgresdb".to_string()),
            ("DB_POSTGRESDB_HOST", "127.0.0.1".into()),
            ("DB_POSTGRESDB_PORT", pg.port.to_string()),
            ("DB_POSTGRESDB_USER", "n8n".into()),
            ("DB_POSTGRESDB_PASSWORD", PASSWORD.into()),
            ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".into()),
            ("QUEUE_BULL_REDIS_PORT", free_port().to_string()),
            ("QUEUE_HEALTH_CHECK_PORT", free_port().to_string()),
            ("N8N_RUNNERS_BROKER_PORT", free_port().to_string()),
        ],
        &late,
    );
    let mut exited = None;
    for _ in 0..300 {
        if let Some(st) = worker.0.try_wait().unwrap() {
            exited = Some(st);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let said = std::fs::read_to_string(&late).unwrap_or_default();
    let st = exited.unwrap_or_else(|| panic!("the worker did not exit: {said}"));
    assert!(!st.success(), "{said}");
    assert!(
        said.contains("remaining connection slots are reserved"),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "{said}");
    let dir = dir.join("run");
    let o = Command::new(bin())
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "20",
            "--warmup",
            "1s",
            "--stage-duration",
            "4s",
            "--body",
            r#"{"sleep_ms":0}"#,
            "--project",
            &project,
            "--out",
            dir.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!text.contains(PASSWORD), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    let f = &v["diagnosis"]["findings"][0];
    assert_eq!(f["id"], "postgres-connections-exhausted", "{v}\n{}", logs());
    assert!(
        f["figures"]["log_refusal_lines"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    assert!(
        f["figures"]["log_problem_lines"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    assert_eq!(f["figures"]["postgres_refused_rounds"], 0.0, "{f}");
    let saved = n8ncap::record::dir::load_summary(&dir).unwrap();
    let db = saved.stages[0].database.as_ref().unwrap();
    assert!(db.logs_read && db.postgres.is_none(), "{db:?}");
    assert_eq!(db.logged_by, vec![name.clone()]);
    drop(held);
    drop(admin);
    drop(pg);
}
