//! The diagnosis on synthetic levels: every input shape a user brings (one k6 level, a coarse
//! grid, an open-model run, a run that failed), with figures taken from real n8n 2.41 runs
//! where there are some (runner limit 5 → 4.7 req/s at 1 s jobs; CPU-bound near 12.5/s).

use super::*;
use crate::model::settings::Provenance;
use crate::model::settings::Sourced;
use crate::model::{Capping, Limit};
use crate::record::diagnosis::{CpuSite, SaturationSign};
use crate::record::stage::{ContainerObserved, EndpointObserved, Latency, QueueObserved};
use crate::record::{LoadLevel, LoadModel, Role};

mod cpu_bound;
mod failures;
mod host;
mod redis;
pub use cpu_bound::{cpu_stage, with_cpu};
use failures::failing;

/// A valid closed stage at `vus` in flight with throughput `x` and mean response N ÷ X.
pub fn closed(index: usize, vus: u32, x: f64) -> StageResult {
    let mean_ms = vus as f64 / x * 1000.0;
    stage(index, LoadModel::Closed, Some(vus), None, x, mean_ms)
}

pub fn stage(
    index: usize,
    model: LoadModel,
    vus: Option<u32>,
    rate: Option<f64>,
    x: f64,
    mean_ms: f64,
) -> StageResult {
    let requests = (x * 10.0).round() as u64;
    StageResult {
        vus,
        rate,
        max_vus: Some(1000),
        duration_s: 15.0,
        warmup_s: 5.0,
        window_s: 10.0,
        requests,
        ok: requests,
        throughput_rps: x,
        request_rate: x,
        latency: Some(Latency {
            mean_ms,
            min_ms: mean_ms * 0.9,
            p50_ms: mean_ms,
            p90_ms: mean_ms * 1.02,
            p95_ms: mean_ms * 1.03,
            p99_ms: mean_ms * 1.05,
            max_ms: mean_ms * 1.1,
        }),
        new_connections: vus.unwrap_or(1) as u64,
        client_cpu_percent: 5.0,
        ..StageResult::empty(index, format!("stage {index}"), model)
    }
}

pub fn settings(job_s: f64, c: Option<u32>, r: Option<u32>) -> Settings {
    Settings {
        workers: Some(Sourced::new(1, Provenance::Assumed("test".into()))),
        worker_concurrency: c.map(|v| Sourced::new(v, Provenance::Assumed("test".into()))),
        runner_limit: r.map(|v| Sourced::new(v, Provenance::Assumed("test".into()))),
        runners_per_worker: Some(Sourced::new(1, Provenance::Assumed("test".into()))),
        job_time: Some(Sourced::new(job_s, Provenance::Assumed("test".into()))),
        code_time: Some(Sourced::new(job_s, Provenance::Assumed("test".into()))),
        task_memory_mb: None,
        executions_mode: None,
        binary_data_mode: None,
        db_pool_size: None,
        measured: Default::default(),
    }
}

pub fn run(stages: &[StageResult], s: Settings) -> Diagnosis {
    diagnose(
        stages,
        &Inputs {
            service_time: ServiceTime::of(stages, &s),
            settings: s,
            task_request_timeout_s: None,
            host: cpu::Host {
                cores: Some(Sourced::new(2.0, Provenance::Assumed("test".into()))),
                shares_client_cpu: true,
                client_cores: Some(2.0),
            },
            mix: Vec::new(),
        },
    )
}

fn finding<'a>(d: &'a Diagnosis, id: &str) -> &'a Finding {
    d.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:?}", d.findings))
}

#[test]
fn one_saturated_level_with_known_limits_gives_the_verdict() {
    // A single k6 run of real n8n: 20 in flight, 1 s Code, runner limit 5: 4.7 req/s.
    let d = run(&[closed(0, 20, 4.7)], settings(1.0, Some(10), Some(5)));
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let s = d.service_time.as_ref().unwrap();
    assert!((s.value - 1.06).abs() < 1e-9, "assumed job + 60 ms");
    assert!(matches!(s.source, Provenance::Assumed(_)));
    assert_eq!(
        d.levels[0].saturated_by,
        vec![SaturationSign::ResponseAboveServiceTime]
    );
    let f = finding(&d, "runner-limit-caps");
    assert!((f.get("runner_tasks_running").unwrap() - 4.7).abs() < 1e-9);
    assert!((d.effective_concurrency.unwrap() - 4.7 * 1.06).abs() < 1e-9);
    let k = d.knee.as_ref().unwrap();
    assert_eq!(k.level, LoadLevel::InFlight(20));
    assert!((k.in_flight - 4.982).abs() < 0.01);
    assert!(d.next_level.is_none());
}

