//! The capacity model (docs/diagnose.md), pure: numbers in, numbers out.
//!
//! Per worker w: slots `c_w` (effective worker concurrency) and runner capacity `r_w` (the sum of
//! `N8N_RUNNERS_MAX_CONCURRENCY` of the runners attached to its broker). A job holds a slot for
//! its whole time S = W + C (W: waiting on external calls, C: Code work) and a runner task for C.
//! Worker-bound ceiling Σc ÷ S, runner-bound ceiling Σr ÷ C; the smaller caps throughput. With
//! W = 0 this is min(runner limit, worker concurrency) ÷ job time.

pub mod autoscaler;
pub mod bound;
pub mod budget;
mod capacity;
pub mod db_recovery;
pub mod drain;
pub mod memory;
pub mod mix;
pub mod operating_point;
pub mod proposal;
pub mod provenance;
pub mod settings;
pub mod usl;

pub use bound::{Bound, Holds};
pub use capacity::Capacity;
pub use operating_point::OperatingPoint;
use provenance::Provenance;

use serde::{Deserialize, Serialize};

/// n8n's defaults, each checked against n8n 2.x's source (`packages/@n8n/config` and the CLI's
/// commands).
pub mod n8n_defaults {
    /// `worker --concurrency` when not given.
    pub const WORKER_CONCURRENCY: u32 = 10;
    /// `N8N_RUNNERS_MAX_CONCURRENCY` when unset (the 2.x source says 10; the docs say 5).
    pub const RUNNER_LIMIT: u32 = 10;
    /// `N8N_RUNNERS_TASK_REQUEST_TIMEOUT`, seconds.
    pub const TASK_REQUEST_TIMEOUT_S: f64 = 60.0;
    /// `DB_POSTGRESDB_POOL_SIZE`.
    pub const DB_POOL_SIZE: u32 = 2;
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT`, seconds: how long a worker's shutdown waits for its
    /// running executions.
    pub const GRACEFUL_SHUTDOWN_S: f64 = 30.0;
    /// `QUEUE_WORKER_LOCK_DURATION`, ms: Bull's lease on a running job (scaling-mode config).
    pub const LOCK_DURATION_MS: f64 = 60_000.0;
    /// `QUEUE_WORKER_STALLED_INTERVAL`, ms: how often Bull looks for jobs whose lease lapsed.
    pub const STALLED_INTERVAL_MS: f64 = 30_000.0;
    /// `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`, ms: how long an n8n process tries a lost Redis
    /// before it exits (`RedisClientService`; measured on 2.41.1: main and workers exited 10 s
    /// after Redis stopped).
    pub const REDIS_TIMEOUT_THRESHOLD_MS: f64 = 10_000.0;
    /// `N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT`, seconds: a runner's own shutdown window.
    pub const RUNNER_GRACEFUL_SHUTDOWN_S: f64 = 30.0;
    /// At shutdown a running Code task is re-armed to end by this share of
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` (n8n #37651).
    pub const SHUTDOWN_TASK_SHARE: f64 = 0.8;
    /// `N8N_RUNNERS_TASK_TIMEOUT`, seconds: how long a Code task may run (2.x; 3.0 lowers it
    /// to 60, n8n #37042).
    pub const TASK_TIMEOUT_S: f64 = 300.0;
    /// `N8N_RUNNERS_TASK_TIMEOUT` from n8n 3.0 on, seconds (n8n #37042).
    pub const TASK_TIMEOUT_3_S: f64 = 60.0;
    /// `DB_PING_TIMEOUT_MS` (`DEFAULT_PING_TIMEOUT_MS` in `@n8n/config`'s database config).
    pub const DB_PING_TIMEOUT_MS: f64 = 5_000.0;
    /// `N8N_METRICS_QUEUE_METRICS_INTERVAL`, seconds: how often main refreshes its queue
    /// gauges and counters.
    pub const QUEUE_METRICS_INTERVAL_S: f64 = 20.0;
    /// MiB an idle `n8nio/runners` container holds (its launcher and a Node runner), used when
    /// a run did not measure the runner before load.
    pub const RUNNER_IDLE_MIB: f64 = 150.0;
}

/// The share of a measured ceiling a plan runs at (the 2/3 safety factor).
pub const OPERATING_SHARE: f64 = 2.0 / 3.0;

/// Share of its usable cores at which a process counts as saturated (one Node process's
/// JavaScript runs on one core).
pub const SATURATED_SHARE: f64 = 0.85;

/// Jobs waiting: below this many on average (a gauge's mean over a stage or a window) there
/// is no queue.
pub const WAITED_JOBS: f64 = 1.0;

/// An n8n version an upgrade is checked for (`audit --upgrade`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upgrade {
    /// n8n 3.0 (docs.n8n.io, "n8n 3.0 breaking changes").
    #[value(name = "3.0")]
    V3,
}

