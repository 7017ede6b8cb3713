//! The execution database on a real PostgreSQL, when `DB_TYPE=postgresdb` and the
//! `DB_POSTGRESDB_*` variables name one: main writes each execution at intake, the worker reads
//! it and writes its result with real statements, holding its connection for a configurable
//! cost per execution (`SIM_DB_COST_MS`, a `pg_sleep` inside the statement). Each process goes
//! through a pool of `DB_POSTGRESDB_POOL_SIZE` connections (n8n's default 2) and, with
//! `N8N_METRICS_INCLUDE_DB_POOL_METRICS=true`, serves n8n's pool metrics under n8n's names
//! (n8n's `PrometheusDbPoolMetricsService`: the gauges `db_pool_connections_active`, `_idle`,
//! `_max`, `db_pool_requests_pending`, `db_pool_connected`, the counter
//! `db_pool_disconnections_total` and the histogram `db_pool_acquire_seconds` with n8n's
//! buckets). The tables are n8n's (`execution_entity`, `execution_data`, with n8n's column
//! names). When Postgres refuses a connection (SQLSTATE 53300) the simulator fails as n8n
//! 2.41.1 was measured to (`super::db_fail`): Postgres' message in the logs and in the
//! execution's data, never in a response; the execution left `new` or `running` when the write
//! that would have ended it was refused. The password is never printed.

use super::db_monitor::{Health, MonitorConfig, Pinged};
use crate::error::BadInput;
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;

/// n8n's `db_pool_acquire_seconds` buckets.
pub const ACQUIRE_BUCKETS: [f64; 8] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

/// Where the executions live, and how each process reaches them.
#[derive(Clone)]
pub struct DbConfig {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    /// `DB_POSTGRESDB_PASSWORD`: never printed.
    pub password: String,
    /// `DB_POSTGRESDB_POOL_SIZE` (n8n's default 2): connections of each process.
    pub pool_size: u32,
    /// `SIM_DB_COST_MS`: what a worker's statements hold their connection for per execution.
    pub cost: Duration,
    /// `N8N_METRICS_INCLUDE_DB_POOL_METRICS`.
    pub metrics: bool,
    /// n8n's watch over the database: pings and recovery.
    pub monitor: MonitorConfig,
    /// `DB_POSTGRESDB_IDLE_CONNECTION_TIMEOUT` (30 s): an idle pooled connection is closed
    /// after it (zero: kept), so a Postgres n8n filled stays full that long after the load.
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "postgres {}@{}:{}/{} pool {} cost {:?}",
            self.user, self.host, self.port, self.database, self.pool_size, self.cost
        )
    }
}

impl DbConfig {
    /// The database of `env`: none unless `DB_TYPE=postgresdb` (n8n's default is SQLite, which
    /// the simulator does not play: it keeps executions in memory then).
    pub fn from_env(env: Env) -> Result<Option<DbConfig>, BadInput> {
        match env("DB_TYPE").as_deref().map(str::trim) {
            None | Some("") | Some("sqlite") => return Ok(None),
            Some("postgresdb") => {}
            Some(other) => {
                return Err(BadInput(format!(
                    "DB_TYPE={other:?} is not a database the simulator plays: use postgresdb (or leave it unset)"
                )))
            }
        }
        let pool_size: u32 =
            crate::util::env_parse(env, "DB_POSTGRESDB_POOL_SIZE", 2, "a whole number")?;
        if pool_size == 0 || pool_size > 1000 {
            return Err(BadInput(format!(
                "DB_POSTGRESDB_POOL_SIZE={pool_size}: give 1 to 1000 connections"
            )));
        }
        let cost_ms: f64 = crate::util::env_parse(env, "SIM_DB_COST_MS", 0.0, "milliseconds")?;
        if !(0.0..=60_000.0).contains(&cost_ms) {
            return Err(BadInput(format!(
                "SIM_DB_COST_MS={cost_ms}: give 0 to 60000 ms"
            )));
        }
        Ok(Some(DbConfig {
            host: env("DB_POSTGRESDB_HOST").unwrap_or_else(|| "localhost".into()),
            port: crate::util::env_parse(env, "DB_POSTGRESDB_PORT", 5432u16, "a port number")?,
            database: env("DB_POSTGRESDB_DATABASE").unwrap_or_else(|| "n8n".into()),
            user: env("DB_POSTGRESDB_USER").unwrap_or_else(|| "postgres".into()),
            password: env("DB_POSTGRESDB_PASSWORD").unwrap_or_default(),
            pool_size,
            cost: Duration::from_secs_f64(cost_ms / 1000.0),
            metrics: env("N8N_METRICS_INCLUDE_DB_POOL_METRICS").is_some_and(|v| v.trim() == "true"),
            monitor: MonitorConfig::from_env(env)?,
            idle_timeout: {
                let ms: f64 = crate::util::env_parse(
                    env,
                    "DB_POSTGRESDB_IDLE_CONNECTION_TIMEOUT",
                    30_000.0,
                    "milliseconds",
                )?;
                if !(0.0..=86_400_000.0).contains(&ms) {
                    return Err(BadInput(format!(
                        "DB_POSTGRESDB_IDLE_CONNECTION_TIMEOUT={ms}: give 0 to 86400000 ms"
                    )));
                }
                Duration::from_secs_f64(ms / 1000.0)
            },
        }))
    }
}