#[test]
fn one_saturated_level_pins_an_unknown_runner_limit() {
    let d = run(&[closed(0, 20, 4.7)], settings(1.0, Some(10), None));
    let r = d.settings.runner_limit.as_ref().expect("inferred");
    assert_eq!(r.value, 5);
    assert!(matches!(r.source, Provenance::Inferred(_)), "{}", r.source);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
}

#[test]
fn one_saturated_level_pins_an_unknown_worker_concurrency() {
    // Runner limit 20 known; 9.6 req/s at 1 s jobs: X × S = 10.2 executions in progress.
    let d = run(&[closed(0, 20, 9.6)], settings(1.0, None, Some(20)));
    let c = d.settings.worker_concurrency.as_ref().expect("inferred");
    assert_eq!(c.value, 10);
    assert!(matches!(c.source, Provenance::Inferred(_)));
    assert_eq!(d.capping_limit, Some(Limit::WorkerConcurrency.into()));
}

#[test]
fn the_queue_gauges_give_worker_concurrency() {
    let mut st = closed(0, 20, 9.6);
    st.queue = Some(QueueObserved {
        active_mean: 10.0,
        active_max: 10.0,
        waiting_mean: 9.5,
        waiting_max: 10.0,
        samples: 10,
        ..Default::default()
    });
    let d = run(&[st], settings(1.0, None, None));
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 10);
    assert!(d.levels[0]
        .saturated_by
        .contains(&SaturationSign::JobsWaitedInRedis));
}

/// On a busy host part of what is in flight sits in main's intake and response, outside any
/// slot: with 15 slots full, 20 in flight and (for that) no job waiting, worker concurrency is
/// at least the 15 the gauge counted — never the 20 in flight.
#[test]
fn slots_full_with_no_job_waiting_count_the_slots_not_the_in_flight() {
    let mut st = closed(0, 20, 28.0);
    st.queue = Some(QueueObserved {
        active_mean: 14.8,
        active_max: 15.0,
        waiting_mean: 0.3,
        waiting_max: 2.0,
        samples: 10,
        ..Default::default()
    });
    let d = run(&[st], settings(0.2, None, None));
    let c = d.settings.worker_concurrency.as_ref().unwrap();
    assert_eq!(c.value, 15, "{}", c.source);
    // X × C = 28 × 0.2 = 5.6 runner tasks: the runner limit 6 caps.
    assert_eq!(d.settings.runner_limit.as_ref().unwrap().value, 6);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
}

/// Jobs waited, yet on a busy host the queue ran dry at moments and the mean of the slots
/// taken fell to 14.3 of 15: the readings taken while a job waited count all 15.
#[test]
fn the_slots_are_read_where_jobs_waited() {
    let mut st = closed(0, 20, 9.6);
    st.queue = Some(QueueObserved {
        active_mean: 14.3,
        active_max: 15.0,
        waiting_mean: 2.1,
        waiting_max: 5.0,
        active_while_waiting: Some(15.0),
        samples: 10,
        ..Default::default()
    });
    let d = run(&[st], settings(1.0, None, None));
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 15);
}

#[test]
fn a_coarse_grid_is_saturated_at_its_top_level() {
    // --vus 2,8 on 4 slots and 1 s jobs: 8 in flight is at the ceiling (R = 2.1 s).
    let d = run(
        &[closed(0, 2, 1.9), closed(1, 8, 3.8)],
        settings(1.0, Some(4), Some(10)),
    );
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    assert!(!d.levels[0].saturated() && d.levels[1].saturated());
    assert!(d.next_level.is_none());
    let k = d.knee.as_ref().unwrap();
    assert!((k.in_flight - 3.8 * 1.06).abs() < 1e-6);
}