/// R̄ ÷ S above which a closed level is at the ceiling (Little's law: below the ceiling R̄ = S,
/// above it R̄ = N ÷ X_max). With deterministic jobs R̄ = S exactly until a limit binds;
/// measured real n8n varies R̄ at 1 in flight by a few %, and CPU contention below the knee adds
/// 10–20 %; 1.3 S is clear of both and reached at 1.3 × the knee.
pub const SATURATION_RATIO: f64 = 1.3;

/// A closed level with mean response `mean_response_s` is saturated when it exceeds
/// [`SATURATION_RATIO`] × the service time.
pub fn saturated(mean_response_s: f64, service_time_s: f64) -> bool {
    service_time_s > 0.0 && mean_response_s > SATURATION_RATIO * service_time_s
}

/// n8n's fixed overhead per execution (webhook intake, queueing, the respond node), used when
/// no level at 1 in flight measured it: real n8n 2.41 added 50–70 ms at 1 in flight; the
/// reference study 40 ms.
pub const DEFAULT_OVERHEAD_S: f64 = 0.06;

/// One worker's two limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkerLimits {
    /// Effective worker concurrency (slots).
    pub worker_concurrency: u32,
    /// Σ runner limits of the runners attached to this worker's broker (0: no runner).
    pub runner_capacity: u32,
}

impl WorkerLimits {
    /// Executions of an all-Code job the worker runs at once: min(slots, runner tasks).
    pub fn effective_concurrency(&self) -> u32 {
        self.worker_concurrency.min(self.runner_capacity)
    }
}

/// What one job asks for, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Slot-only time (external calls).
    pub wait_s: f64,
    /// Code time: slot and runner task.
    pub code_s: f64,
    /// n8n's fixed overhead per execution (intake, queueing, respond).
    #[serde(default)]
    pub overhead_s: f64,
}

impl Job {
    /// Job time W + C, as the workflow defines it.
    pub fn job_time(&self) -> f64 {
        self.wait_s + self.code_s
    }

    /// Service time S = W + C + overhead: the response at 1 in flight, and what a slot-bound
    /// ceiling divides by.
    pub fn service_time(&self) -> f64 {
        self.job_time() + self.overhead_s
    }
}

/// A kind of limit: a thing that can cap throughput, answered by its file in `src/limits/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    WorkerConcurrency,
    RunnerLimit,
    /// CPU: one process (a Node process runs its JavaScript on one core) or the host.
    Cpu,
    /// Regular mode: `N8N_CONCURRENCY_PRODUCTION_LIMIT` executions at once in main.
    ProductionLimit,
    /// The workers' database pools: `DB_POSTGRESDB_POOL_SIZE` connections each.
    DbPool,
    /// Main's intake in queue mode: its one thread receives and enqueues every execution.
    MainIntake,
    /// The host's cores, shared by every process on it (one for the deployment's host).
    HostCpu,
    /// Postgres' connections: `max_connections` against every process's pool (written
    /// `postgres`, as scale.json has always named it).
    #[serde(rename = "postgres")]
    PostgresConnections,
    /// Postgres' server CPU, which every process's queries draw on.
    PostgresServer,
    /// The queue's Redis: one thread runs every command of every worker's and main's Bull.
    Redis,
}

