//! Recommend: settings from the break point with a 2/3 safety factor, raising the worker and
//! runner limits as a pair, and the throughput and response time the new settings predict.

use crate::diagnose::Diagnosis;
use crate::model::settings::{Settings, Sourced};
use crate::model::{self, Job, WorkerLimits};
use serde::{Deserialize, Serialize};

/// Runner limit per runner we do not go past when adding capacity: n8n's default, and one
/// Node process per runner does not get faster with more tasks.
pub const RUNNER_LIMIT_PER_RUNNER: u32 = 10;

/// Runner memory besides the tasks: an idle `n8nio/runners` container, when not measured.
pub const RUNNER_BASE_MB_ASSUMED: f64 = 150.0;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recommendation {
    pub break_point: Sourced<u32>,
    /// ⌊2/3 × break point⌋: the in-flight executions to plan for.
    pub operating_concurrency: u32,
    pub workers: u32,
    /// Per worker.
    pub worker_concurrency: u32,
    /// Per runner.
    pub runner_limit: u32,
    pub runners_per_worker: u32,
    /// Runner tasks each worker can run: runner_limit × runners_per_worker.
    pub runner_capacity_per_worker: u32,
    pub runner_memory_limit_mb: Option<Sourced<u64>>,
    /// Throughput ceiling with the proposed settings, jobs/s.
    pub predicted_throughput: f64,
    /// Mean response at the operating concurrency, s.
    pub predicted_response_s: f64,
    /// Ceiling with today's settings, jobs/s.
    pub current_ceiling: Option<f64>,
    pub notes: Vec<String>,
}

/// Builds the recommendation. `break_point` overrides the diagnosis' (from `--break-point`).
pub fn recommend(
    settings: &Settings,
    diagnosis: Option<&Diagnosis>,
    break_point: Option<Sourced<u32>>,
    overhead_s: f64,
) -> Result<Recommendation, String> {
    let bp = break_point
        .or_else(|| {
            diagnosis
                .and_then(|d| d.break_point.as_ref())
                .map(|b| Sourced::new(b.in_flight, format!("sweep: {}", b.reason)))
        })
        .ok_or("no break point: the sweep never failed its thresholds nor stopped growing; sweep higher or give --break-point")?;
    let job_time = settings
        .job_time
        .as_ref()
        .ok_or("job time unknown: give --job-time (or sweep with sleep_ms in the body)")?
        .value;
    let code = settings
        .code_time
        .as_ref()
        .map(|c| c.value)
        .unwrap_or(job_time);
    let job = Job {
        wait_s: (job_time - code).max(0.0),
        code_s: code.min(job_time),
    };
    let workers = settings
        .workers
        .as_ref()
        .map(|w| w.value)
        .unwrap_or(1)
        .max(1);
    let operating = (bp.value as f64 * 2.0 / 3.0).floor() as u32;
    if operating == 0 {
        return Err(format!("break point {} is too low to plan from", bp.value));
    }
    let worker_concurrency = operating.div_ceil(workers);
    // Every slot that runs Code at the same time needs a runner task: c × C ÷ S, rounded up.
    let code_slots = ((worker_concurrency as f64) * job.code_s / job_time.max(1e-9)).ceil() as u32;
    let code_slots = code_slots.max(1);
    let current_limit = settings.runner_limit.as_ref().map(|r| r.value);
    let per_runner_cap = current_limit
        .unwrap_or(RUNNER_LIMIT_PER_RUNNER)
        .max(RUNNER_LIMIT_PER_RUNNER);
    let runners_per_worker = code_slots.div_ceil(per_runner_cap).max(1);
    let runner_limit = code_slots.div_ceil(runners_per_worker);
    let capacity_per_worker = runner_limit * runners_per_worker;
    let cap = model::capacity(
        &vec![
            WorkerLimits {
                worker_concurrency,
                runner_capacity: capacity_per_worker,
            };
            workers as usize
        ],
        job,
    );
    let at = model::predict_bound(&cap, job, overhead_s, operating);
    let mut notes = Vec::new();
    let current_ceiling = match (
        settings.worker_concurrency.as_ref(),
        settings.runner_limit.as_ref(),
    ) {
        (Some(c), Some(r)) => {
            let rpw = settings
                .runners_per_worker
                .as_ref()
                .map(|x| x.value)
                .unwrap_or(1);
            let now = model::capacity(
                &vec![
                    WorkerLimits {
                        worker_concurrency: c.value,
                        runner_capacity: r.value * rpw,
                    };
                    workers as usize
                ],
                job,
            );
            // What raising only the worker limit would give.
            let only_workers = model::capacity(
                &vec![
                    WorkerLimits {
                        worker_concurrency,
                        runner_capacity: r.value * rpw,
                    };
                    workers as usize
                ],
                job,
            );
            if only_workers.ceiling < cap.ceiling * 0.99 {
                notes.push(format!(
                    "with the runner limit left at {} the ceiling stays {:.2} req/s ({:.0}/min): \
                     worker concurrency {worker_concurrency} is useful only with runner capacity \
                     {capacity_per_worker} per worker",
                    r.value * rpw,
                    only_workers.ceiling,
                    only_workers.ceiling * 60.0
                ));
            }
            Some(now.ceiling)
        }
        _ => None,
    };
    if runners_per_worker > 1 {
        notes.push(format!(
            "{runners_per_worker} runners per worker, each N8N_RUNNERS_MAX_CONCURRENCY={runner_limit}: \
             a runner is one Node process; if the Code is I/O-bound, one runner with \
             N8N_RUNNERS_MAX_CONCURRENCY={capacity_per_worker} holds the same"
        ));
    }
    notes.push(format!(
        "add workers in pairs with their runners: each new worker needs {runners_per_worker} runner(s) \
         whose N8N_RUNNERS_TASK_BROKER_URI points at it"
    ));
    let runner_memory_limit_mb = settings.task_memory_mb.as_ref().map(|m| {
        let mb = (runner_limit as f64 * m.value + RUNNER_BASE_MB_ASSUMED).ceil() as u64;
        Sourced::new(
            mb,
            format!(
                "{runner_limit} tasks × {:.0} MiB per task ({}) + {RUNNER_BASE_MB_ASSUMED:.0} MiB base (assumed, not measured)",
                m.value, m.source
            ),
        )
    });
    if runner_memory_limit_mb.is_none() {
        notes.push(
            "runner memory limit: tasks × per-task peak + idle base — not measured in this run \
             (sweep with the memory profile, or give alloc_mb in the body)"
                .into(),
        );
    }
    Ok(Recommendation {
        break_point: bp,
        operating_concurrency: operating,
        workers,
        worker_concurrency,
        runner_limit,
        runners_per_worker,
        runner_capacity_per_worker: capacity_per_worker,
        runner_memory_limit_mb,
        predicted_throughput: cap.ceiling,
        predicted_response_s: at.response_s,
        current_ceiling,
        notes,
    })
}

