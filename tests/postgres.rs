//! The database as a limit, on a real PostgreSQL (Debian's `postgresql`, started here as the
//! `postgres` user with a temporary data directory; .ci/run installs it): the simulator's
//! processes write and read their executions through pools of `DB_POSTGRESDB_POOL_SIZE`
//! connections, serve n8n's `db_pool_*` metrics, and fail an execution when Postgres refuses a
//! connection (53300), as n8n does.

use crate::common::*;
use n8ncap::diagnose::{diagnose, Inputs};
use n8ncap::model::settings::Provenance;
use n8ncap::model::settings::{Settings, Sourced};
use n8ncap::model::Limit;
use n8ncap::observe::watch::Endpoint;
use n8ncap::record::{Role, Summary};
use n8ncap::sim::db::DbConfig;
use n8ncap::sim::{Stack, StackConfig};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A PostgreSQL server on a free port, stopped (immediate shutdown) when dropped.
pub struct Postgres {
    child: std::process::Child,
    pub port: u16,
    /// Its binaries, data directory and socket directory, and whether it runs as the
    /// `postgres` user (the tests run as root): what a drill's `pg_ctl` needs.
    pub bin: std::path::PathBuf,
    pub data: std::path::PathBuf,
    pub socket_dir: std::path::PathBuf,
    pub as_postgres: bool,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown; the postmaster takes its backends with it.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGQUIT);
        }
        let _ = self.child.wait();
    }
}

