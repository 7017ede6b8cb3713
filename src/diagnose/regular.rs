//! Regular mode: main runs every execution, so when its one JavaScript thread is what caps,
//! no setting of main raises the ceiling — queue mode does, by moving the executions to
//! workers. This says so, and what the queue-mode stack would need for twice the throughput,
//! with the same model (CPU per execution split between main's intake and the workers).

use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::record::diagnosis::CpuUse;
use crate::record::Role;

/// Of the CPU an execution costs, the part main keeps in queue mode (the webhook intake):
/// measured on real n8n 2.41, about 0.03 s of main CPU and 0.1 s of worker CPU per
/// webhook → Code → respond execution.
pub const MAIN_INTAKE_SHARE: f64 = 0.03 / 0.13;

/// When a regular-mode main's CPU caps: the queue-mode stack that would carry twice the
/// measured throughput.
pub fn queue_mode_advice(
    s: &Settings,
    cpu: Option<&CpuUse>,
    x: f64,
    service_time_s: f64,
    findings: &mut Vec<Finding>,
) {
    let Some(site) = cpu.filter(|c| c.is_process_of(Role::Main)) else {
        return;
    };
    if !s.is_regular() || x <= 0.0 {
        return;
    }
    let per_exec = site.cpu_s_per_execution;
    let worker_cpu = per_exec * (1.0 - MAIN_INTAKE_SHARE);
    let main_cpu = per_exec * MAIN_INTAKE_SHARE;
    let target = 2.0 * x;
    // Each worker is one Node process: one core's worth of executions.
    let workers = (target * worker_cpu).ceil().max(1.0);
    let per_worker = target / workers;
    let concurrency = (per_worker * service_time_s * 1.5).ceil().max(1.0);
    let code = s.code_time.as_ref().map(|c| c.value);
    let job = s
        .job_time
        .as_ref()
        .map(|j| j.value)
        .unwrap_or(service_time_s);
    let runner = match code {
        Some(c) if job > 0.0 => (concurrency * c / job).ceil().max(1.0),
        _ => concurrency,
    };
    let intake_bound = 1.0 / main_cpu.max(1e-9);
    findings.push(
        Finding::new(FindingId::QueueModeLiftsCpu,
            format!(
                "Regular mode: main's one core caps throughput at {x:.2} req/s; queue mode would move the executions to workers"
            ),
        )
        .evidence(format!(
            "main spends {per_exec:.3} CPU s per execution on one thread ({:.2} cores used): {:.2} executions/s at most, whatever N8N_CONCURRENCY_PRODUCTION_LIMIT is",
            site.cores_used, site.bound_per_s
        ))
        .evidence(format!(
            "in queue mode main keeps the intake (about {:.0} % of an execution's CPU on real n8n: {main_cpu:.3} s → {intake_bound:.0} executions/s) and each worker runs the rest on its own core ({worker_cpu:.3} s)",
            MAIN_INTAKE_SHARE * 100.0
        ))
        .evidence(format!(
            "for {target:.1} req/s (twice today): {workers:.0} worker(s), each --concurrency {concurrency:.0} with a runner of N8N_RUNNERS_MAX_CONCURRENCY {runner:.0}, Redis, and a core per worker"
        ))
        .figure("throughput_per_s", x)
        .figure("main_cpu_s_per_execution", per_exec)
        .figure("queue_mode_workers", workers)
        .figure("queue_mode_worker_concurrency", concurrency)
        .figure("queue_mode_runner_limit", runner)
        .figure("queue_mode_intake_bound_per_s", intake_bound)
        .why("In regular mode every execution's JavaScript runs on main's one thread: raising the production limit only queues more executions for it.")
        .fix("set EXECUTIONS_MODE=queue with Redis (QUEUE_BULL_REDIS_HOST) on main and workers; start workers (n8n worker --concurrency) each with its runner; sweep again"),
    );
}
