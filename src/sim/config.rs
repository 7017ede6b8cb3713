//! Each simulated role's settings, read from the same variables and flags as the real n8n
//! process or container of that role (names and defaults checked against n8n 2.x source:
//! `@n8n/config` runners.config.ts, scaling-mode.config.ts, endpoints.config.ts, and the task
//! runner's base-runner-config.ts). The few settings that only the simulator has are flags.

use crate::error::BadInput;
use crate::util::{env_bool, env_parse};
use crate::wire::resp::RedisUrl;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Metric switches every n8n instance reads.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// `N8N_METRICS` (default false): whether `/metrics` exists at all.
    pub enabled: bool,
    /// `N8N_METRICS_PREFIX` (default `n8n_`).
    pub prefix: String,
    /// `N8N_METRICS_INCLUDE_QUEUE_METRICS` (default false; main only).
    pub queue_metrics: bool,
    /// `N8N_METRICS_QUEUE_METRICS_INTERVAL` in seconds (default 20).
    pub queue_metrics_interval: Duration,
    /// `N8N_METRICS_INCLUDE_MESSAGE_EVENT_BUS_METRICS` (default false): runner task counters.
    pub event_bus_metrics: bool,
}

impl MetricsConfig {
    pub fn from_env(env: Env, default_enabled: bool) -> Result<Self, BadInput> {
        let interval: f64 = env_parse(
            env,
            "N8N_METRICS_QUEUE_METRICS_INTERVAL",
            20.0,
            "a number of seconds",
        )?;
        let interval = positive_secs("N8N_METRICS_QUEUE_METRICS_INTERVAL", interval)?;
        Ok(Self {
            enabled: env_bool(env, "N8N_METRICS", default_enabled)?,
            prefix: env("N8N_METRICS_PREFIX").unwrap_or_else(|| "n8n_".into()),
            queue_metrics: env_bool(env, "N8N_METRICS_INCLUDE_QUEUE_METRICS", default_enabled)?,
            queue_metrics_interval: interval,
            event_bus_metrics: env_bool(
                env,
                "N8N_METRICS_INCLUDE_MESSAGE_EVENT_BUS_METRICS",
                false,
            )?,
        })
    }
}

/// What main's intake costs by default: n8n 2.41.1's main spent 12.6 ms of CPU per webhook
/// execution at 20.3/s on a 2-core host (9–16 ms by rate; the project's second lab, docs/sim.md),
/// about 79/s on its one thread. The first lab's 27 ms were read on another machine with a
/// compiler running beside it: a figure of this kind belongs to its host.
pub const MAIN_INTAKE_CPU_MS: u64 = 13;

/// What a worker's execution costs by default: an n8n 2.41.1 worker process spent 48–52 ms of
/// CPU per webhook → Code → respond execution on the same host (its runner 4–5 ms more:
/// [`RUNNER_CPU_MS`]), so a simulated stack on a small host is host-bound where a
/// real one is. On another host, set `SIM_WORKER_CPU_MS` to what n8n's worker spends there
/// (its `process_cpu_seconds_total` over the executions it ran).
pub const WORKER_CPU_MS: u64 = 50;

/// What a runner's Code task costs by default: n8n 2.41.1's runner process spent 4–5 ms of CPU
/// per Code execution on the same host, on its own thread (a process of its own in n8n).
pub const RUNNER_CPU_MS: u64 = 5;

/// What a webhook processor's intake costs by default: 11.1 ms of CPU per execution on the same
/// host (main's fell to about 1 ms once the processor took the webhooks).
pub const WEBHOOK_CPU_MS: u64 = 11;

