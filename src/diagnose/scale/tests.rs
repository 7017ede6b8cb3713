use super::super::tests::{closed, run, settings};
use super::*;
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Provenance, Sourced};
use crate::model::Limit;
use crate::record::diagnosis::CpuSite;
use crate::record::stage::EndpointObserved;

/// A run at `workers` workers of 5 slots and 5 runner tasks (1 s jobs): 1 in flight, then a
/// saturated level at `x`/s, with main's CPU at 25 ms per execution.
fn at(workers: u32, x: f64) -> Diagnosis {
    let mut hi = closed(1, workers * 5 + 20, x);
    hi.endpoints.push(EndpointObserved {
        url: "http://127.0.0.1/metrics".into(),
        role: Some(Role::Main),
        samples: 10,
        cpu_percent_mean: x * 0.025 * 100.0,
        ..Default::default()
    });
    let mut s = settings(1.0, Some(5), Some(5));
    s.workers = Some(Sourced::new(workers, Provenance::Flag("--workers".into())));
    run(&[closed(0, 1, 1.0 / 1.05), hi], s)
}

fn judged(ds: &[(u32, Diagnosis)], target: Option<f64>) -> Scaling {
    let runs: Vec<Run> = ds
        .iter()
        .map(|(n, d)| Run {
            label: format!("w{n}"),
            diagnosis: d,
        })
        .collect();
    judge_counts(&runs, target).unwrap()
}

/// A webhook processor swept beside main (11.1 ms per execution, n8n 2.41.1's): the
/// processors a target past main's intake needs come from its measured bound, not main's.
#[test]
fn webhook_processors_are_counted_at_a_processor_s_measured_cost() {
    let mut ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4), (8, 35.5)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    // 30/s needs a 45/s ceiling: 2 processors at main's 40/s each.
    assert_eq!(
        judged(&ds, Some(30.0)).plan.unwrap().webhook_processors,
        Some(2)
    );
    let mut hi = closed(1, 8 * 5 + 20, 35.5);
    hi.endpoints.push(EndpointObserved {
        url: "http://127.0.0.1/metrics".into(),
        role: Some(Role::Main),
        samples: 10,
        cpu_percent_mean: 35.5 * 0.025 * 100.0,
        ..Default::default()
    });
    hi.endpoints.push(EndpointObserved {
        url: "http://127.0.0.1:5679/metrics".into(),
        role: Some(Role::Webhook),
        samples: 10,
        cpu_percent_mean: 35.5 * 0.0111 * 100.0,
        ..Default::default()
    });
    let mut s = settings(1.0, Some(5), Some(5));
    s.workers = Some(Sourced::new(8, Provenance::Flag("--workers".into())));
    ds[3].1 = run(&[closed(0, 1, 1.0 / 1.05), hi], s);
    let p = judged(&ds, Some(30.0)).plan.unwrap();
    // One core ÷ 11.1 ms = 90/s: one processor holds the 45/s.
    assert_eq!(p.webhook_processors, Some(1), "{}", p.note);
    assert!(
        p.note.contains("webhook processor's measured"),
        "{}",
        p.note
    );
}

/// A history whose jobs slowed under load with full slots (`job-time-grows`) at the top
/// count: the host's CPU is the shared limit reached, not "no shared limit".
#[test]
fn jobs_slower_at_the_top_count_are_the_host_s_cpu_reached() {
    let mut ds: Vec<(u32, Diagnosis)> = [(1, 11.6), (2, 21.6), (3, 27.2)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    ds[2].1.findings.push(
        Finding::new(FindingId::JobTimeGrows, "every job slowed under load")
            .figure("throughput_per_s", 27.2)
            .evidence("job time side by side: 0.420 s quiet, 0.550 s at 27.20/s"),
    );
    let s = judged(&ds, None);
    let host = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::HostCpu)
        .unwrap_or_else(|| panic!("{:?}", s.shared));
    assert!(host.reached, "{host:?}");
    assert!(
        host.evidence.iter().any(|e| e.contains("0.550 s")),
        "{host:?}"
    );
}