#[test]
fn a_level_below_the_ceiling_is_not_saturated_and_says_what_to_try() {
    let d = run(
        &[closed(0, 1, 0.94), closed(1, 4, 3.76)],
        settings(1.0, Some(10), Some(10)),
    );
    assert_eq!(d.capping_limit, None);
    assert!(d.measured_ceiling.is_none());
    // The settings put the knee near 10 × S: 1.5 × that, and at least twice the top level.
    let next = d.next_level.unwrap();
    assert!((15..=16).contains(&next), "{next}");
    assert!((d.service_time.as_ref().unwrap().value - 1.0 / 0.94).abs() < 1e-9);
}

#[test]
fn a_history_below_the_ceiling_proposes_no_next_level_in_words_or_figures() {
    let window = |mut s: StageResult| {
        s.history = Some(crate::record::stage::HistoryFigures {
            windows: 1,
            slot_time_s: Some(1.0),
            executions: 100.0,
            host: None,
        });
        s
    };
    let d = run(
        &[window(closed(0, 1, 0.94)), window(closed(1, 4, 3.76))],
        settings(1.0, Some(10), Some(10)),
    );
    assert_eq!(d.capping_limit, None);
    assert!(d.next_level.is_none());
    assert!(!d.verdict.contains("Try"), "{}", d.verdict);
}

#[test]
fn open_model_levels_are_arrivals_not_in_flight() {
    // 5/s served; 20/s offered to 5 runner tasks of 1 s: 4.7/s done, arrivals dropped.
    let mut lo = stage(0, LoadModel::Open, None, Some(5.0), 5.0, 1060.0);
    lo.max_vus = Some(50);
    let mut hi = stage(1, LoadModel::Open, None, Some(20.0), 4.7, 10_600.0);
    hi.dropped_iterations = 120;
    let d = run(&[lo, hi], settings(1.0, Some(10), Some(5)));
    assert_eq!(d.levels[1].level, LoadLevel::Rate(20.0));
    // In flight by Little's law: 4.7/s × 10.6 s, never the 20 arrivals/s.
    assert!((d.levels[1].in_flight - 4.7 * 10.6).abs() < 1e-9);
    assert!(d.levels[1]
        .saturated_by
        .contains(&SaturationSign::ThroughputBelowOfferedRate));
    assert!(!d.levels[0].saturated());
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    for c in &d.comparison {
        assert_ne!(c.in_flight, 20.0);
    }
}

#[test]
fn measured_against_model_uses_the_service_time() {
    // Worker-bound 15 ÷ S, S = 0.24 s measured at 1 in flight (0.2 s job + 40 ms).
    let stages = [closed(0, 1, 1.0 / 0.24), closed(1, 30, 15.0 / 0.22)];
    let d = run(&stages, settings(0.2, Some(15), Some(20)));
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    let cap = d.capacity.unwrap();
    assert!((cap.worker_bound() - 15.0 / 0.24).abs() < 1e-9);
    let c1 = &d.comparison[0];
    assert!((c1.predicted - c1.measured).abs() < 1e-9);
    assert!((d.fixed_overhead_s.unwrap() - 0.04).abs() < 1e-9);
    assert_eq!(d.curve.len(), 30);
}

#[test]
fn every_diagnosis_round_trips_through_json() {
    // summary.json must read back whatever the verdict (JSON has no NaN or infinity).
    let cases: Vec<(Vec<StageResult>, Settings)> = vec![
        (vec![closed(0, 20, 4.7)], settings(1.0, Some(10), Some(5))),
        (vec![closed(0, 20, 4.7)], settings(1.0, Some(10), Some(0))),
        (vec![closed(0, 20, 4.7)], settings(1.0, None, None)),
        (vec![closed(0, 20, 4.7)], Settings::default()),
        (cpu_stage(true), settings(0.01, Some(15), Some(20))),
        (cpu_stage(false), settings(0.01, Some(15), Some(20))),
        (
            vec![failing(0, 5, Some(500), 60_000.0)],
            settings(1.0, None, None),
        ),
        (
            vec![closed(0, 1, 0.94), closed(1, 4, 3.76)],
            settings(1.0, Some(10), Some(10)),
        ),
    ];
    for (stages, s) in cases {
        let mut s = s;
        if let Some(c) = s.code_time.as_mut() {
            c.value = c
                .value
                .min(s.job_time.as_ref().map(|j| j.value).unwrap_or(0.0));
        }
        let d = run(&stages, s);
        let text = serde_json::to_string(&d).unwrap();
        let back: Diagnosis =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {}", d.verdict));
        assert_eq!(back.capping_limit, d.capping_limit);
        assert_eq!(back.findings.len(), d.findings.len());
    }
}

