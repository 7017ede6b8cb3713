//! One stage of a sweep as measured: [`StageResult`], written to `stages.jsonl` as the stage
//! ends and kept in `summary.json`. The load engine fills the request figures, the observer the
//! `queue`, `endpoints` and `containers` parts; neither judges.

use super::role::Role;
use serde::{Deserialize, Serialize};

pub use super::db::{names_db_refusal, names_no_data, DatabaseObserved, DbPoolObserved};
use std::collections::BTreeMap;

/// The load model, decided first: it says what a result measures (processing or intake).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadModel {
    /// N virtual users, each sends and waits for the answer: in flight = N. Measures processing
    /// capacity when the webhook answers after the last node.
    Closed,
    /// A fixed arrival rate, not waiting for answers (capped by `max_vus`). Measures intake.
    Open,
}

/// A load level, typed: requests in flight (closed model) or arrivals per second (open model).
/// The two are never interchangeable; an open level's in-flight count is derived (Little's law).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadLevel {
    InFlight(u32),
    /// Mean offered arrival rate over the stage (per second).
    Rate(f64),
}

impl LoadLevel {
    /// "20 in flight" or "5.0 arrivals/s".
    pub fn words(&self) -> String {
        match self {
            LoadLevel::InFlight(n) => format!("{n} in flight"),
            LoadLevel::Rate(r) => format!("{r:.1} arrivals/s"),
        }
    }

    /// The level's number, for ordering levels of one model and for chart axes.
    pub fn magnitude(&self) -> f64 {
        match self {
            LoadLevel::InFlight(n) => *n as f64,
            LoadLevel::Rate(r) => *r,
        }
    }
}

/// What a stretch of production history adds to its stage's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistoryFigures {
    /// Windows pooled into the stage (a saturated period is one stage).
    pub windows: u32,
    /// Mean of `n8n_workflow_execution_duration_seconds` over the stage: the time an
    /// execution held its slot, waiting for a runner included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_time_s: Option<f64>,
    /// Executions that mean is over.
    #[serde(default)]
    pub executions: f64,
    /// The host's CPU over the stage (node_exporter, the history's `host_by`): busy cores and
    /// the cores it has, over the windows read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::record::history::HostCpu>,
}

/// The metrics a threshold can name, as k6 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ThresholdMetric {
    #[serde(rename = "http_req_failed")]
    HttpReqFailed,
    #[serde(rename = "http_req_duration")]
    HttpReqDuration,
    #[serde(rename = "checks")]
    Checks,
    #[serde(rename = "http_reqs")]
    HttpReqs,
    #[serde(rename = "dropped_iterations")]
    DroppedIterations,
}

impl ThresholdMetric {
    pub const ALL: [ThresholdMetric; 5] = [
        ThresholdMetric::HttpReqFailed,
        ThresholdMetric::HttpReqDuration,
        ThresholdMetric::Checks,
        ThresholdMetric::HttpReqs,
        ThresholdMetric::DroppedIterations,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            ThresholdMetric::HttpReqFailed => "http_req_failed",
            ThresholdMetric::HttpReqDuration => "http_req_duration",
            ThresholdMetric::Checks => "checks",
            ThresholdMetric::HttpReqs => "http_reqs",
            ThresholdMetric::DroppedIterations => "dropped_iterations",
        }
    }

    pub fn parse(name: &str) -> Option<ThresholdMetric> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl std::fmt::Display for ThresholdMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A threshold evaluated on some aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    pub metric: ThresholdMetric,
    pub expr: String,
    pub observed: Option<f64>,
    pub passed: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub mean_ms: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseStat {
    pub mean_ms: f64,
    pub p95_ms: f64,
}

/// k6's split of a request: blocked (waiting for a connection), connecting (TCP), TLS,
/// sending, waiting (time to first byte), receiving. Connecting counts new connections only.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Phases {
    pub blocked: PhaseStat,
    pub connecting: PhaseStat,
    pub tls_handshaking: PhaseStat,
    pub sending: PhaseStat,
    pub waiting: PhaseStat,
    pub receiving: PhaseStat,
}