/// Where a process's CPU per execution comes from: its flag, else its variable, else its default.
#[derive(Debug, Clone, Copy)]
pub enum CpuVar {
    /// `SIM_MAIN_CPU_MS` (main): [`MAIN_INTAKE_CPU_MS`] unset.
    Main,
    /// `SIM_MAIN_CPU_MS` (`n8n webhook`, a webhook processor): [`WEBHOOK_CPU_MS`] unset.
    Webhook,
    /// `SIM_WORKER_CPU_MS` (workers and regular mode's main): [`WORKER_CPU_MS`] unset (a
    /// simulated worker then serves at most 20/s on its one thread, as n8n's did).
    Worker,
    /// `SIM_RUNNER_CPU_MS` (each Code task on a runner): [`RUNNER_CPU_MS`] unset.
    Runner,
}

/// The simulator's CPU per execution on one process's JavaScript thread: `flag` when given,
/// else the role's variable (ms, 0 to 600 000), else its default — the variables for a compose
/// stack, which passes no flags.
pub fn sim_cpu(env: Env, flag: Option<u64>, var: CpuVar) -> Result<Duration, BadInput> {
    if let Some(ms) = flag {
        return Ok(Duration::from_millis(ms));
    }
    let (var, default) = match var {
        CpuVar::Main => ("SIM_MAIN_CPU_MS", MAIN_INTAKE_CPU_MS),
        CpuVar::Webhook => ("SIM_MAIN_CPU_MS", WEBHOOK_CPU_MS),
        CpuVar::Worker => ("SIM_WORKER_CPU_MS", WORKER_CPU_MS),
        CpuVar::Runner => ("SIM_RUNNER_CPU_MS", RUNNER_CPU_MS),
    };
    let ms: u64 = env_parse(env, var, default, "a number of milliseconds")?;
    if ms > 600_000 {
        return Err(BadInput(format!(
            "{var}={ms}: give 0 to 600000 ms of CPU per execution"
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// Where the queue lives: `QUEUE_BULL_REDIS_HOST` / `QUEUE_BULL_REDIS_PORT` (default
/// localhost:6379). Without a real Redis, sim main serves the queue at that port itself.
pub fn queue_address(env: Env) -> Result<(String, u16), BadInput> {
    let host = env("QUEUE_BULL_REDIS_HOST")
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "localhost".into());
    let port = env_parse(env, "QUEUE_BULL_REDIS_PORT", 6379u16, "a port number")?;
    Ok((host, port))
}

fn listen_ip(env: Env, var: &str, default: &str) -> Result<IpAddr, BadInput> {
    let text = env(var)
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.into());
    let text = text.trim();
    let text = if text == "localhost" {
        "127.0.0.1"
    } else {
        text
    };
    text.parse().map_err(|_| {
        BadInput(format!(
            "{var}={text:?} is not an IP address to listen on: use e.g. 0.0.0.0 or 127.0.0.1"
        ))
    })
}

fn seconds(env: Env, var: &str, default: f64) -> Result<Duration, BadInput> {
    let v: f64 = env_parse(env, var, default, "a number of seconds")?;
    positive_secs(var, v)
}

/// Seconds from a variable: more than 0 and at most 30 days (beyond, clock arithmetic would
/// overflow).
fn positive_secs(var: &str, v: f64) -> Result<Duration, BadInput> {
    match Duration::try_from_secs_f64(v) {
        Ok(d) if v > 0.0 && d <= crate::util::MAX_DURATION => Ok(d),
        _ => Err(BadInput(format!(
            "{var} must be a number of seconds above 0 and at most 30 days"
        ))),
    }
}

#[derive(Debug, Clone)]
pub struct MainConfig {
    /// `N8N_LISTEN_ADDRESS` + `N8N_PORT` (default 5678).
    pub listen: SocketAddr,
    /// The queue endpoint workers connect to (see [`queue_address`]).
    pub queue_listen: SocketAddr,
    /// The workflows main has registered, by webhook path, each with the defaults of what it
    /// does (`load`: everything from the body, as the example workflow).
    pub workflows: Workflows,
    /// `EXECUTIONS_MODE=regular`: main runs every execution itself.
    pub regular: Option<RegularConfig>,
    pub metrics: MetricsConfig,
    /// Time main spends on each execution outside any worker slot (webhook handling, saving).
    pub overhead: Duration,
    /// CPU main burns per execution on its one JavaScript thread.
    pub cpu: Duration,
    /// Other roles run in this process: report this role's own thread CPU, not the process's.
    pub shared_process: bool,
    /// A real Redis for the queue (Bull's key names) instead of main serving it.
    pub redis: Option<RedisUrl>,
    /// `QUEUE_BULL_PREFIX` (default `bull`).
    pub bull_prefix: String,
    /// `DB_TYPE=postgresdb`: the executions on a real PostgreSQL through this process's pool.
    pub db: Option<super::db::DbConfig>,
    /// On main's own queue (no Redis): how long after a worker's connection closed the jobs it
    /// held are failed — `QUEUE_WORKER_LOCK_DURATION` (their lease lapses) plus
    /// `QUEUE_WORKER_STALLED_INTERVAL` (Bull's stalled check finds them), as on Redis.
    pub stalled_after: Duration,
}

impl MainConfig {
    pub fn from_env(env: Env, port: Option<u16>, overhead: Duration) -> Result<Self, BadInput> {
        let regular = match env("EXECUTIONS_MODE").as_deref().map(str::trim) {
            // The simulator's compose stacks are queue-mode stacks; n8n's own default is regular.
            None | Some("") | Some("queue") => None,
            Some("regular") => Some(RegularConfig::from_env(env)?),
            Some(other) => {
                return Err(BadInput(format!(
                    "EXECUTIONS_MODE={other:?} is not an executions mode: use queue or regular"
                )))
            }
        };
        let ip = listen_ip(env, "N8N_LISTEN_ADDRESS", "0.0.0.0")?;
        let port = match port {
            Some(p) => p,
            None => env_parse(env, "N8N_PORT", 5678u16, "a port number")?,
        };
        let (_, queue_port) = queue_address(env)?;
        Ok(Self {
            listen: SocketAddr::new(ip, port),
            queue_listen: SocketAddr::new(ip, queue_port),
            workflows: Workflows::default(),
            regular,
            metrics: MetricsConfig::from_env(env, false)?,
            overhead,
            cpu: Duration::ZERO,
            shared_process: false,
            redis: None,
            bull_prefix: bull_prefix(env),
            db: super::db::DbConfig::from_env(env)?,
            stalled_after: ShutdownConfig::from_env(env)?.stalled_after(),
        })
    }
}

/// Webhook path → what its workflow does unless the body says otherwise (JobSpec fields).
#[derive(Debug, Clone)]
pub struct Workflows(
    pub std::collections::BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
);

impl Default for Workflows {
    /// `load` (the example workflow: everything from the body) and `notify` (a workflow
    /// without a Code node, as the `mix` profile expects).
    fn default() -> Self {
        let mut notify = serde_json::Map::new();
        notify.insert("code".into(), serde_json::Value::Bool(false));
        Workflows(std::collections::BTreeMap::from([
            ("load".to_string(), serde_json::Map::new()),
            ("notify".to_string(), notify),
        ]))
    }
}

impl Workflows {
    /// Adds `path=JSON` (a `--workflow` flag): e.g. `orders={"sleep_ms":200,"code":false}`.
    pub fn add(&mut self, spec: &str) -> Result<(), BadInput> {
        let (path, json) = spec.split_once('=').ok_or_else(|| {
            BadInput(format!(
                "--workflow {spec:?}: write PATH=JSON, e.g. orders='{{\"sleep_ms\":200,\"code\":false}}'"
            ))
        })?;
        let path = path.trim().trim_start_matches('/');
        if path.is_empty()
            || !path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            return Err(BadInput(format!(
                "--workflow {spec:?}: the path must be letters, digits, - _ . / (the part after /webhook/)"
            )));
        }
        let defaults = match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => {
                return Err(BadInput(format!(
                    "--workflow {path}: {json:?} is not a JSON object such as {{\"sleep_ms\":200}}"
                )))
            }
        };
        if let Err(e) = serde_json::from_value::<super::wire::JobSpec>(serde_json::Value::Object(
            defaults.clone(),
        )) {
            return Err(BadInput(format!("--workflow {path}: {e}")));
        }
        self.0.insert(path.to_string(), defaults);
        Ok(())
    }
}

/// Regular mode: main runs the executions, at most `N8N_CONCURRENCY_PRODUCTION_LIMIT` at once
/// (-1, the default: no limit), its Code nodes on an internal runner of
/// `N8N_RUNNERS_MAX_CONCURRENCY` tasks, all of its JavaScript on one thread.
#[derive(Debug, Clone)]
pub struct RegularConfig {
    pub production_limit: Option<u32>,
    pub runner_limit: u32,
    /// Time each execution spends besides its own work (loading and saving it).
    pub overhead: Duration,
    /// CPU each execution burns on main's JavaScript thread (what a worker burns in queue mode).
    pub cpu: Duration,
}

impl RegularConfig {
    pub fn from_env(env: Env) -> Result<Self, BadInput> {
        Ok(RegularConfig {
            production_limit: production_limit(env)?,
            runner_limit: runner_limit(env)?,
            overhead: Duration::ZERO,
            cpu: Duration::ZERO,
        })
    }
}

/// `N8N_CONCURRENCY_PRODUCTION_LIMIT`: None for -1 (n8n's default, no limit).
pub fn production_limit(env: Env) -> Result<Option<u32>, BadInput> {
    let v: i64 = env_parse(
        env,
        "N8N_CONCURRENCY_PRODUCTION_LIMIT",
        -1,
        "a whole number (-1 for no limit)",
    )?;
    match v {
        -1 => Ok(None),
        1..=100_000 => Ok(Some(v as u32)),
        _ => Err(BadInput(format!(
            "N8N_CONCURRENCY_PRODUCTION_LIMIT={v}: use -1 (off) or a number from 1 to 100000"
        ))),
    }
}

pub fn bull_prefix(env: Env) -> String {
    env("QUEUE_BULL_PREFIX")
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "bull".into())
}

