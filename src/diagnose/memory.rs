//! Memory per execution, from a run's stages: each n8n container's mean memory in a stage
//! against the executions it held then — a worker its share of the slots taken (n8n's active
//! jobs when the queue was read, else Little's law at the stage's rate and response time, within
//! the slots), a runner the tasks of its worker within its limit, main every request in flight —
//! fitted as a base and a slope (`model::memory`). Where memory grows with what a process holds,
//! the need at its configured concurrency (the measured slope; its interval said beside it) and
//! the limit to set, and a limit below that need.

use crate::findings::{Finding, FindingId};
use crate::model::memory::{fit, Fit};
use crate::model::settings::Settings;
use crate::record::memory::MemoryUse;
use crate::record::{Role, StageResult};
use std::collections::BTreeMap;

const MB: f64 = 1e6;

type Observed = crate::record::stage::ContainerObserved;
/// A container's (executions held, mean memory) points, and its last reading.
type Points<'a> = (Vec<(f64, f64)>, &'a Observed);

/// Executions in the workers' slots in a stage (all workers), and the workers.
fn in_workers(s: &StageResult, settings: &Settings) -> Option<(f64, f64)> {
    let workers = s
        .containers
        .iter()
        .filter(|c| c.role == Role::Worker && !c.gone)
        .count() as f64;
    if workers < 1.0 {
        return None;
    }
    let slots = settings
        .worker_concurrency
        .as_ref()
        .map(|c| f64::from(c.value) * workers);
    let held = match &s.queue {
        Some(q) if q.samples > 0 && q.active_mean.is_finite() => q.active_mean,
        _ => {
            let little = s.throughput_rps * s.latency.as_ref()?.mean_ms / 1000.0;
            slots.map_or(little, |c| little.min(c))
        }
    };
    (held.is_finite() && held >= 0.0).then_some((held, workers))
}

/// The executions `c` held in stage `s`.
fn held_by(c: &Observed, s: &StageResult, settings: &Settings) -> Option<f64> {
    match c.role {
        Role::Main => {
            let n = s.throughput_rps * s.latency.as_ref()?.mean_ms / 1000.0;
            n.is_finite().then_some(n)
        }
        Role::Worker => in_workers(s, settings).map(|(held, w)| held / w),
        Role::Runner => {
            let (held, w) = in_workers(s, settings)?;
            let limit = c.runner_limit.map_or(f64::INFINITY, f64::from);
            Some((held / w).min(limit))
        }
        _ => None,
    }
}

/// The executions the container can hold as configured.
fn configured(c: &Observed, settings: &Settings) -> Option<u32> {
    match c.role {
        Role::Worker => settings.worker_concurrency.as_ref().map(|w| w.value),
        Role::Runner => c
            .runner_limit
            .or_else(|| settings.runner_limit.as_ref().map(|r| r.value)),
        _ => None,
    }
}

/// Each watched n8n container's memory per execution, over the valid stages of the run.
pub fn per_execution(stages: &[StageResult], settings: &Settings) -> Vec<MemoryUse> {
    let mut by_name: BTreeMap<&str, Points> = BTreeMap::new();
    for s in stages.iter().filter(|s| s.valid && !s.partial) {
        for c in &s.containers {
            let usable = c.samples > 0 && !c.gone && !c.exited && c.memory_mean_bytes > 0.0;
            let Some(held) = held_by(c, s, settings).filter(|_| usable) else {
                continue;
            };
            let e = by_name.entry(&c.name).or_insert_with(|| (Vec::new(), c));
            e.0.push((held, c.memory_mean_bytes));
            e.1 = c;
        }
    }
    by_name
        .into_values()
        .filter_map(|(points, c)| {
            let f: Fit = fit(&points)?;
            let at = configured(c, settings).filter(|_| f.grows());
            let held_max = points.iter().map(|p| p.0).fold(0.0, f64::max);
            Some(MemoryUse {
                name: c.name.clone(),
                role: c.role,
                base_bytes: f.base,
                per_execution_bytes: f.slope,
                per_execution_interval: f.slope_interval,
                stages: points.len() as u32,
                held_max,
                at,
                need_bytes: at.map(|a| f.need(f64::from(a))),
                recommended_limit_bytes: at.map(|a| f.limit(f64::from(a))),
                limit_bytes: c.memory_limit_bytes,
            })
        })
        .collect()
}

