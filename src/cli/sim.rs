//! `n8ncap sim`'s arguments: the simulated n8n's main, worker and whole stack.

use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// n8n main: webhook, queue, /metrics. Reads N8N_PORT, N8N_LISTEN_ADDRESS, N8N_METRICS*,
    /// QUEUE_BULL_REDIS_PORT (the simulated queue listens there).
    Main(SimMainArgs),
    /// n8n worker: slots, task broker, health/metrics server. Reads N8N_CONCURRENCY_PRODUCTION_LIMIT,
    /// QUEUE_BULL_REDIS_HOST/PORT, QUEUE_HEALTH_CHECK_PORT, N8N_RUNNERS_*, N8N_METRICS*.
    Worker(SimWorkerArgs),
    /// Task runner (n8nio/runners): reads N8N_RUNNERS_TASK_BROKER_URI, N8N_RUNNERS_MAX_CONCURRENCY,
    /// N8N_RUNNERS_AUTH_TOKEN.
    Runner,
    /// Every role in one process.
    All(SimAllArgs),
    /// The n8n command line (`n8n`, `n8n worker --concurrency=N`, `n8n webhook`) mapped to the
    /// simulator's roles, so an image built with this entrypoint runs unchanged compose files.
    N8n {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Args, Debug)]
pub struct SimMainArgs {
    /// Listen port (default: N8N_PORT, else 5678).
    #[arg(long)]
    pub port: Option<u16>,
    /// Simulator only: ms main spends per execution outside worker slots.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub overhead_ms: u64,
    /// Simulator only: CPU ms main burns per execution on its one JavaScript thread (default:
    /// SIM_MAIN_CPU_MS, else 13 — what n8n 2.41.1's main spent; 0 for a main that costs
    /// nothing).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub cpu_ms: Option<u64>,
    /// Put the queue on this Redis (Bull's keys: bull:jobs:wait, bull:jobs:active), e.g.
    /// redis://127.0.0.1:6379.
    #[arg(long)]
    pub redis: Option<String>,
    /// Another webhook path with its workflow's defaults (see `sim all --help`). Repeatable.
    #[arg(long = "workflow", value_name = "PATH=JSON")]
    pub workflows: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SimWorkerArgs {
    /// Jobs this worker runs at once (n8n worker --concurrency; default 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: Option<u32>,
    /// Simulator only: ms each job holds its slot besides its own work.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub overhead_ms: u64,
    /// Simulator only: CPU ms each execution burns on the worker's one JavaScript thread
    /// (default: SIM_WORKER_CPU_MS, else 50 — what an n8n 2.41.1 worker spent per webhook → Code →
    /// respond execution; 0 for a worker that costs nothing).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub cpu_ms: Option<u64>,
    /// Take jobs from this Redis (Bull's keys) instead of main's simulated queue.
    #[arg(long)]
    pub redis: Option<String>,
}

#[derive(Args, Debug)]
pub struct SimAllArgs {
    /// Port for main's webhook and /metrics (default: N8N_PORT, else 5678).
    #[arg(long)]
    pub port: Option<u16>,
    /// Workers (1–1000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub workers: u32,
    /// Worker concurrency (N8N_CONCURRENCY_PRODUCTION_LIMIT overrides it, as in n8n).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: Option<u32>,
    /// Runners attached to each worker (0 = none: Code tasks time out; at most 100).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub runners_per_worker: u32,
    /// Limit of each runner (default: N8N_RUNNERS_MAX_CONCURRENCY, else 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub runner_limit: Option<u32>,
    /// Simulator only: total fixed overhead per execution in ms (half on main, half in the slot).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub overhead_ms: u64,
    /// Simulator only: CPU ms each execution burns on its worker's one JavaScript thread
    /// (default: SIM_WORKER_CPU_MS, else 50; each runner's Code task: SIM_RUNNER_CPU_MS, else 5).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub cpu_ms: Option<u64>,
    /// Simulator only: CPU ms each execution burns on main's JavaScript thread (default:
    /// SIM_MAIN_CPU_MS, else 13 — what n8n 2.41.1's main spent).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub main_cpu_ms: Option<u64>,
    /// Put the queue on this Redis (Bull's keys).
    #[arg(long)]
    pub redis: Option<String>,
    /// queue (workers take the executions) or regular (main runs them, at most
    /// N8N_CONCURRENCY_PRODUCTION_LIMIT at once, Code on its internal runner).
    #[arg(long, value_enum, env = "EXECUTIONS_MODE", default_value = "queue")]
    pub executions_mode: ExecutionsModeArg,
    /// Another webhook path with its workflow's defaults, e.g.
    /// --workflow notify='{"sleep_ms":300,"code":false}' (a workflow without a Code node).
    /// Repeatable; /webhook/load (everything from the body) is always there.
    #[arg(long = "workflow", value_name = "PATH=JSON")]
    pub workflows: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionsModeArg {
    Queue,
    Regular,
}