/// One process's pool and what n8n's pool metrics count.
pub struct Db {
    pool: Pool,
    cfg: DbConfig,
    /// Connected or not, as the pool's connections and the monitor say (shared with them).
    health: Arc<Health>,
    /// Connections Postgres refused (53300).
    refused: AtomicU64,
    /// Cumulative counts per bucket of [`ACQUIRE_BUCKETS`], then +Inf; the sum of seconds.
    acquire: Mutex<([u64; 9], f64)>,
}

pub use super::db_monitor::DbError;

/// Each pooled connection's task, as pg-pool's: an error that ends it (Postgres terminated it)
/// is the pool's `error` event — the database marked not connected, the line logged.
struct Watched {
    health: Arc<Health>,
}

impl deadpool_postgres::Connect for Watched {
    fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<
                        (tokio_postgres::Client, tokio::task::JoinHandle<()>),
                        tokio_postgres::Error,
                    >,
                > + Send
                + '_,
        >,
    > {
        let (pg, health) = (pg.clone(), self.health.clone());
        Box::pin(async move {
            let (client, connection) = pg.connect(NoTls).await?;
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    health.pool_client_error(&words(&e));
                }
            });
            Ok((client, task))
        })
    }
}

impl Db {
    /// The pool of one process (`application_name` says which, in `pg_stat_activity`), and
    /// the executions table made when missing.
    pub async fn connect(cfg: &DbConfig, application_name: &str) -> anyhow::Result<Db> {
        let mut pg = tokio_postgres::Config::new();
        pg.host(&cfg.host)
            .port(cfg.port)
            .dbname(&cfg.database)
            .user(&cfg.user)
            .application_name(application_name)
            .connect_timeout(Duration::from_secs(10));
        if !cfg.password.is_empty() {
            pg.password(cfg.password.as_str());
        }
        let health = Arc::new(Health::default());
        let manager = Manager::from_connect(
            pg,
            Watched {
                health: health.clone(),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(cfg.pool_size as usize)
            .build()?;
        let db = Db {
            pool,
            cfg: cfg.clone(),
            health,
            refused: AtomicU64::new(0),
            acquire: Mutex::new(([0; 9], 0.0)),
        };
        let c = db.get().await.map_err(|e| {
            anyhow::anyhow!(
                "the database {}:{}/{} does not answer: {e}",
                cfg.host,
                cfg.port,
                cfg.database
            )
        })?;
        // n8n's own tables and columns (`execution_entity`, `execution_data`), so that what a
        // run leaves behind is found with the query that finds it on a real n8n.
        for create in [
            "CREATE TABLE IF NOT EXISTS execution_entity (
                 id BIGINT PRIMARY KEY,
                 finished BOOLEAN NOT NULL DEFAULT false,
                 mode VARCHAR NOT NULL DEFAULT 'webhook',
                 status VARCHAR NOT NULL,
                 \"workflowId\" VARCHAR NOT NULL DEFAULT 'sim',
                 \"createdAt\" TIMESTAMPTZ NOT NULL DEFAULT now(),
                 \"startedAt\" TIMESTAMPTZ,
                 \"stoppedAt\" TIMESTAMPTZ)",
            "CREATE TABLE IF NOT EXISTS execution_data (
                 \"executionId\" BIGINT PRIMARY KEY,
                 \"workflowData\" TEXT NOT NULL DEFAULT '{}',
                 data TEXT NOT NULL DEFAULT '')",
        ] {
            c.batch_execute(create).await.or_else(|e| {
                // Two processes creating it at once: the other one won (Postgres says so as a
                // unique violation on its catalog, a table that already exists, or the table's
                // row type that already exists — `type "execution_data" already exists`, 42710).
                use tokio_postgres::error::SqlState;
                let raced = [
                    SqlState::UNIQUE_VIOLATION,
                    SqlState::DUPLICATE_TABLE,
                    SqlState::DUPLICATE_OBJECT,
                ];
                if e.code().is_some_and(|c| raced.contains(c)) {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
        }
        Ok(db)
    }

    /// A connection from the pool after any recovery in progress (n8n parks the acquisition,
    /// at most `DB_CONNECTION_ACQUISITION_TIMEOUT_MS`), the wait timed into the acquire
    /// histogram.
    async fn get(&self) -> Result<deadpool_postgres::Object, DbError> {
        let t0 = Instant::now();
        self.health
            .await_recovery(self.cfg.monitor.acquisition_timeout)
            .await?;
        let got = self.pool.get().await;
        let waited = t0.elapsed().as_secs_f64();
        if let Ok(mut a) = self.acquire.lock() {
            for (i, b) in ACQUIRE_BUCKETS.iter().enumerate() {
                if waited <= *b {
                    a.0[i] += 1;
                }
            }
            a.0[8] += 1;
            a.1 += waited;
        }
        got.map_err(|e| {
            let refused = matches!(&e, deadpool_postgres::PoolError::Backend(b)
                if b.code() == Some(&tokio_postgres::error::SqlState::TOO_MANY_CONNECTIONS));
            if refused {
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
            DbError {
                words: words(&e),
                lost: !refused,
            }
        })
    }

    /// The connected state n8n's handlers read (main answers 503 while it is false).
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The highest execution id written so far: main numbers its executions after it, as
    /// Postgres' sequence does.
    pub async fn last_execution_id(&self) -> Result<u64, DbError> {
        let c = self.get().await?;
        let row = c
            .query_one(
                "SELECT coalesce(max(id), 0)::int8 FROM execution_entity",
                &[],
            )
            .await
            .map_err(|e| failed(&e))?;
        Ok(row.try_get::<_, i64>(0).map_err(|e| failed(&e))?.max(0) as u64)
    }

    /// Main at intake: the execution is written (`new`) before it is queued.
    pub async fn insert_execution(&self, id: u64) -> Result<(), DbError> {
        let c = self.get().await?;
        let id = id as i64;
        c.execute(
            "INSERT INTO execution_entity (id, status) VALUES ($1, 'new')
             ON CONFLICT (id) DO UPDATE SET status = 'new', finished = false,
                 \"createdAt\" = now(), \"startedAt\" = NULL, \"stoppedAt\" = NULL",
            &[&id],
        )
        .await
        .map_err(|e| failed(&e))?;
        c.execute(
            "INSERT INTO execution_data (\"executionId\") VALUES ($1)
             ON CONFLICT (\"executionId\") DO UPDATE SET data = ''",
            &[&id],
        )
        .await
        .map(|_| ())
        .map_err(|e| failed(&e))
    }

    /// The worker, as it starts the execution: marked `running` (n8n writes it before the
    /// workflow runs, so an execution whose end is never written stays `running`).
    pub async fn start_execution(&self, id: u64) -> Result<(), DbError> {
        let c = self.get().await?;
        c.execute(
            "UPDATE execution_entity SET status = 'running', \"startedAt\" = now() WHERE id = $1",
            &[&(id as i64)],
        )
        .await
        .map(|_| ())
        .map_err(|e| failed(&e))
    }

    /// The worker, at the execution's end: reads it and writes its result and its data, on one
    /// connection held for the configured cost per execution (inside the write, as a slow
    /// statement holds it). Refused that connection, the execution stays as
    /// [`Db::start_execution`] left it (n8n's separate writes left most of theirs `running`;
    /// one hold keeps the database time per execution what `SIM_DB_COST_MS` says).
    pub async fn finish_execution(&self, id: u64, ok: bool, data: &str) -> Result<(), DbError> {
        let c = self.get().await?;
        let id = id as i64;
        c.query_opt("SELECT status FROM execution_entity WHERE id = $1", &[&id])
            .await
            .map_err(|e| failed(&e))?;
        let cost = self.cfg.cost.as_secs_f64();
        if cost > 0.0 {
            c.execute("SELECT pg_sleep($1::float8)", &[&cost])
                .await
                .map_err(|e| failed(&e))?;
        }
        c.execute(
            "UPDATE execution_entity SET status = $2, finished = $3, \"stoppedAt\" = now() WHERE id = $1",
            &[&id, &(if ok { "success" } else { "error" }), &ok],
        )
        .await
        .map_err(|e| failed(&e))?;
        c.execute(
            "UPDATE execution_data SET data = $2 WHERE \"executionId\" = $1",
            &[&id, &data],
        )
        .await
        .map(|_| ())
        .map_err(|e| failed(&e))
    }

    /// Main, to answer the webhook with the last node's data: the execution's data read back.
    pub async fn read_result(&self, id: u64) -> Result<(), DbError> {
        let c = self.get().await?;
        c.query_opt(
            "SELECT data FROM execution_data WHERE \"executionId\" = $1",
            &[&(id as i64)],
        )
        .await
        .map(|_| ())
        .map_err(|e| failed(&e))
    }

    /// n8n's pool metrics, under `prefix` (nothing unless the flag is on).
    pub fn render_metrics(&self, prefix: &str) -> String {
        use std::fmt::Write as _;
        if !self.cfg.metrics {
            return String::new();
        }
        let st = self.pool.status();
        let active = st.size.saturating_sub(st.available);
        let mut s = String::new();
        for (name, help, v) in [
            (
                "connections_active",
                "Number of in-use connections in the database connection pool.",
                active as f64,
            ),
            (
                "connections_idle",
                "Number of not-in-use connections in the database connection pool.",
                st.available as f64,
            ),
            (
                "requests_pending",
                "Number of requests waiting for an available database connection.",
                st.waiting as f64,
            ),
            (
                "connections_max",
                "Max size of the database connection pool.",
                self.cfg.pool_size as f64,
            ),
            (
                "connected",
                "Whether n8n considers the database connected (1) or disconnected (0).",
                if self.health.connected() { 1.0 } else { 0.0 },
            ),
        ] {
            let _ = write!(s, "# HELP {prefix}db_pool_{name} {help}\n# TYPE {prefix}db_pool_{name} gauge\n{prefix}db_pool_{name} {v}\n");
        }
        let _ = write!(
            s,
            "# HELP {prefix}db_pool_disconnections_total Number of transitions from a connected to a disconnected database.\n# TYPE {prefix}db_pool_disconnections_total counter\n{prefix}db_pool_disconnections_total {}\n",
            self.health.disconnections()
        );
        if let Ok(a) = self.acquire.lock() {
            let _ = writeln!(s, "# HELP {prefix}db_pool_acquire_seconds Time spent acquiring a connection from the database pool (Postgres only).\n# TYPE {prefix}db_pool_acquire_seconds histogram");
            for (i, b) in ACQUIRE_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{prefix}db_pool_acquire_seconds_bucket{{le=\"{b}\"}} {}",
                    a.0[i]
                );
            }
            let _ = writeln!(
                s,
                "{prefix}db_pool_acquire_seconds_bucket{{le=\"+Inf\"}} {}",
                a.0[8]
            );
            let _ = writeln!(s, "{prefix}db_pool_acquire_seconds_sum {}", a.1);
            let _ = writeln!(s, "{prefix}db_pool_acquire_seconds_count {}", a.0[8]);
        }
        s
    }

    /// The pool of one process with its monitor running in `tasks` (pings and recovery, as
    /// n8n's `DbConnectionMonitor`).
    pub async fn start(
        cfg: &DbConfig,
        application_name: &str,
        tasks: &mut tokio::task::JoinSet<()>,
    ) -> anyhow::Result<Arc<Db>> {
        let db = Arc::new(Db::connect(cfg, application_name).await?);
        tasks.spawn(super::db_monitor::watch(db.clone(), cfg.monitor));
        if !cfg.idle_timeout.is_zero() {
            // pg-pool's idleTimeoutMillis: idle connections closed once unused that long.
            let (idle, pool) = (cfg.idle_timeout, db.pool.clone());
            tasks.spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    pool.retain(|_, m| m.last_used() < idle);
                }
            });
        }
        Ok(db)
    }

    /// Connections Postgres refused (53300) so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// A statement's failure: lost when the connection ended or Postgres is going away (57P,
/// 08 — its shutdown, a restart), else the statement's own error.
fn failed(e: &tokio_postgres::Error) -> DbError {
    let code = e.code().map(|c| c.code().to_string());
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    let lost = e.is_closed()
        || io
        || code
            .as_deref()
            .is_some_and(|c| c.starts_with("57P") || c.starts_with("08"));
    DbError {
        words: words(e),
        lost,
    }
}

/// A database error in Postgres' own words (its message, as n8n's error carries it), never the
/// connection string.
fn words(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(pg) = err.downcast_ref::<tokio_postgres::Error>() {
            if let Some(db) = pg.as_db_error() {
                return db.message().to_string();
            }
        }
        cur = err.source();
    }
    e.to_string()
}

impl Pinged for Db {
    async fn ping(&self) -> Result<(), DbError> {
        let c = self.pool.get().await.map_err(|e| DbError {
            words: words(&e),
            lost: true,
        })?;
        c.simple_query("SELECT 1")
            .await
            .map(|_| ())
            .map_err(|e| failed(&e))
    }

    async fn reinitialize(&self) -> Result<(), DbError> {
        // The old pool's idle connections go (n8n destroys its DataSource), and a new one must
        // open.
        self.pool.retain(|_, _| false);
        self.ping().await
    }

    fn health(&self) -> &Health {
        &self.health
    }
}
