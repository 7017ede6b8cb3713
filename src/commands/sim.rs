//! `n8ncap sim`: the simulator's roles started from the command line (and `sim n8n`, which
//! plays n8n's own command line in a compose stack).

use crate::cli::SimCommand;
use crate::error::BadInput;
use crate::sim;
use crate::sim::config::{self, CpuVar};
use crate::util::process_env;
use crate::wire::resp::RedisUrl;
use std::time::Duration;

pub(super) async fn run(s: SimCommand) -> anyhow::Result<()> {
    let env = process_env;
    match s {
        SimCommand::Main(a) => {
            let mut cfg =
                config::MainConfig::from_env(&env, a.port, Duration::from_millis(a.overhead_ms))?;
            cfg.redis = a.redis.as_deref().map(RedisUrl::parse).transpose()?;
            cfg.cpu = config::sim_cpu(&env, a.cpu_ms, CpuVar::Main)?;
            for w in &a.workflows {
                cfg.workflows.add(w)?;
            }
            sim::run_main(cfg).await
        }
        SimCommand::Worker(a) => {
            let mut cfg = config::WorkerConfig::from_env(
                &env,
                a.concurrency,
                Duration::from_millis(a.overhead_ms),
            )?;
            cfg.redis = a.redis.as_deref().map(RedisUrl::parse).transpose()?;
            cfg.cpu = config::sim_cpu(&env, a.cpu_ms, CpuVar::Worker)?;
            sim::run_worker(cfg).await
        }
        SimCommand::Runner => sim::run_runner(config::RunnerConfig::from_env(&env)?).await,
        // While it still waits for its Redis, `docker stop` ends it at once too; once it
        // runs, the role answers the signal itself (a worker's shutdown waits for its jobs, as
        // n8n's does: a select around the running role would end it 0.1 s after SIGTERM).
        SimCommand::N8n { args } => {
            let role = tokio::select! {
                r = sim_n8n(args) => r?,
                _ = crate::util::stop_signal() => return Ok(()),
            };
            match role {
                N8nRole::Worker(cfg) => sim::run_worker(*cfg).await,
                N8nRole::Main(cfg) => sim::run_main(*cfg).await,
            }
        }
        SimCommand::All(a) => {
            let w = config::WorkerConfig::from_env(&env, a.concurrency, Duration::ZERO)?;
            let port = match a.port {
                Some(p) => p,
                None => crate::util::env_parse(&env, "N8N_PORT", 5678u16, "a port number")?,
            };
            let runner_limit = match a.runner_limit {
                Some(0) => return Err(BadInput("--runner-limit must be at least 1".into()).into()),
                Some(l) => l,
                None => config::runner_limit(&env)?,
            };
            let m = config::MetricsConfig::from_env(&env, true)?;
            let mut workflows = config::Workflows::default();
            for w in &a.workflows {
                workflows.add(w)?;
            }
            let listen = crate::util::env_parse(
                &env,
                "N8N_LISTEN_ADDRESS",
                std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                "an IP address",
            )?;
            sim::run_all(sim::StackConfig {
                listen,
                port,
                workers: a.workers.max(1),
                worker_concurrency: w.concurrency,
                runners_per_worker: a.runners_per_worker,
                runner_limit,
                task_request_timeout: w.task_request_timeout,
                queue_metrics_interval: m.queue_metrics_interval,
                event_bus_metrics: m.event_bus_metrics,
                overhead: Duration::from_millis(a.overhead_ms),
                worker_cpu: config::sim_cpu(&env, a.cpu_ms, CpuVar::Worker)?,
                main_cpu: config::sim_cpu(&env, a.main_cpu_ms, CpuVar::Main)?,
                redis: a.redis.as_deref().map(RedisUrl::parse).transpose()?,
                workflows,
                regular: a.executions_mode == crate::cli::ExecutionsModeArg::Regular,
                production_limit: config::production_limit(&env)?,
                db: crate::sim::db::DbConfig::from_env(&env)?,
            })
            .await
        }
    }
}

/// The role `sim n8n` plays, configured and with its Redis found, not yet started.
enum N8nRole {
    Worker(Box<config::WorkerConfig>),
    Main(Box<config::MainConfig>),
}

