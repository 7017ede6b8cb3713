//! Production history as read from a Prometheus-compatible API: the processes found, the
//! windows the range was cut into (throughput from main's completion counter, slots taken and
//! jobs waiting from its queue gauges, CPU per process), what each busy window shows of
//! saturation, and every gap, counter reset and warning on the way. `observe::history` fills
//! it; `diagnose::history` judges it.

use super::role::Role;
use crate::model::settings::Sourced;
use serde::{Deserialize, Serialize};

/// An n8n process the series came from (`job` and `instance` labels), and how its role was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub job: String,
    pub instance: String,
    pub role: Role,
    /// "exposes the queue gauges", "a role label", "exposes process metrics only".
    pub role_by: String,
}

impl Process {
    pub fn name(&self) -> String {
        format!("{} ({})", self.instance, self.job)
    }
}

/// What a busy window shows of saturation, without response times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowEvidence {
    /// Jobs waited in Redis while the worker slots were taken.
    JobsWaitedWhileSlotsTaken,
    /// The completion rate stayed flat (within 5 % of the window before) while the waiting grew.
    CompletionsFlatWhileWaitingGrew,
    /// A process ran at its CPU bound (≥ 85 % of one core for a Node process).
    ProcessAtCpuBound,
    /// Jobs waited while slots sat free, with the workers up: the queue was stuck.
    QueueStalled,
}

impl WindowEvidence {
    pub fn words(&self) -> &'static str {
        match self {
            WindowEvidence::JobsWaitedWhileSlotsTaken => "jobs waited while the slots were taken",
            WindowEvidence::CompletionsFlatWhileWaitingGrew => {
                "completions flat while the waiting grew"
            }
            WindowEvidence::ProcessAtCpuBound => "a process at its CPU bound",
            WindowEvidence::QueueStalled => "jobs waited while slots sat free",
        }
    }
}

/// CPU of one process in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub process: String,
    pub role: Role,
    /// Cores used on average (1.0 = one core).
    pub cores: f64,
    /// `n8n_process_resident_memory_bytes` and `n8n_nodejs_eventloop_lag_seconds` at their
    /// highest in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_max_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eventloop_lag_max_s: Option<f64>,
    /// The process's database pool over the window (n8n's `db_pool_*` gauges), when exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool: Option<Box<super::db::DbPoolObserved>>,
}

/// One window of the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    /// Seconds of the window the completion counter covered (steps without a gap).
    pub covered_s: f64,
    pub completions: f64,
    pub failures: f64,
    /// The completions were counted between two refresh ticks of main's counter, over
    /// `covered_s` from tick to tick (`observe::refresh`); false: between the window's edges
    /// on the step grid (± one refresh's worth).
    #[serde(default)]
    pub between_ticks: bool,
    /// Completions per second, and its interval: the two ends' tick uncertainty (between
    /// ticks), or one refresh's worth of completions over the window (on the step grid).
    pub throughput_per_s: f64,
    pub throughput_interval: [f64; 2],
    pub active_mean: f64,
    pub active_max: f64,
    pub waiting_mean: f64,
    pub waiting_start: f64,
    pub waiting_end: f64,
    pub waiting_max: f64,
    /// The slots taken over the steps where a job waited (every slot was then taken), and how
    /// many steps that is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_while_waiting: Option<f64>,
    #[serde(default)]
    pub waited_samples: u32,
    /// Queue-gauge samples in the window, and steps with no (or an impossible) sample.
    pub samples: u32,
    pub gaps: u32,
    pub cpu: Vec<ProcessCpu>,
    /// Mean of `n8n_workflow_execution_duration_seconds` over every series the selector
    /// matched: the time an execution held its slot (includes time waiting for a runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_s: Option<f64>,
    /// How many executions that mean is over (the histogram's count).
    #[serde(default)]
    pub executions: f64,
    pub busy: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<WindowEvidence>,
    /// Queue stalled: the workers that were up with free slots (processes scraped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_workers: Vec<String>,
    /// The workers that ran through the whole window (None: they changed within it, or were
    /// not read); how they were counted is the history's `workers_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The host's CPU over the window (node_exporter), when Prometheus scrapes it; which host
    /// is the history's `host_by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostCpu>,
}

/// A host's CPU over a window, from node_exporter's `node_cpu_seconds_total`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostCpu {
    /// Cores busy on average (outside idle, iowait and steal).
    pub busy_cores: f64,
    /// The cores the host has (its CPUs).
    pub cores: f64,
    /// Read from n8n's scraped processes against the cores given (`--host-cores`), not from
    /// node_exporter: what was not scraped (runners, Postgres, Redis) is not in `busy_cores`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub processes_only: bool,
}

/// A stretch of a series with no usable sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryGap {
    pub series: String,
    pub from: f64,
    pub to: f64,
    pub reason: String,
}

/// A counter that fell: the process restarted (or two answer behind one target).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReset {
    pub series: String,
    pub at: f64,
    pub from: f64,
    pub to: f64,
}

/// The settings the n8ncap exporter published, when Prometheus scraped it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExporterSettings {
    pub workers: u32,
    pub worker_concurrency: Option<u32>,
    pub runner_capacity: Option<u32>,
}

/// The whole reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The API's URL, credentials redacted.
    pub source: String,
    pub start: f64,
    pub end: f64,
    pub matchers: Vec<String>,
    pub step_s: Sourced<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_interval_s: Option<f64>,
    /// How often the queue gauges and the completion counter changed value (n8n refreshes
    /// them every `N8N_METRICS_QUEUE_METRICS_INTERVAL`, 20 s by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_refresh_s: Option<f64>,
    /// How the refresh was told: "measured: the refresh ticks of the completion counter's raw
    /// samples" or "the median spacing of its changes on the step grid".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue_refresh_by: String,
    /// How far a refresh tick of the completion counter may be off (median half-width, s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_half_width_s: Option<f64>,
    pub window_s: f64,
    pub processes: Vec<Process>,
    pub windows: Vec<Window>,
    /// Steps with no usable sample, per series (counted), and the first few stretches.
    pub gap_steps: u64,
    pub gaps: Vec<HistoryGap>,
    pub resets: Vec<CounterReset>,
    /// Prometheus' own warnings (partial data).
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter: Option<ExporterSettings>,
    /// How the workers of each window were counted (kube-state-metrics' replicas, the worker
    /// targets up, or the worker processes with CPU samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_by: Option<String>,
    /// Which node_exporter the windows' host CPU was read from, and why that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_by: Option<String>,
}

impl History {
    /// The same reading with only the windows `keep` holds (each cloned once): one count's part
    /// of a month, without a copy of the whole month first.
    pub fn with_windows(&self, keep: impl Fn(&Window) -> bool) -> History {
        History {
            source: self.source.clone(),
            start: self.start,
            end: self.end,
            matchers: self.matchers.clone(),
            step_s: self.step_s.clone(),
            scrape_interval_s: self.scrape_interval_s,
            queue_refresh_s: self.queue_refresh_s,
            queue_refresh_by: self.queue_refresh_by.clone(),
            tick_half_width_s: self.tick_half_width_s,
            window_s: self.window_s,
            processes: self.processes.clone(),
            windows: self.windows.iter().filter(|w| keep(w)).cloned().collect(),
            gap_steps: self.gap_steps,
            gaps: self.gaps.clone(),
            resets: self.resets.clone(),
            warnings: self.warnings.clone(),
            exporter: self.exporter.clone(),
            workers_by: self.workers_by.clone(),
            host_by: self.host_by.clone(),
        }
    }
}