/// `N8N_RUNNERS_MODE`: `internal` (n8n starts a runner child process) or `external`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnersMode {
    Internal,
    External,
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub name: String,
    /// Effective worker concurrency: `--concurrency` (default 10), overridden by
    /// `N8N_CONCURRENCY_PRODUCTION_LIMIT` when that is not -1.
    pub concurrency: u32,
    /// Where the queue is (`QUEUE_BULL_REDIS_HOST:QUEUE_BULL_REDIS_PORT`).
    pub queue: (String, u16),
    /// `N8N_WORKER_SERVER_ADDRESS` + `QUEUE_HEALTH_CHECK_PORT` (default 5678): /healthz, /metrics.
    pub health_listen: SocketAddr,
    /// `N8N_RUNNERS_BROKER_LISTEN_ADDRESS` (127.0.0.1) + `N8N_RUNNERS_BROKER_PORT` (5679).
    pub broker_listen: SocketAddr,
    pub runners_mode: RunnersMode,
    /// `N8N_RUNNERS_MAX_CONCURRENCY` on this process: used only by an internal runner.
    pub internal_runner_limit: u32,
    /// `SIM_RUNNER_CPU_MS` on this process: an internal runner's CPU per Code task.
    pub internal_runner_cpu: Duration,
    /// `N8N_RUNNERS_AUTH_TOKEN`: runners must present it (when set). Never printed.
    pub auth_token: String,
    /// `N8N_RUNNERS_TASK_REQUEST_TIMEOUT` (default 60 s): how long a Code task waits for a runner.
    pub task_request_timeout: Duration,
    pub metrics: MetricsConfig,
    /// Time each job holds its slot besides its own work (loading and saving the execution).
    pub overhead: Duration,
    /// CPU each job burns on the worker's one JavaScript thread, inside its slot.
    pub cpu: Duration,
    /// Other roles run in this process: report this role's own thread CPU.
    pub shared_process: bool,
    /// A real Redis for the queue (Bull's key names) instead of main's simulated one.
    pub redis: Option<RedisUrl>,
    /// `QUEUE_BULL_PREFIX` (default `bull`).
    pub bull_prefix: String,
    /// `DB_TYPE=postgresdb`: the executions on a real PostgreSQL through this process's pool.
    pub db: Option<super::db::DbConfig>,
    /// How the worker stops and how Bull finds the jobs a stopped worker left.
    pub shutdown: ShutdownConfig,
}