/// `sim n8n ARGS`: the n8n command line (main, or `worker`) read into its role's settings, its
/// Redis found first.
async fn sim_n8n(args: Vec<String>) -> anyhow::Result<N8nRole> {
    let env = process_env;
    let overhead = Duration::from_millis(20);
    match args.first().map(String::as_str) {
        Some("worker") => {
            let conc = match crate::topology::concurrency_flag(&args) {
                Some(Ok(c)) => Some(c),
                Some(Err(bad)) => {
                    return Err(BadInput(format!("--concurrency {bad:?} is not a number")).into())
                }
                None => None,
            };
            let mut cfg = config::WorkerConfig::from_env(&env, conc, overhead)?;
            cfg.cpu = config::sim_cpu(&env, None, CpuVar::Worker)?;
            cfg.redis = sim_n8n_redis(&env, "worker").await?;
            Ok(N8nRole::Worker(Box::new(cfg)))
        }
        role @ (None | Some("start") | Some("webhook")) => {
            let mut cfg = config::MainConfig::from_env(&env, None, overhead)?;
            let intake = match role {
                Some("webhook") => CpuVar::Webhook,
                _ => CpuVar::Main,
            };
            cfg.cpu = config::sim_cpu(&env, None, intake)?;
            if let Some(r) = cfg.regular.as_mut() {
                r.cpu = config::sim_cpu(&env, None, CpuVar::Worker)?;
            }
            // Regular mode has no queue: nothing to wait for.
            if cfg.regular.is_none() {
                cfg.redis = sim_n8n_redis(&env, "main").await?;
            }
            Ok(N8nRole::Main(Box::new(cfg)))
        }
        Some(other) => Err(BadInput(format!(
            "sim n8n: {other:?} is not an n8n command the simulator plays (worker, webhook, start)"
        ))
        .into()),
    }
}

/// `sim n8n` plays the n8n command line in a compose stack: when QUEUE_BULL_REDIS_HOST names a
/// real Redis (it answers PING), the queue lives there under Bull's keys, as in n8n; when it
/// names the simulator's main (the stacks without a Redis service), main serves the queue. The
/// Redis may start after this container: an unreachable host is retried every half second, and
/// once it was for `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` (10 s) the process exits with n8n's
/// words, as n8n does (a restart policy starts it again; main's own host serves the queue at
/// once). Each decision is logged with the address.
async fn sim_n8n_redis(
    env: &dyn Fn(&str) -> Option<String>,
    role: &str,
) -> anyhow::Result<Option<RedisUrl>> {
    use crate::wire::resp::{probe, Probe};
    let Some(host) = env("QUEUE_BULL_REDIS_HOST").filter(|h| !h.trim().is_empty()) else {
        return Ok(None);
    };
    let port: u16 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_PORT", 6379, "a port number")?;
    let db: u32 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_DB", 0, "a database number")?;
    let threshold = config::redis_timeout_threshold(env)?;
    let deadline = std::time::Instant::now() + threshold;
    let mut said = false;
    loop {
        match probe(&host, port).await {
            Probe::Redis => {
                eprintln!(
                    "n8ncap sim n8n {role}: the queue is on Redis at {host}:{port} (db {db}, Bull's keys)"
                );
                return Ok(Some(RedisUrl::new(
                    &host,
                    port,
                    env("QUEUE_BULL_REDIS_PASSWORD"),
                    db,
                )));
            }
            Probe::NotRedis => {
                eprintln!(
                    "n8ncap sim n8n {role}: {host}:{port} is not a Redis (no PONG): the queue is \
                     the simulator's own, served by main"
                );
                return Ok(None);
            }
            Probe::Unreachable if role == "main" && crate::wire::resp::is_own_host(&host).await => {
                eprintln!(
                    "n8ncap sim n8n main: QUEUE_BULL_REDIS_HOST {host} is this container: main \
                     serves the simulator's queue on port {port}"
                );
                return Ok(None);
            }
            Probe::Unreachable | Probe::Silent if std::time::Instant::now() >= deadline => {
                let s = format!("{}s", threshold.as_secs_f64().round());
                eprintln!("Unable to connect to Redis after trying to connect for {s}");
                eprintln!("Exiting process due to Redis connection error");
                anyhow::bail!(
                    "sim n8n {role}: nothing answered at QUEUE_BULL_REDIS_HOST {host}:{port} for \
                     QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD ({s})"
                );
            }
            Probe::Unreachable | Probe::Silent => {
                if !said {
                    eprintln!(
                        "n8ncap sim n8n {role}: waiting for QUEUE_BULL_REDIS_HOST {host}:{port} \
                         to answer"
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