/// Main's one core at 25 ms per execution caps near 40/s: 1, 2, 4 workers grow with
/// them, 8 bend. The shared limit named is main's intake, reached, with its bound; a target
/// under it gets workers, one over it gets none and says why.
#[test]
fn main_s_intake_bends_the_curve_and_is_named() {
    let ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4), (8, 35.5)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    let s = judged(&ds, Some(20.0));
    assert_eq!(
        s.points.iter().map(|p| p.workers).collect::<Vec<_>>(),
        [1, 2, 4, 8]
    );
    // 4 → 8 gained 16.1/s for 4 workers of 4.9/s: 82 % of linear.
    let e = s.points[3].efficiency.unwrap();
    assert!((e - 16.1 / (4.0 * 4.9)).abs() < 0.02, "{e}");
    let main = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::MainIntake)
        .unwrap();
    assert!(main.reached);
    // 0.025 s per execution on one core: 40/s (at least what was measured).
    assert!((main.bound_per_s.unwrap() - 40.0).abs() < 0.5, "{main:?}");
    let f = s.fit.as_ref().unwrap();
    assert!(f.sigma > 0.0 || f.kappa > 0.0);
    // 20/s at 2/3 needs a 30/s ceiling: 6 or 7 workers on the fitted curve.
    let p = s.plan.as_ref().unwrap();
    assert!((p.needed_ceiling_per_s - 30.0).abs() < 1e-9);
    assert!(matches!(p.workers, Some(6..=8)), "{p:?}");
    // Each planned worker keeps the runs' 5 slots and runner limit 5; the pools n8n's 2.
    assert_eq!(p.per_worker.worker_concurrency, Some(5));
    assert_eq!(p.per_worker.runner_limit, Some(5));
    let n = p.workers.unwrap();
    assert_eq!(p.postgres_connections, Some((n + 1) * 2));
    assert_eq!(p.webhook_processors, None);
    // 30/s needs 45/s: beyond main's 40/s, no count as deployed; 2 webhook processors of
    // 40/s first, then 45 ÷ λ workers (λ one worker's fitted ceiling, ≈ 4.9/s).
    let s = judged(&ds, Some(30.0));
    let lambda = s.fit.as_ref().unwrap().lambda_per_s;
    let p = s.plan.unwrap();
    assert_eq!(p.workers, None);
    assert_eq!(p.webhook_processors, Some(2));
    let after = (45.0 / lambda).ceil() as u32;
    assert_eq!(p.workers_after_change, Some(after));
    assert_eq!(p.postgres_connections, Some((after + 1 + 2) * 2));
}

/// The queue's Redis at 0.9 of its one core at 8 workers: named as what stops scale-out,
/// with its bound (one core ÷ its CPU per execution), and a plan beyond it gets no workers.
#[test]
fn redis_at_its_one_thread_is_a_shared_limit() {
    let mut ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4), (8, 30.0)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    let redis = crate::record::diagnosis::CpuUse {
        site: CpuSite::Process,
        role: Some(Role::Redis),
        name: "n8n-redis-1".into(),
        cores_used: 0.9,
        cpu_s_per_execution: 0.03,
        usable_cores: Sourced::new(1.0, Provenance::Default("one thread".into())),
        bound_per_s: 1.0 / 0.03,
        saturated: true,
        eventloop_lag_s: None,
    };
    ds[3].1.cpu.push(redis);
    let s = judged(&ds, Some(30.0));
    let r = s.shared.iter().find(|l| l.kind == Limit::Redis).unwrap();
    assert!(r.reached);
    assert!((r.bound_per_s.unwrap() - 33.3).abs() < 0.1);
    // 30/s needs a 45/s ceiling, beyond Redis' 33/s: no workers.
    let p = s.plan.as_ref().unwrap();
    assert_eq!(p.workers, None);
    assert!(p.note.starts_with("Redis"), "{}", p.note);
}