impl Limit {
    pub fn words(&self) -> &'static str {
        match self {
            Limit::WorkerConcurrency => "worker concurrency",
            Limit::RunnerLimit => "runner limit",
            Limit::Cpu => "CPU",
            Limit::ProductionLimit => "production limit (regular mode)",
            Limit::DbPool => "database pool",
            Limit::MainIntake => "main's intake",
            Limit::HostCpu => "the host's CPU",
            Limit::PostgresConnections => "Postgres' connection limit",
            Limit::PostgresServer => "Postgres' server CPU",
            Limit::Redis => "Redis' one thread",
        }
    }

    /// How a plan's prediction names the bound it meets: a process's CPU (a verdict's "CPU" is
    /// whichever site bound), else the kind's words.
    pub fn as_plan_bound(&self) -> &'static str {
        if *self == Limit::Cpu {
            "a process's CPU"
        } else {
            self.words()
        }
    }
}

/// A plan's bound as `summary.json` has always written it (`predicted_bound`): a process's CPU
/// is `process_cpu` (a verdict's capping `cpu`), every other kind its own name.
pub mod plan_bound {
    use super::Limit;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(l: &Limit, s: S) -> Result<S::Ok, S::Error> {
        if *l == Limit::Cpu {
            s.serialize_str("process_cpu")
        } else {
            l.serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Limit, D::Error> {
        let word = String::deserialize(d)?;
        if word == "process_cpu" {
            return Ok(Limit::Cpu);
        }
        Limit::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&word))
    }
}

/// What caps throughput, as a verdict says it: one kind, or one of the two states that are no
/// kind — the slots and the runner tasks level (the data cannot say which), or no runner at
/// all. Written as one word (`runner_limit`, `both`, `no_runner`), as before it had states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capping {
    /// Worker concurrency and the runner limit within [`INSEPARABLE`] of each other.
    Both,
    /// No runner attached anywhere: Code tasks never run.
    NoRunner,
    #[serde(untagged)]
    Kind(Limit),
}

impl Capping {
    pub fn words(&self) -> &'static str {
        match self {
            Capping::Both => "worker concurrency and runner limit (equal)",
            Capping::NoRunner => "no runner attached",
            Capping::Kind(l) => l.words(),
        }
    }

    /// The kind, when one kind caps.
    pub fn kind(&self) -> Option<Limit> {
        match self {
            Capping::Kind(l) => Some(*l),
            Capping::Both | Capping::NoRunner => None,
        }
    }
}

impl From<Limit> for Capping {
    fn from(l: Limit) -> Capping {
        Capping::Kind(l)
    }
}