/// `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` (ms, default 10 000): how long an n8n process keeps
/// trying to reach a lost Redis before it exits (`RedisClientService`'s `maxTimeout`).
pub fn redis_timeout_threshold(env: Env) -> Result<Duration, BadInput> {
    let ms = js_number(env, "QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD", 10_000.0);
    positive_ms("QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD", ms)
}

/// A number variable as n8n's `@n8n/config` reads it (JavaScript's `Number()`): one that is not
/// a number keeps the default, with n8n's warning ("Invalid number value for …"), and the
/// process starts.
fn js_number(env: Env, var: &str, default: f64) -> f64 {
    match env(var) {
        None => default,
        Some(v) => {
            match v.trim().parse::<f64>() {
                Ok(n) if !n.is_nan() => n,
                _ => {
                    eprintln!("Invalid number value for {var}: keeping its default {default} (as n8n does)");
                    default
                }
            }
        }
    }
}

/// Milliseconds from a variable: more than 0 and at most 30 days.
fn positive_ms(var: &str, ms: f64) -> Result<Duration, BadInput> {
    positive_secs(var, ms / 1000.0).map_err(|_| {
        BadInput(format!(
            "{var} must be a number of milliseconds above 0 and at most 30 days"
        ))
    })
}

/// The share of the shutdown window a stopping worker's Code tasks get (n8n 2.41's task broker).
pub const SHUTDOWN_TASK_BUDGET_RATIO: f64 = 0.8;