#[test]
fn saturated_with_no_job_waiting_points_behind_the_slots() {
    // Real-n8n-like: 60 slots, runner limit 20 (both unknown), 1 s Code, 32 in flight: every job
    // holds a slot, none waits in the queue, yet R̄ = 1.6 s > 1.3 S.
    let mut st = closed(0, 32, 20.0);
    st.queue = Some(QueueObserved {
        active_mean: 32.0,
        active_max: 32.0,
        waiting_mean: 0.0,
        samples: 10,
        ..Default::default()
    });
    let d = run(&[st], settings(1.0, None, None));
    let c = d.settings.worker_concurrency.as_ref().unwrap();
    assert_eq!(c.value, 32);
    assert!(matches!(c.source, Provenance::Inferred(_)));
    assert!(c.source.words().contains("at least"), "{}", c.source);
    assert_eq!(d.settings.runner_limit.as_ref().unwrap().value, 20);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
}

#[test]
fn a_reached_worker_concurrency_caps_even_with_the_runner_limit_unknown() {
    // 40 slots of ≈1 s, runners unknown: 38.5 req/s at 64 in flight, 24 jobs waiting.
    let mut st = closed(0, 64, 38.5);
    st.queue = Some(QueueObserved {
        active_mean: 40.0,
        active_max: 40.0,
        waiting_mean: 23.0,
        samples: 10,
        ..Default::default()
    });
    let d = run(&[st], settings(1.0, None, None));
    assert_eq!(d.settings.worker_concurrency.as_ref().unwrap().value, 40);
    assert!(d.settings.runner_limit.is_none());
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    // And the mirror: only the runner limit known, and reached.
    let d = run(&[closed(0, 20, 4.7)], settings(1.0, None, Some(5)));
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
}

#[test]
fn uploads_say_what_main_and_the_workers_held() {
    let mut s = closed(0, 4, 2.0);
    s.bytes_sent = s.requests * 10_000_000;
    let mib = 1024.0 * 1024.0;
    s.memory_by_role = vec![
        crate::record::stage::RoleMemory {
            role: Role::Main,
            containers: 1,
            baseline_bytes: 200.0 * mib,
            mean_bytes: 230.0 * mib,
            max_bytes: 250.0 * mib,
        },
        crate::record::stage::RoleMemory {
            role: Role::Worker,
            containers: 1,
            baseline_bytes: 300.0 * mib,
            mean_bytes: 320.0 * mib,
            max_bytes: 340.0 * mib,
        },
    ];
    let d = run(&[s], settings(1.0, Some(10), Some(10)));
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "upload-memory")
        .expect("uploads named");
    assert_eq!(f.get("bytes_in_flight"), Some(40_000_000.0));
    assert_eq!(f.get("main_growth_mib"), Some(50.0));
    assert_eq!(f.get("worker_growth_mib"), Some(40.0));
}

#[test]
fn a_ramp_without_a_held_step_is_too_fast_to_read() {
    let mut stages: Vec<StageResult> = (0..4).map(|i| closed(i, 2 + 2 * i as u32, 5.0)).collect();
    for (i, s) in stages.iter_mut().enumerate() {
        s.warmup_s = 0.0;
        s.ramp = Some(crate::record::stage::Ramp {
            from: 2 * i as u32,
            to: 2 * i as u32 + 4,
        });
    }
    let d = run(&stages, settings(1.0, Some(10), Some(10)));
    assert!(d.levels.is_empty());
    // A window has no warm-up by design: no warmup-too-short for it.
    assert!(!d.findings.iter().any(|f| f.id == "warmup-too-short"));
    assert!(d.capping_limit.is_none());
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "ramp-too-fast")
        .expect("named");
    assert_eq!(f.get("too_fast_windows"), Some(4.0));
    // With one held step after the ramp, that step is the level the diagnosis reads.
    stages.push(closed(4, 8, 5.0));
    let d = run(&stages, settings(1.0, Some(10), Some(10)));
    assert_eq!(d.levels.len(), 1);
    assert!(d.findings.iter().any(|f| f.id == "ramp-windows"));
}