/// Failed requests by class.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ErrorCounts {
    pub connect_refused: u64,
    pub connect_other: u64,
    /// TLS handshake failed (certificate not trusted, protocol).
    #[serde(default)]
    pub tls: u64,
    pub timeout: u64,
    /// Connection broken mid-request.
    pub io: u64,
    /// Responses with status ≥ 400, by status.
    pub http_status: BTreeMap<u16, u64>,
    /// Responses with a good status that failed a check.
    pub check_failed: u64,
    /// Failed responses whose body carries Postgres' refusal of a connection (SQLSTATE 53300,
    /// "too many clients"): counted among `http_status` too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_refused: u64,
    /// Good-status answers carrying n8n's "Workflow executed successfully but the last node did
    /// not return any data": counted among the good ones (a workflow may answer so), and what
    /// a real n8n answers when main cannot read the execution's data back from its database.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub no_data: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckResult {
    pub name: String,
    pub passes: u64,
    pub fails: u64,
}

/// Where the queue figures came from.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum QueueSource {
    /// LLEN of Bull's lists, read directly.
    Redis,
    /// n8n main's queue gauges.
    #[default]
    Metrics,
}

/// Queue state during the stage (see `observe`): from Redis when sampled, else from n8n main's
/// queue gauges.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueObserved {
    #[serde(default)]
    pub source: QueueSource,
    /// Mean and max of `n8n_scaling_mode_queue_jobs_active` (worker slots taken).
    pub active_mean: f64,
    pub active_max: f64,
    /// Mean and max of `n8n_scaling_mode_queue_jobs_waiting` (jobs in Redis).
    pub waiting_mean: f64,
    pub waiting_max: f64,
    /// Mean of the slots taken over the readings where a job waited: then every slot was
    /// taken, so this counts the slots even when, between those readings, the queue ran dry
    /// (on a busy host part of what is in flight sits in main's intake and response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_while_waiting: Option<f64>,
    pub samples: u32,
    /// Scrapes that failed (endpoint down or garbage).
    pub gaps: u32,
    /// True when the stage was shorter than n8n's refresh interval of these gauges (the
    /// interval given), or its steady window held fewer than two refreshes measured: its gauge
    /// means may describe another level and are not used.
    pub coarse: bool,
    /// How often main's gauges and completion counter changed value, measured over the run so
    /// far (median spacing of the changes the scrapes saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_s: Option<f64>,
    /// Coarse by the refresh measured although the interval given said the stage was long
    /// enough: the interval given is not main's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refresh_contradicts_flag: bool,
}

/// One `/metrics` endpoint during the stage's steady window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EndpointObserved {
    pub url: String,
    /// main, worker or webhook (given, or read from the content).
    pub role: Option<Role>,
    pub samples: u32,
    pub gaps: u32,
    pub last_error: Option<String>,
    pub rss_mean_bytes: f64,
    pub rss_max_bytes: f64,
    /// `nodejs_heap_size_used_bytes`: the JS heap, not the process (Buffers are outside it).
    pub heap_used_mean_bytes: f64,
    pub heap_used_max_bytes: f64,
    pub external_mean_bytes: f64,
    pub eventloop_lag_mean_s: f64,
    pub eventloop_lag_max_s: f64,
    /// From `process_cpu_seconds_total`, in % of one core.
    pub cpu_percent_mean: f64,
    /// From `n8n_runner_task_requested_total` (event-bus metrics), when present.
    pub runner_tasks_requested_per_s: Option<f64>,
    /// n8n's database pool (`N8N_METRICS_INCLUDE_DB_POOL_METRICS=true`), when exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool: Option<DbPoolObserved>,
    /// The n8n version the process reports (`n8n_version_info`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n8n_version: Option<String>,
}