/// A worker's stop as n8n 2.x does it, and Bull's lease on the jobs it holds (names and defaults
/// from `@n8n/config`'s `scaling-mode.config.ts`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShutdownConfig {
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` (s, default 30): after SIGTERM the worker takes no job
    /// and waits this long at most for those it runs; then it exits and they fail.
    pub graceful: Duration,
    /// `QUEUE_WORKER_LOCK_DURATION` (ms, default 60 000): a job's lease.
    pub lock: Duration,
    /// `QUEUE_WORKER_LOCK_RENEW_TIME` (ms, default 10 000): how often a running job's lease is renewed.
    pub renew: Duration,
    /// `QUEUE_WORKER_STALLED_INTERVAL` (ms, default 30 000): how often a worker looks for jobs
    /// whose lease lapsed; n8n ≥ 2.0 fails them (no stalled retry).
    pub stalled: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            graceful: Duration::from_secs(30),
            lock: Duration::from_secs(60),
            renew: Duration::from_secs(10),
            stalled: Duration::from_secs(30),
        }
    }
}

impl ShutdownConfig {
    /// From a worker's death to its jobs' failure at most: the lease lapses, then the stalled
    /// check that runs after it fails them.
    pub fn stalled_after(&self) -> Duration {
        self.lock + self.stalled
    }

    /// When a stopping worker's Code tasks are aborted: n8n's task broker caps every running
    /// task's timeout at the signal + 0.8 × `N8N_GRACEFUL_SHUTDOWN_TIMEOUT`
    /// (`SHUTDOWN_TASK_BUDGET_RATIO` in `task-broker-ws-server`; measured on n8n 2.41.1: a
    /// 2.9 s job signalled 0.2 s after it began was failed at 2.64 s with a 3 s window).
    pub fn task_budget(&self) -> Duration {
        self.graceful.mul_f64(SHUTDOWN_TASK_BUDGET_RATIO)
    }

    pub fn from_env(env: Env) -> Result<Self, BadInput> {
        let d = ShutdownConfig::default();
        let ms = |var: &str, default: Duration| -> Result<Duration, BadInput> {
            let v = js_number(env, var, default.as_secs_f64() * 1000.0);
            positive_ms(var, v)
        };
        // n8n waits 0 s with 0 (and with less, as JavaScript's timers do).
        let window = |var: &str, default: f64| -> Result<Duration, BadInput> {
            let v = js_number(env, var, default).max(0.0);
            Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| *d <= crate::util::MAX_DURATION)
                .ok_or_else(|| BadInput(format!("{var} must be at most 30 days (seconds)")))
        };
        let graceful = match env("N8N_GRACEFUL_SHUTDOWN_TIMEOUT") {
            Some(_) => window("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", 30.0)?,
            // The variable it replaced, still read by n8n when the new one is unset.
            None => window("QUEUE_WORKER_TIMEOUT", d.graceful.as_secs_f64())?,
        };
        let c = ShutdownConfig {
            graceful,
            lock: ms("QUEUE_WORKER_LOCK_DURATION", d.lock)?,
            renew: ms("QUEUE_WORKER_LOCK_RENEW_TIME", d.renew)?,
            stalled: ms("QUEUE_WORKER_STALLED_INTERVAL", d.stalled)?,
        };
        if c.renew >= c.lock {
            return Err(BadInput(format!(
                "QUEUE_WORKER_LOCK_RENEW_TIME ({} ms) must be below QUEUE_WORKER_LOCK_DURATION ({} ms): a running job's lease would lapse",
                c.renew.as_millis(),
                c.lock.as_millis()
            )));
        }
        Ok(c)
    }
}

impl WorkerConfig {
    pub fn from_env(
        env: Env,
        concurrency_flag: Option<u32>,
        overhead: Duration,
    ) -> Result<Self, BadInput> {
        let concurrency = match production_limit(env)? {
            Some(limit) => limit,
            None => concurrency_flag.unwrap_or(10),
        };
        if concurrency == 0 {
            return Err(BadInput(
                "--concurrency must be at least 1 (n8n's default is 10)".into(),
            ));
        }
        let mode = match env("N8N_RUNNERS_MODE").as_deref().map(str::trim) {
            None | Some("") | Some("internal") => RunnersMode::Internal,
            Some("external") => RunnersMode::External,
            Some(other) => {
                return Err(BadInput(format!(
                    "N8N_RUNNERS_MODE={other:?} is not a runners mode: use internal or external"
                )))
            }
        };
        let health_ip = listen_ip(env, "N8N_WORKER_SERVER_ADDRESS", "0.0.0.0")?;
        let health_port = env_parse(env, "QUEUE_HEALTH_CHECK_PORT", 5678u16, "a port number")?;
        let broker_ip = listen_ip(env, "N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "127.0.0.1")?;
        let broker_port = env_parse(env, "N8N_RUNNERS_BROKER_PORT", 5679u16, "a port number")?;
        Ok(Self {
            name: env("HOSTNAME").unwrap_or_else(|| "worker".into()),
            concurrency,
            queue: queue_address(env)?,
            health_listen: SocketAddr::new(health_ip, health_port),
            broker_listen: SocketAddr::new(broker_ip, broker_port),
            runners_mode: mode,
            internal_runner_limit: runner_limit(env)?,
            internal_runner_cpu: sim_cpu(env, None, CpuVar::Runner)?,
            auth_token: env("N8N_RUNNERS_AUTH_TOKEN").unwrap_or_default(),
            task_request_timeout: seconds(env, "N8N_RUNNERS_TASK_REQUEST_TIMEOUT", 60.0)?,
            metrics: MetricsConfig::from_env(env, false)?,
            overhead,
            cpu: Duration::ZERO,
            shared_process: false,
            redis: None,
            bull_prefix: bull_prefix(env),
            db: super::db::DbConfig::from_env(env)?,
            shutdown: ShutdownConfig::from_env(env)?,
        })
    }
}

/// `N8N_RUNNERS_MAX_CONCURRENCY` (default 10 in n8n 2.x source; the docs say 5).
pub fn runner_limit(env: Env) -> Result<u32, BadInput> {
    let v: u32 = env_parse(env, "N8N_RUNNERS_MAX_CONCURRENCY", 10, "a whole number")?;
    if v == 0 {
        return Err(BadInput(
            "N8N_RUNNERS_MAX_CONCURRENCY must be at least 1".into(),
        ));
    }
    Ok(v)
}

#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub name: String,
    /// `N8N_RUNNERS_TASK_BROKER_URI` (default http://127.0.0.1:5679).
    pub broker: (String, u16),
    /// `N8N_RUNNERS_MAX_CONCURRENCY` of this runner (default 10).
    pub max_concurrency: u32,
    /// `N8N_RUNNERS_AUTH_TOKEN`. Never printed.
    pub auth_token: String,
    /// CPU each Code task burns on the runner's one thread (`SIM_RUNNER_CPU_MS`).
    pub cpu: Duration,
}

impl RunnerConfig {
    pub fn from_env(env: Env) -> Result<Self, BadInput> {
        let uri = env("N8N_RUNNERS_TASK_BROKER_URI")
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "http://127.0.0.1:5679".into());
        Ok(Self {
            name: env("HOSTNAME").unwrap_or_else(|| "runner".into()),
            broker: parse_broker_uri(&uri)?,
            max_concurrency: runner_limit(env)?,
            auth_token: env("N8N_RUNNERS_AUTH_TOKEN").unwrap_or_default(),
            cpu: sim_cpu(env, None, CpuVar::Runner)?,
        })
    }
}

/// Splits `http://host:port[/path]` into host and port.
pub fn parse_broker_uri(uri: &str) -> Result<(String, u16), BadInput> {
    let bad = || {
        BadInput(format!(
            "N8N_RUNNERS_TASK_BROKER_URI={:?} is not a broker URI: write http://HOST:PORT, \
             e.g. http://n8n-worker:5679",
            crate::wire::url::truncate(&crate::wire::url::redact(uri), 80)
        ))
    };
    let rest = uri
        .trim()
        .strip_prefix("http://")
        .or_else(|| uri.trim().strip_prefix("ws://"))
        .ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn shutdown_variables_are_read_as_n8n_reads_them() {
        // 0 is n8n's to take (no wait); a word keeps the default, as n8n's Number() does.
        let c = ShutdownConfig::from_env(&env_of(&[("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", "0")]));
        assert_eq!(c.unwrap().graceful, Duration::ZERO);
        let c = ShutdownConfig::from_env(&env_of(&[("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", "abc")]));
        assert_eq!(c.unwrap().graceful, Duration::from_secs(30));
        let c = ShutdownConfig::from_env(&env_of(&[
            ("QUEUE_WORKER_LOCK_DURATION", "4000"),
            ("QUEUE_WORKER_LOCK_RENEW_TIME", "1000"),
        ]));
        assert_eq!(c.unwrap().lock, Duration::from_secs(4));
        // A lease of no length is refused, in the variable's own unit.
        let e =
            ShutdownConfig::from_env(&env_of(&[("QUEUE_WORKER_LOCK_DURATION", "0")])).unwrap_err();
        assert!(e.0.contains("milliseconds"), "{}", e.0);
        let e = redis_timeout_threshold(&env_of(&[("QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD", "-1")]))
            .unwrap_err();
        assert!(e.0.contains("milliseconds"), "{}", e.0);
    }

    #[test]
    fn production_limit_overrides_concurrency_flag() {
        let env = env_of(&[("N8N_CONCURRENCY_PRODUCTION_LIMIT", "7")]);
        let w = WorkerConfig::from_env(&env, Some(15), Duration::ZERO).unwrap();
        assert_eq!(w.concurrency, 7);
        let env = env_of(&[("N8N_CONCURRENCY_PRODUCTION_LIMIT", "-1")]);
        let w = WorkerConfig::from_env(&env, Some(15), Duration::ZERO).unwrap();
        assert_eq!(w.concurrency, 15);
        let w = WorkerConfig::from_env(&env_of(&[]), None, Duration::ZERO).unwrap();
        assert_eq!(w.concurrency, 10);
        assert_eq!(w.task_request_timeout, Duration::from_secs(60));
        assert_eq!(w.broker_listen.port(), 5679);
        assert_eq!(w.health_listen.port(), 5678);
    }

    #[test]
    fn main_s_intake_costs_n8n_s_cpu_unless_its_flag_or_variable_says_otherwise() {
        let ms = |env: &dyn Fn(&str) -> Option<String>, flag, var| {
            sim_cpu(env, flag, var).unwrap().as_millis()
        };
        let none = env_of(&[]);
        assert_eq!(ms(&none, None, CpuVar::Main), 13);
        assert_eq!(ms(&none, None, CpuVar::Worker), 50);
        assert_eq!(ms(&none, None, CpuVar::Webhook), 11);
        assert_eq!(ms(&none, None, CpuVar::Runner), 5);
        assert_eq!(
            RunnerConfig::from_env(&none).unwrap().cpu,
            Duration::from_millis(5)
        );
        let free = env_of(&[("SIM_RUNNER_CPU_MS", "0")]);
        assert_eq!(RunnerConfig::from_env(&free).unwrap().cpu, Duration::ZERO);
        // An empty variable is unset, as n8n reads its own.
        assert_eq!(
            ms(&env_of(&[("SIM_MAIN_CPU_MS", " ")]), None, CpuVar::Main),
            13
        );
        let set = env_of(&[("SIM_MAIN_CPU_MS", "0"), ("SIM_WORKER_CPU_MS", "90")]);
        assert_eq!(ms(&set, None, CpuVar::Main), 0);
        assert_eq!(ms(&set, None, CpuVar::Worker), 90);
        // The flag wins over the variable.
        assert_eq!(ms(&set, Some(80), CpuVar::Main), 80);
        assert_eq!(ms(&set, Some(5), CpuVar::Worker), 5);
        let over = env_of(&[("SIM_MAIN_CPU_MS", "600001")]);
        assert!(sim_cpu(&over, None, CpuVar::Main)
            .unwrap_err()
            .0
            .contains("SIM_MAIN_CPU_MS"));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let env = env_of(&[("N8N_RUNNERS_MAX_CONCURRENCY", "abc")]);
        let err = RunnerConfig::from_env(&env).unwrap_err();
        assert!(err.0.contains("N8N_RUNNERS_MAX_CONCURRENCY"));
        let env = env_of(&[("N8N_RUNNERS_MODE", "sidecar")]);
        let err = WorkerConfig::from_env(&env, None, Duration::ZERO).unwrap_err();
        assert!(err.0.contains("N8N_RUNNERS_MODE"));
        let env = env_of(&[("N8N_RUNNERS_TASK_BROKER_URI", "n8n-worker")]);
        assert!(RunnerConfig::from_env(&env)
            .unwrap_err()
            .0
            .contains("BROKER_URI"));
    }

    #[test]
    fn broker_uri_forms() {
        assert_eq!(
            parse_broker_uri("http://n8n-worker:5679").unwrap(),
            ("n8n-worker".to_string(), 5679)
        );
        assert_eq!(
            parse_broker_uri("http://127.0.0.1:5679/runners").unwrap(),
            ("127.0.0.1".to_string(), 5679)
        );
    }
}
