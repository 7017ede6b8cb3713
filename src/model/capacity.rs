//! A deployment's capacity for a job: its bounds (every resource that caps, as data), the
//! ceiling and what caps. The figures of the slots and runner tasks every report shows are
//! read from the bounds, never kept beside them; `summary.json` still writes them, flat, as it
//! always has (`Written`).

use super::bound::{self, Bound};
use super::{unbounded, Capping, Limit};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "Written", from = "Written")]
pub struct Capacity {
    /// The throughput ceiling X_max: per worker, the smaller of its slots' and its runners'
    /// bounds, summed; no more than the binding bound.
    pub ceiling: f64,
    pub capping: Capping,
    /// Jobs making progress at the ceiling: X_max × S.
    pub effective_concurrency: f64,
    /// Every bound the model holds (slots, runner tasks, and each kind's), the binding one
    /// first.
    pub bounds: Vec<Bound>,
}

impl Capacity {
    /// The bound that caps: the one allowing the fewest executions per second.
    pub fn binding(&self) -> Option<&Bound> {
        bound::binding(&self.bounds)
    }

    /// A kind's bound, when the capacity holds one.
    pub fn bound_of(&self, l: Limit) -> Option<&Bound> {
        self.bounds.iter().find(|b| b.limit == l)
    }

    fn servers(&self, l: Limit) -> u32 {
        self.bound_of(l).map_or(0, |b| b.servers.round() as u32)
    }

    fn allows(&self, l: Limit) -> f64 {
        self.bound_of(l).map_or(0.0, Bound::per_s)
    }

    /// Σc: the workers' slots across the deployment.
    pub fn slots(&self) -> u32 {
        self.servers(Limit::WorkerConcurrency)
    }

    /// Σr: the runner tasks across the deployment.
    pub fn runner_tasks(&self) -> u32 {
        self.servers(Limit::RunnerLimit)
    }

    /// Σc ÷ S, jobs/s.
    pub fn worker_bound(&self) -> f64 {
        self.allows(Limit::WorkerConcurrency)
    }

    /// Σr ÷ C, jobs/s (infinite when C = 0).
    pub fn runner_bound(&self) -> f64 {
        self.allows(Limit::RunnerLimit)
    }
}

/// A capacity as `summary.json` writes it: the slots' and runner tasks' figures first, read
/// from its bounds (an older file without bounds is read with none).
#[derive(Serialize, Deserialize)]
struct Written {
    total_worker_concurrency: u32,
    total_runner_capacity: u32,
    worker_bound: f64,
    #[serde(with = "unbounded")]
    runner_bound: f64,
    ceiling: f64,
    capping: Capping,
    effective_concurrency: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    bounds: Vec<Bound>,
}

impl From<Capacity> for Written {
    fn from(c: Capacity) -> Written {
        Written {
            total_worker_concurrency: c.slots(),
            total_runner_capacity: c.runner_tasks(),
            worker_bound: c.worker_bound(),
            runner_bound: c.runner_bound(),
            ceiling: c.ceiling,
            capping: c.capping,
            effective_concurrency: c.effective_concurrency,
            bounds: c.bounds,
        }
    }
}

impl From<Written> for Capacity {
    fn from(w: Written) -> Capacity {
        Capacity {
            ceiling: w.ceiling,
            capping: w.capping,
            effective_concurrency: w.effective_concurrency,
            bounds: w.bounds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{slots_and_runners, Job, WorkerLimits};
    use super::*;

    /// The figures written are the bounds': 2 workers of 5 slots and 3 runner tasks, a 0.5 s
    /// job of 0.2 s Code — and the JSON reads back to the same capacity.
    #[test]
    fn the_figures_written_are_read_from_the_bounds_and_read_back() {
        let w = WorkerLimits {
            worker_concurrency: 5,
            runner_capacity: 3,
        };
        let job = Job {
            wait_s: 0.0,
            code_s: 0.2,
            overhead_s: 0.3,
        };
        let cap = slots_and_runners(&[w, w], job);
        let v = serde_json::to_value(&cap).unwrap();
        assert_eq!(v["total_worker_concurrency"], 10);
        assert_eq!(v["total_runner_capacity"], 6);
        assert!((v["worker_bound"].as_f64().unwrap() - 20.0).abs() < 1e-9);
        assert!((v["runner_bound"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(v["bounds"].as_array().unwrap().len(), 2);
        let back: Capacity = serde_json::from_value(v).unwrap();
        assert_eq!(back, cap);
        // No Code: the runner bound is unbounded, written as null.
        let none = slots_and_runners(&[w], Job { code_s: 0.0, ..job });
        assert!(serde_json::to_value(&none).unwrap()["runner_bound"].is_null());
        assert_eq!(none.runner_bound(), f64::INFINITY);
    }
}