/// JSON has no infinity: an unbounded ceiling (no Code, so no runner bound) is written as
/// `null` and read back as infinity.
pub mod unbounded {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

/// Two ceilings within this share of each other cannot be told apart: n8n's overhead alone
/// moves them that much.
pub const INSEPARABLE: f64 = 0.10;

impl Capacity {
    /// The slot and runner bounds' servers as the settings gave them: each takes its setting's
    /// provenance (with how it was multiplied) in place of the model's own words.
    pub fn source_bounds(&mut self, slots: Option<Provenance>, runners: Option<Provenance>) {
        for b in &mut self.bounds {
            let given = if b.limit == Limit::WorkerConcurrency {
                slots.clone()
            } else if b.limit == Limit::RunnerLimit {
                runners.clone()
            } else {
                None
            };
            if let Some(p) = given {
                b.source = p;
            }
        }
    }
}

/// The ceilings of `n` identical workers.
pub fn slots_and_runners_uniform(n: u32, w: WorkerLimits, job: Job) -> Capacity {
    let one = slots_and_runners(&[w], job);
    let n_f = n as f64;
    Capacity {
        ceiling: one.ceiling * n_f,
        capping: one.capping,
        effective_concurrency: one.effective_concurrency * n_f,
        bounds: one
            .bounds
            .into_iter()
            .map(|b| Bound {
                servers: b.servers * n_f,
                source: b.source.with_note(&format!(" × {n} workers")),
                ..b
            })
            .collect(),
    }
}

pub fn slots_and_runners(workers: &[WorkerLimits], job: Job) -> Capacity {
    let c: u32 = workers
        .iter()
        .map(|w| w.worker_concurrency)
        .fold(0, u32::saturating_add);
    let r: u32 = workers
        .iter()
        .map(|w| w.runner_capacity)
        .fold(0, u32::saturating_add);
    let s = job.service_time().max(1e-9);
    let runner_bound_of = |cap: u32| {
        if job.code_s > 0.0 {
            cap as f64 / job.code_s
        } else if cap > 0 {
            f64::INFINITY
        } else {
            0.0
        }
    };
    // Per worker, min(c_w ÷ S, r_w ÷ C): a worker's spare runner capacity cannot serve another.
    let ceiling: f64 = workers
        .iter()
        .map(|w| (w.worker_concurrency as f64 / s).min(runner_bound_of(w.runner_capacity)))
        .sum();
    let mut bounds = vec![
        Bound {
            limit: Limit::WorkerConcurrency,
            servers: c as f64,
            demand_s: s,
            holds: Holds::Execution,
            source: Provenance::Model("worker slots (--concurrency)".into()),
        },
        Bound {
            limit: Limit::RunnerLimit,
            servers: r as f64,
            demand_s: job.code_s,
            holds: Holds::Code,
            source: Provenance::Model("runner tasks (N8N_RUNNERS_MAX_CONCURRENCY)".into()),
        },
    ];
    bounds.sort_by(|a, b| a.per_s().total_cmp(&b.per_s()));
    let capping = capping_of(&bounds);
    Capacity {
        ceiling,
        capping,
        effective_concurrency: ceiling * s,
        bounds,
    }
}

/// Which limit caps, from bounds sorted smallest first: one with no server (a runner limit of
/// 0: no runner attached) stops every Code task; two within [`INSEPARABLE`] of each other cannot
/// be told apart; else the smallest.
pub fn capping_of(sorted: &[Bound]) -> Capping {
    if sorted
        .iter()
        .any(|b| b.servers <= 0.0 && b.holds == Holds::Code)
    {
        return Capping::NoRunner;
    }
    let Some(first) = sorted.first() else {
        return Capping::Kind(Limit::WorkerConcurrency);
    };
    match sorted.get(1) {
        // An unbounded second (a job with no Code) is never level with the first.
        Some(second)
            if second.per_s().is_finite()
                && second.per_s() - first.per_s() <= INSEPARABLE * second.per_s() =>
        {
            // A resource measured for itself (a pool the execution waits for while it holds
            // its slot) level with the slots is their cause: it is named, not the pair.
            [first, second]
                .iter()
                .find(|b| b.holds == Holds::Measured)
                .map_or(Capping::Both, |b| Capping::Kind(b.limit))
        }
        _ => Capping::Kind(first.limit),
    }
}

/// The closed-load prediction at N in flight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub in_flight: u32,
    /// Throughput, jobs/s.
    pub throughput: f64,
    /// Mean response time, s.
    pub response_s: f64,
    /// Jobs in Redis no worker has taken: max(0, N − Σc).
    pub waiting_in_redis: f64,
    /// Slots taken: min(N, Σc) — what `n8n_scaling_mode_queue_jobs_active` shows.
    pub slots_taken: f64,
    /// Runner tasks running: X × C.
    pub runner_tasks: f64,
    /// Jobs holding a slot while waiting for a runner: slots taken − X × S.
    pub waiting_for_runner: f64,
}

/// Deterministic job times: X(N) = min(N ÷ S, X_max), S with the overhead. This is what a
/// stack with steady job times does (the simulator, a Code node that sleeps). `x_max` is the
/// ceiling to use (the settings' ceiling, or lower when CPU caps).
pub fn predict_bound(cap: &Capacity, job: Job, x_max: f64, n: u32) -> Point {
    let x = (n as f64 / job.service_time().max(1e-9)).min(x_max);
    point(cap, job, n, x)
}

fn point(cap: &Capacity, job: Job, n: u32, x: f64) -> Point {
    let c = cap.slots() as f64;
    let nf = n as f64;
    let slots = nf.min(c);
    let response = if x > 0.0 { nf / x } else { f64::INFINITY };
    Point {
        in_flight: n,
        throughput: x,
        response_s: response,
        waiting_in_redis: (nf - c).max(0.0),
        slots_taken: slots,
        runner_tasks: x * job.code_s,
        waiting_for_runner: (slots - x * job.service_time()).max(0.0),
    }
}