/// One container during the stage's steady window (Docker stats).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ContainerObserved {
    pub name: String,
    pub role: Role,
    pub samples: u32,
    pub gaps: u32,
    /// The container disappeared during the stage.
    pub gone: bool,
    /// Memory as docker stats computes it (usage minus inactive file cache).
    pub memory_first_bytes: f64,
    /// The container's memory at the first reading of the run, before load reached it.
    pub memory_baseline_bytes: f64,
    pub memory_mean_bytes: f64,
    pub memory_max_bytes: f64,
    /// In % of one core (200 % = two cores busy).
    pub cpu_percent_mean: f64,
    pub cpu_percent_max: f64,
    /// The container's CPU limit in cores (`--cpus`, `deploy.resources.limits.cpus`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit_cores: Option<f64>,
    /// The container's memory limit (`mem_limit`, `--memory`, `resources.limits.memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// Runners: the worker (or main) container whose task broker they attach to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<String>,
    /// Runners: their `N8N_RUNNERS_MAX_CONCURRENCY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_limit: Option<u32>,
    /// The highest and the last memory reading of the whole stage, warm-up included: a
    /// container that dies early keeps the figure it had before death.
    #[serde(default)]
    pub memory_peak_bytes: f64,
    #[serde(default)]
    pub memory_last_bytes: f64,
    /// Lifecycle events in the stage (warm-up included), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<super::lifecycle::LifecycleEvent>,
    /// It ended during the stage (a `die` event), by the OOM killer when `oom_killed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exited: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
    /// Times it started again during the stage (its restart policy, or `docker restart`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub restarted: u32,
    /// Not running when the stage ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub down_at_end: bool,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// Memory of all containers of one role together (summed per reading, so it shows what the
/// role holds at one moment).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RoleMemory {
    pub role: Role,
    pub containers: u32,
    /// Sum of the containers' first readings of the run, before load.
    pub baseline_bytes: f64,
    pub mean_bytes: f64,
    pub max_bytes: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageResult {
    pub index: usize,
    /// Which repetition of this load level (0-based; `--repeat K` runs each level K times).
    #[serde(default)]
    pub repeat: u32,
    pub label: String,
    pub model: LoadModel,
    /// Closed model: virtual users (in flight).
    pub vus: Option<u32>,
    /// Open model: arrival rate (per second) at the start and end of the stage.
    pub rate: Option<f64>,
    pub ramp_to: Option<f64>,
    pub max_vus: Option<u32>,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Length of the steady window the figures come from.
    pub window_s: f64,
    /// The stage was cut short (interrupt or abort); its figures cover what ran.
    pub partial: bool,
    /// Requests completed inside the steady window, whatever their outcome.
    pub requests: u64,
    /// Of those, answered with status < 400.
    pub ok: u64,
    /// Good answers per second (status < 400 and every check passed). Closed model: in flight ÷
    /// mean latency × good share (Little's law, exact for a closed loop and not quantized by
    /// jobs finishing in batches); open model: good completions ÷ window.
    pub throughput_rps: f64,
    /// All completions ÷ window, failures included (k6's `http_reqs` rate).
    pub request_rate: f64,
    /// Time from the intended start of each request to its last byte. In the closed model the
    /// intended start is when the virtual user began the request.
    pub latency: Option<Latency>,
    pub phases: Phases,
    /// k6's `http_req_failed`: share of requests with no response or status ≥ 400.
    pub error_rate: f64,
    pub errors: ErrorCounts,
    pub checks: Vec<CheckResult>,
    /// Share of requests that passed every check (a request with no response fails them all).
    pub check_pass_rate: f64,
    /// Open model: arrivals that could not start because `max_vus` were busy.
    pub dropped_iterations: u64,
    pub new_connections: u64,
    /// Near 1: every request opened a connection (keep-alive missing); near 0: reuse works.
    pub new_conns_per_request: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Answers longer than the 1 MiB n8ncap keeps of a body: checks read only that part.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bodies_cut: u64,
    pub warmup_requests: u64,
    /// CPU the n8ncap process used during the stage, in % of one core: near 100 × cores means
    /// the load generator itself may be the bottleneck.
    #[serde(default)]
    pub client_cpu_percent: f64,
    /// Busy CPU of the whole machine n8ncap ran on during the stage, in % of one core (every
    /// process: n8n, n8ncap, and anything else running there). Recorded only when the target is
    /// on loopback, so this machine is n8n's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_percent: Option<f64>,
    /// False when the stage's error or check figures fail: its latency is not a result.
    pub valid: bool,
    pub invalid_reasons: Vec<String>,
    pub thresholds: Vec<ThresholdResult>,
    /// What n8n's own metrics said during the stage, when they were scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueObserved>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointObserved>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerObserved>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_by_role: Vec<RoleMemory>,
    /// Why the stage ended (the adaptive sweep ends a stage when it is steady).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<StageEnd>,
    /// A profile with several scenarios: each one's figures (they add up to the stage's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioResult>,
    /// A window of a closed-model ramp (k6's `ramping-vus`): the virtual users moved from
    /// `from` to `to` during it, so it is no load level; `vus` is their mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Ramp>,
    /// Open model: what arrived, what completed and what was left over, counted by time
    /// (arrivals by intended start, completions by completion time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    /// A stretch of production history (`diagnose --prometheus`): no load was driven, so no
    /// level was chosen and there is no warm-up; its figures are what n8n's metrics counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryFigures>,
    /// 95 % interval of `throughput_rps` from the window itself (batch means over the window,
    /// widened by the one response per virtual user a window edge can cut).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_ci: Option<[f64; 2]>,
    /// k6: iterations started per second in the window and their mean duration (s). With think
    /// time or several requests per iteration, Little's law holds for iterations, not requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<IterationFigures>,
    /// The database beside the pools: n8n's log lines naming Postgres' refusal (Docker) and
    /// Postgres' own connections (a DSN), when either was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseObserved>,
    /// The target on this machine: what every process of the host spent over the stage, from
    /// /proc, grouped by what it is (n8n's roles, Postgres, Redis, the load, anything else).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_processes: Vec<HostProcessCpu>,
    /// This n8ncap read /proc for `host_processes` (empty when its own process served the
    /// target); absent from runs saved by an n8ncap that did not, whose host's busy CPU then
    /// stands for the deployment's (`diagnose::cpu`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_placed: bool,
}