#[test]
fn a_regular_mode_main_at_its_production_limit_is_named_as_such() {
    // Production limit 4, 1 s jobs: 4 in flight at 3.85/s with 40 ms overhead, 8 in flight flat.
    let mut s = Settings::regular(
        Some(4),
        Provenance::Flag("--executions-mode regular".into()),
    );
    s.job_time = Some(Sourced::new(1.0, Provenance::Assumed("test".into())));
    s.code_time = Some(Sourced::new(1.0, Provenance::Assumed("test".into())));
    let d = run(&[closed(0, 1, 1.0 / 1.04), closed(1, 8, 3.85)], s);
    assert_eq!(
        d.capping_limit,
        Some(Limit::ProductionLimit.into()),
        "{}",
        d.verdict
    );
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "production-limit-caps")
        .expect("named");
    assert!((f.get("executions_in_progress").unwrap() - 4.0).abs() < 0.1);
}

#[test]
fn the_load_generator_is_judged_against_the_cores_it_ran_on_wherever_diagnosed() {
    // n8ncap used 180 % CPU: saturated on the 2 cores it recorded, not on a 64-core analyst.
    let mut st = closed(0, 10, 9.0);
    st.client_cpu_percent = 180.0;
    let judged = |client_cores: f64| {
        let d = diagnose(
            std::slice::from_ref(&st),
            &Inputs {
                settings: settings(1.0, Some(10), Some(10)),
                host: cpu::Host {
                    cores: None,
                    shares_client_cpu: false,
                    client_cores: Some(client_cores),
                },
                ..Inputs::default()
            },
        );
        d.findings
            .iter()
            .any(|f| f.id == "load-generator-saturated")
    };
    assert!(judged(2.0));
    assert!(!judged(64.0));
}

#[test]
fn a_stale_slots_gauge_names_no_bound_below_the_measured_ceiling() {
    // 2 workers × 5 slots, runners of 3 tasks each, 0.5 s jobs: 12/s. The gauges (20 s refresh)
    // still show the 4 slots of an earlier level; the interval given (1 s) let them through.
    let mut st = closed(1, 20, 11.96);
    st.queue = Some(QueueObserved {
        active_mean: 4.0,
        active_max: 4.0,
        waiting_mean: 6.0,
        waiting_max: 7.0,
        samples: 10,
        ..Default::default()
    });
    let mut s = settings(0.5, None, None);
    s.workers = None;
    let d = run(&[closed(0, 1, 1.0 / 0.54), st], s);
    assert_ne!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    let f = finding(&d, "settings-disagree");
    assert!(f.get("named_bound_per_s").unwrap() < f.get("measured_per_s").unwrap());
    // What the measurement supports: about 6.5 executions in progress.
    let x_s = d.effective_concurrency.unwrap();
    assert!((x_s - 11.96 * 0.54).abs() < 0.05, "{x_s}");
}

#[test]
fn zero_slots_and_zero_runner_tasks_refuted_by_what_was_served() {
    // Every stage served (19 of 19 in the hostile case): settings of 0 cannot be the ones
    // running, whatever they say.
    let stages: Vec<StageResult> = [1u32, 5, 10, 20]
        .iter()
        .enumerate()
        .map(|(i, n)| closed(i, *n, (*n as f64 / 1.06).min(4.7)))
        .collect();
    let d = run(&stages, settings(1.0, Some(0), Some(0)));
    assert_ne!(d.capping_limit, Some(Capping::NoRunner), "{}", d.verdict);
    assert_ne!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    let f = finding(&d, "settings-disagree");
    assert!(f.get("measured_per_s").unwrap() > 4.0, "{f:?}");
}

#[test]
fn a_limit_inferred_from_the_measurement_is_not_doubted_for_its_rounding() {
    // 50 workers × 10 slots, runners of 5 tasks, Code 0.5 s in a 0.52 s job: 500/s. The runner
    // limit inferred from X × C = 260 tasks rounds to 5 per worker, whose bound (250 ÷ 0.52 s =
    // 481/s) is under the 500 measured only by that rounding.
    let mut s = settings(0.52, Some(10), None);
    s.workers = Some(Sourced::new(50, Provenance::Assumed("test".into())));
    let d = run(&[closed(0, 1, 1.0 / 0.56), closed(1, 800, 500.0)], s);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    assert_eq!(d.settings.runner_limit.as_ref().unwrap().value, 5);
}

