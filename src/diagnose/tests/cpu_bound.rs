//! CPU in the diagnosis: a worker, a container at its CPU limit, a host busy with other work,
//! and CPU not read or read as zero — with the figures of real n8n 2.41 (about 0.1 s of worker
//! CPU and 0.03 s of main's per execution).

use super::*;

/// `stage` with each role's process read at `cores` of CPU (its `/metrics` rate).
pub fn with_cpu(mut stage: StageResult, cores: &[(Role, f64)]) -> StageResult {
    for (role, c) in cores {
        stage.endpoints.push(EndpointObserved {
            url: format!("http://127.0.0.1/{}", role.word()),
            role: Some(*role),
            samples: 10,
            cpu_percent_mean: c * 100.0,
            ..Default::default()
        });
    }
    stage
}

pub fn cpu_stage(with_cpu_read: bool) -> Vec<StageResult> {
    // Real n8n on 2 vCPU: short jobs, slots out of the way, 12.5 executions/s.
    let hi = closed(1, 20, 12.5);
    let hi = if with_cpu_read {
        with_cpu(hi, &[(Role::Worker, 1.25), (Role::Main, 0.38)])
    } else {
        hi
    };
    vec![closed(0, 1, 1.0 / 0.08), hi]
}

#[test]
fn a_cpu_bound_worker_is_named_with_its_numbers() {
    let d = run(&cpu_stage(true), settings(0.01, Some(15), Some(20)));
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    let site = d.cpu_limit.as_ref().unwrap();
    assert_eq!(site.role, Some(Role::Worker));
    assert_eq!(site.site, CpuSite::Process);
    assert!((site.cpu_s_per_execution - 0.1).abs() < 1e-9);
    assert!((site.bound_per_s - 12.5).abs() < 1e-9);
    let f = finding(&d, "cpu-limit-caps");
    assert!((f.get("cpu_s_per_execution").unwrap() - 0.1).abs() < 1e-9);
    // Main: 0.38 cores ÷ 12.5 = 0.03 CPU s per execution.
    let main = d.cpu.iter().find(|u| u.role == Some(Role::Main)).unwrap();
    assert!((main.cpu_s_per_execution - 0.0304).abs() < 1e-4);
    assert!(!main.saturated);
    let host = d.cpu.iter().find(|u| u.site == CpuSite::Host).unwrap();
    assert!((host.cores_used - (1.25 + 0.38 + 0.05)).abs() < 1e-9);
}

#[test]
fn without_cpu_data_a_shortfall_is_unmodelled_and_says_which_flag_tells() {
    let d = run(&cpu_stage(false), settings(0.01, Some(15), Some(20)));
    assert_eq!(d.capping_limit, None, "{}", d.verdict);
    let f = finding(&d, "unmodelled-limit");
    assert!(f.evidence.iter().any(|e| e.contains("--docker")));
    assert!((f.get("throughput_per_s").unwrap() - 12.5).abs() < 1e-9);
}

/// CPU sampled but reading 0 at every process (`sim all`: roles sharing one process) is not
/// "not measured": the diagnosis names the processes, and the plan's note says which.
#[test]
fn cpu_that_read_zero_is_told_apart_from_cpu_not_watched() {
    let mut stages = cpu_stage(true);
    for e in &mut stages[1].endpoints {
        e.cpu_percent_mean = 0.0;
    }
    let d = run(&stages, settings(0.01, Some(15), Some(20)));
    assert!(d.cpu.is_empty());
    assert_eq!(d.cpu_read_zero.len(), 2, "{:?}", d.cpu_read_zero);
    let unwatched = run(&cpu_stage(false), settings(0.01, Some(15), Some(20)));
    assert_eq!(unwatched.cpu_read_zero.len(), 0);
    // One process that moved: CPU was measured, nothing read zero is reported.
    let mut one = cpu_stage(true);
    one[1].endpoints[1].cpu_percent_mean = 0.0;
    let d = run(&one, settings(0.01, Some(15), Some(20)));
    assert!(!d.cpu.is_empty());
    assert!(d.cpu_read_zero.is_empty());
}

#[test]
fn a_saturated_container_with_a_cpu_limit_binds_at_its_limit() {
    let mut stages = cpu_stage(false);
    stages[1].containers.push(ContainerObserved {
        name: "n8n-worker-1".into(),
        role: Role::Worker,
        samples: 5,
        cpu_percent_mean: 48.0,
        cpu_limit_cores: Some(0.5),
        ..Default::default()
    });
    let d = run(&stages, settings(0.01, Some(15), Some(20)));
    let site = d.cpu_limit.as_ref().expect("cpu binds");
    assert_eq!(site.usable_cores.value, 0.5);
    assert!((site.bound_per_s - 12.5 * 0.5 / 0.48).abs() < 1e-9);
}

#[test]
fn a_host_busy_with_other_work_is_named_and_never_a_cpu_verdict() {
    // A runner of 5 tasks of 0.4 s: 12.5/s; the stack's processes use a few % of a core
    // while a build keeps both cores busy.
    let mut stages = [closed(0, 1, 1.0 / 0.46), closed(1, 20, 12.5)];
    for s in stages.iter_mut() {
        s.host_cpu_percent = Some(198.0);
        s.endpoints = vec![
            EndpointObserved {
                url: "main".into(),
                role: Some(Role::Main),
                samples: 10,
                cpu_percent_mean: 4.0,
                ..Default::default()
            },
            EndpointObserved {
                url: "worker".into(),
                role: Some(Role::Worker),
                samples: 10,
                cpu_percent_mean: 6.0,
                ..Default::default()
            },
        ];
    }
    let d = run(&stages, settings(0.4, Some(20), Some(5)));
    assert_ne!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let f = finding(&d, "host-shared");
    let other = f.get("other_cores").unwrap();
    assert!(other > 1.5 && other < 2.0, "{other}");
}

/// A ceiling pooled over several levels reads the CPU over the same stages: a worker at 100 ms
/// of CPU per execution, three levels at its 10/s, the last of them cut short (a history's
/// window at the load's end, its CPU rate over fewer samples: 0.775 cores). CPU per execution
/// is the pooled cores over the pooled throughput (0.91 ÷ 9.83 ≈ 0.093 s), not the last level's
/// cores over the pooled throughput (0.079 s; a quiet CI run read 0.069 s so, and the worker not
/// saturated).
#[test]
fn cpu_per_execution_is_read_over_the_levels_the_ceiling_pools() {
    let stages = vec![
        closed(0, 1, 1.0 / 0.12),
        with_cpu(closed(1, 16, 9.5), &[(Role::Worker, 0.928)]),
        with_cpu(closed(2, 24, 10.0), &[(Role::Worker, 1.028)]),
        with_cpu(closed(3, 32, 10.0), &[(Role::Worker, 0.775)]),
    ];
    let d = run(&stages, settings(0.02, Some(30), Some(30)));
    let x = d.measured_ceiling.as_ref().unwrap();
    assert_eq!(x.n, 3, "{x:?}");
    let worker = d.cpu.iter().find(|u| u.role == Some(Role::Worker)).unwrap();
    let cores = (0.928 + 1.028 + 0.775) / 3.0;
    assert!((worker.cores_used - cores).abs() < 1e-9, "{worker:?}");
    assert!((worker.cpu_s_per_execution - cores / x.mean).abs() < 1e-9);
    assert!(worker.saturated, "{worker:?}");
    assert_eq!(d.capping_limit, Some(Limit::Cpu.into()), "{}", d.verdict);
}
