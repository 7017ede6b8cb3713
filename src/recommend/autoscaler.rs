//! An autoscaler for the workers from a run's measured capacity: the jobs one worker holds at
//! the 2/3 operating point (Little's law at the measured ceiling: X ÷ workers × S) as the target
//! per replica, counting waiting and active jobs together; the replicas between the base load and
//! the first shared bound (main's intake, the host, Postgres' connections); scale-down held for
//! the p99 job, and n8n's shutdown window and the pod's grace period above it.

use crate::error::NoPlan;
use crate::model::settings::{Provenance, Sourced};
use crate::record::autoscaler::{AutoscalerPlan, AutoscalerTarget};
use crate::record::diagnosis::Diagnosis;
use crate::record::scaling::SharedLimit;

use crate::model::n8n_defaults::SHUTDOWN_TASK_SHARE;
use crate::model::OPERATING_SHARE as OPERATING;
/// Kubernetes' default scale-down stabilisation, s.
pub const HPA_SCALE_DOWN_DEFAULT_S: u32 = 300;
/// The longest `stabilizationWindowSeconds` the API server takes (autoscaling/v2 validation:
/// 0 to 3600).
pub const HPA_STABILIZATION_MAX_S: u32 = 3600;
/// Postgres' `max_connections` and reserved connections when nothing says otherwise.
const PG_AVAILABLE_DEFAULT: u32 =
    crate::model::budget::MAX_CONNECTIONS_DEFAULT - crate::model::budget::RESERVED_DEFAULT;
/// How often KEDA reads the lists, s (its default is 30).
const POLLING_S: u32 = 15;

/// What a run measured that the autoscaler needs: its diagnosis and operating point.
pub struct Basis<'a> {
    pub diagnosis: &'a Diagnosis,
    /// The run's name, for the sources.
    pub from: String,
    /// The p99 job time and the p99 Code time, s.
    pub job_p99_s: f64,
    pub code_p99_s: Option<f64>,
    /// Executions/s at the base load (a history's median window), when the run shows it.
    pub base_per_s: Option<f64>,
}

/// The autoscaler for `target` from what `m` measured.
pub fn plan(m: &Basis, target: AutoscalerTarget) -> Result<AutoscalerPlan, NoPlan> {
    let d = m.diagnosis;
    let x = d
        .measured_ceiling
        .as_ref()
        .map(|c| c.mean)
        .filter(|x| *x > 0.0);
    let s = d
        .service_time
        .as_ref()
        .map(|s| s.value)
        .filter(|s| *s > 0.0);
    let (Some(x), Some(s)) = (x, s) else {
        return Err(NoPlan(format!(
            "{}: no measured ceiling with a job time — an autoscaler's target is what one worker \
             holds at its ceiling: sweep until a level saturates (sweep --profile breakpoint)",
            m.from
        )));
    };
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let per_worker = x / workers as f64;
    let holds = per_worker * s;
    let target_v = ((OPERATING * holds * 10.0).floor() / 10.0).max(0.1);
    let per_replica = Sourced::new(
        target_v,
        Provenance::Measured(format!(
            "2/3 × {per_worker:.2} executions/s per worker ({x:.2}/s at {workers} worker{}) × job time {s:.2} s = {:.2} jobs held, rounded down ({})",
            if workers == 1 { "" } else { "s" },
            OPERATING * holds,
            m.from
        )),
    );
    let mut notes = Vec::new();
    let at_op = OPERATING * per_worker;
    let min_replicas = match m.base_per_s.filter(|b| b.is_finite() && *b > 0.0) {
        Some(b) => Sourced::new(
            ((b / at_op).ceil() as u32).max(1),
            Provenance::Measured(format!(
                "base load {b:.2}/s ÷ {at_op:.2}/s per worker at 2/3 ({})",
                m.from
            )),
        ),
        None => {
            notes.push("the run shows no base load (a history does: diagnose --prometheus … --out DIR): minimum 1 worker, so the first job does not wait for a pod to start".into());
            Sourced::new(1, Provenance::Assumed("no base load measured".into()))
        }
    };
    let max_replicas = max_replicas(d, &target, per_worker, min_replicas.value, &mut notes);
    let p99 = m.job_p99_s;
    let (graceful, termination) = shutdown(&target, p99, m.code_p99_s.unwrap_or(p99));
    let scale_down = scale_down(p99, &mut notes);
    if target.runner_sidecar.is_none() {
        notes.push(format!(
            "{} has no runner in its pod: each new worker would start without one — the patch adds a runner sidecar",
            target.workload
        ));
    }
    Ok(AutoscalerPlan {
        per_replica,
        min_replicas,
        max_replicas,
        polling_s: Sourced::new(
            POLLING_S,
            Provenance::Proposed("half KEDA's default 30 s: a backlog is seen sooner".into()),
        ),
        scale_down_s: scale_down,
        graceful_shutdown_s: graceful,
        termination_grace_s: termination,
        job_p99_s: Sourced::new(p99, Provenance::Measured(m.from.clone())),
        notes,
        target,
    })
}