/// Curves stop here: MVA costs N² and no chart needs more points.
pub const MAX_CURVE_IN_FLIGHT: u32 = 2000;

/// Mean-value analysis of the closed network: a delay station (fixed overhead, plus the
/// slot-only part when runners cap) and the capping resource as a load-dependent multi-server
/// station with k = effective concurrency servers. Exact for exponential job times; with
/// variable job times the knee is rounder than [`predict_bound`]'s.
pub fn predict_mva(cap: &Capacity, job: Job, x_max: f64, max_n: u32) -> Vec<Point> {
    // The station is the binding bound's servers and demand; every other part of the service
    // time is delay (a model without bounds: the slots).
    let (servers, demand) = match cap.binding() {
        Some(b) if b.servers > 0.0 && b.demand_s > 0.0 => (b.servers as u32, b.demand_s),
        _ => (cap.slots().max(1), job.job_time()),
    };
    let delay = (job.service_time() - demand).max(0.0);
    let max_n = max_n.min(MAX_CURVE_IN_FLIGHT);
    let k = servers as usize;
    let mu = |j: usize| j.min(k) as f64 / demand.max(1e-9);
    // p[j]: probability of j jobs at the station, for the current population.
    let mut p = vec![1.0f64];
    let mut out = Vec::with_capacity(max_n as usize);
    for n in 1..=max_n as usize {
        let r_station: f64 = (1..=n).map(|j| j as f64 / mu(j) * p[j - 1]).sum();
        let x = n as f64 / (delay + r_station);
        let mut next = vec![0.0; n + 1];
        for j in 1..=n {
            next[j] = x / mu(j) * p[j - 1];
        }
        next[0] = (1.0 - next[1..].iter().sum::<f64>()).max(0.0);
        p = next;
        out.push(point(cap, job, n as u32, x.min(x_max)));
    }
    out
}

#[cfg(test)]
mod tests {
    /// A verdict's state and a kind are written as one word each, as before states had a type
    /// of their own, and read back the same.
    #[test]
    fn a_capping_is_one_word_whether_state_or_kind() {
        for (c, word) in [
            (Capping::Both, "both"),
            (Capping::NoRunner, "no_runner"),
            (Capping::Kind(Limit::RunnerLimit), "runner_limit"),
            (Capping::Kind(Limit::MainIntake), "main_intake"),
        ] {
            let v = serde_json::to_value(c).unwrap();
            assert_eq!(v, word);
            assert_eq!(serde_json::from_value::<Capping>(v).unwrap(), c);
        }
        assert!(serde_json::from_value::<Capping>("slots".into()).is_err());
    }

