//! `n8ncap replay`'s arguments.

use super::OutputArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// A run of the deployment (results directory or summary.json): one worker's ceiling and
    /// the job time, and the autoscaler n8ncap generates from them.
    pub run: PathBuf,
    /// The arrivals to replay: a history's results directory (`diagnose --prometheus … --out
    /// DIR`), a k6 output (JSON or CSV), or a CSV of `seconds,rate` points.
    #[arg(long)]
    pub arrivals: PathBuf,
    /// The deployment — manifests with its ScaledObject or HPA, or compose files.
    #[arg(short = 'f', long = "file")]
    pub files: Vec<PathBuf>,
    /// The same from a running compose project (Docker API).
    #[arg(long, conflicts_with = "files")]
    pub project: Option<String>,
    /// Seconds from a new pod's creation to its first job (image pull, start, Redis).
    #[arg(long, default_value = "30s")]
    pub pod_start: String,
    /// The longest queue wait the generated object may let a job have on these arrivals: it is
    /// tuned by replaying candidates — the fewest worker-hours within this wait that lose
    /// nothing at scale-down.
    #[arg(long, default_value = "5s")]
    pub max_wait: String,
    #[command(flatten)]
    pub output: OutputArgs,
}