/// How long the autoscaler holds a scale-down: 1.5 × the p99 job time, at least Kubernetes'
/// default and at most the longest hold it takes (said in the notes when the jobs are longer).
fn scale_down(p99: f64, notes: &mut Vec<String>) -> Sourced<u32> {
    let stabilise = (p99 * 1.5).ceil() as u32;
    if stabilise <= HPA_SCALE_DOWN_DEFAULT_S {
        Sourced::new(
            HPA_SCALE_DOWN_DEFAULT_S,
            Provenance::Default(format!(
                "Kubernetes' default, above 1.5 × the p99 job time {p99:.1} s"
            )),
        )
    } else if stabilise <= HPA_STABILIZATION_MAX_S {
        Sourced::new(
            stabilise,
            Provenance::Proposed(format!("1.5 × the p99 job time {p99:.1} s")),
        )
    } else {
        notes.push(format!(
            "1.5 × the p99 job time {p99:.0} s is past the longest scale-down hold Kubernetes \
             takes ({HPA_STABILIZATION_MAX_S} s): the hold is set to that, and a worker removed \
             may still run a job — jobs this long belong in a queue of their own"
        ));
        Sourced::new(
            HPA_STABILIZATION_MAX_S,
            Provenance::Proposed(format!(
                "Kubernetes' most ({HPA_STABILIZATION_MAX_S} s), under 1.5 × the p99 job time \
                 {p99:.1} s"
            )),
        )
    }
}

/// n8n's shutdown window (at least the p99 job, and a Code task's 0.8 share of it at least the
/// p99 Code time) and the pod's grace period above it and the runner's.
fn shutdown(target: &AutoscalerTarget, p99: f64, code: f64) -> (Sourced<u32>, Sourced<u32>) {
    let window = target.graceful_shutdown_s.value;
    let need = (p99.max(code / SHUTDOWN_TASK_SHARE) * 1.25).ceil();
    let graceful = if window >= p99 && SHUTDOWN_TASK_SHARE * window >= code {
        Sourced::new(
            window.ceil() as u32,
            target.graceful_shutdown_s.source.clone(),
        )
    } else {
        Sourced::new(
            need as u32,
            Provenance::Proposed(format!(
                "1.25 × the p99 job time {p99:.1} s (Code {code:.1} s, capped at 0.8 × the window at shutdown); now {window:.0} s ({})",
                target.graceful_shutdown_s.source.words()
            )),
        )
    };
    let runner_s = target.runner_shutdown_s.value.ceil() as u32;
    let grace_need = graceful.value + runner_s + 5;
    let termination = if target.termination_grace_s.value >= grace_need as f64 {
        Sourced::new(
            target.termination_grace_s.value as u32,
            target.termination_grace_s.source.clone(),
        )
    } else {
        Sourced::new(
            grace_need,
            Provenance::Proposed(format!(
                "n8n's shutdown window {} s + the runner's {runner_s} s ({}) + 5 s; now {:.0} s ({})",
                graceful.value,
                target.runner_shutdown_s.source.words(),
                target.termination_grace_s.value,
                target.termination_grace_s.source.words()
            )),
        )
    };
    (graceful, termination)
}