#[test]
fn from_n_in_flight_on_names_the_smallest_level_at_the_ceiling() {
    // 4 slots of 1 s: 8, 16 and 32 in flight all at the ceiling, 16 a hair the fastest.
    let d = run(
        &[
            closed(0, 2, 1.9),
            closed(1, 8, 3.80),
            closed(2, 16, 3.84),
            closed(3, 32, 3.81),
        ],
        settings(1.0, Some(4), Some(10)),
    );
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    let f = d
        .findings
        .iter()
        .find(|f| f.id == FindingId::WorkerConcurrencyCaps)
        .unwrap();
    let all = format!("{} {}", d.verdict, f.evidence.join(" "));
    assert!(all.contains("from 8 in flight on"), "{all}");
    assert!(!all.contains("from 16 in flight on"), "{all}");
}

#[test]
fn an_adaptive_stage_ended_when_steady_is_not_faulted_for_the_warm_up_it_chose() {
    use crate::record::stage::StageEnd;
    // 8 in flight at 2 s responses after a 0.5 s warm-up.
    let stage = |end: StageEnd| {
        let mut s = closed(1, 8, 4.0);
        s.warmup_s = 0.5;
        s.ended_by = Some(end);
        s
    };
    let has = |end: StageEnd| {
        run(
            &[closed(0, 2, 1.9), stage(end)],
            settings(1.0, Some(4), Some(10)),
        )
        .findings
        .iter()
        .any(|f| f.id == FindingId::WarmupTooShort)
    };
    assert!(has(StageEnd::Duration), "a fixed stage is faulted");
    assert!(!has(StageEnd::Steady { half_width: 0.05 }));
    assert!(!has(StageEnd::Settled {
        half_width: 0.1,
        threshold_rps: 3.8
    }));
}

/// main at its one core in queue mode: main's intake caps (not "CPU"), with main's CPU per
/// execution and the rate it allows, and no plan of workers or slots raises it; in regular mode
/// main runs the executions too, and the same reading is CPU's.
#[test]
fn main_at_its_core_in_queue_mode_is_mains_intake() {
    let hi = with_cpu(
        closed(1, 20, 12.5),
        &[(Role::Worker, 0.5), (Role::Main, 0.95)],
    );
    let stages = vec![closed(0, 1, 1.0 / 0.08), hi];
    let d = run(&stages, settings(0.01, Some(15), Some(20)));
    assert_eq!(
        d.capping_limit,
        Some(Limit::MainIntake.into()),
        "{}",
        d.verdict
    );
    let f = finding(&d, "main-intake-caps");
    assert!((f.get("cpu_s_per_execution").unwrap() - 0.076).abs() < 1e-9);
    assert!((f.get("main_intake_bound_per_s").unwrap() - 1.0 / 0.076).abs() < 1e-6);
    assert!(d.findings.iter().all(|f| f.id.as_str() != "cpu-limit-caps"));
    assert!(crate::recommend::recommend(&d, None).is_err());

    let mut regular = settings(0.01, Some(15), Some(20));
    regular.executions_mode = Some(Sourced::new(
        crate::model::settings::ExecutionsMode::Regular,
        Provenance::Assumed("test".into()),
    ));
    let d = run(&stages, regular);
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
}

/// A sweep from 2 in flight with no `sleep_ms` (no job time) of a server that saturates at
/// 50/s: 49.4/s at 2 and at 10 in flight, the mean response 40 → 202 ms. The least loaded
/// level bounds S from above: 10 in flight is saturated and the ceiling is measured.
#[test]
fn a_sweep_without_a_baseline_or_a_job_time_still_finds_its_ceiling() {
    let stages = [closed(0, 2, 49.4), closed(1, 10, 49.4)];
    let mut s = settings(0.0, None, None);
    s.job_time = None;
    s.code_time = None;
    let d = run(&stages, s);
    let x = d.measured_ceiling.as_ref().expect("a ceiling");
    assert!((x.mean - 49.4).abs() < 1e-9, "{}", d.verdict);
    let st = d.service_time.as_ref().unwrap();
    assert!((st.value - 2.0 / 49.4).abs() < 1e-6, "{st:?}");
}
