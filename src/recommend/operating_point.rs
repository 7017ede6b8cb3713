//! A judged run's operating point (`model::OperatingPoint`): the time budget, the autoscaler
//! and the alerts are sized from it.

use crate::error::BadInput;
use crate::model::OperatingPoint;
use crate::record::diagnosis::Level;
use crate::record::{Diagnosis, Role, Summary};

/// What the judged `summary` (its diagnosis `d`) measured of one execution and the ceiling: the
/// longest p99 response of a valid level below the ceiling (an execution's time when nothing
/// waits), its Code part when the run knows it, the workers' worst event-loop lag, one
/// worker's ceiling and the workers that add throughput. `from` names the run.
pub fn operating_point(
    summary: &Summary,
    d: &Diagnosis,
    from: &str,
) -> Result<OperatingPoint, BadInput> {
    let below: Vec<&Level> = d
        .levels
        .iter()
        .filter(|l| l.valid && !l.saturated())
        .collect();
    let p99 = |l: &Level| {
        l.stages
            .iter()
            .filter_map(|i| summary.stages.get(*i))
            .filter_map(|s| s.latency.as_ref().map(|l| l.p99_ms / 1000.0))
            .fold(0.0, f64::max)
    };
    let job_p99_s = below.iter().map(|l| p99(l)).fold(0.0, f64::max);
    if job_p99_s <= 0.0 || !job_p99_s.is_finite() {
        return Err(BadInput(format!(
            "--run {from}: no valid level below the ceiling with a response time: the run cannot say how long a job takes"
        )));
    }
    // The Code share of the job, from what the run knows of its Code time and job time.
    let code_p99_s = d
        .settings
        .code_time
        .as_ref()
        .zip(d.settings.job_time.as_ref())
        .filter(|(_, j)| j.value > 0.0)
        .map(|(c, j)| job_p99_s * (c.value / j.value).min(1.0));
    let worker_lag_max_s = summary
        .stages
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.role == Some(Role::Worker) && e.samples > 0)
        .map(|e| e.eventloop_lag_max_s)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .reduce(f64::max);
    // From Prometheus history a level's response is n8n's mean execution time: the p99 is
    // longer, so the budget is checked against a figure that can only be short.
    let from = if summary.stages.iter().any(|s| s.history.is_some()) {
        format!("{from} (Prometheus history: n8n's mean execution time, the p99 is longer)")
    } else {
        from.to_string()
    };
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let per_worker = d
        .measured_ceiling
        .as_ref()
        .map(|c| c.mean / f64::from(workers))
        .zip(d.service_time.as_ref().map(|s| s.value))
        .filter(|(x, s)| x.is_finite() && *x > 0.0 && s.is_finite() && *s > 0.0);
    let useful_workers = per_worker.and_then(|(x, _)| super::autoscaler::useful_workers(d, x));
    Ok(OperatingPoint {
        from,
        job_p99_s,
        code_p99_s,
        worker_lag_max_s,
        per_worker,
        useful_workers,
        ceiling_per_s: d
            .measured_ceiling
            .as_ref()
            .map(|c| c.mean)
            .filter(|x| x.is_finite() && *x > 0.0),
    })
}