/// Main's event loop lagging 150 ms at 8 workers while its CPU reads 0.75 of a core (under
/// 85 %): its intake is named as reached, from the lag; at 20 ms it is not.
#[test]
fn main_s_event_loop_lag_reaches_its_intake_below_its_cpu_bound() {
    let lagged = |lag: f64| {
        let mut ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4), (8, 30.0)]
            .iter()
            .map(|&(n, x)| (n, at(n, x)))
            .collect();
        let main = ds[3].1.cpu.iter_mut().find(|u| u.role == Some(Role::Main));
        main.unwrap().eventloop_lag_s = Some(lag);
        judged(&ds, None)
    };
    let s = lagged(0.15);
    let m = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::MainIntake)
        .unwrap();
    assert!((m.bound_per_s.unwrap() - 40.0).abs() < 0.5);
    assert!(m.reached);
    assert_eq!(m.evidence.len(), 2);
    let s = lagged(0.02);
    let m = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::MainIntake)
        .unwrap();
    assert!(!m.reached);
    assert_eq!(m.evidence.len(), 2);
}

/// The lag a diagnosis carries is main's own endpoint's, mean over the level's stages.
#[test]
fn main_s_cpu_use_carries_its_event_loop_lag() {
    let mut hi = closed(1, 60, 30.0);
    hi.endpoints.push(EndpointObserved {
        url: "http://127.0.0.1/metrics".into(),
        role: Some(Role::Main),
        samples: 10,
        cpu_percent_mean: 75.0,
        eventloop_lag_mean_s: 0.12,
        ..Default::default()
    });
    let mut s = settings(1.0, Some(5), Some(5));
    s.workers = Some(Sourced::new(8, Provenance::Flag("--workers".into())));
    let d = run(&[closed(0, 1, 1.0 / 1.05), hi], s);
    let m = d.cpu.iter().find(|u| u.role == Some(Role::Main)).unwrap();
    assert_eq!(m.eventloop_lag_s, Some(0.12));
}

/// At 4 workers of 5 slots main's gauge showed 10 slots taken while jobs waited: two workers
/// never joined. The point is kept, marked, and left out of the fit and the efficiencies; 18
/// slots (within half a worker's) is a full count.
#[test]
fn a_count_whose_added_workers_took_no_jobs_is_left_out_of_the_fit() {
    let with_full = |full: f64| {
        let mut ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 10.0)]
            .iter()
            .map(|&(n, x)| (n, at(n, x)))
            .collect();
        for (n, d) in ds.iter_mut() {
            let top = d.levels.iter_mut().rfind(|l| l.valid).unwrap();
            top.slots_full = Some(if *n == 4 { full } else { *n as f64 * 5.0 });
        }
        judged(&ds, None)
    };
    let s = with_full(10.0);
    assert!(s.points[0].not_joined.is_none() && s.points[1].not_joined.is_none());
    assert!(s.points[2].not_joined.is_some());
    assert_eq!(s.points[2].efficiency, None);
    // Fitted on 1 and 2 workers only: linear, 4 workers at 4 × 4.9.
    let at4 = s.fit.as_ref().unwrap().law().at(4.0);
    assert!((at4 - 19.6).abs() < 0.5, "{at4}");
    let s = with_full(18.0);
    assert!(s.points[2].not_joined.is_none());
    assert!(s.points[2].efficiency.unwrap() < 0.05);
    let at4 = s.fit.as_ref().unwrap().law().at(4.0);
    assert!(at4 < 12.0, "{at4}");
}

#[test]
fn linear_growth_reaches_no_shared_limit_and_says_the_next() {
    let ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    let s = judged(&ds, None);
    assert!(s.shared.iter().all(|l| !l.reached));
    let main = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::MainIntake)
        .unwrap();
    assert!((main.bound_per_s.unwrap() - 40.0).abs() < 0.5);
    assert!(s.points[1].efficiency.unwrap() > 0.95);
}

