use super::*;
use crate::model::settings::Provenance;
use crate::model::Limit;
use crate::record::history::ProcessCpu;
use crate::record::Role;

/// The history made into evidence by its source and judged, as `diagnose --prometheus` does:
/// the diagnosis and the stages; `h` left marked.
fn judge(h: &mut History, flags: Settings, timeout: Option<f64>) -> (Diagnosis, Vec<StageResult>) {
    let ev = crate::observe::history::evidence(h.clone(), flags.clone(), "test");
    let d = super::judge_windows(&ev, &flags, timeout);
    *h = ev
        .windows
        .clone()
        .expect("a history's evidence has its windows");
    (d, ev.summary.stages)
}

/// A history of 75 s windows: `quiet` windows of a few executions at the job time where
/// nothing waited, then `busy` saturated windows at `x`/s with `active` slots taken,
/// `waiting` jobs waiting and executions holding their slot `slot_s`; each busy window's
/// rate off the truth by `wobble` (as windows cut at edges read 8.2–14.9 for 12.5).
fn history(quiet: usize, job_s: f64, busy: &[(f64, f64, f64, f64)]) -> History {
    let mut windows = Vec::new();
    let mut t = 1_800_000_000.0;
    let mut push = |x: f64, active: f64, waiting: f64, slot: f64, t: &mut f64| {
        let covered = 75.0;
        windows.push(Window {
            start: *t,
            end: *t + covered,
            covered_s: covered,
            completions: x * covered,
            failures: 0.0,
            between_ticks: true,
            throughput_per_s: x,
            throughput_interval: [x * 0.98, x * 1.02],
            active_mean: active,
            active_max: active,
            waiting_mean: waiting,
            waiting_start: waiting,
            waiting_end: waiting,
            waiting_max: waiting,
            // Every step read jobs waiting at the window's slots: all were taken.
            active_while_waiting: (waiting >= 1.0).then_some(active),
            waited_samples: if waiting >= 1.0 { 5 } else { 0 },
            samples: 5,
            gaps: 0,
            cpu: vec![ProcessCpu {
                process: "w:1 (n8n-worker)".into(),
                role: Role::Worker,
                cores: 0.05,
                rss_max_bytes: None,
                eventloop_lag_max_s: None,
                db_pool: None,
            }],
            execution_s: Some(slot),
            executions: x * covered,
            busy: false,
            evidence: Vec::new(),
            idle_workers: Vec::new(),
            workers: None,
            host: None,
        });
        *t += covered;
    };
    for _ in 0..quiet {
        push(0.1, 0.05, 0.0, job_s, &mut t);
    }
    for &(x, active, waiting, slot) in busy {
        push(x, active, waiting, slot, &mut t);
    }
    History {
        source: "test".into(),
        start: 1_800_000_000.0,
        end: t,
        matchers: Vec::new(),
        step_s: Sourced::new(15.0, Provenance::Assumed("test".into())),
        scrape_interval_s: Some(15.0),
        queue_refresh_s: Some(20.0),
        queue_refresh_by: "test".into(),
        tick_half_width_s: Some(2.5),
        window_s: 75.0,
        processes: Vec::new(),
        windows,
        gap_steps: 0,
        gaps: Vec::new(),
        resets: Vec::new(),
        warnings: Vec::new(),
        exporter: None,
        workers_by: None,
        host_by: None,
    }
}

fn ids(d: &Diagnosis) -> Vec<FindingId> {
    d.findings.iter().map(|f| f.id).collect()
}

/// The windows of a steady 12.5/s as ticks cut them: a few per cent around the truth.
const WOBBLE: [f64; 5] = [0.95, 1.05, 0.97, 1.03, 1.0];