    /// A plan's bound is written as summary.json always wrote it — a process's CPU
    /// `process_cpu`, the host's `host_cpu`, a kind its own name — and read back, `cpu` too.
    #[test]
    fn a_plan_s_bound_keeps_its_words_in_json() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct P {
            #[serde(with = "super::plan_bound")]
            b: Limit,
        }
        for (l, word) in [
            (Limit::Cpu, "process_cpu"),
            (Limit::HostCpu, "host_cpu"),
            (Limit::WorkerConcurrency, "worker_concurrency"),
            (Limit::Redis, "redis"),
        ] {
            let v = serde_json::to_value(P { b: l }).unwrap();
            assert_eq!(v["b"], word);
            assert_eq!(serde_json::from_value::<P>(v).unwrap(), P { b: l });
        }
        let cpu: P = serde_json::from_value(serde_json::json!({"b": "cpu"})).unwrap();
        assert_eq!(cpu.b, Limit::Cpu);
        assert!(serde_json::from_value::<P>(serde_json::json!({"b": "slots"})).is_err());
        // A shared limit's kind keeps scale.json's word for Postgres' connections.
        assert_eq!(
            serde_json::to_value(Limit::PostgresConnections).unwrap(),
            "postgres"
        );
    }

    use super::*;

    fn one(c: u32, r: u32) -> Vec<WorkerLimits> {
        vec![WorkerLimits {
            worker_concurrency: c,
            runner_capacity: r,
        }]
    }

    #[test]
    fn reference_study_figures() {
        // Worker 15, runner 2/5/10/20, 3 s jobs → 0.66, 1.66, 3.33, 5.0 req/s.
        let job = Job {
            wait_s: 0.0,
            code_s: 3.0,
            overhead_s: 0.0,
        };
        for (r, x, lim) in [
            (2, 0.6667, Capping::Kind(Limit::RunnerLimit)),
            (5, 1.6667, Capping::Kind(Limit::RunnerLimit)),
            (10, 3.3333, Capping::Kind(Limit::RunnerLimit)),
            (20, 5.0, Capping::Kind(Limit::WorkerConcurrency)),
            (15, 5.0, Capping::Both),
        ] {
            let cap = slots_and_runners(&one(15, r), job);
            assert!((cap.ceiling - x).abs() < 1e-3, "r={r}: {}", cap.ceiling);
            assert_eq!(cap.capping, lim, "r={r}");
        }
        let cap = slots_and_runners(&one(15, 0), job);
        assert_eq!(cap.capping, Capping::NoRunner);
        assert_eq!(cap.ceiling, 0.0);
    }

    #[test]
    fn closed_load_predictions() {
        let job = Job {
            wait_s: 0.0,
            code_s: 3.0,
            overhead_s: 0.0,
        };
        let cap = slots_and_runners(&one(15, 10), job);
        let p = predict_bound(&cap, job, cap.ceiling, 20);
        assert!((p.throughput - 3.3333).abs() < 1e-3);
        assert!((p.response_s - 6.0).abs() < 1e-3);
        assert_eq!(p.waiting_in_redis, 5.0);
        assert_eq!(p.slots_taken, 15.0);
        assert!((p.runner_tasks - 10.0).abs() < 1e-9);
        assert!((p.waiting_for_runner - 5.0).abs() < 1e-9);
        let with_overhead = Job {
            overhead_s: 0.04,
            ..job
        };
        let p1 = predict_bound(&cap, with_overhead, cap.ceiling, 1);
        assert!((p1.response_s - 3.04).abs() < 1e-9);
    }

    #[test]
    fn wait_time_holds_slots_not_runners() {
        // 4 slots, runner 1, W = 0.4 s, C = 0.1 s: worker-bound 4/0.5 = 8/s < runner 1/0.1 = 10/s.
        let job = Job {
            wait_s: 0.4,
            code_s: 0.1,
            overhead_s: 0.0,
        };
        let cap = slots_and_runners(&one(4, 1), job);
        assert_eq!(cap.capping, Capping::Kind(Limit::WorkerConcurrency));
        assert!((cap.ceiling - 8.0).abs() < 1e-9);
    }

    #[test]
    fn spare_runner_capacity_on_one_worker_does_not_serve_another() {
        let job = Job {
            wait_s: 0.0,
            code_s: 1.0,
            overhead_s: 0.0,
        };
        let ws = vec![
            WorkerLimits {
                worker_concurrency: 10,
                runner_capacity: 20,
            },
            WorkerLimits {
                worker_concurrency: 10,
                runner_capacity: 0,
            },
        ];
        let cap = slots_and_runners(&ws, job);
        assert!((cap.ceiling - 10.0).abs() < 1e-9, "{}", cap.ceiling);
    }

    #[test]
    fn mva_approaches_both_asymptotes() {
        let job = Job {
            wait_s: 0.0,
            code_s: 1.0,
            overhead_s: 0.0,
        };
        let job = Job {
            overhead_s: 0.05,
            ..job
        };
        let cap = slots_and_runners(&one(15, 10), job);
        let curve = predict_mva(&cap, job, cap.ceiling, 60);
        assert!((curve[0].throughput - 1.0 / 1.05).abs() < 1e-9);
        assert!((curve[59].throughput - 10.0).abs() < 0.05);
        for w in curve.windows(2) {
            assert!(w[1].throughput >= w[0].throughput - 1e-12);
        }
        let b = predict_bound(&cap, job, cap.ceiling, 10);
        assert!(curve[9].throughput <= b.throughput + 1e-9);
    }
}
