//! A simulated process's watch over its database, as n8n 2.41's `DbConnectionMonitor` does it
//! (`@n8n/db` db-connection-monitor.ts and backoff.ts; the third lab's Postgres restarts in the
//! project's reference facts; docs/sim.md "A Postgres restart"): a pooled connection Postgres
//! ends (its shutdown terminates every backend) marks the database not connected at once —
//! "Postgres pool client error: …" —, and main answers every webhook call HTTP 503 `{"code":503,
//! "message":"Database is not ready!"}` while it is; a ping every `DB_PING_INTERVAL_SECONDS`
//! (2 s) marks it connected again when it succeeds; after `DB_PING_MAX_FAILURES_BEFORE_RECOVERY`
//! (3) failed pings in a row the pool is torn down and made again, at once and then after
//! `DB_RECOVERY_BACKOFF_MIN_MS` × 2^(attempt − 1) capped at `DB_RECOVERY_BACKOFF_MAX_MS` (1 s,
//! 30 s), with no pings meanwhile; a statement asking for a connection during that recovery
//! waits for it, at most `DB_CONNECTION_ACQUISITION_TIMEOUT_MS` (30 s). The log lines are n8n's.
//! Shares no code with n8ncap's prediction of it (`model::db_recovery`): a witness.

use crate::error::BadInput;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Why a statement failed, in the words the execution's error carries.
#[derive(Debug, Clone)]
pub struct DbError {
    pub words: String,
    /// The database is away (its connection refused, ended or shutting down), not a refusal
    /// of a running Postgres (53300) nor a statement's own error.
    pub lost: bool,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words)
    }
}

/// The monitor's settings, n8n's variables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonitorConfig {
    /// `DB_PING_INTERVAL_SECONDS` (2).
    pub ping_interval: Duration,
    /// `DB_PING_TIMEOUT_MS` (5 000).
    pub ping_timeout: Duration,
    /// `DB_PING_MAX_FAILURES_BEFORE_RECOVERY` (3).
    pub max_failures: u32,
    /// `DB_RECOVERY_BACKOFF_MIN_MS` (1 000).
    pub backoff_min: Duration,
    /// `DB_RECOVERY_BACKOFF_MAX_MS` (30 000).
    pub backoff_max: Duration,
    /// `DB_CONNECTION_ACQUISITION_TIMEOUT_MS` (30 000; 0 waits for good).
    pub acquisition_timeout: Duration,
}

impl Default for MonitorConfig {
    /// n8n 2.41's defaults.
    fn default() -> Self {
        MonitorConfig {
            ping_interval: Duration::from_secs(2),
            ping_timeout: Duration::from_secs(5),
            max_failures: 3,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            acquisition_timeout: Duration::from_secs(30),
        }
    }
}

impl MonitorConfig {
    pub fn from_env(env: Env) -> Result<MonitorConfig, BadInput> {
        let ms = |name: &str, default: f64| -> Result<Duration, BadInput> {
            let v: f64 = crate::util::env_parse(env, name, default, "milliseconds")?;
            if !(0.0..=3_600_000.0).contains(&v) {
                return Err(BadInput(format!("{name}={v}: give 0 to 3600000 ms")));
            }
            Ok(Duration::from_secs_f64(v / 1000.0))
        };
        let ping_s: f64 = crate::util::env_parse(env, "DB_PING_INTERVAL_SECONDS", 2.0, "seconds")?;
        if !(0.01..=3600.0).contains(&ping_s) {
            return Err(BadInput(format!(
                "DB_PING_INTERVAL_SECONDS={ping_s}: give 0.01 to 3600 seconds"
            )));
        }
        let max_failures: u32 = crate::util::env_parse(
            env,
            "DB_PING_MAX_FAILURES_BEFORE_RECOVERY",
            3,
            "a whole number",
        )?;
        if max_failures == 0 {
            return Err(BadInput(
                "DB_PING_MAX_FAILURES_BEFORE_RECOVERY=0: give 1 or more".into(),
            ));
        }
        let backoff_min = ms("DB_RECOVERY_BACKOFF_MIN_MS", 1000.0)?;
        if backoff_min.is_zero() {
            return Err(BadInput(
                "DB_RECOVERY_BACKOFF_MIN_MS=0: give 1 ms or more".into(),
            ));
        }
        Ok(MonitorConfig {
            ping_interval: Duration::from_secs_f64(ping_s),
            ping_timeout: ms("DB_PING_TIMEOUT_MS", 5000.0)?,
            max_failures,
            backoff_min,
            backoff_max: ms("DB_RECOVERY_BACKOFF_MAX_MS", 30_000.0)?,
            acquisition_timeout: ms("DB_CONNECTION_ACQUISITION_TIMEOUT_MS", 30_000.0)?,
        })
    }

    /// n8n's `computeBackoff`: doubling from the floor, capped (never below the floor).
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.backoff_max.max(self.backoff_min);
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(30));
        self.backoff_min.saturating_mul(factor).min(ceiling)
    }
}

