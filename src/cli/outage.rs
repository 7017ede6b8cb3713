//! `n8ncap outage`'s arguments.

use super::OutputArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct OutageArgs {
    /// The webhook to load (POST).
    #[arg(long)]
    pub url: String,
    /// Arrivals per second (an open model: a webhook's callers do not wait for each other).
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: f64,
    /// The load's length.
    #[arg(long, default_value = "45s")]
    pub duration: String,
    /// When Redis is stopped, from the load's start.
    #[arg(long, default_value = "10s")]
    pub stop_after: String,
    /// How long Redis stays down before it is started again (compare it with n8n's
    /// QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD, 10 s by default).
    #[arg(long, default_value = "15s")]
    pub outage: String,
    /// The compose project whose Redis is stopped and started again through the Docker API;
    /// its n8n containers are read back afterwards (state, exit code, restarts, last log line).
    #[arg(long, conflicts_with = "stop_cmd")]
    pub project: Option<String>,
    /// The Redis container to stop (default: the project's one Redis).
    #[arg(long, requires = "project")]
    pub redis_container: Option<String>,
    /// For any other deployment: the command that stops Redis (run with `sh -c`).
    #[arg(long, requires = "start_cmd")]
    pub stop_cmd: Option<String>,
    /// The command that starts Redis again: always run after --stop-cmd, also on an error or
    /// an interrupt.
    #[arg(long, requires = "stop_cmd")]
    pub start_cmd: Option<String>,
    /// n8n's QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD, e.g. 10s (read from the containers with
    /// --project; n8n's 10 s otherwise).
    #[arg(long)]
    pub threshold: Option<String>,
    /// The request body (JSON).
    #[arg(long, default_value = "{}")]
    pub body: String,
    /// How long a request waits for its answer before it counts as never answered.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Save the outage (outage.json) in this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite the outage.json an earlier outage left in --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}
