//! The recommendation follows the verdict: checked on diagnoses of synthetic runs.

use super::*;
use crate::diagnose::tests::{closed, cpu_stage, run, settings, with_cpu};
use crate::model::settings::Provenance;
use crate::model::Limit;
use crate::record::Role;

#[test]
fn reference_check_break_point_120_job_24s() {
    let s = Settings {
        worker_concurrency: Some(Sourced::new(120, Provenance::Assumed("test".into()))),
        runner_limit: Some(Sourced::new(10, Provenance::Assumed("test".into()))),
        job_time: Some(Sourced::new(24.0, Provenance::Assumed("test".into()))),
        code_time: Some(Sourced::new(24.0, Provenance::Assumed("test".into()))),
        ..Settings::default()
    };
    let r = from_break_point(
        &s,
        Sourced::new(120, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    assert_eq!(r.break_point_kind, BreakPointKind::Failure);
    assert_eq!(r.operating_concurrency, 80);
    assert_eq!(r.settings.worker_concurrency_or_default(), 80);
    assert_eq!(r.settings.runner_capacity_or_default(), 80);
    assert!((r.predicted_throughput - 80.0 / 24.0).abs() < 1e-9);
    assert!(!r.cpu_measured);
    // With the runner limit left at 10: 10 ÷ 24 s = 25/min — the tool must say so.
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("stays"))
        .expect("a note");
    assert!(note.contains("25/min"), "{note}");
    assert!((r.current_ceiling.unwrap() - 10.0 / 24.0).abs() < 1e-9);
}

#[test]
fn runner_capacity_follows_the_code_share_and_is_never_lowered() {
    let s = Settings {
        job_time: Some(Sourced::new(2.0, Provenance::Assumed("t".into()))),
        code_time: Some(Sourced::new(0.5, Provenance::Assumed("t".into()))),
        worker_concurrency: Some(Sourced::new(4, Provenance::Assumed("t".into()))),
        runner_limit: Some(Sourced::new(2, Provenance::Assumed("t".into()))),
        task_memory_mb: Some(Sourced::new(100.0, Provenance::Assumed("t".into()))),
        ..Settings::default()
    };
    let r = from_break_point(
        &s,
        Sourced::new(30, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    assert_eq!(r.settings.worker_concurrency_or_default(), 20);
    // 20 slots × 0.5 ÷ 2 = 5 holding Code at once (today 2).
    assert_eq!(r.settings.runner_capacity_or_default(), 5);
    assert_eq!(r.runner_memory_limit_mb.unwrap().value, 650);
    let r = from_break_point(
        &Settings {
            runner_limit: Some(Sourced::new(8, Provenance::Assumed("t".into()))),
            ..s
        },
        Sourced::new(30, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    assert_eq!(r.settings.runner_capacity_or_default(), 8);
}

#[test]
fn a_runner_limited_knee_raises_the_runners_and_keeps_the_slots() {
    // One k6 level: 10 slots, runner limit 5, 1 s Code, 4.7 req/s.
    let d = run(&[closed(0, 20, 4.7)], settings(1.0, Some(10), Some(5)));
    let r = recommend(&d, None).unwrap();
    assert_eq!(r.break_point_kind, BreakPointKind::Knee);
    assert_eq!(
        r.settings.worker_concurrency_or_default(),
        10,
        "worker concurrency is not the problem"
    );
    assert!(r.settings.runner_capacity_or_default() >= 10);
    assert!(r.predicted_throughput > 4.7);
    // X × S = 4.7 × 1.06: what the deployment held at its ceiling.
    assert_eq!(r.operating_concurrency, 4);
    assert_eq!(r.predicted_bound, (Limit::WorkerConcurrency));
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("failure point was not reached")));
}

#[test]
fn a_worker_limited_knee_raises_worker_concurrency_one_step_without_cpu_data() {
    let d = run(
        &[closed(0, 2, 1.9), closed(1, 8, 3.8)],
        settings(1.0, Some(4), Some(10)),
    );
    let r = recommend(&d, None).unwrap();
    assert_eq!(r.settings.worker_concurrency_or_default(), 6);
    assert!(r.settings.runner_capacity_or_default() >= 6);
    assert!(!r.cpu_measured);
    assert!(r.predicted_throughput >= 3.8);
}

#[test]
fn a_failure_point_gets_the_two_thirds_factor() {
    let mut failing = closed(2, 40, 9.0);
    failing.valid = false;
    failing.invalid_reasons = vec!["http_req_failed rate<0.05 (observed 0.2)".into()];
    failing.error_rate = 0.2;
    let d = run(
        &[closed(0, 10, 9.4), closed(1, 20, 9.6), failing],
        settings(1.0, Some(10), Some(20)),
    );
    let r = recommend(&d, None).unwrap();
    assert_eq!(r.break_point_kind, BreakPointKind::Failure);
    assert_eq!(r.break_point.value, 40);
    assert_eq!(r.operating_concurrency, 26);
    assert_eq!(r.settings.worker_concurrency_or_default(), 26);
}

#[test]
fn a_cpu_bound_worker_gets_more_workers_up_to_the_host() {
    // Real n8n's figures: worker at 1.25 cores, main at 0.38, 12.5 executions/s.
    let d = run(&cpu_stage(true), settings(0.01, Some(15), Some(20)));
    let r = recommend(&d, None).unwrap();
    assert!(r.settings.worker_count() >= 2, "{r:?}");
    assert!(r.cpu_measured);
    // The host (2 cores, 1.68 used at 12.5/s) allows 14.9/s: more workers add only that much.
    let host = 2.0 / (1.68 / 12.5);
    assert!(r.predicted_throughput <= host + 1e-9);
    assert!(r.predicted_throughput > 12.5);
    assert_eq!(r.predicted_bound, Limit::HostCpu);
}

#[test]
fn no_plan_from_a_run_with_no_valid_stage() {
    let mut s = closed(0, 5, 1000.0);
    s.valid = false;
    s.error_rate = 1.0;
    s.errors.connect_refused = s.requests;
    let d = run(&[s], settings(1.0, Some(10), Some(10)));
    let e = recommend(&d, None).unwrap_err();
    assert!(e.contains("fix"), "{e}");
}

#[test]
fn no_plan_when_the_ceiling_was_not_reached() {
    let d = run(
        &[closed(0, 1, 0.94), closed(1, 4, 3.76)],
        settings(1.0, Some(10), Some(10)),
    );
    let e = recommend(&d, None).unwrap_err();
    assert!(e.contains("sweep to 15 in flight"), "{e}");
}

#[test]
fn absurd_inputs_give_up_instead_of_absurd_counts() {
    let s = Settings {
        job_time: Some(Sourced::new(1.0, Provenance::Assumed("t".into()))),
        ..Settings::default()
    };
    let e = from_break_point(
        &s,
        Sourced::new(4_000_000_000, Provenance::Flag("--break-point".into())),
    )
    .unwrap_err();
    assert!(e.contains("beyond what a deployment runs"), "{e}");
}

#[test]
fn a_plan_whose_slow_executions_outlast_the_shutdown_window_says_so() {
    // 40 s jobs, 4 slots: at 1 and 2 in flight below the ceiling, saturated at 8.
    let s = settings(40.0, Some(4), Some(10));
    let d = run(
        &[
            closed(0, 1, 1.0 / 40.1),
            closed(1, 2, 2.0 / 40.1),
            closed(2, 8, 4.0 / 40.1),
        ],
        s,
    );
    let r = recommend(&d, None).unwrap();
    let note = r
        .notes
        .iter()
        .find(|n| n.starts_with("N8N_GRACEFUL_SHUTDOWN_TIMEOUT="))
        .unwrap_or_else(|| panic!("{:?}", r.notes));
    // The predicted mean response (≥ 40 s) × 1.5: well past n8n's 30 s default.
    let need: f64 = note["N8N_GRACEFUL_SHUTDOWN_TIMEOUT=".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(need >= 60.0, "{note}");
    // Short jobs: n8n's 30 s window covers them, nothing said.
    let d = run(
        &[
            closed(0, 1, 1.0 / 1.1),
            closed(1, 2, 2.0 / 1.1),
            closed(2, 8, 4.0 / 1.1),
        ],
        settings(1.0, Some(4), Some(10)),
    );
    let r = recommend(&d, None).unwrap();
    assert!(
        !r.notes.iter().any(|n| n.contains("GRACEFUL")),
        "{:?}",
        r.notes
    );
}

#[test]
fn the_plan_is_the_settings_with_what_it_changes_proposed() {
    let s = Settings {
        job_time: Some(Sourced::new(2.0, Provenance::Assumed("t".into()))),
        code_time: Some(Sourced::new(0.5, Provenance::Assumed("t".into()))),
        worker_concurrency: Some(Sourced::new(4, Provenance::Assumed("t".into()))),
        runner_limit: Some(Sourced::new(2, Provenance::Assumed("t".into()))),
        db_pool_size: Some(Sourced::new(3, Provenance::Flag("--db-pool-size".into()))),
        ..Settings::default()
    };
    let r = from_break_point(
        &s,
        Sourced::new(30, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    let p = &r.settings;
    // Changed: proposed, with the new value. Kept: today's value and source.
    assert!(Settings::proposed(&p.worker_concurrency));
    assert_eq!(p.worker_concurrency.as_ref().unwrap().value, 20);
    assert!(Settings::proposed(&p.runner_limit));
    assert_eq!(p.runner_limit.as_ref().unwrap().value, 5);
    assert!(!Settings::proposed(&p.db_pool_size));
    assert_eq!(p.db_pool_size, s.db_pool_size);
    assert_eq!(p.job_time, s.job_time);
    // The prediction is the model's ceiling of those very settings (no CPU measured).
    let c = limits::capacity(p, 0.0).unwrap();
    assert!((c.ceiling - r.predicted_throughput).abs() < 1e-9);
    // 20 slots ÷ 2 s = 10/s; 5 runner tasks ÷ 0.5 s = 10/s.
    assert!((r.predicted_throughput - 10.0).abs() < 1e-9);
}

#[test]
fn summary_json_keeps_its_flat_figures_and_reads_plans_saved_without_settings() {
    let s = Settings {
        job_time: Some(Sourced::new(2.0, Provenance::Assumed("t".into()))),
        code_time: Some(Sourced::new(0.5, Provenance::Assumed("t".into()))),
        worker_concurrency: Some(Sourced::new(4, Provenance::Assumed("t".into()))),
        runner_limit: Some(Sourced::new(2, Provenance::Assumed("t".into()))),
        workers: Some(Sourced::new(3, Provenance::Assumed("t".into()))),
        ..Settings::default()
    };
    let r = from_break_point(
        &s,
        Sourced::new(90, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    // 2/3 × 90 = 60 in flight over 3 workers.
    assert_eq!(v["workers"], 3);
    assert_eq!(v["worker_concurrency"], 20);
    assert_eq!(v["runners_per_worker"], 1);
    assert_eq!(v["runner_limit"], 5);
    assert_eq!(v["runner_capacity_per_worker"], 5);
    assert_eq!(v["settings"]["worker_concurrency"]["value"], 20);
    assert!(v.get("regular_mode").is_none());
    let back: Recommendation = serde_json::from_value(v.clone()).unwrap();
    // The proposal's lines are made with the plan and not written (a saved run's plan is made
    // again by judging it): all else reads back.
    assert!(back
        .proposal
        .lines(crate::limits::Dialect::Compose)
        .is_empty());
    assert!(!r.proposal.lines(crate::limits::Dialect::Compose).is_empty());
    let back = Recommendation {
        proposal: r.proposal.clone(),
        ..back
    };
    assert_eq!(back, r);
    // A plan saved before the settings were kept (and with the pool as a flat figure).
    v.as_object_mut().unwrap().remove("settings");
    v["db_pool_size"] = 7.into();
    v["regular_mode"] = true.into();
    let old: Recommendation = serde_json::from_value(v).unwrap();
    assert_eq!(old.settings.worker_count(), 3);
    assert_eq!(old.settings.worker_concurrency_or_default(), 20);
    assert_eq!(old.settings.runner_capacity_or_default(), 5);
    assert_eq!(old.settings.db_pool_size.as_ref().unwrap().value, 7);
    assert!(old.settings.is_regular());
}

#[test]
fn a_worker_read_with_no_runner_is_planned_with_one() {
    // Code a tenth of the job: 10 slots need 1 runner task, yet today's runner limit (5) is
    // never lowered — as when the one runner had been read.
    let s = Settings {
        job_time: Some(Sourced::new(1.0, Provenance::Assumed("t".into()))),
        code_time: Some(Sourced::new(0.1, Provenance::Assumed("t".into()))),
        worker_concurrency: Some(Sourced::new(10, Provenance::Assumed("t".into()))),
        runner_limit: Some(Sourced::new(5, Provenance::Assumed("t".into()))),
        runners_per_worker: Some(Sourced::new(0, Provenance::Assumed("t".into()))),
        ..Settings::default()
    };
    let r = from_break_point(
        &s,
        Sourced::new(15, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    assert_eq!(r.settings.runners_per_worker_count(), 1);
    assert_eq!(r.settings.runner_capacity_or_default(), 5);
}

#[test]
fn a_plan_from_a_break_point_says_the_windows_a_30_day_job_outlasts() {
    let s = |job: f64| Settings {
        worker_concurrency: Some(Sourced::new(10, Provenance::Assumed("test".into()))),
        runner_limit: Some(Sourced::new(10, Provenance::Assumed("test".into()))),
        job_time: Some(Sourced::new(job, Provenance::Assumed("test".into()))),
        ..Settings::default()
    };
    let value = |r: &Recommendation, var: &str| -> Option<f64> {
        let n = r.notes.iter().find(|n| n.starts_with(var))?;
        n[var.len() + 1..].split_whitespace().next()?.parse().ok()
    };
    let month = 30.0 * 86_400.0;
    let r = from_break_point(
        &s(month),
        Sourced::new(5, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    // The job × 1.5, for both windows: the shutdown's and the runner task's.
    assert_eq!(
        value(&r, "N8N_GRACEFUL_SHUTDOWN_TIMEOUT"),
        Some(month * 1.5)
    );
    assert_eq!(value(&r, "N8N_RUNNERS_TASK_TIMEOUT"), Some(month * 1.5));
    // A 10 s job fits n8n's 30 s and 300 s defaults: nothing said.
    let r = from_break_point(
        &s(10.0),
        Sourced::new(5, Provenance::Flag("--break-point".into())),
    )
    .unwrap();
    assert_eq!(value(&r, "N8N_GRACEFUL_SHUTDOWN_TIMEOUT"), None);
    assert_eq!(value(&r, "N8N_RUNNERS_TASK_TIMEOUT"), None);
}

#[test]
fn a_slot_raise_is_one_step_even_when_an_idle_workers_cpu_allows_thousands() {
    // 4 slots of 1 s jobs, saturated at 8 in flight; the worker spent 1 % of a core at 3.9/s,
    // so its CPU "allows" about 390/s — a bound no run came near.
    let hi = with_cpu(
        closed(1, 8, 3.9),
        &[(Role::Worker, 0.01), (Role::Main, 0.01)],
    );
    let d = run(&[closed(0, 2, 1.95), hi], settings(1.0, Some(4), Some(10)));
    let r = recommend(&d, None).unwrap();
    let c = r.settings.worker_concurrency_or_default();
    assert!(
        c > 4 && c <= 8,
        "one step of at most 2× from 4, got {c}: {r:?}"
    );
    // Followed, the plan can be followed again: a second run at the new slots gives a plan.
    let d = run(
        &[closed(0, 2, 1.95), closed(1, 2 * c, c as f64 * 0.97)],
        settings(1.0, Some(c), Some(10)),
    );
    let again = recommend(&d, None).expect("a plan after the plan was followed");
    assert!(again.settings.worker_concurrency_or_default() > c);
}

#[test]
fn a_plan_past_mains_intake_is_bound_by_it_not_by_a_process_cpu() {
    // 4 slots of 1 s jobs saturated at 3.9/s; main spent 0.2 of a core there (0.051 CPU s per
    // execution: its one thread allows 19.5/s), the worker little. A plan of many more slots
    // meets main's intake first; the prediction says so by its name.
    let hi = with_cpu(
        closed(1, 8, 3.9),
        &[(Role::Worker, 0.01), (Role::Main, 0.2)],
    );
    let d = run(&[closed(0, 2, 1.95), hi], settings(1.0, Some(4), Some(40)));
    // A break point of 60 in flight: 40 slots, which allow 39/s; main allows 19.5.
    let given = Sourced::new(60, Provenance::Flag("--break-point".into()));
    let r = recommend(&d, Some(given)).unwrap();
    assert_eq!(r.predicted_bound, (Limit::MainIntake), "{r:?}");
    assert!((r.predicted_throughput - 3.9 / 0.2).abs() < 1e-6, "{r:?}");
}

/// Jobs of an hour at p99: 1.5 × is past the 3600 s Kubernetes takes for a scale-down hold —
/// the plan holds 3600 s (an object the API server accepts) and says what it cannot promise.
#[test]
fn a_scale_down_hold_stays_within_what_kubernetes_takes() {
    use crate::diagnose::tests::{closed, run, settings};
    let d = run(
        &[closed(0, 1, 1.0 / 1.05), closed(1, 40, 20.0)],
        settings(1.0, Some(10), Some(10)),
    );
    let target = crate::report::autoscaler::tests::plan(
        std::array::from_fn(|_| "n8n-worker".to_string()),
        false,
    )
    .target;
    for (p99, hold) in [(1.1, 300), (600.0, 900), (3600.0, 3600)] {
        let m = crate::recommend::autoscaler::Basis {
            diagnosis: &d,
            from: "run".into(),
            job_p99_s: p99,
            code_p99_s: None,
            base_per_s: None,
        };
        let p = crate::recommend::autoscaler::plan(&m, target.clone()).unwrap();
        assert_eq!(p.scale_down_s.value, hold, "{p99}");
        assert_eq!(
            p.notes.iter().any(|n| n.contains("3600 s")),
            hold == 3600,
            "{:?}",
            p.notes
        );
    }
}

/// Main's intake measured a hair above one worker's ceiling (its CPU read within its noise:
/// 1.002 workers' worth) makes no second worker useful; a bound of 1.5 workers' does.
#[test]
fn a_shared_bound_a_hair_above_one_worker_makes_no_second_one_useful() {
    let useful = |main_cores: f64| {
        let hi = with_cpu(closed(1, 20, 25.0), &[(Role::Main, main_cores)]);
        let d = run(
            &[closed(0, 1, 1.0 / 0.05), hi],
            settings(0.04, Some(10), Some(10)),
        );
        let (n, _) = crate::recommend::autoscaler::useful_workers(&d, 25.0).expect("main's bound");
        n
    };
    // 1.0 core ÷ (0.998 ÷ 25/s) = 25.05/s: 1.002 workers of 25/s.
    assert_eq!(useful(0.998), 1);
    // 1.0 ÷ (0.667 ÷ 25) = 37.5/s: 1.5 workers.
    assert_eq!(useful(0.667), 2);
}