/// A worker that would add less than this share of one worker's ceiling before the shared
/// bound is not counted: a bound measured a hair above one worker's ceiling (main's CPU read
/// over the same stages, within its noise) does not make a second worker useful.
const USEFUL_SHARE: f64 = 0.1;

/// Workers past which none adds throughput (more than [`USEFUL_SHARE`] of a worker): the first
/// shared bound the run measured (main's intake, the host's CPU) ÷ one worker's ceiling, with
/// what bounds it.
pub fn useful_workers(d: &Diagnosis, per_worker: f64) -> Option<(u32, String)> {
    let shared: Vec<SharedLimit> = crate::limits::shared_limits(d);
    shared
        .iter()
        .filter_map(|l| Some((l, l.bound_per_s.filter(|b| b.is_finite() && *b > 0.0)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(l, b)| {
            (
                ((b / per_worker - USEFUL_SHARE).ceil() as u32).max(1),
                format!(
                    "{} bounds the deployment at {b:.1}/s = {:.1} workers of {per_worker:.2}/s",
                    l.kind.words(),
                    b / per_worker
                ),
            )
        })
}

/// Replicas past which a worker adds nothing ([`useful_workers`]), and the Postgres
/// connections left for workers' pools.
fn max_replicas(
    d: &Diagnosis,
    t: &AutoscalerTarget,
    per_worker: f64,
    min: u32,
    notes: &mut Vec<String>,
) -> Sourced<u32> {
    let by_shared = useful_workers(d, per_worker);
    let pool = t.worker_pool.value.max(1);
    let left = PG_AVAILABLE_DEFAULT.saturating_sub(t.other_connections);
    let by_pg = (
        (left / pool).max(1),
        format!(
            "Postgres' default max_connections 100 − 3 reserved − {} held by main and webhook processors = {left}, ÷ pool {pool} per worker ({}); give the real max_connections by auditing with --postgres",
            t.other_connections,
            t.worker_pool.source.words()
        ),
    );
    let measured = by_shared.is_some();
    let (n, why) = match by_shared {
        Some(s) if s.0 <= by_pg.0 => s,
        _ => by_pg,
    };
    if !measured {
        notes.push("no shared bound was measured (main's CPU, the host's): the maximum is Postgres' connection budget; a scale sweep (sweep --workers 1,2,4) measures where workers stop adding".into());
    }
    let n = n.max(min);
    Sourced::new(
        n,
        if measured {
            Provenance::Measured(why)
        } else {
            Provenance::Assumed(why)
        },
    )
}

/// The workers an autoscaler adds and removes, as `replay` models them: one worker's ceiling
/// and the job time from the run, and the pod start.
pub fn workload(
    d: &Diagnosis,
    pod_start: std::time::Duration,
) -> crate::model::autoscaler::Workload {
    let x = d.measured_ceiling.as_ref().map(|c| c.mean).unwrap_or(0.0);
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    crate::model::autoscaler::Workload {
        per_worker_per_s: x / f64::from(workers),
        job_s: d.service_time.as_ref().map(|s| s.value).unwrap_or(0.0),
        pod_start_s: pod_start.as_secs().min(u64::from(u32::MAX)) as u32,
        window_s: 0.0,
    }
}

/// The base load of a history: the median rate over its covered windows.
pub fn base_load(h: &crate::record::history::History) -> Option<f64> {
    let mut rates: Vec<f64> = h
        .windows
        .iter()
        .filter(|w| w.covered_s > 0.0)
        .map(|w| w.throughput_per_s)
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    Some(rates[rates.len() / 2])
}