/// The findings: what an execution costs where memory grows with it, and a limit below the
/// need at the configured concurrency.
pub fn findings(uses: &[MemoryUse], out: &mut Vec<Finding>) {
    for u in uses.iter().filter(|u| u.per_execution_interval[0] > 0.0) {
        let [lo, hi] = u.per_execution_interval;
        let mut f = Finding::new(
            FindingId::MemoryPerExecution,
            format!(
                "{} ({}): {:.1} MB per execution held ({:.1}–{:.1}) over {:.0} MB",
                u.name,
                u.role.word(),
                u.per_execution_bytes / MB,
                lo / MB,
                hi / MB,
                u.base_bytes / MB
            ),
        )
        .subject(u.name.clone())
        .figure("per_execution_mb", u.per_execution_bytes / MB)
        .figure("base_mb", u.base_bytes / MB)
        .evidence(format!(
            "its mean memory in {} stages, up to {:.1} executions held",
            u.stages, u.held_max
        ))
        .why("Memory that grows with the executions a process holds is what a higher concurrency costs; a runner holds a Code node's Buffers outside V8's heap, so N8N_RUNNERS_MAX_OLD_SPACE_SIZE does not bound them: only the container's limit does.");
        if let (Some(at), Some(need), Some(rec)) = (u.at, u.need_bytes, u.recommended_limit_bytes) {
            f = f
                .figure("need_mb", need / MB)
                .figure("recommended_limit_mib", rec / (1024.0 * 1024.0))
                .fix(format!(
                    "at its {at} it needs {:.0} MB: give it a memory limit of {:.0} MiB (15 % over), and size a higher concurrency by {:.1} MB an execution",
                    need / MB,
                    rec / (1024.0 * 1024.0),
                    hi / MB
                ));
        }
        out.push(f);
        if let (Some(limit), Some(need), Some(at)) = (u.limit_bytes, u.need_bytes, u.at) {
            if (limit as f64) < need {
                out.push(
                    Finding::new(
                        FindingId::MemoryLimitBelowNeed,
                        format!(
                            "{}: its memory limit {:.0} MiB is below the {:.0} MB its {at} executions need",
                            u.name,
                            limit as f64 / (1024.0 * 1024.0),
                            need / MB
                        ),
                    )
                    .subject(u.name.clone())
                    .figure("limit_mib", limit as f64 / (1024.0 * 1024.0))
                    .figure("need_mb", need / MB)
                    .why("At its configured concurrency it holds more than the limit: the OOM killer ends it, and every execution it holds fails with it (a runner takes every task on it down).")
                    .fix(format!(
                        "raise its limit to {:.0} MiB, or lower its concurrency",
                        u.recommended_limit_bytes.unwrap_or(need) / (1024.0 * 1024.0)
                    )),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::stage::{ContainerObserved, Latency, QueueObserved};

    fn stage(i: usize, active: f64, runner_mb: f64) -> StageResult {
        let mut s = StageResult::empty(i, format!("{active}"), crate::record::LoadModel::Closed);
        s.valid = true;
        s.throughput_rps = active;
        s.latency = Some(Latency {
            mean_ms: 1000.0,
            ..Default::default()
        });
        s.queue = Some(QueueObserved {
            active_mean: active,
            samples: 10,
            ..Default::default()
        });
        let c = |name: &str, role, mb: f64| ContainerObserved {
            name: name.into(),
            role,
            samples: 10,
            memory_mean_bytes: mb * MB,
            runner_limit: (role == Role::Runner).then_some(10),
            memory_limit_bytes: (role == Role::Runner).then_some(256 << 20),
            ..Default::default()
        };
        s.containers = vec![
            c("w", Role::Worker, 400.0 + (i as f64 % 2.0) * 5.0),
            c("r", Role::Runner, runner_mb),
        ];
        s
    }

    /// A runner holding 20 MB a task over 124 MB at 1, 4 and 8 tasks: the slope, and at its
    /// limit of 10 a need of about 324 MB — above its 256 MiB limit.
    #[test]
    fn the_runner_s_slope_and_a_limit_below_its_need() {
        let stages: Vec<StageResult> = [1.0, 4.0, 8.0]
            .iter()
            .enumerate()
            .map(|(i, a)| stage(i, *a, 124.0 + 20.0 * a))
            .collect();
        let uses = per_execution(&stages, &Settings::default());
        let r = uses.iter().find(|u| u.name == "r").unwrap();
        assert!((r.per_execution_bytes / MB - 20.0).abs() < 1e-6, "{r:?}");
        assert!((r.base_bytes / MB - 124.0).abs() < 1e-6);
        assert_eq!(r.at, Some(10));
        assert!((r.need_bytes.unwrap() / MB - 324.0).abs() < 1e-3);
        let w = uses.iter().find(|u| u.name == "w").unwrap();
        assert_eq!(w.at, None, "the worker does not grow: {w:?}");
        let mut out = Vec::new();
        findings(&uses, &mut out);
        let ids: Vec<FindingId> = out.iter().map(|f| f.id).collect();
        assert_eq!(
            ids,
            vec![
                FindingId::MemoryPerExecution,
                FindingId::MemoryLimitBelowNeed
            ]
        );
        assert!((out[1].get("need_mb").unwrap() - 324.0).abs() < 1e-6);
    }
}
