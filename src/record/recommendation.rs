//! The recommendation as recorded in `summary.json`: settings that follow the diagnosis, the
//! break point they come from, and what they are predicted to allow.

use super::diagnosis::BreakPointKind;
use crate::model::settings::{Settings, Sourced};
use crate::model::Limit;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// In flight at the break point the plan comes from.
    pub break_point: Sourced<u32>,
    pub break_point_kind: BreakPointKind,
    /// The in-flight executions to plan for: ⌊2/3 × failure point⌋, or the measured effective
    /// concurrency when only the knee is known.
    pub operating_concurrency: u32,
    /// The settings the plan proposes: today's, each value it changes sourced "proposed: why",
    /// and the job they are for. Written as the flat figures `summary.json` has always carried
    /// (`workers`, `worker_concurrency`, `runner_limit`, `runners_per_worker`,
    /// `runner_capacity_per_worker`, `regular_mode`) and in full under `settings`.
    #[serde(flatten, with = "proposed")]
    pub settings: Settings,
    pub runner_memory_limit_mb: Option<Sourced<u64>>,
    /// Throughput ceiling with the proposed settings, jobs/s.
    pub predicted_throughput: f64,
    /// The kind whose bound the prediction meets (a process's CPU written `process_cpu`).
    #[serde(with = "crate::model::plan_bound")]
    pub predicted_bound: Limit,
    /// False: no CPU was measured, the prediction is an upper bound.
    pub cpu_measured: bool,
    /// Mean response at the operating concurrency, s.
    pub predicted_response_s: Option<f64>,
    /// Ceiling with today's settings, jobs/s.
    pub current_ceiling: Option<f64>,
    /// Capacity measured in the run, jobs/s.
    pub measured_capacity: Option<f64>,
    pub notes: Vec<String>,
    /// The diagnosis's doubt, when the verdict the plan rests on has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<String>,
    /// The changes the plan proposes as setting lines in each dialect, made with the plan
    /// (`limits::proposal`). Not written: `settings` is, and a saved run's plan is made again
    /// by judging it (`recommend DIR`, `report DIR`).
    #[serde(skip)]
    pub proposal: crate::model::proposal::Proposal,
}

/// The runner's memory limit from what its Code tasks really use: tasks × per-task peak + base,
/// with headroom. When a runner was OOM-killed the plan starts from that runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// The runner the plan starts from (one that was OOM-killed), else every runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    pub oom_killed: bool,
    /// Tasks the limit must hold: the runner's `N8N_RUNNERS_MAX_CONCURRENCY`.
    pub tasks: u32,
    pub per_task_mib: Sourced<f64>,
    pub base_mib: Sourced<f64>,
    /// Headroom over tasks × per-task + base (1.25 = 25 %).
    pub headroom: f64,
    /// The proposed `mem_limit` / `resources.limits.memory`, MiB.
    pub memory_limit_mib: u64,
    /// Today's limit on that runner, and the tasks it holds with the same headroom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_limit_mib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_within_current_limit: Option<u32>,
}

/// The proposed settings in `summary.json`: the flat figures readers have always parsed, and
/// the settings with their sources; a file from before `settings` was kept is read from its
/// flat figures.
mod proposed {
    use crate::model::settings::{ExecutionsMode, Settings, Sourced};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Written<'a> {
        workers: u32,
        worker_concurrency: u32,
        runner_limit: u32,
        runners_per_worker: u32,
        /// Runner tasks each worker can run: runner_limit × runners_per_worker.
        runner_capacity_per_worker: u32,
        /// Regular mode: worker concurrency is main's production limit, runner limit its
        /// internal runner's, and there is one process.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        regular_mode: bool,
        settings: &'a Settings,
    }

    pub fn serialize<S: Serializer>(s: &Settings, ser: S) -> Result<S::Ok, S::Error> {
        Written {
            workers: s.worker_count(),
            worker_concurrency: s.worker_concurrency_or_default(),
            runner_limit: s.runner_limit_or_default(),
            runners_per_worker: s.runners_per_worker_count(),
            runner_capacity_per_worker: s
                .runner_limit_or_default()
                .saturating_mul(s.runners_per_worker_count()),
            regular_mode: s.is_regular(),
            settings: s,
        }
        .serialize(ser)
    }

    #[derive(Deserialize)]
    struct Read {
        workers: u32,
        worker_concurrency: u32,
        runner_limit: u32,
        runners_per_worker: u32,
        #[serde(default)]
        db_pool_size: Option<u32>,
        #[serde(default)]
        regular_mode: bool,
        #[serde(default)]
        settings: Option<Settings>,
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Settings, D::Error> {
        let r = Read::deserialize(d)?;
        if let Some(s) = r.settings {
            return Ok(s);
        }
        use crate::model::settings::Provenance;
        let src = "summary.json (a plan recorded without its settings)";
        let v = |n: u32| Some(Sourced::new(n, Provenance::Recorded(src.into())));
        Ok(Settings {
            executions_mode: r
                .regular_mode
                .then(|| Sourced::new(ExecutionsMode::Regular, Provenance::Recorded(src.into()))),
            workers: v(r.workers),
            worker_concurrency: v(r.worker_concurrency),
            runner_limit: v(r.runner_limit),
            runners_per_worker: v(r.runners_per_worker),
            db_pool_size: r.db_pool_size.and_then(v),
            ..Settings::default()
        })
    }
}

/// Where a plan is pasted: the names of the deployment it was read from (`recommend -f` or
/// `--project`), so the snippet patches the services and containers that exist. Absent names
/// are n8n's charts' and compose examples' own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanTarget {
    /// The worker's compose service, or its Deployment.
    pub worker: Option<String>,
    /// The worker's container in its pod (Kubernetes).
    pub worker_container: Option<String>,
    /// The runner paired with the worker: its compose service, or its container in the pod.
    pub runner: Option<String>,
    /// What owns the worker's replicas (an HPA or a KEDA ScaledObject): a plan never pins them.
    pub autoscaler: Option<String>,
}
