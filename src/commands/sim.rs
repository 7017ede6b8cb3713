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
        SimCommand::All(a) => sim::run_all(stack(&a)?).await,
    }
}

/// The role `sim n8n` plays, configured and with its Redis found, not yet started.
enum N8nRole {
    Worker(Box<config::WorkerConfig>),
    Main(Box<config::MainConfig>),
}

/// `sim all`: the whole stack in one process, from the flags and n8n's variables.
fn stack(a: &crate::cli::SimAllArgs) -> anyhow::Result<sim::StackConfig> {
    let env = process_env;
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
    Ok(sim::StackConfig {
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
        runner_cpu: config::sim_cpu(&env, None, CpuVar::Runner)?,
        main_cpu: config::sim_cpu(&env, a.main_cpu_ms, CpuVar::Main)?,
        redis: a.redis.as_deref().map(RedisUrl::parse).transpose()?,
        workflows,
        regular: a.executions_mode == crate::cli::ExecutionsModeArg::Regular,
        production_limit: config::production_limit(&env)?,
        db: crate::sim::db::DbConfig::from_env(&env)?,
    })
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
            cfg.redis = sim::queue_redis::find(&env, "worker").await?;
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
                cfg.redis = sim::queue_redis::find(&env, "main").await?;
            }
            Ok(N8nRole::Main(Box::new(cfg)))
        }
        Some(other) => Err(BadInput(format!(
            "sim n8n: {other:?} is not an n8n command the simulator plays (worker, webhook, start)"
        ))
        .into()),
    }
}