#[test]
fn a_worker_capped_history_is_named_from_little_at_the_slots_with_no_flag() {
    // 4 slots, 0.5 s jobs: 8/s; no quiet window gives the job time.
    let busy: Vec<_> = [1.0, 1.0, 1.0, 1.0, 1.0]
        .iter()
        .map(|k| (8.0 * k, 4.0, 8.0, 0.5))
        .collect();
    let mut h = history(0, 0.5, &busy);
    let (d, stages) = judge(&mut h, Settings::default(), None);
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    // One pooled stage for the saturated period.
    assert_eq!(stages.len(), 1);
    let x = d.measured_ceiling.as_ref().unwrap();
    assert!((x.mean - 8.0).abs() < 1e-9, "{x:?}");
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 4);
    assert!(ids(&d).contains(&FindingId::SlotsBind), "{:?}", ids(&d));
    // A history chose no level: nothing from a sweep's vocabulary.
    assert!(!ids(&d).contains(&FindingId::WarmupTooShort));
    assert_eq!(d.next_level, None);
    assert!(!d.verdict.contains("arrivals/s"), "{}", d.verdict);
    // The named bound is not below what was measured.
    let bound = 4.0 / d.service_time.as_ref().unwrap().value;
    assert!(bound >= 0.97 * x.mean, "{bound} for {}", x.mean);
}

#[test]
fn a_slots_gauge_over_little_s_law_is_not_the_slots_inferred() {
    // 4 slots, 0.5 s jobs at 8/s (4 executions in slots), while main's gauge counts 7: jobs
    // finished but not yet cleared from the active list on a starved host.
    let busy: Vec<_> = (0..5).map(|_| (8.0, 7.0, 8.0, 0.5)).collect();
    let mut h = history(0, 0.5, &busy);
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 4);
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
}

#[test]
fn a_runner_capped_history_pools_its_period_and_infers_the_runner_from_the_code_time() {
    // 12 slots, a runner of 5 tasks, 0.4 s Code: 12.5/s; each execution holds its slot
    // 0.96 s (waiting for a runner inside it). The windows alias ±20 %.
    let busy: Vec<_> = WOBBLE.iter().map(|k| (12.5 * k, 12.0, 8.0, 0.96)).collect();
    let mut h = history(0, 0.4, &busy);
    let flags = Settings {
        code_time: Some(Sourced::new(0.4, Provenance::Flag("--code-time".into()))),
        ..Default::default()
    };
    let (d, _) = judge(&mut h, flags, None);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let x = d.measured_ceiling.as_ref().unwrap();
    // Pooled, never the best window (17/s).
    let truth: f64 = WOBBLE.iter().map(|k| 12.5 * k).sum::<f64>() / 5.0;
    assert!((x.mean - truth).abs() < 1e-6, "{x:?}");
    assert!(
        x.mean < 12.5 * 1.05 - 0.1,
        "the best window is not the ceiling"
    );
    let r = d.settings.runner_limit.as_ref().unwrap();
    assert!((r.value as f64 - 5.0).abs() <= 1.0, "{r:?}");
    let iv = r.interval.unwrap();
    assert!(iv[0] <= 5.0 && iv[1] >= 5.0, "{r:?}");
}

#[test]
fn without_the_code_time_a_history_says_what_a_slot_holds_cannot_be_told() {
    let busy: Vec<_> = [1.0; 4].iter().map(|_| (12.5, 12.0, 8.0, 0.96)).collect();
    let mut h = history(0, 0.4, &busy);
    let (d, _) = judge(&mut h, Settings::default(), None);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == FindingId::SlotsBind)
        .expect("slots-bind");
    assert!((f.get("executions_in_slots").unwrap() - 12.0).abs() < 0.01);
    assert!(d.verdict.contains("--code-time"), "{}", d.verdict);
    // With a quiet window's job time, the slot time at saturation shows the wait: the
    // runner limit is inferred without any flag.
    let mut h = history(3, 0.4, &busy);
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let r = d.settings.runner_limit.as_ref().unwrap().value;
    assert!((4..=6).contains(&r), "{r}");
}

#[test]
fn the_workers_a_history_listed_are_the_plan_s_workers() {
    let busy: Vec<_> = [1.0; 4].iter().map(|_| (16.0, 8.0, 8.0, 0.5)).collect();
    let mut h = history(0, 0.5, &busy);
    h.processes = ["w1", "w2"]
        .iter()
        .map(|i| crate::record::history::Process {
            job: "n8n-worker".into(),
            instance: i.to_string(),
            role: Role::Worker,
            role_by: "test".into(),
        })
        .collect();
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert_eq!(d.settings.workers.as_ref().unwrap().value, 2);
    // 8 slots taken across two workers: 4 each.
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 4);
}

