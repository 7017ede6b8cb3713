//! An n8n queue-mode stand-in: main (webhook + queue + metrics), workers (slots), task brokers
//! and runners (Code tasks), as separate roles talking over TCP like the real stack.
//!
//! This module is the witness the rest of n8ncap is tested against, so it stays independent:
//! its throughput comes from slots and runner tasks really held, never from the capacity
//! model's formulas, and it imports nothing from `load`, `model` or `diagnose`.

pub mod bull;
pub mod config;
pub mod cpu;
pub mod db;
pub mod db_fail;
pub mod db_monitor;
pub mod intake;
pub mod main_role;
pub mod process;
pub mod queue_redis;
pub mod redis_watch;
pub mod regular;
pub mod rendezvous;
pub mod runner;
pub mod wire;
pub mod worker;

use config::{MainConfig, RunnerConfig, RunnersMode, WorkerConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::task::JoinSet;

/// The n8n version the simulator's `n8n_version_info` claims to behave like.
pub struct SimVersion;
pub const SIM_VERSION: SimVersion = SimVersion;

impl SimVersion {
    pub fn labels(&self) -> [(&'static str, &'static str); 4] {
        [
            ("version", "v2.41.1-sim"),
            ("major", "2"),
            ("minor", "41"),
            ("patch", "1"),
        ]
    }
}

/// Fixed overhead per execution: half on main (webhook handling, outside any slot), half inside
/// the worker slot (loading and saving the execution). 40 ms total matches what the reference
/// study measured at 1 in flight on a real n8n.
pub const DEFAULT_OVERHEAD: Duration = Duration::from_millis(40);

/// Settings for a whole stack in one process (`sim all`, the demo, tests).
#[derive(Debug, Clone)]
pub struct StackConfig {
    /// Address for main's webhook and /metrics (the other roles stay on loopback).
    pub listen: IpAddr,
    /// Port for main's webhook and /metrics (0 = any free port).
    pub port: u16,
    pub workers: u32,
    /// Effective worker concurrency of each worker.
    pub worker_concurrency: u32,
    /// Runners attached to each worker (0: none, Code tasks time out).
    pub runners_per_worker: u32,
    /// `N8N_RUNNERS_MAX_CONCURRENCY` of each runner.
    pub runner_limit: u32,
    pub task_request_timeout: Duration,
    pub queue_metrics_interval: Duration,
    pub event_bus_metrics: bool,
    pub overhead: Duration,
    /// CPU burnt per execution on each worker's one JavaScript thread.
    pub worker_cpu: Duration,
    /// CPU burnt per Code task on each runner's thread (none unless given: `sim all` gives
    /// n8n's `config::RUNNER_CPU_MS`).
    pub runner_cpu: Duration,
    /// CPU burnt per execution on main's JavaScript thread (none unless given: `sim all` gives
    /// n8n's `config::MAIN_INTAKE_CPU_MS`; the demo and tests state their own).
    pub main_cpu: Duration,
    /// Queue on this Redis (Bull's key names) instead of main's simulated queue.
    pub redis: Option<crate::wire::resp::RedisUrl>,
    /// Webhook paths main registers, each with its workflow's defaults.
    pub workflows: config::Workflows,
    /// `EXECUTIONS_MODE=regular`: no workers; main runs the executions, at most
    /// `production_limit` at once (None: n8n's -1, no limit), Code on an internal runner of
    /// `runner_limit` tasks.
    pub regular: bool,
    pub production_limit: Option<u32>,
    /// The executions on a real PostgreSQL (`DB_TYPE=postgresdb`), each process with its pool.
    pub db: Option<db::DbConfig>,
}

impl Default for StackConfig {
    fn default() -> Self {
        Self {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            workers: 1,
            worker_concurrency: 10,
            runners_per_worker: 1,
            runner_limit: 10,
            task_request_timeout: Duration::from_secs(60),
            queue_metrics_interval: Duration::from_secs(20),
            event_bus_metrics: false,
            overhead: DEFAULT_OVERHEAD,
            worker_cpu: Duration::ZERO,
            runner_cpu: Duration::ZERO,
            main_cpu: Duration::ZERO,
            redis: None,
            workflows: config::Workflows::default(),
            regular: false,
            production_limit: None,
            db: None,
        }
    }
}

/// A running in-process stack. Dropping it stops every role.
pub struct Stack {
    pub main_url: String,
    pub webhook_url: String,
    pub worker_metrics_urls: Vec<String>,
    pub config: StackConfig,
    _tasks: JoinSet<()>,
}

impl Stack {
    pub async fn start(cfg: StackConfig) -> anyhow::Result<Stack> {
        let mut tasks = JoinSet::new();
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let metrics = config::MetricsConfig {
            enabled: true,
            prefix: "n8n_".into(),
            queue_metrics: true,
            queue_metrics_interval: cfg.queue_metrics_interval,
            event_bus_metrics: cfg.event_bus_metrics,
        };
        let main = main_role::start(
            MainConfig {
                listen: SocketAddr::new(cfg.listen, cfg.port),
                queue_listen: SocketAddr::new(loopback, 0),
                workflows: cfg.workflows.clone(),
                regular: cfg.regular.then(|| config::RegularConfig {
                    production_limit: cfg.production_limit,
                    runner_limit: cfg.runner_limit,
                    overhead: cfg.overhead - cfg.overhead / 2,
                    cpu: cfg.worker_cpu,
                }),
                metrics: metrics.clone(),
                overhead: cfg.overhead / 2,
                cpu: cfg.main_cpu,
                shared_process: true,
                redis: cfg.redis.clone(),
                bull_prefix: "bull".into(),
                db: cfg.db.clone(),
                stalled_after: config::ShutdownConfig::default().stalled_after(),
            },
            &mut tasks,
        )
        .await?;
        let mut worker_metrics_urls = Vec::new();
        let workers = if cfg.regular { 0 } else { cfg.workers };
        for w in 0..workers {
            let name = format!("worker-{}", w + 1);
            let addrs = worker::start(
                WorkerConfig {
                    name: name.clone(),
                    concurrency: cfg.worker_concurrency,
                    queue: main
                        .queue
                        .map(|q| (q.ip().to_string(), q.port()))
                        .unwrap_or_else(|| ("127.0.0.1".into(), 0)),
                    health_listen: SocketAddr::new(loopback, 0),
                    broker_listen: SocketAddr::new(loopback, 0),
                    runners_mode: RunnersMode::External,
                    internal_runner_limit: 10,
                    internal_runner_cpu: Duration::ZERO,
                    auth_token: String::new(),
                    task_request_timeout: cfg.task_request_timeout,
                    metrics: metrics.clone(),
                    overhead: cfg.overhead - cfg.overhead / 2,
                    cpu: cfg.worker_cpu,
                    shared_process: true,
                    redis: cfg.redis.clone(),
                    bull_prefix: "bull".into(),
                    db: cfg.db.clone(),
                    shutdown: config::ShutdownConfig::default(),
                },
                &mut tasks,
            )
            .await?;
            worker_metrics_urls.push(format!("http://{}/metrics", addrs.health));
            for r in 0..cfg.runners_per_worker {
                let rc = RunnerConfig {
                    name: format!("{name}-runner-{}", r + 1),
                    broker: (addrs.broker.ip().to_string(), addrs.broker.port()),
                    max_concurrency: cfg.runner_limit,
                    auth_token: String::new(),
                    cpu: cfg.runner_cpu,
                };
                tasks.spawn(runner::run(rc));
            }
        }
        // Reach main over loopback even when it listens on every address.
        let main_url = format!("http://127.0.0.1:{}", main.http.port());
        let stack = Stack {
            webhook_url: format!("{main_url}/webhook/load"),
            main_url,
            worker_metrics_urls,
            config: cfg,
            _tasks: tasks,
        };
        stack.wait_ready().await?;
        Ok(stack)
    }

    /// Waits until every worker has its runners attached (they connect asynchronously).
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for url in &self.worker_metrics_urls {
            let runners_url = url.replace("/metrics", "/sim/runners");
            loop {
                let attached = fetch_runner_count(&runners_url).await.unwrap_or(0);
                if attached >= self.config.runners_per_worker as usize {
                    break;
                }
                if tokio::time::Instant::now() > deadline {
                    anyhow::bail!("simulated runners did not attach to {runners_url} within 10 s");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }
}

/// GETs a worker's `/sim/runners` and counts the attached runners.
pub async fn fetch_runner_count(url: &str) -> anyhow::Result<usize> {
    let (_, body) = crate::wire::http::http_get(url, Duration::from_secs(2)).await?;
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(v["runners"].as_array().map(|a| a.len()).unwrap_or(0))
}

/// GETs a worker's `/sim/runners` and reads the tasks its runners finished and the seconds they
/// held them (match to result): the runner's service time as this run measured it.
pub async fn fetch_runner_tasks(url: &str) -> anyhow::Result<(u64, f64)> {
    let (_, body) = crate::wire::http::http_get(url, Duration::from_secs(2)).await?;
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    let done = v["tasks_done"].as_u64().unwrap_or(0);
    let seconds = v["task_seconds"].as_f64().unwrap_or(0.0);
    Ok((done, seconds))
}

/// A process of its own on Redis holds it as n8n does: it exits (code 1) once Redis was
/// unreachable past `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` ([`redis_watch`]).
fn watch_redis(
    url: Option<&crate::wire::resp::RedisUrl>,
    role: &'static str,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    let Some(url) = url.cloned() else {
        return Ok(());
    };
    let threshold = config::redis_timeout_threshold(&crate::util::process_env)?;
    tasks.spawn(async move {
        redis_watch::until_lost(url, threshold, role).await;
        std::process::exit(1);
    });
    Ok(())
}

/// `n8ncap sim main`: runs until interrupted.
pub async fn run_main(cfg: MainConfig) -> anyhow::Result<()> {
    let mut tasks = JoinSet::new();
    if cfg.regular.is_none() {
        watch_redis(cfg.redis.as_ref(), "main", &mut tasks)?;
    }
    let regular = cfg.regular.clone();
    let a = main_role::start(cfg, &mut tasks).await?;
    println!(
        "n8ncap sim main: webhook http://{}/webhook/load, {}",
        a.http,
        match (regular, a.queue) {
            (Some(r), _) => regular_words(r.production_limit, r.runner_limit),
            (None, Some(q)) => format!("queue {q}"),
            (None, None) => "queue on Redis".into(),
        }
    );
    wait_forever(tasks).await
}

/// `n8ncap sim worker`: runs until interrupted.
pub async fn run_worker(cfg: WorkerConfig) -> anyhow::Result<()> {
    let mut tasks = JoinSet::new();
    watch_redis(cfg.redis.as_ref(), "worker", &mut tasks)?;
    let (conc, mode, limit) = (cfg.concurrency, cfg.runners_mode, cfg.internal_runner_limit);
    let a = worker::start(cfg, &mut tasks).await?;
    println!(
        "n8ncap sim worker: concurrency {conc}, runners {mode:?}{}, health/metrics http://{}, \
         task broker {}",
        if mode == RunnersMode::Internal {
            format!(" (limit {limit})")
        } else {
            String::new()
        },
        a.health,
        a.broker
    );
    // SIGTERM (a scale-down, `docker stop`): n8n 2.x's shutdown, then exit.
    tokio::select! {
        _ = crate::util::stop_signal() => {
            let stopped = a.stop.shut_down().await;
            println!(
                "n8ncap sim worker: stopped with {} executions running at the signal, {} Code \
                 task(s) aborted, {} left",
                stopped.held, stopped.aborted, stopped.left
            );
            Ok(())
        }
        _ = tasks.join_next() => anyhow::bail!("a simulator task stopped unexpectedly"),
    }
}

/// `n8ncap sim runner`: runs until interrupted.
pub async fn run_runner(cfg: RunnerConfig) -> anyhow::Result<()> {
    println!(
        "n8ncap sim runner: limit {}, task broker {}:{}",
        cfg.max_concurrency, cfg.broker.0, cfg.broker.1
    );
    // As PID 1 of a container the runner stops on SIGTERM at once (`docker stop`,
    // `docker-compose down`), as the runners' launcher does.
    tokio::select! {
        _ = runner::run(cfg) => {}
        _ = crate::util::stop_signal() => {}
    }
    Ok(())
}

/// `n8ncap sim all`: a whole stack in one process.
pub async fn run_all(cfg: StackConfig) -> anyhow::Result<()> {
    let mut watch = JoinSet::new();
    if !cfg.regular {
        watch_redis(cfg.redis.as_ref(), "all", &mut watch)?;
    }
    let stack = Stack::start(cfg).await?;
    let c = &stack.config;
    if c.regular {
        println!(
            "n8ncap sim all: {}",
            regular_words(c.production_limit, c.runner_limit)
        );
    } else {
        println!(
            "n8ncap sim all: {} worker(s) × concurrency {}, {} runner(s) per worker × limit {}",
            c.workers, c.worker_concurrency, c.runners_per_worker, c.runner_limit
        );
    }
    println!("  webhook: POST {}", stack.webhook_url);
    println!("  main metrics: {}/metrics", stack.main_url);
    for u in &stack.worker_metrics_urls {
        println!("  worker metrics: {u}");
    }
    // SIGTERM too: as PID 1 of a container (`docker stop`, `docker-compose down`) the
    // simulator stops at once, as n8n does.
    crate::util::stop_signal().await;
    Ok(())
}

fn regular_words(production_limit: Option<u32>, runner_limit: u32) -> String {
    format!(
        "regular mode: main runs the executions, production limit {}, internal runner limit \
         {runner_limit}",
        production_limit
            .map(|l| l.to_string())
            .unwrap_or_else(|| "none (-1)".into())
    )
}

async fn wait_forever(mut tasks: JoinSet<()>) -> anyhow::Result<()> {
    tokio::select! {
        _ = crate::util::stop_signal() => Ok(()),
        _ = tasks.join_next() => anyhow::bail!("a simulator task stopped unexpectedly"),
    }
}
