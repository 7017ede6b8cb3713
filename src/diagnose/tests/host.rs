//! The host's CPU placed on the processes that spent it (/proc, a target on this machine), with
//! the figures of a real n8n 2.41.1 on one 2-core host (the second lab): 3 workers of
//! concurrency 5 and runner limit 5, 0.4 s jobs, 27.2/s at fixed users while n8n's processes used
//! about 1.7 of the 2 cores; with 0 ms jobs the whole host held 23.6/s at about 85 ms per
//! execution.

use super::*;
use crate::record::stage::HostProcessCpu;

fn group(name: &str, role: Option<Role>, stack: bool, cores: f64) -> HostProcessCpu {
    HostProcessCpu {
        group: name.into(),
        role,
        stack,
        processes: 1,
        cores,
    }
}

/// A stage where only main's metrics were given (its CPU: `main_cores`) while /proc placed the
/// host's CPU; the host `busy` cores in all.
fn on_the_host(
    mut s: StageResult,
    main_cores: f64,
    groups: Vec<HostProcessCpu>,
    busy: f64,
) -> StageResult {
    s.endpoints = vec![EndpointObserved {
        url: "main".into(),
        role: Some(Role::Main),
        samples: 10,
        cpu_percent_mean: main_cores * 100.0,
        ..Default::default()
    }];
    s.host_processes = groups;
    s.host_cpu_percent = Some(busy * 100.0);
    s
}

fn three_workers_at(x: f64) -> Vec<HostProcessCpu> {
    // Per execution: a worker 50 ms, its runner 5, main 12, Postgres 4, Redis 2, the load 3.
    vec![
        group("n8n worker", Some(Role::Worker), true, 0.050 * x),
        group("n8n runner", Some(Role::Runner), true, 0.005 * x),
        group("n8n main", Some(Role::Main), true, 0.012 * x),
        group("postgres", None, true, 0.004 * x),
        group("redis", None, true, 0.002 * x),
        group("n8ncap (the load)", None, true, 0.003 * x),
    ]
}

#[test]
fn n8n_s_own_workers_are_the_host_s_cpu_and_its_bound_is_near_where_the_host_saturates() {
    let x = 27.2;
    let stages = [
        on_the_host(closed(0, 1, 1.0 / 0.46), 0.01, three_workers_at(2.2), 0.2),
        on_the_host(closed(1, 30, x), 0.012 * x, three_workers_at(x), 2.0),
    ];
    let mut s = settings(0.42, Some(5), Some(5));
    s.workers = Some(Sourced::new(3, Provenance::Assumed("test".into())));
    let d = run(&stages, s);
    let host = d.cpu.iter().find(|u| u.site == CpuSite::Host).unwrap();
    assert!((host.cores_used - 0.076 * x).abs() < 1e-6, "{host:?}");
    assert!(host.saturated, "{host:?}");
    // Within 30 % of the rate at which the host saturated (the old reading: 215/s from main's
    // share alone).
    assert!(
        (host.bound_per_s - x).abs() / x < 0.30,
        "{}",
        host.bound_per_s
    );
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    // The workers' CPU is the work's, not other work.
    assert!(
        !d.findings.iter().any(|f| f.id == "host-shared"),
        "{:?}",
        d.findings
    );
}

#[test]
fn fast_jobs_on_a_full_host_are_the_host_s_cpu_not_a_concurrency_of_one() {
    // 0 ms jobs: 4 in flight held 25.7/s at about 85 ms of CPU per execution over the host.
    let per = |x: f64| {
        vec![
            group("n8n worker", Some(Role::Worker), true, 0.050 * x),
            group("n8n main", Some(Role::Main), true, 0.016 * x),
            group("postgres", None, true, 0.010 * x),
            group("redis", None, true, 0.004 * x),
            group("n8ncap (the load)", None, true, 0.005 * x),
        ]
    };
    let stages = [
        on_the_host(closed(0, 1, 14.0), 0.016 * 14.0, per(14.0), 1.2),
        on_the_host(closed(1, 2, 21.0), 0.016 * 21.0, per(21.0), 1.8),
        on_the_host(closed(2, 4, 23.4), 0.016 * 23.4, per(23.4), 2.0),
    ];
    let mut s = settings(0.0, Some(10), Some(10));
    s.workers = Some(Sourced::new(2, Provenance::Assumed("test".into())));
    let d = run(&stages, s);
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    let host = d.cpu.iter().find(|u| u.site == CpuSite::Host).unwrap();
    assert!(host.saturated && host.cores_used > 1.9, "{host:?}");
}