impl Recommendation {
    /// The settings as compose `environment` / `command` lines.
    pub fn compose_snippet(&self) -> String {
        let mut s = String::new();
        s.push_str("# n8n worker (each of ");
        s.push_str(&self.workers.to_string());
        s.push_str(")\n");
        s.push_str(&format!(
            "n8n-worker:\n  command: worker --concurrency={}\n  environment:\n    - N8N_RUNNERS_MODE=external\n    - N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0\n",
            self.worker_concurrency
        ));
        s.push_str(&format!(
            "# task runner: {} per worker, paired through N8N_RUNNERS_TASK_BROKER_URI\nn8n-worker-runner:\n  environment:\n    - N8N_RUNNERS_TASK_BROKER_URI=http://n8n-worker:5679\n    - N8N_RUNNERS_MAX_CONCURRENCY={}\n",
            self.runners_per_worker, self.runner_limit
        ));
        if let Some(m) = &self.runner_memory_limit_mb {
            s.push_str(&format!("  mem_limit: {}m\n", m.value));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_check_break_point_120_job_24s() {
        let settings = Settings {
            worker_concurrency: Some(Sourced::new(120, "test")),
            runner_limit: Some(Sourced::new(10, "test")),
            job_time: Some(Sourced::new(24.0, "test")),
            code_time: Some(Sourced::new(24.0, "test")),
            ..Settings::default()
        };
        let r = recommend(&settings, None, Some(Sourced::new(120, "flag")), 0.0).unwrap();
        assert_eq!(r.operating_concurrency, 80);
        assert_eq!(r.worker_concurrency, 80);
        assert_eq!(r.runner_capacity_per_worker, 80);
        assert!((r.predicted_throughput - 80.0 / 24.0).abs() < 1e-9);
        // With the runner limit left at 10: 10 ÷ 24 s = 25/min — the tool must say so.
        let note = r
            .notes
            .iter()
            .find(|n| n.contains("stays"))
            .expect("a note on the runner limit");
        assert!(note.contains("25/min"), "{note}");
        assert!((r.current_ceiling.unwrap() - 10.0 / 24.0).abs() < 1e-9);
    }

    #[test]
    fn wait_time_needs_fewer_runner_tasks() {
        let settings = Settings {
            job_time: Some(Sourced::new(2.0, "t")),
            code_time: Some(Sourced::new(0.5, "t")),
            task_memory_mb: Some(Sourced::new(100.0, "t")),
            ..Settings::default()
        };
        let r = recommend(&settings, None, Some(Sourced::new(30, "flag")), 0.0).unwrap();
        assert_eq!(r.worker_concurrency, 20);
        // 20 slots × 0.5 ÷ 2 = 5 holding Code at once.
        assert_eq!(r.runner_capacity_per_worker, 5);
        assert_eq!(r.runner_memory_limit_mb.unwrap().value, 650);
        assert!(recommend(&settings, None, None, 0.0).is_err());
    }
}
