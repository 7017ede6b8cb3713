//! The diagnosis as recorded in `summary.json` and handed to the reports: the verdict, the
//! numbers behind it and everything the charts draw. `diagnose` computes it; reports render it
//! and do not judge.

use super::estimate::Estimate;
use super::role::Role;
use super::stage::LoadLevel;
use crate::findings::Finding;
use crate::model::settings::{Settings, Sourced};
use crate::model::{Capacity, Capping};
use serde::{Deserialize, Serialize};

/// Why a level counts as saturated (at the ceiling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaturationSign {
    /// Mean response well above the service time: requests queued somewhere (Little's law).
    ResponseAboveServiceTime,
    /// Jobs waited in Redis: every worker slot was taken.
    JobsWaitedInRedis,
    /// Open model: fewer completions than arrivals offered, or arrivals dropped.
    ThroughputBelowOfferedRate,
    /// Production history: main's one JavaScript thread at its CPU bound. Requests wait in
    /// front of main's intake, where no queue gauge sees them.
    IntakeAtCpuBound,
}

/// One load level, its repeats merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub level: LoadLevel,
    pub stages: Vec<usize>,
    pub valid: bool,
    /// Widened to at least the counting interval of the answers counted (see `counted`).
    pub throughput: Estimate,
    /// Good answers counted and the seconds they were counted over, summed over the level's
    /// stages: the counting error of its rate, and of a ceiling pooled from several levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<[f64; 2]>,
    /// Requests sent in the level's steady windows: the error rate's counting error.
    #[serde(default)]
    pub requests: u64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<Estimate>,
    pub slots_taken: Option<f64>,
    /// Slots taken while jobs waited in the queue (every slot was then taken), the mean over
    /// those readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_full: Option<f64>,
    /// Executions in slots by Little's law at the slots: completions/s × n8n's slot time (the
    /// execution histogram), when the level comes from Prometheus history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_in_slots: Option<f64>,
    pub waiting: Option<f64>,
    pub error_rate: f64,
    pub client_cpu_percent: f64,
    /// Requests in flight: N (closed model) or X × R̄ (open model, Little's law).
    pub in_flight: f64,
    /// Mean response ÷ service time, when both are known.
    pub response_ratio: Option<f64>,
    /// Empty when the level is below the ceiling.
    pub saturated_by: Vec<SaturationSign>,
    /// Why the level is left out of the judgement although its checks passed: its figures
    /// break Little's law (X × R̄ ≈ N, X ≤ N ÷ R_min) or an open window's books do not balance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impossible: Option<String>,
    /// Why the level is left out: the stack changed during it (a runner or worker died, exited
    /// or restarted), so its figures describe no one deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_changed: Option<String>,
    /// A history's window or saturated period (its label): what the level words say instead
    /// of an arrival rate the history never offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

impl Level {
    pub fn saturated(&self) -> bool {
        self.valid && !self.saturated_by.is_empty()
    }

    /// What the level was: "20 in flight", "5.0 arrivals/s", or a history's window or period
    /// as measured (it chose no level).
    pub fn words(&self) -> String {
        self.window.clone().unwrap_or_else(|| self.level.words())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakPointKind {
    /// The first level whose thresholds failed: the 2/3 factor applies here.
    Failure,
    /// The smallest level at the ceiling: more load only queues.
    Knee,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakPoint {
    pub kind: BreakPointKind,
    pub level: LoadLevel,
    /// Requests in flight at that level (derived for an open level).
    pub in_flight: f64,
    pub reason: String,
}

/// Measured against predicted, per valid level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub level: LoadLevel,
    pub in_flight: f64,
    pub measured: f64,
    pub predicted: f64,
    pub predicted_mva: f64,
    pub predicted_response_s: f64,
    pub predicted_waiting_for_runner: f64,
}

/// The model's curve at one in-flight count, for charts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub in_flight: u32,
    /// Deterministic bound min(N ÷ S, X_max).
    pub bound: f64,
    /// Mean-value analysis.
    pub mva: f64,
}

/// Where CPU was measured and what it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuSite {
    /// One process (a container, or a `/metrics` endpoint) of a role.
    Process,
    /// Every process on the host (or in the containers observed) together.
    Host,
}