fn pg_bin() -> Option<std::path::PathBuf> {
    let mut versions: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("postgres").exists() && b.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn id_of(user: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, user]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Starts PostgreSQL with `max_connections` (3 of them reserved for superusers, its default),
/// with a database `n8n`; None (after saying why) when it is not installed outside CI.
pub async fn start_postgres(max_connections: u32) -> Option<Postgres> {
    start_postgres_with(max_connections, &[]).await
}

/// [`start_postgres`] with more `-c` settings (`ssl=on`, its files).
pub async fn start_postgres_with(max_connections: u32, settings: &[String]) -> Option<Postgres> {
    let bin = pg_bin();
    if !require(
        "PostgreSQL (postgres, initdb)",
        bin.is_some(),
        "apt-get install postgresql",
    ) {
        return None;
    }
    let bin = bin?;
    let port = free_port();
    let dir = fresh_dir(&format!("pg-{port}"));
    let data = dir.join("data");
    std::fs::create_dir_all(&dir).unwrap();
    // Postgres refuses to run as root: as root, the data belongs to the `postgres` user.
    let as_user = (unsafe { libc::geteuid() } == 0)
        .then(|| (id_of("postgres", "-u"), id_of("postgres", "-g")))
        .map(|(u, g)| (u.expect("a postgres user"), g.expect("a postgres group")));
    if let Some((uid, gid)) = as_user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
    }
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .args([
            "-D",
            data.to_str().unwrap(),
            "--auth=trust",
            "-U",
            "postgres",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Command::new(bin.join("postgres"));
    server
        .args(["-D", data.to_str().unwrap(), "-k", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some((uid, gid)) = as_user {
        initdb.uid(uid).gid(gid);
        server.uid(uid).gid(gid);
    }
    assert!(
        initdb.status().expect("run initdb").success(),
        "initdb failed"
    );
    let child = server
        .args(["-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        .args(["-c", &format!("max_connections={max_connections}")])
        .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
        .spawn()
        .expect("start postgres");
    let pg = Postgres {
        child,
        port,
        bin: bin.clone(),
        data: data.clone(),
        socket_dir: dir.clone(),
        as_postgres: as_user.is_some(),
    };
    let dsn = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
    for _ in 0..2400 {
        if let Ok((client, conn)) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            client.batch_execute("CREATE DATABASE n8n").await.unwrap();
            return Some(pg);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("postgres did not accept connections on {port}");
}

/// The superuser's connection to the test cluster's `n8n` database.
async fn superuser(pg: &Postgres) -> tokio_postgres::Client {
    let dsn = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let (client, conn) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// The variables that put a process's executions on the Postgres at `port` through a pool of
/// `pool`, as n8n reads them (the simulator's cost per execution and n8n's pool metrics
/// beside them).
pub fn db_env(port: u16, pool: u32, cost_ms: u64) -> Vec<(&'static str, String)> {
    vec![
        ("DB_TYPE", "postgresdb".to_string()),
        ("DB_POSTGRESDB_HOST", "127.0.0.1".into()),
        ("DB_POSTGRESDB_PORT", port.to_string()),
        ("DB_POSTGRESDB_USER", "postgres".into()),
        ("DB_POSTGRESDB_POOL_SIZE", pool.to_string()),
        ("SIM_DB_COST_MS", cost_ms.to_string()),
        ("N8N_METRICS_INCLUDE_DB_POOL_METRICS", "true".into()),
    ]
}

pub fn db(port: u16, pool: u32, cost_ms: u64) -> DbConfig {
    DbConfig {
        host: "127.0.0.1".into(),
        port,
        database: "n8n".into(),
        user: "postgres".into(),
        password: String::new(),
        pool_size: pool,
        cost: Duration::from_millis(cost_ms),
        metrics: true,
        monitor: Default::default(),
        idle_timeout: Duration::from_secs(30),
    }
}

/// A stack of `workers` × concurrency 10 with its executions on `db`, swept closed at `vus`
/// with main's and each worker's /metrics watched (every 250 ms).
async fn sweep_db(db: DbConfig, workers: u32, vus: &[u32]) -> (Summary, Served) {
    sweep_db_watched(db, workers, vus, None).await
}

/// As [`sweep_db`], with Postgres read through `dsn` beside the load when given.
async fn sweep_db_watched(
    db: DbConfig,
    workers: u32,
    vus: &[u32],
    dsn: Option<String>,
) -> (Summary, Served) {
    let stack = Stack::start(StackConfig {
        workers,
        worker_concurrency: 10,
        runner_limit: 10,
        overhead: Duration::ZERO,
        db: Some(db),
        ..Default::default()
    })
    .await
    .expect("the stack starts");
    let mut endpoints = vec![Endpoint {
        url: format!("{}/metrics", stack.main_url),
        role: Some(Role::Main),
    }];
    endpoints.extend(stack.worker_metrics_urls.iter().map(|u| Endpoint {
        url: u.clone(),
        role: Some(Role::Worker),
    }));
    let observer =
        n8ncap::observe::watch::observer(endpoints, None, None, Duration::from_millis(250), None)
            .await;
    let observer = n8ncap::observe::db_watch::wrap(
        observer,
        n8ncap::observe::db_watch::DbSources {
            docker: None,
            dsn,
            interval: Duration::from_millis(250),
        },
    );
    let profile = closed_profile(
        &stack.webhook_url,
        vus,
        serde_json::json!({"sleep_ms": 100}),
        "1s",
        "4s",
    );
    let (summary, _) = n8ncap::load::run::run_sweep(
        n8ncap::load::run::SweepOptions {
            observer,
            queue_metrics_interval: Duration::from_secs(1),
            ..n8ncap::load::run::SweepOptions::new(profile)
        },
        std::future::pending(),
    )
    .await
    .expect("sweep runs");
    let served = served(&stack).await;
    (summary, served)
}

/// What the user gives: the workers' concurrency and runner limit and the job; not the pool.
fn given(workers: u32) -> Settings {
    Settings {
        workers: Some(Sourced::new(workers, Provenance::Assumed("test".into()))),
        worker_concurrency: Some(Sourced::new(10, Provenance::Assumed("test".into()))),
        runner_limit: Some(Sourced::new(10, Provenance::Assumed("test".into()))),
        runners_per_worker: Some(Sourced::new(1, Provenance::Assumed("test".into()))),
        job_time: Some(Sourced::new(0.1, Provenance::Assumed("test".into()))),
        code_time: Some(Sourced::new(0.1, Provenance::Assumed("test".into()))),
        ..Default::default()
    }
}

fn inputs(s: Settings) -> Inputs {
    Inputs {
        settings: s,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 38 s): a scale study, one at a time, a PostgreSQL cluster"]
async fn a_pool_of_two_caps_at_pool_over_db_time_and_the_plan_raises_it() {
    let Some(pg) = start_postgres(40).await else {
        return;
    };
    let _turn = crate::common::one_scale_study_at_a_time().await;
    // Worker concurrency 10, a pool of 2, 50 ms of database time per execution: 2 ÷ 0.05 s.
    let (s1, _) = sweep_db(db(pg.port, 2, 50), 1, &[1, 2, 4, 8, 16]).await;
    let d = diagnose(&s1.stages, &inputs(given(1)));
    assert_eq!(d.capping_limit, Some(Limit::DbPool.into()), "{}", d.verdict);
    let f = d
        .findings
        .iter()
        .find(|f| f.id.as_str() == "db-pool-caps")
        .expect("db-pool-caps named");
    // The pool was not given: read from n8n_db_pool_connections_max.
    assert_eq!(f.figures["db_pool_connections"], 2.0);
    assert!(d
        .settings
        .db_pool_size
        .as_ref()
        .unwrap()
        .source
        .words()
        .contains("db_pool_connections_max"));
    // Little's law at the pool: X × D ≈ the pool.
    let x = d.measured_ceiling.as_ref().unwrap().mean;
    let dt = f.figures["db_time_s"];
    // At most the pool's two connections busy, and most of the time both.
    assert!(
        x * dt <= 2.0 * 1.05 && x * dt >= 2.0 * 0.8,
        "X {x} × D {dt}"
    );
    // Physical bounds: pg_sleep never ends early (D ≥ 50 ms, so X ≤ 40/s), and a pool of two
    // ran at least most of what it allows.
    assert!(dt >= 0.049, "D {dt}");
    assert!(x <= 2.0 / 0.050 * 1.02, "X {x}");
    // The plan raises the pool and predicts the next ceiling.
    let rec = n8ncap::recommend::recommend(&d, None).expect("a plan");
    let pool = rec
        .settings
        .db_pool_size
        .as_ref()
        .map(|p| p.value)
        .expect("a pool size proposed");
    assert!(pool > 2, "pool {pool}");
    // The pool in both charts' values and the worker patch.
    use n8ncap::report::{dialect, Dialect};
    let yaml = |d: Dialect| -> serde_json::Value {
        serde_saphyr::from_str(&dialect::settings(&rec, d, &Default::default())).expect("YAML")
    };
    assert_eq!(
        yaml(Dialect::HelmCommunity)["db"]["postgresdb"]["poolSize"],
        pool
    );
    let official = yaml(Dialect::HelmOfficial);
    let env = &official["queueMode"]["workerExtraEnv"][0];
    assert_eq!(
        (env["name"].as_str(), env["value"].as_str()),
        (
            Some("DB_POSTGRESDB_POOL_SIZE"),
            Some(pool.to_string().as_str())
        )
    );
    let patch = yaml(Dialect::K8s);
    let worker_env = patch["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    assert!(worker_env
        .iter()
        .any(|e| e["name"] == "DB_POSTGRESDB_POOL_SIZE"
            && e["value"].as_str() == Some(pool.to_string().as_str())));
    let predicted = rec.predicted_throughput;
    let (s2, served2) = sweep_db(db(pg.port, pool, 50), 1, &[1, 8, 16, 24]).await;
    let d2 = diagnose(&s2.stages, &inputs(given(1)));
    // The plan holds the raised pool at most 2/3 busy at the database time run 1 measured. A
    // busy Postgres (CI's parallel tests on two cores) stretches that time: stop 74's CI read
    // 0.073 s against run 1's 0.05 and the pool 93 % busy, which the diagnosis rightly names.
    // So: while D held within 15 % (then at most 1.15 ÷ 1.5 × X ÷ next ≈ 0.79 of the pool is in
    // use, under the 0.85 that names a limit) the pool no longer caps; past it, the pool the
    // verdict reads is the raised one, and its connections in use are at most that pool.
    let d2_time = d2
        .settings
        .measured
        .db_time
        .as_ref()
        .map_or(0.0, |t| t.value);
    if d2_time <= 1.15 * dt {
        assert_ne!(
            d2.capping_limit,
            Some(Limit::DbPool.into()),
            "D {d2_time} vs {dt}: {}",
            d2.verdict
        );
    } else if d2.capping_limit == Some(Limit::DbPool.into()) {
        let f2 = d2
            .findings
            .iter()
            .find(|f| f.id.as_str() == "db-pool-caps")
            .expect("db-pool-caps named");
        assert_eq!(f2.figures["db_pool_connections"], f64::from(pool));
        assert!(f2.figures["db_connections_in_use"] <= f64::from(pool) * 1.05);
    }
    let x2 = d2.measured_ceiling.as_ref().unwrap().mean;
    // The prediction is the next bound, the slots: 10 ÷ S as run 1 measured S. A busy host
    // stretches S between the runs, so run 2 holds the same bound at its own slot time (n8n's
    // execution histogram); on a quiet host the two ceilings agree within 1 %.
    assert_eq!(rec.predicted_bound, Limit::WorkerConcurrency);
    let st1 = d.service_time.as_ref().unwrap().value;
    assert!(
        within(predicted, 10.0 / st1, 0.01),
        "{predicted} vs 10 ÷ {st1}"
    );
    // Never past the slots' bound, and past what the old pool allowed: two connections held
    // at least 50 ms each (pg_sleep never ends early) cannot serve more than 40/s, so a peak
    // above 44/s was served through the raised pool. The slots' bound is physics, not the mean
    // slot time: every execution holds its slot at least 100 ms in the runner and 50 ms in
    // pg_sleep, so 10 slots serve at most 10 ÷ 0.150 s = 66.7/s (5 % for a stage's window
    // edges). The run's mean slot time is not a bound on its best stage: a CI run of
    // 2026-12-06 read a peak of 62.7/s against 10 ÷ 0.177 s, the mean pulled up by the most
    // loaded stage's waits for a pool connection. Its best stage, not the ceiling's mean: a
    // busy host (a CPU hog on every core, other tests' stacks) thins the load this process
    // generates at some levels (measured 0.71 of the slots' bound once beside `stress-ng --cpu
    // 0`; within 1 % quiet).
    let bound = 10.0 / (0.100 + 0.050);
    let peak = s2
        .stages
        .iter()
        .map(|st| st.throughput_rps)
        .fold(0.0, f64::max);
    let figures = format!(
        "peak {peak}, ceiling {x2} vs 10 slots ÷ 0.150 s; mean slot {} s (predicted {predicted} at S {st1}), pool {pool}",
        served2.slot_s
    );
    assert!(x2 <= bound * 1.05 && peak <= bound * 1.05, "{figures}");
    assert!(served2.slot_s >= 0.150, "{figures}");
    assert!(peak > 1.1 * 2.0 / 0.050, "{figures}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 5 s): a PostgreSQL cluster"]
async fn pools_past_max_connections_are_refused_and_lead_the_verdict() {
    // max_connections 8 less 3 reserved: 5 for n8n; main and three workers with pools of 3 ask
    // for up to 12.
    let Some(pg) = start_postgres(8).await else {
        return;
    };
    let dsn = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let (s, _) = sweep_db_watched(db(pg.port, 3, 20), 3, &[30], Some(dsn)).await;
    // No answer names Postgres: its refusals are seen in Postgres itself.
    let in_bodies: u64 = s.stages.iter().map(|st| st.errors.db_refused).sum();
    assert_eq!(in_bodies, 0);
    let failed: u64 = s
        .stages
        .iter()
        .map(|st| st.errors.http_status.get(&500).copied().unwrap_or(0))
        .sum();
    assert!(failed > 0, "nothing failed");
    let pg_seen = s.stages[0]
        .database
        .as_ref()
        .unwrap()
        .postgres
        .clone()
        .unwrap();
    // Read at a round with a slot free, or refused at every round: either is Postgres' own word.
    if pg_seen.samples > 0 {
        assert_eq!(
            (pg_seen.max_connections, pg_seen.reserved),
            (8, 3),
            "{pg_seen:?}"
        );
    } else {
        assert!(pg_seen.refused > 0, "{pg_seen:?}");
    }
    assert!(pg_seen.exhausted(), "{pg_seen:?}");
    let d = diagnose(&s.stages, &inputs(given(3)));
    assert_eq!(
        d.findings[0].id.as_str(),
        "postgres-connections-exhausted",
        "{:?}",
        d.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>()
    );
    assert_eq!(d.findings[0].figures["failed_responses"], failed as f64);
    if let Some(usable) = d.findings[0].figures.get("usable_connections") {
        assert_eq!(*usable, 5.0);
    }
    assert!(
        d.verdict.starts_with("Postgres refused connections"),
        "{}",
        d.verdict
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_reads_the_live_postgres_for_the_connection_budget_and_never_shows_the_dsn() {
    // max_connections 12, 3 reserved: 9 for n8n; the fixture's main and worker ask for 10 each.
    let Some(pg) = start_postgres(12).await else {
        return;
    };
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=n8n password=NOT-SHOWN-7f3a",
        pg.port
    );
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/compose/rules/db-connections-exhausted.yml");
    let audit = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = std::process::Command::new(bin());
        c.args(["audit", "--json", "-f"]).arg(&fixture).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    // A child process of its own: nothing of this test's runtime serves it.
    let out = audit(&[("PG_DSN", dsn.as_str())], &["--postgres-env", "PG_DSN"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!stdout.contains("NOT-SHOWN") && !stderr.contains("NOT-SHOWN"));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{stderr}"));
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "db-connections-exhausted")
        .unwrap_or_else(|| panic!("{v}"));
    // The live figures, not the fixture's postgres service (max_connections=10).
    assert_eq!(f["figures"]["connections_available"], 9.0, "{f}");
    assert_eq!(f["figures"]["connections_needed"], 20.0, "{f}");
    assert!(
        f["figures"]["connections_open"].as_f64().unwrap() >= 1.0,
        "{f}"
    );
    // The live server's major version, not the fixture image's (postgres:16), against n8n's
    // policy: below 16 it is not supported.
    let major: f64 = pg
        .bin
        .parent()
        .and_then(|v| v.file_name())
        .and_then(|v| v.to_str()?.parse().ok())
        .expect("…/postgresql/MAJOR/bin");
    let version = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "postgres-version-unsupported");
    match version {
        Some(f) => assert_eq!(f["figures"]["postgres_major"], major, "{f}"),
        None => assert!(major >= 16.0, "Postgres {major} not flagged: {v}"),
    }
    // An unset variable is bad input, said without a value.
    let out = audit(&[], &["--postgres-env", "PG_DSN_UNSET"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PG_DSN_UNSET"));
}

/// A Postgres out of connections, audited through a DSN alone (a deployment of plain
/// processes, no compose file): max_connections 8, 3 reserved, 5 held by a non-superuser role.
/// Its own refusal (53300) is the finding, not bad input; a superuser (a reserved slot) reads
/// who holds them; once released, the DSN alone reports what is open against what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_with_a_dsn_alone_reports_a_postgres_out_of_connections() {
    let Some(pg) = start_postgres(8).await else {
        return;
    };
    let superuser_dsn = format!("host=127.0.0.1 port={} user=postgres dbname=n8n", pg.port);
    let admin = superuser(&pg).await;
    admin
        .batch_execute("CREATE ROLE n8n LOGIN PASSWORD 'NOT-SHOWN-5e1b'")
        .await
        .unwrap();
    let n8n = format!(
        "host=127.0.0.1 port={} user=n8n dbname=n8n password=NOT-SHOWN-5e1b application_name=n8n-worker",
        pg.port
    );
    // The admin holds one of the 8; 4 more as n8n fill the 5 non-reserved slots.
    let mut held = Vec::new();
    for _ in 0..4 {
        let (c, conn) = tokio_postgres::connect(&n8n, tokio_postgres::NoTls)
            .await
            .unwrap();
        held.push((c, tokio::spawn(conn)));
    }
    let audit = |dsn: &str| {
        let out = std::process::Command::new(bin())
            .args(["audit", "--json", "--postgres-env", "PG_DSN"])
            .env("PG_DSN", dsn)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("NOT-SHOWN"), "{text}");
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{text}"));
        // The server's version is its own finding (tests of the policy: the live audit above).
        let ids: Vec<String> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string())
            .filter(|id| id != "postgres-version-unsupported")
            .collect();
        (out.status.code(), ids, v)
    };
    // As n8n's role: refused for want of a slot — the finding, exit 1, not exit 2.
    let (code, ids, v) = audit(&n8n);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(ids, vec!["postgres-out-of-connections"], "{v}");
    // As a superuser (a reserved slot): every non-reserved slot is open, who holds them said.
    let (code, ids, v) = audit(&superuser_dsn);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(ids, vec!["postgres-out-of-connections"], "{v}");
    let f = &v["findings"][0];
    assert_eq!(f["id"], "postgres-out-of-connections");
    assert_eq!(f["figures"]["connections_available"], 5.0, "{f}");
    assert!(
        f["figures"]["connections_open"].as_f64().unwrap() >= 5.0,
        "{f}"
    );
    // Released: the DSN alone says what is open against what is left.
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, ids, v) = audit(&n8n);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(ids, vec!["postgres-connections"], "{v}");
    assert_eq!(v["findings"][0]["id"], "postgres-connections", "{v}");
    let open = v["findings"][0]["figures"]["connections_open"]
        .as_f64()
        .unwrap();
    assert!((1.0..5.0).contains(&open), "{v}");
    drop(admin);
    drop(pg);
}

/// n8n's pools fill Postgres and keep their idle connections 30 s, so a connection asked for
/// at a sweep's end is refused (53300) and what the run left behind went uncounted. The
/// connection held from before the load counts it: 3 usable slots (6, 3 reserved), one held,
/// the rest taken by n8n's role — a new connection is refused, the held one counts the 2
/// executions left `running` and the 1 left `new`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 4 s): a PostgreSQL cluster"]
async fn the_connection_held_from_the_start_counts_what_a_full_postgres_refuses() {
    let Some(pg) = start_postgres(6).await else {
        return;
    };
    let admin = superuser(&pg).await;
    admin
        .batch_execute(
            "CREATE ROLE n8n LOGIN PASSWORD 'held-c41d'; \
             CREATE TABLE execution_entity (id BIGINT PRIMARY KEY, status VARCHAR NOT NULL, \
                 \"createdAt\" TIMESTAMPTZ NOT NULL DEFAULT now()); \
             GRANT SELECT ON execution_entity TO n8n; \
             INSERT INTO execution_entity (id, status) VALUES (1, 'running'), (2, 'running'), \
                 (3, 'new'), (4, 'success')",
        )
        .await
        .unwrap();
    let dsn = format!(
        "host=127.0.0.1 port={} user=n8n dbname=n8n password=held-c41d",
        pg.port
    );
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 60.0;
    let held = n8ncap::observe::postgres::hold(&dsn).await.expect("held");
    // Every slot a non-superuser may have taken (the admin's connection counts among them).
    let mut taken = Vec::new();
    while let Ok((c, conn)) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls).await {
        tokio::spawn(conn);
        taken.push(c);
        assert!(
            taken.len() <= 3,
            "Postgres took more than its 3 usable slots"
        );
    }
    let fresh = n8ncap::observe::postgres::executions_left(&dsn, since, "")
        .await
        .unwrap();
    let why = fresh.not_counted.expect("a new connection is refused");
    assert!(why.contains("53300") || why.contains("reserved"), "{why}");
    assert!(!why.contains("held-c41d"), "{why}");
    let counted = held.executions_left(since, "").await.unwrap().unwrap();
    assert_eq!(counted.not_counted, None);
    assert_eq!((counted.running, counted.new), (2, 1));
    assert!(counted.held);
}

/// [`tls_files`] readable by the `postgres` user alone (its key 0600), as Postgres demands.
fn certificates(dir: &std::path::Path, names: &[&str]) -> (String, String, String, String) {
    let paths = tls_files(dir, names);
    if unsafe { libc::geteuid() } == 0 {
        let (uid, gid) = (id_of("postgres", "-u"), id_of("postgres", "-g"));
        for p in [dir.to_str().unwrap(), &paths.1, &paths.2] {
            std::os::unix::fs::chown(p, uid, gid).unwrap();
        }
    }
    paths
}

/// Postgres with `ssl=on` (a CA made here signed its certificate for 127.0.0.1): every way
/// n8ncap reads Postgres speaks TLS as the DSN's sslmode says — verify-full with the CA, verify-ca
/// when the host is named otherwise than the certificate, require without a CA — and the
/// connection is TLS by Postgres' own pg_stat_ssl; a wrong CA and a wrong name under verify-full
/// are refused naming the certificate, never the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 3 s): a PostgreSQL cluster with TLS"]
async fn postgres_over_tls_is_read_with_verification_on_and_off() {
    let dir = fresh_dir("pg-tls");
    let (ca, cert, key, other) = certificates(&dir.join("tls"), &["127.0.0.1"]);
    let settings = [
        "ssl=on".to_string(),
        format!("ssl_cert_file={cert}"),
        format!("ssl_key_file={key}"),
    ];
    let Some(pg) = start_postgres_with(20, &settings).await else {
        return;
    };
    let admin = superuser(&pg).await;
    admin
        .batch_execute("CREATE ROLE n8n LOGIN PASSWORD 'tls-c41d'")
        .await
        .unwrap();
    let base = |host: &str| {
        format!(
            "host={host} port={} user=n8n dbname=n8n password=tls-c41d",
            pg.port
        )
    };
    // n8ncap's connections now: (all, over TLS), by Postgres' own pg_stat_ssl.
    let ours = || async {
        let row = admin
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'n8ncap'",
                &[],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    // The connections of the DSN before are gone (a backend outlives its client's close
    // briefly): waited for as a state.
    let none_left = || async {
        for _ in 0..400 {
            if ours().await.0 == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("n8ncap's connections to Postgres were never closed");
    };
    for dsn in [
        format!("{} sslmode=verify-full sslrootcert={ca}", base("127.0.0.1")),
        format!("{} sslmode=verify-ca sslrootcert={ca}", base("localhost")),
        format!("{} sslmode=require", base("127.0.0.1")),
        format!(
            "postgres://n8n:tls-c41d@127.0.0.1:{}/n8n?sslmode=verify-full&sslrootcert={}",
            pg.port,
            ca.replace('/', "%2F")
        ),
    ] {
        let facts = n8ncap::observe::postgres::read(&dsn).await.unwrap();
        assert_eq!(facts.max_connections, 20);
        none_left().await;
        let held = n8ncap::observe::postgres::hold(&dsn).await.expect("held");
        assert_eq!(ours().await, (1, 1), "{}", dsn.replace("tls-c41d", "…"));
        drop(held);
    }
    for (dsn, what) in [
        (
            format!(
                "{} sslmode=verify-full sslrootcert={other}",
                base("127.0.0.1")
            ),
            "UnknownIssuer",
        ),
        (
            format!("{} sslmode=verify-full sslrootcert={ca}", base("localhost")),
            "not valid for name",
        ),
    ] {
        let e = n8ncap::observe::postgres::read(&dsn).await.unwrap_err().0;
        assert!(e.contains(what) && e.contains("sslrootcert"), "{e}");
        assert!(!e.contains("tls-c41d"), "{e}");
    }
}

/// n8n's pool closes a connection idle for `DB_POSTGRESDB_IDLE_CONNECTION_TIMEOUT` (30 s by
/// default): the simulator's pool opens what a burst needs and closes it again after that idle
/// time (1 s here), as Postgres' own count shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 6 s): a PostgreSQL cluster"]
async fn idle_pooled_connections_close_after_n8n_s_idle_timeout() {
    let Some(pg) = start_postgres(50).await else {
        return;
    };
    let admin = superuser(&pg).await;
    let mut cfg = db(pg.port, 4, 300);
    cfg.idle_timeout = Duration::from_secs(1);
    let mut tasks = tokio::task::JoinSet::new();
    let pool = n8ncap::sim::db::Db::start(&cfg, "reaped", &mut tasks)
        .await
        .unwrap();
    let open = || async {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'reaped'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        n
    };
    // Four executions at once hold four connections for their 300 ms each.
    let mut burst = tokio::task::JoinSet::new();
    for id in 1..=4u64 {
        let pool = pool.clone();
        burst.spawn(async move {
            pool.insert_execution(id).await.unwrap();
            pool.finish_execution(id, true, "{}").await.unwrap();
        });
    }
    while let Some(r) = burst.join_next().await {
        r.unwrap();
    }
    assert_eq!(open().await, 4, "the burst's connections, kept while fresh");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        open().await <= 1,
        "idle connections past the timeout closed"
    );
}
