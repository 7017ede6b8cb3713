//! Command-line interface (clap). Only the shape of the arguments lives here; `main.rs` parses
//! them and hands the subcommand to `commands::run`, which dispatches; each command checks its
//! own settings.

use crate::error::BadInput;
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::report::Format;
use crate::util::parse_duration;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

mod drain;
mod outage;
mod postgres_restart;
mod recommend;
mod replay;
mod sim;
mod sweep;
pub use drain::{DrainArgs, SignalArg};
pub use outage::OutageArgs;
pub use postgres_restart::PostgresRestartArgs;
pub use recommend::{RecommendArgs, RecommendFormat};
pub use replay::ReplayArgs;
pub use sim::{ExecutionsModeArg, SimAllArgs, SimCommand, SimMainArgs, SimWorkerArgs};
pub use sweep::SweepArgs;

#[derive(Parser, Debug)]
#[command(
    name = "n8ncap",
    version,
    about = "How many concurrent executions does your n8n queue-mode deployment hold, and what caps it?",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start the built-in simulator, sweep it, and show what n8ncap reports (under a minute).
    Demo {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Drive staged load at a webhook and measure every stage (like k6, with checks first).
    Sweep(Box<SweepArgs>),
    /// Show the deployment — from the Docker API, or from compose files / Kubernetes manifests
    /// with -f: roles, capacity settings with their sources, runner pairing, replicas, limits.
    Inspect {
        /// Only the containers of this compose project.
        #[arg(long, conflicts_with = "files")]
        project: Option<String>,
        /// Read compose files or Kubernetes manifests instead of the Docker API (`-` is
        /// standard input).
        #[arg(short = 'f', long = "file")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Publish the runner metrics n8n does not expose (from the Docker API) for Prometheus.
    Exporter {
        /// Address to serve /metrics on.
        #[arg(long, default_value = "127.0.0.1:9464")]
        listen: std::net::SocketAddr,
        /// Only the containers of this compose project.
        #[arg(long)]
        project: Option<String>,
        /// How often the Docker API is read, e.g. 15s.
        #[arg(long, default_value = "15s")]
        refresh: String,
        /// Job time for the theoretical ceiling, e.g. 3s.
        #[arg(long)]
        job_time: Option<String>,
    },
    /// Print an importable Grafana dashboard for n8n queue mode (runner limit next to worker
    /// concurrency, throughput against the theoretical ceiling, slots vs waiting, RSS by role).
    Grafana {
        /// Name of the Prometheus data source to bind (default: chosen at import).
        #[arg(long)]
        datasource: Option<String>,
        /// A run's results directory: its measured ceiling and operating point (2/3 of it) as
        /// threshold lines on the throughput panel, and a panel of the alerts
        /// `recommend RUN --format prometheus-rules` writes.
        #[arg(long)]
        run: Option<std::path::PathBuf>,
    },
    /// Rebuild report.html of a results directory (from summary.json and timeline.jsonl).
    Report {
        /// The results directory.
        dir: PathBuf,
    },
    /// Check compose files (-f, merged in order), Kubernetes manifests (-f, `-` for stdin) or
    /// the running containers (--live) for the mistakes behind most queue-mode capacity
    /// incidents. Exit 1 when an error-level rule fires.
    Audit(AuditArgs),
    /// Name the limit that caps throughput in a saved sweep (results dir or summary.json).
    Diagnose(Box<DiagnoseArgs>),
    /// Propose settings from a break point with a 2/3 safety factor.
    Recommend(RecommendArgs),
    /// Compare runs: the first is the baseline, each later one is judged against it (verdict,
    /// ceiling, knee, latency and errors at matched levels), every difference against the
    /// runs' own intervals. Exit 99 when a --fail-if threshold is passed beyond noise.
    Compare(CompareArgs),
    /// How throughput grows with workers: saved runs of one deployment at several worker
    /// counts judged together — each count's ceiling and what an added worker gained, the
    /// Universal Scalability Law fitted, the shared limit that stops scale-out — and the
    /// workers a target rate needs (--target-rate).
    Scale(ScaleArgs),
    /// What a scale-down loses: a steady load at the operating point while one worker is
    /// stopped as a scale-down stops it (SIGTERM through the Docker API, or --stop-cmd); the
    /// requests it held counted by how they ended, the time until answers came back, and the
    /// loss the time budget predicted beside it.
    Drain(Box<DrainArgs>),
    /// What a Redis outage costs: a steady load while the queue's Redis is stopped for
    /// --outage and started again (through the Docker API, or --stop-cmd/--start-cmd); the
    /// requests in flight by how they ended, the n8n processes that exited (n8n exits once
    /// Redis is gone past QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD), whether and when answers came
    /// back, and the loss the threshold predicts. Redis is always started again.
    Outage(Box<OutageArgs>),
    /// What a Postgres restart costs: a steady load while the executions' Postgres is stopped
    /// for --down and started again (through the Docker API, or --stop-cmd/--start-cmd); the
    /// calls n8n answered 503 "Database is not ready!", when it answered OK again against its
    /// recovery's backoff (the next try past Postgres' return, not the outage's length), the
    /// requests in flight by how they ended and the executions left `running`. Postgres is
    /// always started again.
    PostgresRestart(Box<PostgresRestartArgs>),
    /// Would this autoscaler have kept up? Recorded arrivals replayed through the deployed
    /// ScaledObject or HPA and through the one n8ncap generates from the run, side by side:
    /// the backlog and queue wait over time with their peaks, the replicas, and the executions
    /// at risk at each scale-down.
    Replay(Box<ReplayArgs>),
    /// Run the n8n queue-mode simulator (roles read the same variables as real n8n).
    #[command(subcommand)]
    Sim(SimCommand),
    /// Print a shell completion script: `n8ncap completions bash >
    /// ~/.local/share/bash-completion/completions/n8ncap`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `n8ncap man > n8ncap.1 && man ./n8ncap.1`; `n8ncap man
    /// sweep` prints n8ncap-sweep(1), each subcommand's page from the same definitions as
    /// its --help.
    Man {
        /// A subcommand (sweep, diagnose, audit, …); none: the page of n8ncap itself.
        command: Option<String>,
    },
}

/// What the model needs to know about the deployment and the job. Unknown limits are read from
/// the run where possible (and said to be inferred).
#[derive(Args, Debug, Clone, Default)]
pub struct SettingsArgs {
    /// Effective worker concurrency per worker (--concurrency / N8N_CONCURRENCY_PRODUCTION_LIMIT).
    #[arg(long)]
    pub worker_concurrency: Option<u32>,
    /// N8N_RUNNERS_MAX_CONCURRENCY of each runner container.
    #[arg(long)]
    pub runner_limit: Option<u32>,
    /// DB_POSTGRESDB_POOL_SIZE of each worker (read from n8n's db_pool metrics when not given).
    #[arg(long)]
    pub db_pool_size: Option<u32>,
    /// Number of workers. `sweep` takes a list (1,2,4): a scale sweep, measured at each count
    /// (scaled by --scale-cmd, or for --project through the Docker API in worker/runner pairs).
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<u32>,
    /// Runners attached to each worker.
    #[arg(long)]
    pub runners_per_worker: Option<u32>,
    /// Job time S (slot held), e.g. 3s. Default: sleep_ms + wait_ms of the request body.
    #[arg(long)]
    pub job_time: Option<String>,
    /// Code time C (runner task held), e.g. 3s. Default: sleep_ms of the request body.
    #[arg(long)]
    pub code_time: Option<String>,
    /// N8N_RUNNERS_TASK_REQUEST_TIMEOUT in seconds (to recognise a worker without a runner;
    /// n8n's default 60 when not given).
    #[arg(long)]
    pub task_request_timeout: Option<f64>,
    /// EXECUTIONS_MODE of the deployment: regular = main runs every execution (no workers).
    #[arg(long, value_enum)]
    pub executions_mode: Option<ExecutionsModeArg>,
    /// Regular mode: N8N_CONCURRENCY_PRODUCTION_LIMIT (-1 = no limit, n8n's default).
    #[arg(long, allow_hyphen_values = true, requires = "executions_mode")]
    pub production_limit: Option<i64>,
}

/// Largest worker count, concurrency or runner limit a flag may give.
const MAX_SETTING: u32 = 100_000;

impl SettingsArgs {
    /// `--workers` as one count: a list is a scale sweep's (`sweep --workers 1,2,4`).
    fn one_count(&self) -> Result<Option<u32>, BadInput> {
        match self.workers.as_slice() {
            [] => Ok(None),
            [n] => Ok(Some(*n)),
            _ => Err(BadInput(
                "--workers takes one count here; a list of counts (1,2,4) is a scale sweep: \
                 n8ncap sweep --workers 1,2,4 --scale-cmd 'COMMAND {workers}'"
                    .into(),
            )),
        }
    }

    /// The settings these flags give, each sourced "flag --…"; bad values are bad input.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let secs = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<Sourced<f64>>> {
            let Some(t) = v else { return Ok(None) };
            let d = parse_duration(t).map_err(|e| BadInput(format!("--{flag}: {e}")))?;
            if d.is_zero() {
                return Err(BadInput(format!("--{flag} must be more than 0")).into());
            }
            Ok(Some(Sourced::new(
                d.as_secs_f64(),
                Provenance::Flag(format!("--{flag}")),
            )))
        };
        let positive = |flag: &str, v: Option<u32>| -> anyhow::Result<Option<Sourced<u32>>> {
            match v {
                Some(0) => Err(BadInput(format!("--{flag} must be at least 1")).into()),
                Some(n) if n > MAX_SETTING => Err(BadInput(format!(
                    "--{flag} {n} is beyond any deployment (at most {MAX_SETTING})"
                ))
                .into()),
                Some(n) => Ok(Some(Sourced::new(n, Provenance::Flag(format!("--{flag}"))))),
                None => Ok(None),
            }
        };
        let job_time = secs("job-time", &self.job_time)?;
        let code_time = secs("code-time", &self.code_time)?;
        if let (Some(j), Some(c)) = (&job_time, &code_time) {
            if c.value > j.value {
                return Err(BadInput(format!(
                    "--code-time ({:.3} s) cannot exceed --job-time ({:.3} s): the Code part is inside the job",
                    c.value, j.value
                ))
                .into());
            }
        }
        self.task_request_timeout()?;
        let mode = self.mode_settings()?;
        Ok(Settings {
            executions_mode: None,
            binary_data_mode: None,
            workers: positive("workers", self.one_count()?)?,
            worker_concurrency: positive("worker-concurrency", self.worker_concurrency)?,
            runner_limit: positive("runner-limit", self.runner_limit)?,
            runners_per_worker: match self.runners_per_worker {
                Some(n) if n > 1000 => {
                    return Err(BadInput(format!(
                        "--runners-per-worker {n} is beyond any deployment (at most 1000)"
                    ))
                    .into())
                }
                n => n.map(|n| Sourced::new(n, Provenance::Flag("--runners-per-worker".into()))),
            },
            // A job time alone means a job that is all Code.
            code_time: code_time.or_else(|| {
                job_time
                    .clone()
                    .map(|j| Sourced::new(j.value, Provenance::Flag("--job-time".into())))
            }),
            job_time,
            task_memory_mb: None,
            db_pool_size: positive("db-pool-size", self.db_pool_size)?,
            measured: Default::default(),
        }
        .or(mode))
    }

    /// `--executions-mode` and `--production-limit`: regular mode's one process and slots.
    fn mode_settings(&self) -> anyhow::Result<Settings> {
        use crate::model::settings::ExecutionsMode;
        match (self.executions_mode, self.production_limit) {
            (Some(ExecutionsModeArg::Regular), limit) => {
                let limit = match limit {
                    None | Some(-1) => None,
                    Some(l) if (1..=MAX_SETTING as i64).contains(&l) => Some(l as u32),
                    Some(l) => {
                        return Err(BadInput(format!(
                            "--production-limit {l}: use -1 (no limit) or 1 to {MAX_SETTING}"
                        ))
                        .into())
                    }
                };
                Ok(Settings::regular(
                    limit,
                    Provenance::Flag("--executions-mode regular".into()),
                ))
            }
            (Some(ExecutionsModeArg::Queue), Some(_)) => Err(BadInput(
                "--production-limit is regular mode's limit; in queue mode give \
                 --worker-concurrency (N8N_CONCURRENCY_PRODUCTION_LIMIT overrides each worker's \
                 --concurrency)"
                    .into(),
            )
            .into()),
            (Some(ExecutionsModeArg::Queue), None) => Ok(Settings {
                executions_mode: Some(Sourced::new(
                    ExecutionsMode::Queue,
                    Provenance::Flag("--executions-mode queue".into()),
                )),
                ..Settings::default()
            }),
            (None, _) => Ok(Settings::default()),
        }
    }

    /// `--task-request-timeout`, checked.
    pub fn task_request_timeout(&self) -> anyhow::Result<Option<f64>> {
        match self.task_request_timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => Err(BadInput(
                "--task-request-timeout must be a number of seconds above 0".into(),
            )
            .into()),
            t => Ok(t),
        }
    }
}