/// CPU use at the capacity and the rate it allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    pub site: CpuSite,
    pub role: Option<Role>,
    /// Container name or metrics URL; "host" for the host.
    pub name: String,
    /// Cores in use at the level measured (1.0 = one core).
    pub cores_used: f64,
    /// CPU seconds per execution: cores used ÷ throughput.
    pub cpu_s_per_execution: f64,
    /// Cores this site can use, and where that number came from.
    pub usable_cores: Sourced<f64>,
    /// Usable cores ÷ CPU seconds per execution, executions/s.
    pub bound_per_s: f64,
    /// At ≥ 85 % of its usable cores.
    pub saturated: bool,
    /// The process's event-loop lag (`nodejs_eventloop_lag_seconds`), mean over the level's
    /// scrapes, s: how long a request waited before its JavaScript thread read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eventloop_lag_s: Option<f64>,
}

impl CpuUse {
    /// Whether this reading is one process's of `role` (not the host's).
    pub fn is_process_of(&self, role: Role) -> bool {
        self.site == CpuSite::Process && self.role == Some(role)
    }
}

/// The diagnosis of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The limit that caps throughput, when the data shows one.
    pub capping_limit: Option<Capping>,
    /// When CPU caps: the site that binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<CpuUse>,
    /// One sentence: the answer.
    pub verdict: String,
    /// Why the verdict may be wrong although its limit is the likeliest (`model-mismatch`: the
    /// measured ceiling far under the named limit's bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<String>,
    /// Settings used, each with its source (flags, the run, inference).
    pub settings: Settings,
    /// S: job time plus n8n's fixed overhead, measured at 1 in flight or assumed.
    pub service_time: Option<Sourced<f64>>,
    /// Latency at 1 in flight minus job time.
    pub fixed_overhead_s: Option<f64>,
    /// Ceilings of the settings (computed with S, overhead included).
    pub capacity: Option<Capacity>,
    /// Throughput at the ceiling (saturated levels), with its interval when repeated.
    pub measured_ceiling: Option<Estimate>,
    /// Executions in progress at the ceiling: capacity × S.
    pub effective_concurrency: Option<f64>,
    /// The rule that decides a level is saturated, in words.
    pub saturation_rule: String,
    pub failure_point: Option<BreakPoint>,
    pub knee: Option<BreakPoint>,
    /// When the ceiling was not reached: the in-flight level to try next.
    pub next_level: Option<u32>,
    pub levels: Vec<Level>,
    pub comparison: Vec<Comparison>,
    pub curve: Vec<CurvePoint>,
    /// CPU per site at the highest valid level with CPU data.
    pub cpu: Vec<CpuUse>,
    /// Processes whose CPU was sampled at that level but read 0 throughout (counters that did
    /// not move, or none): they bound nothing, and CPU was not "unmeasured" there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_read_zero: Vec<String>,
    /// Each watched n8n container's memory per execution held (`diagnose::memory`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<super::memory::MemoryUse>,
    pub findings: Vec<Finding>,
    /// A mix of workflows: each one's share of the executions, the slots and the runner tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<crate::model::mix::KindUse>,
    /// Containers that died, exited or restarted during the run (OOM kills first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deaths: Vec<ContainerDeath>,
    /// What Code tasks use in the runners: per-task peak and idle base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_memory: Option<RunnerMemory>,
}

/// How a container's run ended during the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathKind {
    /// The kernel's OOM killer ended it at its memory limit.
    OomKilled,
    /// Its process ended otherwise (exit code recorded).
    Exited,
    /// It was restarted (`docker restart`, a restart policy) without an OOM kill.
    Restarted,
}

/// A container that died, exited or restarted during the run, with what it held then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerDeath {
    pub name: String,
    pub role: Role,
    /// Runners: the worker (or main) container they served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<String>,
    pub kind: DeathKind,
    /// The stage it happened in (0-based) and when, seconds after that stage began.
    pub stage: usize,
    pub at_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// It was running again by the end of the run.
    pub came_back: bool,
    /// It exited with n8n's "Exiting process due to Redis connection error".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redis_lost: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// The last and the highest memory reading before the death, and the reading before load.
    pub memory_last_bytes: f64,
    pub memory_peak_bytes: f64,
    pub memory_baseline_bytes: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_limit: Option<u32>,
    /// Runners: the Code tasks it held when it died (estimated from the load on its worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_held: Option<Sourced<f64>>,
}

/// Memory one Code task takes in a runner, and a runner's memory without tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerMemory {
    /// MiB per task: mean Δ memory ÷ tasks running (measured), the request body's
    /// `alloc_mb` (declared), or a lower bound from a kill (the limit ÷ tasks held).
    pub per_task_mib: Sourced<f64>,
    /// MiB of a runner before load.
    pub base_mib: Sourced<f64>,
    /// Runner tasks running on average in the stage measured (X × C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<f64>,
    /// The stage measured (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<usize>,
    /// Σ runners' mean memory above their base (MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_mib: Option<f64>,
}
