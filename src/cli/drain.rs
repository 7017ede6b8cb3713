//! `n8ncap drain`'s arguments.

use super::OutputArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct DrainArgs {
    /// The webhook to load (POST).
    #[arg(long)]
    pub url: String,
    /// Arrivals per second; else the operating point of --run (2/3 of its measured ceiling).
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// A run of the same deployment (results directory or summary.json): its ceiling gives
    /// the rate, its job times the prediction.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// The load's length.
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// When the worker is stopped, from the load's start.
    #[arg(long, default_value = "20s")]
    pub stop_after: String,
    /// The start left out of the "before" figures.
    #[arg(long, default_value = "5s")]
    pub warmup: String,
    /// The compose project whose worker is stopped through the Docker API (SIGTERM, SIGKILL
    /// after the grace) and started again once it exited.
    #[arg(long, conflicts_with = "stop_cmd")]
    pub project: Option<String>,
    /// The worker container to stop (default: the project's first worker by name).
    #[arg(long, requires = "project")]
    pub worker: Option<String>,
    /// Docker's grace before SIGKILL, e.g. 30s (default: the container's own stop timeout, else
    /// Docker's 10 s — what `docker compose stop` and a scale-down give).
    #[arg(long, requires = "project")]
    pub grace: Option<String>,
    /// Leave the stopped worker stopped (a scale-down that stays down).
    #[arg(long, requires = "project")]
    pub no_restart: bool,
    /// How the worker is stopped: TERM (a scale-down: SIGTERM, SIGKILL after the grace) or KILL
    /// (SIGKILL at once, through the Docker API: what an OOM kill or a too-short
    /// terminationGracePeriodSeconds does). With --stop-cmd: the signal your command sends.
    #[arg(long, value_enum, default_value = "term", ignore_case = true)]
    pub signal: SignalArg,
    /// For any other deployment: the command that stops one worker the way a scale-down does
    /// (e.g. `kubectl delete pod n8n-worker-abc`); run with `sh -c`, its status and output kept.
    #[arg(long)]
    pub stop_cmd: Option<String>,
    /// Workers sharing the load (read from the project with --project).
    #[arg(long)]
    pub workers: Option<u32>,
    /// The stopped worker's N8N_GRACEFUL_SHUTDOWN_TIMEOUT, e.g. 30s (read from the container
    /// with --project; n8n's default 30 s otherwise).
    #[arg(long)]
    pub shutdown_timeout: Option<String>,
    /// main's /metrics, for n8n's failed-executions counter over the run: URL or main=URL, as
    /// sweep takes it (the counter is on main only).
    #[arg(long)]
    pub metrics: Option<String>,
    /// The request body (JSON); default: the body of --run's sweep (whose job times the
    /// prediction uses), else {}.
    #[arg(long)]
    pub body: Option<String>,
    /// How long a request waits for its answer before it counts as never answered (default:
    /// long enough for n8n's answer to a killed worker's executions — the worker's
    /// QUEUE_WORKER_LOCK_DURATION + 2 × QUEUE_WORKER_STALLED_INTERVAL + 5 s, 125 s with n8n's
    /// defaults).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Save the drain (drain.json) in this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite the drain.json an earlier drain left in --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `drain --signal`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalArg {
    Term,
    Kill,
}

impl From<SignalArg> for crate::model::drain::StopSignal {
    fn from(s: SignalArg) -> Self {
        match s {
            SignalArg::Term => crate::model::drain::StopSignal::Term,
            SignalArg::Kill => crate::model::drain::StopSignal::Kill,
        }
    }
}
