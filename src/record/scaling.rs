//! How throughput grew with workers: the ceilings measured at each worker count, what each added
//! worker gained, the Universal Scalability Law fitted to them, the shared limit that bends the
//! curve (main's intake, Postgres, the host) with its evidence, and a plan for a target rate.

use crate::model::Limit;
use serde::{Deserialize, Serialize};

/// One worker count and what its run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalePoint {
    /// The run (results directory or summary.json) it came from.
    pub run: String,
    pub workers: u32,
    /// Where the worker count came from (its provenance's words).
    pub workers_source: String,
    /// Ceiling measured, /s, with its 95 % interval; None when the run did not reach one.
    pub ceiling: Option<[f64; 3]>,
    /// The limit the run's own verdict named (its `capping_limit`), when one.
    pub limit: Option<String>,
    /// Gained ÷ what the added workers would give at one worker's ceiling (1 = linear), from the
    /// previous count.
    pub efficiency: Option<f64>,
    /// Why the count's workers were not all seen taking jobs: main's gauge showed fewer slots
    /// taken while jobs waited than the count's workers hold. The point is then left out of the
    /// fit (its ceiling is a smaller count's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_joined: Option<String>,
}

/// The Universal Scalability Law fitted to the ceilings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// One worker's ceiling, /s.
    pub lambda_per_s: f64,
    /// Contention: the share of an execution that waits on something all workers share.
    pub sigma: f64,
    pub sigma_range: [f64; 2],
    /// Coherency: a cost that grows with every pair of workers.
    pub kappa: f64,
    pub kappa_range: [f64; 2],
    /// The fit's error against the measured ceilings (root-mean-square, a share).
    pub rms_error: f64,
    /// Workers at which the curve peaks (κ > 0).
    pub peak_workers: Option<f64>,
    /// The ceiling the curve approaches (λ ÷ σ) or peaks at, /s.
    pub ceiling_per_s: Option<f64>,
    /// From this many workers on, one more adds less than 10 % of one worker's ceiling.
    pub diminishing_from: Option<u32>,
}

impl UslFit {
    /// The fitted law, to evaluate at any count.
    pub fn law(&self) -> crate::model::usl::Fit {
        crate::model::usl::Fit {
            lambda: self.lambda_per_s,
            sigma: self.sigma,
            sigma_range: self.sigma_range,
            kappa: self.kappa,
            kappa_range: self.kappa_range,
            rms_error: self.rms_error,
        }
    }
}

/// A limit all workers share, and whether the runs reached it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedLimit {
    /// Its kind, one for the deployment (`main_intake`, `host_cpu`, `postgres`, …; its file in
    /// `src/limits/` says its bound from the evidence and its relief).
    pub kind: Limit,
    /// Its bound, /s, when it can be computed (main: its one core ÷ CPU s per execution).
    pub bound_per_s: Option<f64>,
    /// The run at the highest worker count was at it.
    pub reached: bool,
    pub evidence: Vec<String>,
    /// What moves it.
    pub fix: String,
}

impl SharedLimit {
    /// What a person calls the limit at a sentence's start, in the verdict, the plan and the
    /// chart: its kind's words.
    pub fn words(&self) -> String {
        let w = self.kind.words();
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    }
}

/// Workers for a target rate, at the 2/3 operating point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkersPlan {
    pub target_per_s: f64,
    /// The ceiling the plan needs: target ÷ (2/3).
    pub needed_ceiling_per_s: f64,
    /// Workers the fit says reach it (each with its runner), when any count does.
    pub workers: Option<u32>,
    /// The fitted ceiling at that count, /s.
    pub predicted_ceiling_per_s: Option<f64>,
    /// Why no count does, or what the plan rests on.
    pub note: String,
    /// Each worker's settings, as the runs had them (the plan keeps them).
    #[serde(default)]
    pub per_worker: PerWorker,
    /// Webhook processors (`n8n webhook`) to take production webhooks off main, when main's
    /// intake is below the ceiling needed: the ceiling ÷ one process's intake, rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_processors: Option<u32>,
    /// Workers once the shared limit has moved, at one worker's measured ceiling each
    /// (assumed linear there: sweep again to confirm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_after_change: Option<u32>,
    /// Postgres connections the planned processes hold at their pools' most: (workers + main +
    /// webhook processors) × the pool size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_connections: Option<u32>,
}

/// A worker's settings in a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerWorker {
    pub worker_concurrency: Option<u32>,
    pub runners: Option<u32>,
    pub runner_limit: Option<u32>,
    /// `DB_POSTGRESDB_POOL_SIZE` of every process (n8n's default 2 when the runs did not say).
    pub db_pool_size: u32,
    /// Where the pool size came from.
    pub db_pool_source: String,
}

/// The whole answer of `n8ncap scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub points: Vec<ScalePoint>,
    pub fit: Option<UslFit>,
    pub shared: Vec<SharedLimit>,
    /// One paragraph: what stops scale-out, with its figures.
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<WorkersPlan>,
}

/// One run of the scale command of a scale sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleStep {
    pub workers: u32,
    /// The command as run, the count in place of `{workers}`.
    pub command: String,
    /// Its exit status; None when it did not start, was stopped or ended by a signal.
    pub exit_code: Option<i32>,
    /// The end of what it printed (stdout, then stderr).
    pub output: String,
    /// How long it ran, s.
    pub seconds: f64,
    /// Waited after it before the load, s.
    pub settle_s: f64,
    /// The return to the count the sweep found.
    pub restore: bool,
    /// Why the step failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Worker processes connected to the queue when the load started (Bull's worker clients in
    /// Redis, with `--redis`), and how the wait for them ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_workers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<String>,
    /// Seconds from the command's end until they were, when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined_after_s: Option<f64>,
}

/// A scale sweep (`sweep --workers 1,2,4`): each count's run, the command's steps, the return to
/// the count it found, and the runs judged together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleSweep {
    /// The count the sweep found and returns to.
    pub original_workers: u32,
    /// Where that count came from.
    pub original_source: String,
    pub steps: Vec<ScaleStep>,
    /// The results directory of each count measured, in order.
    pub runs: Vec<String>,
    /// How it ended: completed, interrupted, or the failure that stopped it.
    pub ended: String,
    /// The runs judged together, when at least two counts were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
}