#[test]
fn a_slots_gauge_above_the_settings_given_is_named() {
    let busy: Vec<_> = [1.0; 4].iter().map(|_| (8.0, 4.0, 8.0, 0.5)).collect();
    let mut h = history(0, 0.5, &busy);
    let flags = Settings {
        worker_concurrency: Some(Sourced::new(
            2,
            Provenance::Flag("--worker-concurrency".into()),
        )),
        ..Default::default()
    };
    let (d, _) = judge(&mut h, flags, None);
    assert!(
        ids(&d).contains(&FindingId::SettingsDisagree),
        "{:?}",
        ids(&d)
    );
    // The verdict follows the measurement: no limit whose bound (2 ÷ 0.5 = 4/s) is half
    // of the 8/s measured.
    assert_ne!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
}

#[test]
fn the_slots_are_read_at_the_steps_where_jobs_waited() {
    // 4 slots at 8/s of 0.5 s: between n8n's 20 s refreshes the queue ran dry at some steps,
    // and the gauge's mean over the windows is 3.4; at the steps where jobs waited, 4.
    let busy: Vec<_> = (0..5).map(|_| (8.0, 3.4, 2.0, 0.5)).collect();
    let mut h = history(0, 0.5, &busy);
    for w in &mut h.windows {
        w.active_while_waiting = Some(4.0);
        w.waited_samples = 3;
    }
    let (d, stages) = judge(&mut h, Settings::default(), None);
    let q = stages[0].queue.as_ref().unwrap();
    assert_eq!(q.active_while_waiting, Some(4.0));
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 4);
}

#[test]
fn little_s_law_at_the_slots_allows_the_gauge_s_lag_and_names_a_gauge_that_is_wrong() {
    let slots_bind = |busy: &[(f64, f64, f64, f64)]| {
        let mut h = history(3, 0.5, busy);
        let (d, _) = judge(&mut h, Settings::default(), None);
        // The law's own disagreement carries the executions in slots it counted.
        let fails = d
            .findings
            .iter()
            .any(|f| f.id == FindingId::SettingsDisagree && f.get("executions_in_slots").is_some());
        (ids(&d).contains(&FindingId::SlotsBind), fails)
    };
    // One saturated window whose gauge lagged the load's start by part of a 20 s refresh:
    // 4 executions in slots by the counter, 3.2 by the gauge (25 % off, under 20 + 20/75 %).
    assert_eq!(slots_bind(&[(8.0, 3.2, 4.0, 0.5)]), (true, false));
    // Four windows of a gauge that reads half the slots held: wrong, whatever its lag
    // (50 % off, over 20 + 20/300 %).
    assert_eq!(slots_bind(&[(8.0, 2.0, 4.0, 0.5); 4]), (false, true));
    // Four windows where the law holds.
    assert_eq!(slots_bind(&[(8.0, 4.0, 4.0, 0.5); 4]), (true, false));
}

#[test]
fn jobs_slower_at_load_with_full_slots_are_a_shared_resource_not_a_lower_runner_limit() {
    // The second lab: 3 workers × 5 slots on 2 cores, 0.42 s jobs alone, 0.55 s at 27.2/s while
    // n8n's processes used about 1.7 cores together.
    let busy: Vec<_> = WOBBLE.iter().map(|k| (27.2 * k, 15.0, 6.0, 0.55)).collect();
    let mut h = history(4, 0.42, &busy);
    for w in h.windows.iter_mut().filter(|w| w.throughput_per_s > 1.0) {
        w.cpu = (1..=3)
            .map(|i| ProcessCpu {
                process: format!("w:{i} (n8n-worker)"),
                role: Role::Worker,
                cores: 0.47,
                rss_max_bytes: None,
                eventloop_lag_max_s: None,
                db_pool: None,
            })
            .chain(std::iter::once(ProcessCpu {
                process: "main".into(),
                role: Role::Main,
                cores: 0.3,
                rss_max_bytes: None,
                eventloop_lag_max_s: None,
                db_pool: None,
            }))
            .collect();
    }
    let flags = Settings {
        workers: Some(Sourced::new(3, Provenance::Flag("--workers".into()))),
        worker_concurrency: Some(Sourced::new(
            5,
            Provenance::Flag("--worker-concurrency".into()),
        )),
        ..Settings::default()
    };
    let (d, _) = judge(&mut h, flags, None);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == FindingId::JobTimeGrows)
        .unwrap_or_else(|| panic!("{:?}: {}", ids(&d), d.verdict));
    assert!(
        (f.get("job_time_quiet_s").unwrap() - 0.42).abs() < 0.01,
        "{f:?}"
    );
    assert!(
        (f.get("job_time_load_s").unwrap() - 0.55).abs() < 0.01,
        "{f:?}"
    );
    assert!(f.get("n8n_cores_at_load").unwrap() > 1.5, "{f:?}");
    assert_ne!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    assert!(d.verdict.contains("shared resource"), "{}", d.verdict);
}

