//! The time budget: the timeouts that end executions and tasks against the job times a run
//! measured (`audit --run DIR`). Where users lose executions when they scale down, deploy or
//! upgrade:
//! - a worker's shutdown waits `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` for running executions, then is
//!   killed; the job loses its Bull lock and fails as `MaxStalledCountError` (n8n #37651, with
//!   `maxStalledCount` 0), and since that change a running Code task is capped at 0.8 × that
//!   window when shutdown begins;
//! - a Code task longer than the runner's `N8N_RUNNERS_TASK_TIMEOUT` fails (300 s in 2.x; 60 s
//!   from 3.0, n8n #37042);
//! - a worker whose event loop is blocked longer than the lock's margin (duration − renew time)
//!   misses a renewal and loses the job.
//!
//! Without a run, what cannot be checked is said, and which run would tell.

use super::{finding, Ctx};
use crate::findings::{Finding, FindingId};
use crate::model::{OperatingPoint, Upgrade};
use crate::topology::Role;

/// An autoscaler that takes a worker away sooner after the load drops than a p99 job runs: a
/// KEDA trigger on Bull's wait list goes quiet when the last job is *taken*, not finished, so
/// the workers still running jobs are the ones removed, and their jobs live on the shutdown
/// window alone.
fn scale_down(c: &Ctx, m: &OperatingPoint, out: &mut Vec<Finding>) {
    for n in c.n8n.iter().copied().filter(|n| n.role == Role::Worker) {
        let Some(a) = n.facts.k8s.as_ref().and_then(|k| k.autoscaler.as_ref()) else {
            continue;
        };
        let Some((window, by)) = &a.scale_down else {
            continue;
        };
        let w = *window as f64;
        if w >= m.job_p99_s {
            continue;
        }
        let need = (m.job_p99_s * 1.5).ceil();
        out.push(
            finding(FindingId::ScaleDownBeforeJobsFinish, n.name(), format!(
                "{}: {} removes a worker {w:.0} s after the load drops ({by}), while the p99 job takes {:.1} s in {}",
                n.name(), a.by, m.job_p99_s, m.from
            ))
            .figure("scale_down_s", w)
            .figure("job_p99_s", m.job_p99_s)
            .why("A queue-length trigger goes quiet when the last job is taken, not when it ends: the workers it removes are still running jobs, which then survive only if the shutdown window covers them (shutdown-window-below-job-time), and each removal during a burst's tail restarts the job elsewhere at best.")
            .fix(format!(
                "stabilise scale-down for at least {need:.0} s: Kubernetes — the HPA's spec.behavior.scaleDown.stabilizationWindowSeconds (a KEDA ScaledObject: spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds, and cooldownPeriod when it scales to zero); community chart — worker.autoscaling.behavior.scaleDown.stabilizationWindowSeconds; n8n's chart — keda.worker.cooldownPeriod (its HPA and ScaledObject take no behaviour value: patch them)"
            )),
        );
    }
}

// n8n #37651: at shutdown every task timer is re-armed to fire by now + this × the window.
use crate::model::n8n_defaults::SHUTDOWN_TASK_SHARE;
/// n8n 3.0's `N8N_RUNNERS_TASK_TIMEOUT` default, s.
const TASK_TIMEOUT_3_S: f64 = crate::model::n8n_defaults::TASK_TIMEOUT_3_S;

/// What the audit could not check without a run.
pub(super) fn unchecked() -> String {
    "time budget not checked (no measured job times): the shutdown window against the p99 job \
     time, the runner task timeout against the p99 Code time, the job lock's margin against the \
     workers' event-loop lag — give --run DIR (a sweep's or a `diagnose … --out` results \
     directory of this deployment)"
        .into()
}