#[test]
fn a_run_without_its_worker_count_or_two_at_one_count_are_refused() {
    let mut d = at(2, 9.8);
    d.settings.workers = None;
    let runs = [
        Run {
            label: "a".into(),
            diagnosis: &d,
        },
        Run {
            label: "b".into(),
            diagnosis: &d,
        },
    ];
    assert!(judge_counts(&runs, None)
        .unwrap_err()
        .contains("a: its worker count"));
    let (x, y) = (at(2, 9.8), at(2, 9.7));
    let runs = [
        Run {
            label: "x".into(),
            diagnosis: &x,
        },
        Run {
            label: "y".into(),
            diagnosis: &y,
        },
    ];
    assert!(judge_counts(&runs, None).is_err());
}

/// A target past what 1000 workers reach (5000/s at about 4.9/s a worker: 7500/s needed at 2/3)
/// is no plan: no worker count is given, and the note says the most n8ncap plans falls short.
#[test]
fn a_target_past_the_most_workers_planned_is_said_to_fall_short() {
    let ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4), (8, 35.5)]
        .iter()
        .map(|&(n, x)| (n, at(n, x)))
        .collect();
    let p = judged(&ds, Some(5000.0)).plan.unwrap();
    assert_eq!(
        (p.workers, p.workers_after_change),
        (None, None),
        "{}",
        p.note
    );
    assert!(p.note.contains("short of the target"), "{}", p.note);
    assert_eq!(p.postgres_connections, None);
    assert_eq!(connections(u32::MAX / 2, 4), u32::MAX);
}

/// Each worker's own pool capping at every count (the database pool, per worker) while the
/// ceiling grows with the workers: Postgres' connection limit is not what stops scale-out — it
/// is reached only when Postgres refuses connections.
#[test]
fn a_pool_that_caps_each_worker_is_no_shared_postgres_limit() {
    let pool = |n: u32, x: f64| {
        let mut d = at(n, x);
        d.findings.push(
            Finding::new(FindingId::DbPoolCaps, "the pool caps").figure("db_pool_bound_per_s", x),
        );
        d
    };
    let ds: Vec<(u32, Diagnosis)> = [(1, 4.9), (2, 9.8), (4, 19.4)]
        .iter()
        .map(|&(n, x)| (n, pool(n, x)))
        .collect();
    let s = judged(&ds, None);
    assert!(
        s.shared
            .iter()
            .all(|l| l.kind != Limit::PostgresConnections),
        "{:?}",
        s.shared
    );
    let mut refused = ds;
    refused[2].1.findings.push(Finding::new(
        FindingId::PostgresConnectionsExhausted,
        "Postgres refused connections",
    ));
    let s = judged(&refused, None);
    let pg = s
        .shared
        .iter()
        .find(|l| l.kind == Limit::PostgresConnections);
    assert!(pg.is_some_and(|l| l.reached), "{:?}", s.shared);
}

/// Main's event loop lagging 110 ms at 0.21 of its core (lab 2's real n8n on a full 2-core
/// host, 22.6/s) is the host's contention, not main's thread: main's intake is not reached. The
/// same lag with main at 0.9 of its core is its thread.
#[test]
fn main_s_lag_with_its_core_idle_is_not_its_intake_reached() {
    let lagging = |x: f64, cores: f64| {
        let mut d = at(3, x);
        let m = d
            .cpu
            .iter_mut()
            .find(|u| u.is_process_of(Role::Main))
            .unwrap();
        m.cores_used = cores;
        m.eventloop_lag_s = Some(0.110);
        d
    };
    let main_of = |top: Diagnosis| {
        let ds = vec![(1, at(1, 11.3)), (2, at(2, 19.3)), (3, top)];
        let s = judged(&ds, None);
        s.shared
            .into_iter()
            .find(|l| l.kind == Limit::MainIntake)
            .unwrap()
    };
    let idle = main_of(lagging(22.6, 0.21));
    assert!(!idle.reached, "{idle:?}");
    let busy = main_of(lagging(22.6, 0.9));
    assert!(busy.reached, "{busy:?}");
}