#[test]
fn a_steady_job_time_at_load_is_no_contention() {
    // 4 slots, 0.5 s alone and at load: the slots, not a shared resource.
    let busy: Vec<_> = WOBBLE.iter().map(|k| (8.0 * k, 4.0, 8.0, 0.5)).collect();
    let mut h = history(4, 0.5, &busy);
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert!(!ids(&d).contains(&FindingId::JobTimeGrows), "{:?}", ids(&d));
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
}

/// The second lab with only main scraped (0.3 cores: n8n's processes alone do not add up to a
/// core) and node_exporter on the host: 1.95 of 2 cores busy at load is the host's CPU; the same
/// jobs on a host of 16 cores with 2 busy are not (and n8n's 0.3 cores are no contention).
#[test]
fn node_exporter_s_cores_name_the_host_when_n8n_s_processes_are_not_all_scraped() {
    let busy: Vec<_> = WOBBLE.iter().map(|k| (27.2 * k, 15.0, 6.0, 0.55)).collect();
    let with_host = |busy_cores: f64, cores: f64| {
        let mut h = history(4, 0.42, &busy);
        for w in h.windows.iter_mut() {
            let loaded = w.throughput_per_s > 1.0;
            w.cpu[0].cores = if loaded { 0.3 } else { 0.01 };
            w.cpu[0].role = Role::Main;
            w.host = Some(crate::record::history::HostCpu {
                busy_cores: if loaded { busy_cores } else { 0.1 },
                cores,
                processes_only: false,
            });
        }
        h.host_by = Some("node_exporter at 127.0.0.1:9100".into());
        let (d, _) = judge(&mut h, Settings::default(), None);
        d
    };
    let full = with_host(1.95, 2.0);
    let f = full
        .findings
        .iter()
        .find(|f| f.id == FindingId::JobTimeGrows)
        .unwrap_or_else(|| panic!("{:?}: {}", ids(&full), full.verdict));
    assert!(
        (f.get("host_busy_cores").unwrap() - 1.95).abs() < 1e-9,
        "{f:?}"
    );
    assert_eq!(f.get("host_cores"), Some(2.0));
    assert!((f.get("n8n_cores_at_load").unwrap() - 0.3).abs() < 1e-9);
    assert_eq!(
        full.capping_limit,
        Some(Limit::Cpu.into()),
        "{}",
        full.verdict
    );
    assert_eq!(full.findings[0].id, FindingId::JobTimeGrows);
    let host = full.cpu_limit.as_ref().unwrap();
    // 2 cores ÷ (1.95 cores ÷ 27.2/s): the host's bound from node_exporter.
    assert!(
        (host.bound_per_s - 2.0 / (1.95 / 27.2)).abs() < 0.5,
        "{host:?}"
    );
    let roomy = with_host(2.0, 16.0);
    assert!(
        !ids(&roomy).contains(&FindingId::JobTimeGrows),
        "{:?}: {}",
        ids(&roomy),
        roomy.verdict
    );
}