/// What the process believes of its database, shared by its pool's connections, its monitor and
/// its handlers.
pub struct Health {
    connected: AtomicBool,
    disconnections: AtomicU64,
    /// True while a recovery runs: statements wait for it.
    recovering: tokio::sync::watch::Sender<bool>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            connected: AtomicBool::new(true),
            disconnections: AtomicU64::new(0),
            recovering: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Health {
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    pub fn disconnections(&self) -> u64 {
        self.disconnections.load(Ordering::Relaxed)
    }

    /// A transition only: a fall counts one disconnection.
    pub fn set_connected(&self, connected: bool) {
        if self.connected.swap(connected, Ordering::Relaxed) && !connected {
            self.disconnections.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A pooled connection Postgres ended: pg-pool's `error` event, as n8n logs it.
    pub fn pool_client_error(&self, words: &str) {
        self.set_connected(false);
        eprintln!(
            "Postgres pool client error: {}",
            crate::util::escape_control(words)
        );
    }

    /// Waits out a recovery in progress before a statement takes a connection, at most
    /// `timeout` (zero: for good); Err in n8n's words when it times out.
    pub async fn await_recovery(&self, timeout: Duration) -> Result<(), DbError> {
        let mut rx = self.recovering.subscribe();
        if !*rx.borrow() {
            return Ok(());
        }
        let done = async move {
            let _ = rx.wait_for(|r| !*r).await;
        };
        if timeout.is_zero() {
            done.await;
            return Ok(());
        }
        match tokio::time::timeout(timeout, done).await {
            Ok(_) => Ok(()),
            Err(_) => Err(DbError {
                words: format!(
                    "Timed out after {}ms waiting for database connection recovery",
                    timeout.as_millis()
                ),
                lost: true,
            }),
        }
    }
}

/// What the monitor needs of its process's database: one ping, and the pool made again.
pub trait Pinged: Send + Sync {
    /// `SELECT 1` on a pooled connection; Err with Postgres' words.
    fn ping(&self) -> impl std::future::Future<Output = Result<(), DbError>> + Send;
    /// The pool's idle connections dropped and a new one opened (n8n destroys the DataSource
    /// and initializes it again).
    fn reinitialize(&self) -> impl std::future::Future<Output = Result<(), DbError>> + Send;
    fn health(&self) -> &Health;
}

/// The monitor's loop, for the process's life: pings, and recoveries after enough failures.
pub async fn watch<D: Pinged>(db: std::sync::Arc<D>, cfg: MonitorConfig) {
    let mut failures = 0u32;
    loop {
        tokio::time::sleep(cfg.ping_interval).await;
        let pinged = match tokio::time::timeout(cfg.ping_timeout, db.ping()).await {
            Ok(r) => r,
            Err(_) => Err(DbError {
                words: "Database connection timed out".into(),
                lost: true,
            }),
        };
        match pinged {
            Ok(()) => {
                if !db.health().connected() {
                    eprintln!("Database connection recovered");
                }
                db.health().set_connected(true);
                failures = 0;
            }
            Err(e) => {
                db.health().set_connected(false);
                failures += 1;
                eprintln!(
                    "Database ping failed ({failures}/{}): {}",
                    cfg.max_failures,
                    crate::util::escape_control(&e.words)
                );
                if failures >= cfg.max_failures {
                    eprintln!(
                        "Triggering database connection recovery after {failures} consecutive ping failures"
                    );
                    recover(&*db, &cfg).await;
                    failures = 0;
                }
            }
        }
    }
}

/// Tries until the pool is made again: at once, then after each backoff.
async fn recover<D: Pinged>(db: &D, cfg: &MonitorConfig) {
    let health = db.health();
    health.recovering.send_replace(true);
    let start = Instant::now();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        eprintln!("Attempting to recover database connection (attempt {attempt})");
        match db.reinitialize().await {
            Ok(()) => {
                health.set_connected(true);
                eprintln!(
                    "Database connection recovered after {attempt} attempt(s) in {}ms",
                    start.elapsed().as_millis()
                );
                break;
            }
            Err(e) => {
                let wait = cfg.backoff(attempt);
                eprintln!(
                    "Recovery attempt {attempt} failed: {}. Retrying in {}ms",
                    crate::util::escape_control(&e.words),
                    wait.as_millis()
                );
                tokio::time::sleep(wait).await;
            }
        }
    }
    health.recovering.send_replace(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n8n_s_defaults_and_its_backoff() {
        let cfg = MonitorConfig::from_env(&|_| None).unwrap();
        assert_eq!(cfg, MonitorConfig::default());
        assert_eq!(cfg.ping_interval, Duration::from_secs(2));
        assert_eq!(cfg.max_failures, 3);
        let waits: Vec<u64> = (1..=7).map(|a| cfg.backoff(a).as_millis() as u64).collect();
        assert_eq!(waits, vec![1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        let bad = |k: &'static str, v: &'static str| {
            MonitorConfig::from_env(&move |n| (n == k).then(|| v.to_string())).is_err()
        };
        assert!(bad("DB_PING_MAX_FAILURES_BEFORE_RECOVERY", "0"));
        assert!(bad("DB_PING_INTERVAL_SECONDS", "0"));
        assert!(bad("DB_RECOVERY_BACKOFF_MIN_MS", "-1"));
    }

    #[test]
    fn a_fall_counts_one_disconnection() {
        let h = Health::default();
        h.set_connected(false);
        h.set_connected(false);
        h.set_connected(true);
        h.pool_client_error("terminating connection due to administrator command");
        assert_eq!(h.disconnections(), 2);
        assert!(!h.connected());
    }
}
