//! The lifecycle findings' tests: deaths, restarts, a runner's memory, Redis lost.
use super::*;
use crate::diagnose::tests::{closed, settings};
use crate::diagnose::{diagnose, Inputs};
use crate::record::lifecycle::LifecycleEvent;
use crate::record::stage::RoleMemory;

fn container(name: &str, role: Role) -> ContainerObserved {
    ContainerObserved {
        name: name.into(),
        role,
        samples: 3,
        memory_baseline_bytes: 150.0 * MIB,
        ..ContainerObserved::default()
    }
}

fn event(at_s: f64, action: LifecycleAction, exit_code: Option<i64>) -> LifecycleEvent {
    LifecycleEvent {
        at_s,
        unix: 0.0,
        action,
        exit_code,
        oom_killed: action == LifecycleAction::Die && exit_code == Some(137),
        redis_lost: false,
    }
}

/// Main gives Redis up in stage 2 (n8n's words in its log) while a runner was OOM-killed
/// earlier: the Redis loss leads the verdict and the findings, and the stage before it
/// keeps its measurement.
#[test]
fn a_process_that_gave_redis_up_leads_the_verdict() {
    let mut first = closed(0, 4, 3.9);
    first.containers = vec![container("n8n", Role::Main)];
    let mut second = closed(1, 8, 2.0);
    let mut main = container("n8n", Role::Main);
    main.events = vec![LifecycleEvent {
        redis_lost: true,
        ..event(3.0, LifecycleAction::Die, Some(1))
    }];
    main.exited = true;
    main.down_at_end = true;
    let mut r = container("r", Role::Runner);
    r.events = vec![event(1.0, LifecycleAction::Die, Some(137))];
    r.exited = true;
    r.oom_killed = true;
    r.down_at_end = true;
    second.containers = vec![main, r];
    let set = settings(1.0, Some(10), Some(10));
    let stages = [first, second];
    let d = deaths(&stages, &set);
    assert_eq!(d.len(), 2);
    assert!(d[0].redis_lost && d[0].role == Role::Main && !d[0].came_back);
    assert_eq!((d[0].stage, d[0].exit_code), (1, Some(1)));
    assert!(verdict_prefix(&d, 60.0).is_some());
    let mut out = Vec::new();
    findings(&d, None, None, &mut out);
    assert_eq!(out[0].id, "redis-connection-lost");
    assert_eq!(out[0].get("stage"), Some(2.0));
    let mut levels = crate::diagnose::levels::group(&stages);
    mark_levels(&mut levels, &d, &stages);
    assert!(levels[0].valid && levels[0].stack_changed.is_none());
    assert!(levels[1].stack_changed.is_some());
}

/// Stage 1 at 4 in flight: runner `r` of worker `w` (limit 5, 512 MiB) killed at 2 s.
fn killed_run() -> (Vec<StageResult>, Settings) {
    let mut s = closed(0, 4, 1.9);
    s.valid = false;
    let mut r = container("r", Role::Runner);
    r.attached_to = Some("w".into());
    r.runner_limit = Some(5);
    r.memory_limit_bytes = Some(512 << 20);
    r.memory_last_bytes = 300.0 * MIB;
    r.memory_peak_bytes = 300.0 * MIB;
    r.events = vec![
        event(2.0, LifecycleAction::Oom, None),
        event(2.0, LifecycleAction::Die, Some(137)),
    ];
    r.exited = true;
    r.oom_killed = true;
    r.down_at_end = true;
    s.containers = vec![container("w", Role::Worker), r];
    let mut later = closed(1, 8, 3.8);
    later.containers = vec![container("w", Role::Worker)];
    let mut set = settings(1.0, Some(10), Some(5));
    set.task_memory_mb = Some(Sourced::new(
        200.0,
        Provenance::Body("request body (alloc_mb)".into()),
    ));
    (vec![s, later], set)
}

#[test]
fn a_runner_killed_at_its_limit_comes_first_with_the_numbers_that_fit() {
    let (stages, set) = killed_run();
    let d = diagnose(
        &stages,
        &Inputs {
            settings: set,
            ..Inputs::default()
        },
    );
    assert!(
        d.verdict
            .starts_with("Runner r (of w) was OOM-killed in stage 1 at 2.0 s"),
        "{}",
        d.verdict
    );
    assert_eq!(d.deaths.len(), 1);
    assert_eq!(d.deaths[0].kind, DeathKind::OomKilled);
    assert!(!d.deaths[0].came_back);
    let f = &d.findings[0];
    assert_eq!(f.id, "runner-oom-killed");
    assert_eq!(f.get("memory_limit_mib"), Some(512.0));
    assert_eq!(f.get("tasks_held"), Some(4.0));
    assert_eq!(f.get("per_task_mib"), Some(200.0));
    // 4 × 200 + 150 held this run's tasks; 5 × 200 + 150 with 25 % for the limit 5; at
    // 512 MiB only ⌊(512 ÷ 1.25 − 150) ÷ 200⌋ = 1 task fits.
    assert_eq!(f.get("needed_mib"), Some(950.0));
    assert_eq!(f.get("proposed_limit_mib"), Some(1438.0));
    assert_eq!(f.get("tasks_within_limit"), Some(1.0));
    // The later stage ran without the runner: left out, not judged as a deployment.
    assert!(d
        .levels
        .iter()
        .all(|l| l.stack_changed.is_some() && !l.valid));
    let plan = crate::recommend::memory::plan(&d).unwrap();
    assert_eq!(
        (plan.memory_limit_mib, plan.tasks_within_current_limit),
        (1438, Some(1))
    );
    assert_eq!(plan.runner.as_deref(), Some("r"));
}