/// Lab 2's three workers with `--host-cores 2` and no node_exporter: main and the workers
/// scraped at 1.71 cores together (the runners, Postgres and Redis not) is a full host, and
/// the one verdict is its CPU — the headline, `capping_limit`, the first finding and no plan;
/// the runner limit the quiet job time would infer (27.2 × 0.42 = 11.4 tasks) is not kept.
#[test]
fn n8n_s_processes_against_the_host_s_cores_given_make_one_cpu_verdict() {
    let busy: Vec<_> = WOBBLE.iter().map(|k| (27.2 * k, 15.0, 6.0, 0.55)).collect();
    let mut h = history(4, 0.42, &busy);
    at_load(&mut h, &[0.47, 0.47, 0.47], 0.3);
    crate::observe::history::given_host_cores(&mut h, 2.0);
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    assert_eq!(d.findings[0].id, FindingId::JobTimeGrows, "{:?}", ids(&d));
    assert_eq!(
        d.findings[0].severity,
        crate::findings::Severity::Error,
        "{:?}",
        d.findings[0]
    );
    assert!(
        !ids(&d).contains(&FindingId::RunnerLimitCaps),
        "{:?}",
        ids(&d)
    );
    assert!(
        d.settings.runner_limit.is_none(),
        "{:?}",
        d.settings.runner_limit
    );
    let host = d.cpu_limit.as_ref().unwrap();
    assert_eq!(host.usable_cores.value, 2.0);
    assert!((host.cores_used - 1.71).abs() < 1e-9, "{host:?}");
    // The processes alone do not see the rest: the host was full at what it did.
    let x = d.measured_ceiling.as_ref().unwrap().mean;
    assert!((host.bound_per_s - x).abs() < 1e-9, "{host:?}");
    assert!(crate::recommend::recommend(&d, None).is_err());
    // The same processes on a host of 8 cores given: not full, and nothing says contention.
    let mut roomy = history(4, 0.42, &busy);
    at_load(&mut roomy, &[0.47, 0.47, 0.47], 0.3);
    crate::observe::history::given_host_cores(&mut roomy, 8.0);
    let (r, _) = judge(&mut roomy, Settings::default(), None);
    assert!(!ids(&r).contains(&FindingId::JobTimeGrows), "{:?}", ids(&r));
    assert_ne!(r.capping_limit, Some(Limit::Cpu.into()), "{}", r.verdict);
}

/// A real n8n's runner-bound shape (worker concurrency 5, runner 2, 0.5 s jobs: 3.92/s): the
/// slots hold their jobs 1.25 s (waiting for a runner) while n8n's processes use about 1 of
/// the host's 2 cores. The host is not full, so the runner limit is named — 2, inferred from
/// X × C — with the worker concurrency the slots show, and no contention.
#[test]
fn a_runner_bound_history_on_a_roomy_host_names_the_runner_limit_not_contention() {
    let busy: Vec<_> = WOBBLE.iter().map(|k| (3.92 * k, 5.0, 6.0, 1.25)).collect();
    let mut h = history(4, 0.5, &busy);
    at_load(&mut h, &[0.3, 0.3, 0.3], 0.1);
    crate::observe::history::given_host_cores(&mut h, 2.0);
    let (d, _) = judge(&mut h, Settings::default(), None);
    assert!(!ids(&d).contains(&FindingId::JobTimeGrows), "{:?}", ids(&d));
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    assert_eq!(d.settings.runner_limit.as_ref().map(|r| r.value), Some(2));
    assert_eq!(
        d.settings.worker_concurrency.as_ref().map(|c| c.value),
        Some(5)
    );
}

/// The loaded windows' processes: workers at `workers` cores each and main at `main`.
fn at_load(h: &mut History, workers: &[f64], main: f64) {
    let process = |name: String, role, cores| ProcessCpu {
        process: name,
        role,
        cores,
        rss_max_bytes: None,
        eventloop_lag_max_s: None,
        db_pool: None,
    };
    for w in h.windows.iter_mut().filter(|w| w.throughput_per_s > 1.0) {
        w.cpu = workers
            .iter()
            .enumerate()
            .map(|(i, c)| process(format!("w:{i} (n8n-worker)"), Role::Worker, *c))
            .chain(std::iter::once(process("main".into(), Role::Main, main)))
            .collect();
    }
}