/// How a command prints its result: one `--format` for every command (`--json` is
/// `--format json`), tables fitted to the terminal unless `--wide`.
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Output format: table, json; sarif (audit), html (a run's report, a comparison) and
    /// markdown (a comparison, for a pull request) where they apply.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Tables as wide as their content (else the terminal's width, 100 columns when piped).
    #[arg(long)]
    pub wide: bool,
}

impl OutputArgs {
    /// The format asked for (table when none), refused before any work when `T` has no such
    /// form; `--wide` takes effect here.
    pub fn format<T: crate::report::Rendered>(&self, command: &str) -> Result<Format, BadInput> {
        if self.wide {
            crate::report::width::set_wide();
        }
        let f = match (self.json, self.format) {
            (true, _) => Format::Json,
            (false, f) => f.unwrap_or(Format::Table),
        };
        crate::report::check::<T>(f, command)
    }
}

#[derive(Args, Debug, Clone)]
pub struct ScaleArgs {
    /// Results directories or their summary.json, one per worker count (each run's settings
    /// say its count: a sweep with --project, --docker or --workers). Or none, with
    /// --prometheus: the worker counts a production history held, each judged from its
    /// saturated windows.
    #[arg(required_unless_present = "prometheus", conflicts_with = "prometheus", num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// Executions per second to plan for: the workers whose fitted ceiling holds it at 2/3.
    #[arg(long, value_name = "PER_SECOND")]
    pub target_rate: Option<f64>,
    #[command(flatten)]
    pub history: HistoryArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Results directories or their summary.json: the baseline first (old, then new).
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// Fail (exit 99) when a later run passes this beyond noise: ceiling<-5%, p95>+10% (a
    /// change in %), error-rate>+1 (in percentage points), or verdict (another limit caps).
    /// Repeatable.
    #[arg(long = "fail-if", value_name = "THRESHOLD")]
    pub fail_if: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// Compose file(s), merged in order as Docker Compose merges them, or Kubernetes manifests
    /// (`helm template … | n8ncap audit -f -`).
    #[arg(short = 'f', long = "file")]
    pub files: Vec<PathBuf>,
    /// Audit the running containers (Docker API) instead of files.
    #[arg(long, conflicts_with = "files")]
    pub live: bool,
    /// With --live: only this compose project.
    #[arg(long)]
    pub project: Option<String>,
    /// Also check what upgrading to this n8n version changes (removed variables, defaults that
    /// move), across the whole deployment.
    #[arg(long, value_enum, value_name = "VERSION")]
    pub upgrade: Option<crate::model::Upgrade>,
    /// A run of this deployment — a results directory or its summary.json (a sweep's, or
    /// `diagnose --prometheus … --out DIR`'s), or k6's --out json/csv file: check the time
    /// budget — the shutdown window, the runner task timeout, the job lock's margin, the
    /// autoscaler's scale-down — against the job times and event-loop lag it measured.
    #[arg(long, value_name = "DIR")]
    pub run: Option<PathBuf>,
    /// A Prometheus rules file or PrometheusRule manifest already deployed (repeatable; needs
    /// --run): its alerts on n8n's queue series whose thresholds are far from the measured
    /// capacity (a waiting-jobs threshold past what a webhook's caller can wait, a completion
    /// rate above the ceiling).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Name of an environment variable holding a Postgres DSN (host=… user=… dbname=… or
    /// postgres://…): the connection budget against the live max_connections, with the
    /// connections open now by application (read-only; the DSN is never shown). Alone (no -f,
    /// no --live) it audits the database of any deployment; a Postgres out of connections
    /// (SQLSTATE 53300) is a finding, not an error.
    #[arg(long, value_name = "VAR", conflicts_with = "postgres_file")]
    pub postgres_env: Option<String>,
    /// A file whose first line is that DSN.
    #[arg(long, value_name = "FILE")]
    pub postgres_file: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct DiagnoseArgs {
    /// A results directory or its summary.json (or give a k6 output below).
    #[arg(conflicts_with = "prometheus")]
    pub input: Option<PathBuf>,
    /// A k6 `--summary-export` file (the whole run as one load level).
    #[arg(long, conflicts_with_all = ["input", "k6_json", "prometheus"])]
    pub k6_summary: Option<PathBuf>,
    /// A k6 `--out json` (or `--out csv`) file of any executor: held VU steps and held
    /// arrival rates are the levels, ramps between them are windows. Repeat it for the outputs
    /// of one distributed run (k6-operator's pods): read as one run, clocks aligned.
    #[arg(long, conflicts_with_all = ["input", "prometheus"], visible_alias = "k6-csv")]
    pub k6_json: Vec<PathBuf>,
    /// Least warm-up left out at the start of each level of a k6 time series ("auto": two p50
    /// responses, at least 1 s; a given value is raised to one p50).
    #[arg(long, default_value = "auto")]
    pub k6_warmup: String,
    /// The JSON body the k6 script sent (to read sleep_ms/wait_ms as job time), e.g. '{"sleep_ms":3000}'.
    #[arg(long)]
    pub body: Option<String>,
    /// Read worker concurrency and runner limits from the running containers (Docker API).
    #[arg(long)]
    pub docker: bool,
    /// With --docker: only this compose project.
    #[arg(long)]
    pub project: Option<String>,
    #[command(flatten)]
    pub settings: SettingsArgs,
    #[command(flatten)]
    pub history: HistoryArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Production history from a Prometheus-compatible API (Prometheus, Thanos, Mimir,
/// VictoriaMetrics): no load test, the busy windows of a time range judged.
#[derive(Args, Debug, Clone, Default)]
pub struct HistoryArgs {
    /// The API's base URL, e.g. http://prometheus:9090 (credentials never in the URL).
    #[arg(long)]
    pub prometheus: Option<String>,
    /// How far back from --end (or now): 30m, 6h, 7d.
    #[arg(long, requires = "prometheus", conflicts_with = "start")]
    pub since: Option<String>,
    /// Start of the range: RFC 3339 (2026-11-24T14:00:00Z) or Unix seconds.
    #[arg(long, requires = "prometheus")]
    pub start: Option<String>,
    /// End of the range (default: now).
    #[arg(long, requires = "prometheus")]
    pub end: Option<String>,
    /// A label matcher selecting the deployment, repeatable: 'namespace="n8n-prod"', 'job=~"n8n.*"'.
    #[arg(long = "match", requires = "prometheus")]
    pub matchers: Vec<String>,
    /// The query step (default: the scrape interval, or the range ÷ 40 320 when coarser).
    #[arg(long, requires = "prometheus")]
    pub step: Option<String>,
    /// Window the range is cut into (default 60 s, at least 3 queue-gauge refreshes and 5 steps).
    #[arg(long, requires = "prometheus")]
    pub window: Option<String>,
    /// Name of an environment variable holding a bearer token.
    #[arg(long, requires = "prometheus")]
    pub prometheus_token_env: Option<String>,
    /// A file holding a bearer token.
    #[arg(long, requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,
    /// Name of an environment variable holding user:password for basic auth.
    #[arg(long, requires = "prometheus")]
    pub prometheus_basic_auth_env: Option<String>,
    /// A file holding user:password for basic auth.
    #[arg(long, requires = "prometheus")]
    pub prometheus_basic_auth_file: Option<PathBuf>,
    /// A PEM CA file to trust for an https Prometheus.
    #[arg(long = "prometheus-ca-cert", requires = "prometheus")]
    pub ca_cert: Option<PathBuf>,
    /// Timeout of each API request.
    #[arg(long, default_value = "30s", requires = "prometheus")]
    pub prometheus_timeout: String,
    /// The whole history's deadline (every request together): past it the read stops with an
    /// error that says so, and nothing is judged from a part.
    #[arg(long, default_value = "10m", requires = "prometheus")]
    pub deadline: String,
    /// Write summary.json and report.html here (from a history: the busy windows as stages,
    /// and history.json), for `compare`, `audit --run` and `report`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The cores of the one host main and its workers run on (a compose VM), when Prometheus
    /// scrapes no node_exporter there: n8n's processes' CPU is read against them.
    #[arg(long, requires = "prometheus")]
    pub host_cores: Option<f64>,
}

impl HistoryArgs {
    /// --host-cores checked: a count of cores a host can have.
    pub fn host_cores(&self) -> Result<Option<f64>, BadInput> {
        match self.host_cores {
            Some(c) if !(c.is_finite() && (0.1..=4096.0).contains(&c)) => Err(BadInput(format!(
                "--host-cores {c}: give the cores of n8n's host, from 0.1 to 4096 (nproc on it), e.g. 2"
            ))),
            c => Ok(c),
        }
    }
}

/// A target rate checked: executions per second above 0, within what any deployment runs.
pub fn check_target_rate(t: f64) -> Result<(), BadInput> {
    // A thousandth of an execution a second (one every 17 minutes) is the least a plan is for.
    if t.is_finite() && (1e-3..=1e7).contains(&t) {
        return Ok(());
    }
    Err(BadInput(format!(
        "--target-rate {t}: give executions per second from 0.001 to 10 000 000, e.g. 200"
    )))
}