/// A group of the host's processes over a stage (/proc): n8n's workers, Postgres' backends,
/// n8ncap itself, or another program by its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostProcessCpu {
    /// What they are: "n8n worker", "postgres", "n8ncap (the load)", or a program's name.
    pub group: String,
    /// n8n's role, for n8n's processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Part of the work: n8n, its Postgres and Redis, and the load generator; else other work.
    pub stack: bool,
    pub processes: u32,
    /// Cores used, mean over the stage.
    pub cores: f64,
}

/// Iterations of a k6 level: started per second in the window, and their mean duration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IterationFigures {
    pub per_s: f64,
    pub mean_s: f64,
}

/// An open-model window's books: `arrivals − completions = backlog_end − backlog_start`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Offered per second: arrivals (and dropped arrivals) ÷ window.
    pub offered_per_s: f64,
    /// Requests whose intended start fell in the window.
    pub arrivals: u64,
    /// Requests that finished in the window, whenever they started.
    pub completions: u64,
    /// Requests started before the window and still running at its start: inherited.
    pub backlog_start: u64,
    /// Requests started before the window's end and still running then.
    pub backlog_end: u64,
    /// (backlog_end − backlog_start) ÷ window: how fast the queue grew.
    pub backlog_growth_per_s: f64,
    /// Requests that started in the window and finished after it: the stage's latency includes
    /// them (measured from their intended start).
    pub late: u64,
    /// Requests of the stage before that were still unanswered when this one began: the
    /// client gave up on them after the drain bound (the request timeout), n8n may still be
    /// running them. 0 when the last stage drained.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inherited: u64,
}

impl Flow {
    /// A window's books; the backlog's growth per second is derived here, once.
    pub fn of(
        window_s: f64,
        (arrivals, dropped): (u64, u64),
        completions: u64,
        (backlog_start, backlog_end): (u64, u64),
        late: u64,
    ) -> Flow {
        let per_s = |v: f64| if window_s > 0.0 { v / window_s } else { 0.0 };
        Flow {
            offered_per_s: per_s((arrivals + dropped) as f64),
            arrivals,
            completions,
            backlog_start,
            backlog_end,
            backlog_growth_per_s: per_s(backlog_end as f64 - backlog_start as f64),
            late,
            inherited: 0,
        }
    }
}