pub(super) fn rules(c: &Ctx, m: &OperatingPoint, upgrade: Option<Upgrade>, out: &mut Vec<Finding>) {
    for n in c.n8n.iter().copied().filter(|n| n.role == Role::Worker) {
        let Some(t) = &n.times else { continue };
        if let Some(w) = &t.graceful_shutdown_s {
            let code = m.code_p99_s.unwrap_or(m.job_p99_s);
            let task_cap = SHUTDOWN_TASK_SHARE * w.value;
            if w.value < m.job_p99_s || task_cap < code {
                let need = (m.job_p99_s.max(code / SHUTDOWN_TASK_SHARE) * 1.25).ceil();
                out.push(
                    finding(FindingId::ShutdownWindowBelowJobTime, n.name(), format!(
                        "{}: shutdown waits {:.0} s ({}) for running executions, and caps a Code task at {task_cap:.0} s, while the p99 job takes {:.1} s (Code {code:.1} s) in {}",
                        n.name(), w.value, w.source, m.job_p99_s, m.from
                    ))
                    .evidence(format!("N8N_GRACEFUL_SHUTDOWN_TIMEOUT {:.0} s; p99 job time {:.1} s measured", w.value, m.job_p99_s))
                    .figure("shutdown_window_s", w.value)
                    .figure("job_p99_s", m.job_p99_s)
                    .why("A scale-down, deploy or restart kills the executions still running when the window ends: their Bull lock is lost and they fail as MaxStalledCountError (n8n #37651).")
                    .fix(format!("N8N_GRACEFUL_SHUTDOWN_TIMEOUT={need:.0} on {} — compose: its environment; n8n's chart: redis.worker.timeout (and lifecycle.worker.terminationGracePeriodSeconds above it); the community chart: an extra env var of the worker; Kubernetes: the worker container's env, and the pod's terminationGracePeriodSeconds above it plus the runner's window", n.name())),
                );
            }
        }
        if let (Some(d), Some(r), Some(lag)) =
            (&t.lock_duration_ms, &t.lock_renew_ms, m.worker_lag_max_s)
        {
            let margin_s = (d.value - r.value) / 1000.0;
            if margin_s <= lag {
                out.push(
                    finding(FindingId::LockMarginBelowEventLoopLag, n.name(), format!(
                        "{}: Bull's job lock leaves {margin_s:.1} s between renewals (QUEUE_WORKER_LOCK_DURATION {:.0} − QUEUE_WORKER_LOCK_RENEW_TIME {:.0} ms) while the worker's event loop lagged up to {lag:.1} s in {}",
                        n.name(), d.value, r.value, m.from
                    ))
                    .figure("lock_margin_s", margin_s)
                    .figure("event_loop_lag_max_s", lag)
                    .why("A renewal that comes late loses the lock: with maxStalledCount 0 the execution fails, or runs twice.")
                    .fix(format!("QUEUE_WORKER_LOCK_DURATION={:.0} on {} (at least the renew time + twice the lag measured) — compose or Kubernetes: its env; n8n's chart: redis.worker.lockDuration; the community chart: an extra env var of the worker — and find what blocks the event loop", ((r.value + 2000.0 * lag.max(1.0)) / 1000.0).ceil() * 1000.0, n.name())),
                );
            }
        }
    }
    scale_down(c, m, out);
    let code = m.code_p99_s.unwrap_or(m.job_p99_s);
    // Where Code runs: a runner, or an n8n process with its internal runner (topology gives
    // those, and only those, a task timeout).
    let code_here = c.runners.iter().chain(c.n8n.iter()).filter_map(|n| {
        let t = n.times.as_ref()?;
        Some((n, t, t.task_timeout_s.as_ref()?))
    });
    for (n, t, timeout) in code_here {
        // After the upgrade an unset timeout is 3.0's default.
        let (limit, source) = match (upgrade, t.task_timeout_set) {
            (Some(Upgrade::V3), false) => (TASK_TIMEOUT_3_S, "n8n 3.0 default".to_string()),
            _ => (timeout.value, timeout.source.words()),
        };
        if limit < code {
            out.push(
                finding(FindingId::TaskTimeoutBelowCodeTime, n.name(), format!(
                    "{}: a Code task is stopped after {limit:.0} s ({source}), while the p99 Code time is {code:.1} s in {}",
                    n.name(), m.from
                ))
                .figure("task_timeout_s", limit)
                .figure("code_p99_s", code)
                .why("Every Code task longer than the timeout fails, and its execution with it.")
                .fix(format!("N8N_RUNNERS_TASK_TIMEOUT={:.0} on {} — compose or Kubernetes: its env; n8n's chart: taskRunners.extraEnv; the community chart: taskRunners.taskTimeout", (code * 1.5).ceil(), n.name())),
            );
        }
    }
}
