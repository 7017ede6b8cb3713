//! `n8ncap sweep`'s arguments: the profile and its overrides, the target, what is watched
//! beside the load, and a scale sweep's worker counts.

use super::{OutputArgs, SettingsArgs};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Profile name (smoke, baseline, steady, breakpoint, memory, arrival, mix, binary, ramp) or
    /// path to a YAML file (default: steady). The built-in profiles name no target: give --url.
    #[arg(long, short = 'p')]
    pub profile: Option<String>,
    /// Webhook URL (overrides the profile's).
    #[arg(long)]
    pub url: Option<String>,
    /// Closed-model stages: in-flight counts, e.g. 1,10,20.
    #[arg(long, value_delimiter = ',')]
    pub vus: Option<Vec<u32>>,
    /// Open-model stages: arrival rates per second, e.g. 2,5,10.
    #[arg(long, value_delimiter = ',', conflicts_with = "vus")]
    pub rates: Option<Vec<f64>>,
    /// Duration of every stage's steady part, e.g. 30s.
    #[arg(long)]
    pub stage_duration: Option<String>,
    /// Warm-up at the start of every stage, excluded from the figures, e.g. 5s.
    #[arg(long)]
    pub warmup: Option<String>,
    /// JSON request body, e.g. '{"sleep_ms":3000}'.
    #[arg(long)]
    pub body: Option<String>,
    /// Per-request timeout, e.g. 120s.
    #[arg(long)]
    pub timeout: Option<String>,
    /// https: PEM file of CA certificates to trust besides the public roots.
    #[arg(long)]
    pub ca_cert: Option<String>,
    /// https: accept any certificate (self-signed test hosts only).
    #[arg(long)]
    pub insecure: bool,
    /// Results directory (default: n8ncap-results/<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write no results directory.
    #[arg(long, conflicts_with = "out")]
    pub no_out: bool,
    /// Overwrite the results in an --out directory that already holds a run.
    #[arg(long)]
    pub force: bool,
    /// Stop after the first stage whose thresholds fail.
    #[arg(long)]
    pub abort_on_fail: bool,
    /// Send no pre-flight request: by default one request goes to each target before any load,
    /// and a refused connection or a 400/401/403/404/405/410 stops the run (exit 2).
    #[arg(long)]
    pub no_preflight: bool,
    /// n8n /metrics to watch, as URL or role=URL (main, worker, webhook); repeatable. Main's
    /// queue gauges give slots taken and waiting.
    #[arg(long = "metrics")]
    pub metrics: Vec<String>,
    /// How often metrics and container stats are sampled, e.g. 1s.
    #[arg(long, default_value = "1s")]
    pub scrape_interval: String,
    /// Watch the containers (Docker API, DOCKER_HOST honoured): settings and memory/CPU.
    #[arg(long)]
    pub docker: bool,
    /// Only the containers of this compose project (implies --docker).
    #[arg(long)]
    pub project: Option<String>,
    /// Sample Bull's queue in this Redis every interval (LLEN bull:jobs:wait / active;
    /// read-only), e.g. redis://127.0.0.1:6379. Finer than n8n's 20 s queue gauges.
    #[arg(long)]
    pub redis: Option<String>,
    /// QUEUE_BULL_PREFIX of the deployment (for --redis).
    #[arg(long, default_value = "bull")]
    pub bull_prefix: String,
    /// Read Postgres beside the load through the DSN in this variable (host=… user=… dbname=…
    /// or postgres://…; read-only, never shown): its connections every interval and, at the
    /// end, the run's executions left running in n8n's table.
    #[arg(long, value_name = "VAR", conflicts_with = "postgres_file")]
    pub postgres_env: Option<String>,
    /// A file whose first line is that DSN.
    #[arg(long, value_name = "FILE")]
    pub postgres_file: Option<PathBuf>,
    /// n8n's N8N_METRICS_QUEUE_METRICS_INTERVAL in seconds, to flag stages shorter than it.
    #[arg(long, default_value_t = 20.0)]
    pub queue_metrics_interval: f64,
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Scale sweep: the command that sets the worker count, `{workers}` replaced by each count
    /// of --workers (run with `sh -c`; it should return once the workers run, e.g. `kubectl
    /// scale deploy/n8n-worker --replicas={workers} && kubectl rollout status
    /// deploy/n8n-worker`).
    #[arg(long, value_name = "COMMAND")]
    pub scale_cmd: Option<String>,
    /// Scale sweep: the worker count to return to when the sweep ends, is stopped or fails (the
    /// count running now; 0–1000, as --workers). With --redis and no --restore-workers, the
    /// worker processes connected to the queue are counted instead.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub restore_workers: Option<u32>,
    /// Scale sweep: wait this long after the command returned, before the load (new workers
    /// connect to Redis and their runners to them), e.g. 10s.
    #[arg(long, default_value = "10s")]
    pub scale_settle: String,
    /// Run every stage K times in a row: gives confidence intervals on throughput and p95.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// Choose the levels as the run goes: 1 in flight, then ×2 until saturated (or thresholds
    /// fail), then refine the knee to ±10 %; each stage ends once its throughput is steady.
    #[arg(long, conflicts_with_all = ["vus", "rates", "repeat"])]
    pub adaptive: bool,
    /// Adaptive: never more in flight than this.
    #[arg(long, default_value_t = 200)]
    pub max_vus: u32,
    /// Adaptive: wall time for the whole search, e.g. 5m.
    #[arg(long, default_value = "5m")]
    pub budget: String,
    /// Adaptive: a stage ends once the 95 % half-width of its throughput is under this share.
    #[arg(long, default_value_t = 0.03)]
    pub precision: f64,
    /// Adaptive: a stage ends at this length (after its warm-up) whatever its precision.
    #[arg(long, default_value = "60s")]
    pub max_stage: String,
    /// Adaptive: past the knee, keep raising the load until thresholds fail (never beyond
    /// --max-vus).
    #[arg(long, requires = "adaptive")]
    pub to_failure: bool,
    /// Adaptive, set by a scale sweep (no flag): the level tried right after the baseline, the
    /// knee the previous count reached scaled to this count's workers.
    #[arg(skip)]
    pub head_start: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl SweepArgs {
    /// The profile to run: `-p`, else the default `steady`.
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or("steady")
    }
}
