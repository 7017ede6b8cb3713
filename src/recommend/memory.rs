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