#[test]
fn other_work_is_named_by_program_and_what_could_not_be_placed_is_said() {
    let x = 12.5;
    let mut groups = three_workers_at(x);
    groups.push(group("stress-ng-cpu", None, false, 0.8));
    let stages = [
        on_the_host(closed(0, 1, 1.0 / 0.46), 0.01, three_workers_at(2.0), 1.4),
        on_the_host(closed(1, 20, x), 0.012 * x, groups, 2.0),
    ];
    let d = run(&stages, settings(0.4, Some(20), Some(5)));
    let f = finding(&d, "host-shared");
    let other = f.get("other_cores").unwrap();
    assert!((other - (2.0 - 0.076 * x)).abs() < 1e-6, "{other}");
    assert!(
        f.evidence.iter().any(|e| e.contains("stress-ng-cpu 0.80")),
        "{f:?}"
    );
    assert!(f.evidence.iter().any(|e| e.contains("not placed")), "{f:?}");
}

/// Lab 2's runs as an older n8ncap saved them (a real n8n 2.41.1 on 2 cores): no /proc placement,
/// only main's metrics (or main's and the workers'), and the host's busy CPU per stage. The host's
/// reading stands for the deployment's — the workers, Postgres and Redis are in it and nowhere
/// else — so the 3-worker sweep's host bound is near its 27/s (the old reading: 212/s from
/// main's share), and the 0 ms jobs on 2 workers (25.7/s at 1.92 of 2 cores) are named CPU.
#[test]
fn an_older_run_s_host_cpu_per_stage_is_the_deployment_s_when_nothing_was_placed() {
    let saturated_queue = |mut s: StageResult, active: f64| {
        s.queue = Some(crate::record::stage::QueueObserved {
            active_mean: active,
            active_max: active,
            ..Default::default()
        });
        s
    };
    // 3 workers of 5, 0.42 s jobs: main alone observed at 9 ms a run; the host 1.96 cores busy.
    let x = 27.1;
    let quiet = on_the_host(closed(0, 1, 1.0 / 0.46), 0.02, Vec::new(), 0.3);
    let loaded = on_the_host(closed(1, 30, x), 0.009 * x, Vec::new(), 1.96);
    let stages = [saturated_queue(quiet, 0.9), saturated_queue(loaded, 15.0)];
    let mut s = settings(0.42, Some(5), Some(5));
    s.workers = Some(Sourced::new(3, Provenance::Assumed("test".into())));
    let d = run(&stages, s);
    let host = d.cpu.iter().find(|u| u.site == CpuSite::Host).unwrap();
    assert!((host.cores_used - 1.96).abs() < 1e-9, "{host:?}");
    assert!((host.bound_per_s - x).abs() / x < 0.30, "{host:?}");
    assert!(!d.findings.iter().any(|f| f.id == "host-shared"));

    // 0 ms jobs, 2 workers observed (0.67 and 0.65 cores), main 0.2, the host 1.92 busy: the
    // 0.3 cores not observed (Postgres, Redis, the load) are within half of what was.
    let x = 25.7;
    let with = |s: StageResult, busy: f64| {
        let mut s = on_the_host(s, 0.2, Vec::new(), busy);
        for (port, cores) in [(5711, 0.67), (5721, 0.65)] {
            s.endpoints.push(EndpointObserved {
                url: format!("http://127.0.0.1:{port}/metrics"),
                role: Some(Role::Worker),
                samples: 10,
                cpu_percent_mean: cores * 100.0,
                ..Default::default()
            });
        }
        saturated_queue(s, 1.4)
    };
    let stages = [with(closed(0, 1, 23.4), 1.63), with(closed(1, 4, x), 1.92)];
    let d = run(&stages, settings(0.0, None, None));
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    let host = d.cpu_limit.as_ref().unwrap();
    assert_eq!(host.site, CpuSite::Host);
    assert!((host.bound_per_s - 28.0).abs() / 28.0 < 0.30, "{host:?}");

    // The same stages from today's n8ncap, which read /proc and placed nothing (its own process
    // served the target): the busy host is other work, never the deployment's CPU.
    let mut today = stages.clone();
    for s in today.iter_mut() {
        s.host_placed = true;
    }
    let d = run(&today, settings(0.0, None, None));
    assert_ne!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
}
