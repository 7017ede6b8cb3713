//! The runner's memory limit from what Code tasks really use (the diagnosis's per-task peak
//! and idle base): tasks × peak + base with headroom, for the runner that was OOM-killed when
//! one was, else for every runner at its limit.

use crate::diagnose::lifecycle::{memory_needed_mib, tasks_within, MEMORY_HEADROOM};
use crate::model::n8n_defaults;
use crate::record::diagnosis::{DeathKind, Diagnosis};
use crate::record::recommendation::MemoryPlan;
use crate::record::Role;

const MIB: f64 = 1024.0 * 1024.0;

pub fn plan(d: &Diagnosis) -> Option<MemoryPlan> {
    let m = d.runner_memory.as_ref()?;
    let killed = d
        .deaths
        .iter()
        .find(|x| x.kind == DeathKind::OomKilled && x.role == Role::Runner);
    let tasks = killed
        .and_then(|k| k.runner_limit)
        .or(d.settings.runner_limit.as_ref().map(|l| l.value))
        .unwrap_or(n8n_defaults::RUNNER_LIMIT)
        .max(1);
    let current = killed
        .and_then(|k| k.memory_limit_bytes)
        .map(|b| (b as f64 / MIB).round() as u64);
    Some(MemoryPlan {
        runner: killed.map(|k| k.name.clone()),
        oom_killed: killed.is_some(),
        tasks,
        per_task_mib: m.per_task_mib.clone(),
        base_mib: m.base_mib.clone(),
        headroom: MEMORY_HEADROOM,
        memory_limit_mib: memory_needed_mib(tasks as f64, m, MEMORY_HEADROOM) as u64,
        current_limit_mib: current,
        tasks_within_current_limit: current.map(|c| tasks_within(c as f64, m)),
    })
}

/// What the plan's concurrency needs where a run measured memory growing with the executions a
/// worker or a runner holds (`diagnose::memory`): a note per container whose limit it passes or
/// that has none, with the limit to set (the need with the slope's upper bound, 15 % over).
pub fn at_plan(
    uses: &[crate::record::memory::MemoryUse],
    plan: &crate::model::settings::Settings,
) -> Vec<String> {
    use crate::model::memory::Fit;
    let mut out = Vec::new();
    for u in uses.iter().filter(|u| u.per_execution_interval[0] > 0.0) {
        let planned = match u.role {
            Role::Worker => plan.worker_concurrency.as_ref().map(|c| c.value),
            Role::Runner => plan.runner_limit.as_ref().map(|r| r.value),
            _ => None,
        };
        let Some(planned) = planned else { continue };
        let fit = Fit {
            base: u.base_bytes,
            slope: u.per_execution_bytes,
            slope_interval: u.per_execution_interval,
            points: u.stages as usize,
        };
        let (need, limit) = (fit.need(f64::from(planned)), fit.limit(f64::from(planned)));
        let over = match u.limit_bytes {
            Some(l) if (l as f64) < need => format!(", over its {:.0} MiB limit", l as f64 / MIB),
            Some(_) => continue,
            None => ", and it has no memory limit".to_string(),
        };
        out.push(format!(
            "Memory: at the plan's {planned} {} needs {:.0} MB ({:.0} MB + {planned} × {:.1} MB measured, {:.1}–{:.1}; at most {:.0} MB){over} — give it {:.0} MiB.",
            u.name,
            need / 1e6,
            u.base_bytes / 1e6,
            u.per_execution_bytes / 1e6,
            u.per_execution_interval[0] / 1e6,
            u.per_execution_interval[1] / 1e6,
            fit.need_at_most(f64::from(planned)) / 1e6,
            limit / MIB
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::settings::{Provenance, Settings, Sourced};
    use crate::record::memory::MemoryUse;

    /// A runner measured at 20 MB a task (18–22) over 124 MB with a 448 MiB (470 MB) limit: its
    /// limit of 10 fits (324 MB), a plan of 20 does not (524 MB) and says the limit to set.
    #[test]
    fn a_plan_past_a_measured_memory_limit_says_so() {
        let u = MemoryUse {
            name: "runner-1".into(),
            role: Role::Runner,
            base_bytes: 124e6,
            per_execution_bytes: 20e6,
            per_execution_interval: [18e6, 22e6],
            stages: 4,
            held_max: 8.0,
            at: Some(10),
            need_bytes: Some(324e6),
            recommended_limit_bytes: None,
            limit_bytes: Some(448 << 20),
        };
        let plan = |limit: u32| Settings {
            runner_limit: Some(Sourced::new(limit, Provenance::Proposed("plan".into()))),
            ..Settings::default()
        };
        assert!(at_plan(std::slice::from_ref(&u), &plan(10)).is_empty());
        let notes = at_plan(std::slice::from_ref(&u), &plan(20));
        assert_eq!(notes.len(), 1, "{notes:?}");
        // 124 + 20 × 20 = 524 MB (at most 564); × 1.15 = 602.6 MB = 574.7 MiB → 576 MiB.
        assert!(
            notes[0].contains("524 MB") && notes[0].contains("576 MiB"),
            "{notes:?}"
        );
    }
}