/// Virtual users at the start and end of a ramp window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    pub from: u32,
    pub to: u32,
}

/// One scenario's figures in a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub name: String,
    pub requests: u64,
    pub ok: u64,
    /// This scenario's part of the stage's throughput (good answers per second).
    pub throughput_rps: f64,
    pub request_rate: f64,
    /// Share of the stage's requests.
    pub share: f64,
    pub latency: Option<Latency>,
    pub error_rate: f64,
    pub errors: ErrorCounts,
    pub checks: Vec<CheckResult>,
    pub check_pass_rate: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl StageResult {
    /// A stage of `model` with nothing measured yet, valid until judged otherwise.
    pub fn empty(index: usize, label: String, model: LoadModel) -> StageResult {
        StageResult {
            index,
            repeat: 0,
            label,
            model,
            vus: None,
            rate: None,
            ramp_to: None,
            max_vus: None,
            duration_s: 0.0,
            warmup_s: 0.0,
            window_s: 0.0,
            partial: false,
            requests: 0,
            ok: 0,
            throughput_rps: 0.0,
            request_rate: 0.0,
            latency: None,
            phases: Phases::default(),
            error_rate: 0.0,
            errors: ErrorCounts::default(),
            checks: Vec::new(),
            check_pass_rate: 1.0,
            dropped_iterations: 0,
            new_connections: 0,
            new_conns_per_request: 0.0,
            bytes_sent: 0,
            bytes_received: 0,
            bodies_cut: 0,
            warmup_requests: 0,
            client_cpu_percent: 0.0,
            host_cpu_percent: None,
            valid: true,
            invalid_reasons: Vec::new(),
            thresholds: Vec::new(),
            queue: None,
            endpoints: Vec::new(),
            containers: Vec::new(),
            memory_by_role: Vec::new(),
            ended_by: None,
            scenarios: Vec::new(),
            ramp: None,
            flow: None,
            throughput_ci: None,
            iterations: None,
            database: None,
            host_processes: Vec::new(),
            host_placed: false,
            history: None,
        }
    }

    /// The stage's load level, typed by its model. A ramping open stage counts as its mean
    /// offered rate.
    pub fn level(&self) -> LoadLevel {
        match self.model {
            LoadModel::Closed => LoadLevel::InFlight(self.vus.unwrap_or(0)),
            LoadModel::Open => {
                let r0 = self.rate.unwrap_or(0.0);
                LoadLevel::Rate((r0 + self.ramp_to.unwrap_or(r0)) / 2.0)
            }
        }
    }
}

/// A container's stats at one moment, as `inspect` shows them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContainerStats {
    pub memory_bytes: u64,
    pub cpu_percent: Option<f64>,
}

/// Most requests in flight n8ncap takes anywhere (flags, profiles, k6 files, saved summaries):
/// far beyond any n8n deployment, and small enough that nothing sized by it can exhaust memory.
pub const MAX_IN_FLIGHT: u32 = 1_000_000;

/// One step of the search, recorded in the summary and shown under the stage table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchStep {
    /// The level chosen (none when the search stopped).
    pub in_flight: Option<u32>,
    pub why: String,
}

/// Why a stage of the adaptive sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum StageEnd {
    /// The profile's fixed duration (a fixed sweep).
    Duration,
    /// Throughput steady: its confidence half-width fell under the precision asked.
    Steady {
        half_width: f64,
    },
    /// The knee question this level asks was answered: the throughput's 95 % interval lies
    /// wholly above or below `threshold_rps` (95 % of the ceiling) before the precision asked.
    Settled {
        half_width: f64,
        threshold_rps: f64,
    },
    /// Jobs were counted, not throughput: a short level past every slot so that n8n's queue
    /// gauges show how many slots the workers have.
    SlotsCounted,
    /// The maximum stage length, before the precision was reached.
    MaxLength {
        half_width: Option<f64>,
    },
    /// The sweep's time budget ran out.
    Budget,
    Interrupted,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