#[test]
fn without_a_declared_allocation_a_kill_gives_a_lower_bound_per_task() {
    let (stages, mut set) = killed_run();
    set.task_memory_mb = None;
    let deaths = deaths(&stages, &set);
    let m = runner_memory(&stages, &set, &deaths).unwrap();
    // (512 − 150) ÷ 4 tasks held.
    assert!((m.per_task_mib.value - 90.5).abs() < 1e-9);
    assert!(matches!(m.per_task_mib.source, Provenance::Inferred(_)));
}

#[test]
fn per_task_memory_is_the_runners_growth_over_the_tasks_running() {
    // 4 in flight, 1 s jobs at 3.9/s; the runners held 200 MiB above their base on average.
    let mut s = closed(0, 4, 3.9);
    s.containers = vec![container("r", Role::Runner)];
    s.memory_by_role = vec![RoleMemory {
        role: Role::Runner,
        containers: 1,
        baseline_bytes: 150.0 * MIB,
        mean_bytes: 350.0 * MIB,
        max_bytes: 406.0 * MIB,
    }];
    // Code-bound: X × C = 3.9 of at most 4 tasks running. The peak, 256 MiB above the
    // base, was held by at most 4 tasks: 64 MiB each. The mean of the readings (200 MiB over
    // 3.9 tasks: 51 each) counts the readings that fell between tasks.
    let set = settings(1.0, Some(10), Some(5));
    let m = runner_memory(std::slice::from_ref(&s), &set, &[]).unwrap();
    assert!((m.per_task_mib.value - 256.0 / 4.0).abs() < 1e-9);
    assert_eq!(m.tasks, Some(4.0));
    assert_eq!(m.base_mib.value, 150.0);
    assert_eq!(
        memory_needed_mib(5.0, &m, 1.0),
        (5.0 * 64.0 + 150.0_f64).ceil()
    );
    // A busy machine lowers X (2.9/s), not what 4 tasks hold: still 64.
    let mut slow = s.clone();
    slow.throughput_rps = 2.9;
    let m = runner_memory(std::slice::from_ref(&slow), &set, &[]).unwrap();
    assert!((m.per_task_mib.value - 64.0).abs() < 1e-9);
    // 0.3 s of Code in a 1 s job: X × C = 3.9 × 0.3 tasks, under half of 4: the means.
    let mut part = settings(1.0, Some(10), Some(5));
    part.code_time = Some(Sourced::new(0.3, Provenance::Assumed("test".into())));
    let m = runner_memory(std::slice::from_ref(&s), &part, &[]).unwrap();
    assert!((m.per_task_mib.value - 200.0 / (3.9 * 0.3)).abs() < 1e-9);
}

#[test]
fn a_restart_is_named_and_leaves_its_level_out() {
    let mut s = closed(0, 4, 3.9);
    let mut r = container("r", Role::Runner);
    r.events = vec![
        event(1.0, LifecycleAction::Kill, None),
        event(1.0, LifecycleAction::Die, Some(143)),
        event(1.5, LifecycleAction::Start, None),
    ];
    r.exited = true;
    r.restarted = 1;
    s.containers = vec![r];
    let next = closed(1, 8, 7.8);
    let set = settings(1.0, Some(10), Some(10));
    let d = deaths(&[s.clone(), next.clone()], &set);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].kind, DeathKind::Restarted);
    assert!(d[0].came_back);
    let mut levels = crate::diagnose::levels::group(&[s.clone(), next.clone()]);
    mark_levels(&mut levels, &d, &[s, next]);
    // Only the level it restarted in.
    assert!(levels[0].stack_changed.is_some() && !levels[0].valid);
    assert!(levels[1].stack_changed.is_none() && levels[1].valid);
    let mut out = Vec::new();
    findings(&d, None, None, &mut out);
    assert_eq!(out[0].id, "container-restarted");
    assert_eq!(out[0].get("stage"), Some(1.0));
}
