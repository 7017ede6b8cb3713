//! Settings the model needs, each with where its value came from, so every figure n8ncap shows
//! can say "worker concurrency 15 (from --worker-concurrency)" or "runner limit 10 (inferred
//! from the measured ceiling)".

pub use super::provenance::{Provenance, ProvenanceKind};
use super::{slots_and_runners_uniform, Capacity, Job, WorkerLimits};
use serde::{Deserialize, Serialize};

/// A value and where it came from. In JSON: `value`, `source` (the words), `provenance` (the
/// variant) and, for an inferred value, `interval`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Provenance,
    /// An inferred value's 95 % interval (from the throughput's), before rounding.
    pub interval: Option<[f64; 2]>,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: Provenance) -> Self {
        Sourced {
            value,
            source,
            interval: None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SourcedRepr<T> {
    value: T,
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provenance: Option<ProvenanceKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interval: Option<[f64; 2]>,
}

impl<T: Serialize> Serialize for Sourced<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SourcedRepr {
            value: &self.value,
            source: self.source.words(),
            provenance: Some(self.source.kind()),
            interval: self.interval,
        }
        .serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Sourced<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = SourcedRepr::<T>::deserialize(d)?;
        Ok(Sourced {
            value: r.value,
            source: Provenance::from_saved(r.source, r.provenance),
            interval: r.interval,
        })
    }
}

/// How finely an inferred limit's estimate and interval are read.
const READING: f64 = 0.1;

impl Sourced<u32> {
    /// An inferred whole number from its estimate and interval: the one integer inside the
    /// interval when there is exactly one, else the nearest to the estimate — and the source
    /// says which, with the interval ("runner limit 5 (4.8–5.2, inferred)").
    pub fn inferred(estimate: f64, interval: [f64; 2], from: impl std::fmt::Display) -> Self {
        let [lo, hi] = [interval[0].min(estimate), interval[1].max(estimate)];
        // Figures read to a tenth: an integer within that of the interval lies in it (a
        // degenerate 6.04–6.04 holds 6).
        let whole: Vec<u32> = (((lo - READING).ceil().max(1.0) as u32)
            ..=((hi + READING).floor().max(0.0) as u32))
            .collect();
        let (value, note) = match whole.as_slice() {
            [one] => (*one, String::new()),
            [] => (
                estimate.round().max(1.0) as u32,
                format!(
                    "; no whole number lies in {lo:.2}–{hi:.2}: something besides this limit costs"
                ),
            ),
            _ => (
                estimate.round().max(1.0) as u32,
                format!("; anywhere from {} to {}", whole[0], whole[whole.len() - 1]),
            ),
        };
        Sourced {
            value,
            source: Provenance::Inferred(format!("{from} ({lo:.1}–{hi:.1}, inferred{note})")),
            interval: Some([lo, hi]),
        }
    }
}

/// `EXECUTIONS_MODE`: `queue` (workers take executions from Redis) or `regular` (n8n's
/// default: main runs every execution itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionsMode {
    Queue,
    Regular,
}

/// `N8N_DEFAULT_BINARY_DATA_MODE`: where n8n keeps binary data (uploads, files a workflow
/// makes). n8n refuses other values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryDataMode {
    /// In the process's memory.
    Default,
    /// Files under `N8N_BINARY_DATA_STORAGE_PATH`, on the process's own disk.
    Filesystem,
    /// In the database (n8n 2.x's default in queue mode).
    Database,
    /// In S3-compatible object storage.
    S3,
}

impl BinaryDataMode {
    pub fn parse(v: &str) -> Option<BinaryDataMode> {
        match v.trim() {
            "default" => Some(BinaryDataMode::Default),
            "filesystem" => Some(BinaryDataMode::Filesystem),
            "database" => Some(BinaryDataMode::Database),
            "s3" => Some(BinaryDataMode::S3),
            _ => None,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            BinaryDataMode::Default => "default",
            BinaryDataMode::Filesystem => "filesystem",
            BinaryDataMode::Database => "database",
            BinaryDataMode::S3 => "s3",
        }
    }
}

impl std::fmt::Display for BinaryDataMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// The deployment and workload as far as they are known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Queue or regular mode; unknown is taken as queue mode (what n8ncap is for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_mode: Option<Sourced<ExecutionsMode>>,
    pub workers: Option<Sourced<u32>>,
    /// Per worker.
    pub worker_concurrency: Option<Sourced<u32>>,
    /// Per runner.
    pub runner_limit: Option<Sourced<u32>>,
    pub runners_per_worker: Option<Sourced<u32>>,
    /// Job time S (seconds).
    pub job_time: Option<Sourced<f64>>,
    /// Code time C (seconds).
    pub code_time: Option<Sourced<f64>>,
    /// Per-task memory the Code node allocates (MiB).
    pub task_memory_mb: Option<Sourced<f64>>,
    /// Where binary data goes (`N8N_DEFAULT_BINARY_DATA_MODE` of main, or n8n's default for
    /// the executions mode), when the deployment was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_data_mode: Option<Sourced<BinaryDataMode>>,
    /// `DB_POSTGRESDB_POOL_SIZE` of each worker (n8n's default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool_size: Option<Sourced<u32>>,
    /// What a run measured of the deployment, beside what is configured (written flat, as the
    /// fields were before they had a struct of their own).
    #[serde(flatten)]
    pub measured: Measured,
}

/// What a run measured of the deployment that no setting says: read from its metrics, never
/// configured, so a plan proposes none of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Seconds an execution holds a worker's database connection (Little's law at the pool:
    /// connections in use ÷ executions per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_time: Option<Sourced<f64>>,
    /// The wait for a pool connection 99 % of acquisitions stayed under, at the busiest level
    /// measured (n8n's `db_pool_acquire_seconds`), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_acquire_p99_s: Option<Sourced<f64>>,
}

impl Measured {
    /// Fills what `self` lacks from `other`.
    pub fn or(self, other: Measured) -> Measured {
        Measured {
            db_time: self.db_time.or(other.db_time),
            db_acquire_p99_s: self.db_acquire_p99_s.or(other.db_acquire_p99_s),
        }
    }
}

impl Settings {
    /// Regular mode as the model sees it: one process (main) runs every execution, its slots
    /// are `N8N_CONCURRENCY_PRODUCTION_LIMIT` (None: -1, no limit), its Code nodes go to its
    /// internal runner (`runner_limit`, n8n's default when not given).
    pub fn regular(production_limit: Option<u32>, source: Provenance) -> Settings {
        Settings {
            executions_mode: Some(Sourced::new(ExecutionsMode::Regular, source.clone())),
            workers: Some(Sourced::new(1, Provenance::Deployment("regular mode: main runs every execution".into()))),
            worker_concurrency: production_limit.map(|l| {
                Sourced::new(
                    l,
                    source.with_note(": N8N_CONCURRENCY_PRODUCTION_LIMIT, regular mode's slots"),
                )
            }),
            runners_per_worker: Some(Sourced::new(1, Provenance::Deployment("regular mode: main's internal runner".into()))),
            runner_limit: Some(Sourced::new(
                super::n8n_defaults::RUNNER_LIMIT, Provenance::Default("n8n 2.x default for main's internal runner (N8N_RUNNERS_MAX_CONCURRENCY unset)".into()))),
            ..Settings::default()
        }
    }

    pub fn is_regular(&self) -> bool {
        self.executions_mode
            .as_ref()
            .is_some_and(|m| m.value == ExecutionsMode::Regular)
    }

    /// Workers (1 when not known: one worker is what a deployment without one more has).
    pub fn worker_count(&self) -> u32 {
        self.workers.as_ref().map(|w| w.value).unwrap_or(1).max(1)
    }

    pub fn runners_per_worker_count(&self) -> u32 {
        self.runners_per_worker
            .as_ref()
            .map(|r| r.value)
            .unwrap_or(1)
    }

    /// Worker concurrency, n8n's default (10) when not known: what a plan starts from.
    pub fn worker_concurrency_or_default(&self) -> u32 {
        self.worker_concurrency
            .as_ref()
            .map_or(super::n8n_defaults::WORKER_CONCURRENCY, |c| c.value)
    }

    /// The runner limit, n8n's default when not known: what a plan starts from.
    pub fn runner_limit_or_default(&self) -> u32 {
        self.runner_limit
            .as_ref()
            .map_or(super::n8n_defaults::RUNNER_LIMIT, |r| r.value)
    }

    /// Runner tasks one worker can run, the runner limit at n8n's default when not known.
    pub fn runner_capacity_or_default(&self) -> u32 {
        self.runner_limit_or_default()
            .saturating_mul(self.runners_per_worker_count())
    }

    /// The settings with `value` proposed for the setting `field` picks, saying why; a value
    /// equal to today's keeps today's source. A plan is these settings.
    pub fn propose(
        mut self,
        field: fn(&mut Settings) -> &mut Option<Sourced<u32>>,
        value: u32,
        why: impl std::fmt::Display,
    ) -> Settings {
        let slot = field(&mut self);
        if slot.as_ref().map(|v| v.value) != Some(value) {
            *slot = Some(Sourced::new(value, Provenance::Proposed(why.to_string())));
        }
        self
    }

    /// Whether the setting `field` picks is one a plan proposed.
    pub fn proposed(o: &Option<Sourced<u32>>) -> bool {
        o.as_ref()
            .is_some_and(|v| matches!(v.source, Provenance::Proposed(_)))
    }

    /// Runner tasks one worker can run: runner limit × runners per worker.
    pub fn runner_capacity_per_worker(&self) -> Option<u32> {
        let r = self.runner_limit.as_ref()?.value;
        Some(r.saturating_mul(self.runners_per_worker_count()))
    }

    /// The job as the model sees it: W + C from the job and Code times (a job time alone is
    /// all Code), plus n8n's fixed overhead.
    pub fn job(&self, overhead_s: f64) -> Option<Job> {
        let job = self.job_time.as_ref()?.value;
        let code = self
            .code_time
            .as_ref()
            .map(|c| c.value)
            .unwrap_or(job)
            .min(job);
        Some(Job {
            wait_s: (job - code).max(0.0),
            code_s: code,
            overhead_s: overhead_s.max(0.0),
        })
    }

    /// The job and Code times of a mix: the share-weighted means of its kinds.
    pub fn from_mix(kinds: &[super::mix::Kind]) -> Settings {
        if kinds.is_empty() {
            return Settings::default();
        }
        let job = super::mix::mean_job(kinds);
        let source = match kinds {
            [one] => Provenance::Body(format!("profile scenario {}", one.name)),
            _ => Provenance::Body(format!(
                "mix of {} workflows: Σ share × time ({})",
                kinds.len(),
                kinds
                    .iter()
                    .map(|k| format!("{} {:.0} %", k.name, k.share * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
        Settings {
            job_time: Some(Sourced::new(job.job_time(), source.clone())),
            code_time: Some(Sourced::new(job.code_s, source)),
            ..Settings::default()
        }
    }

    /// The only place the settings become ceilings: needs the job time, worker concurrency and
    /// runner limit.
    pub fn slots_and_runners(&self, overhead_s: f64) -> Option<Capacity> {
        let job = self.job(overhead_s)?;
        let limits = WorkerLimits {
            worker_concurrency: self.worker_concurrency.as_ref()?.value,
            runner_capacity: self.runner_capacity_per_worker()?,
        };
        let n = self.worker_count();
        let mut cap = slots_and_runners_uniform(n, limits, job);
        // Each bound's servers are a setting's: its provenance, and how it was multiplied.
        let per = self.runners_per_worker_count();
        cap.source_bounds(
            self.worker_concurrency
                .as_ref()
                .map(|v| v.source.with_note(&format!(" × {n} workers"))),
            self.runner_limit.as_ref().map(|v| {
                v.source
                    .with_note(&format!(" × {per} runner(s) × {n} workers"))
            }),
        );
        Some(cap)
    }

    /// Fills what `self` lacks from `other` (flags first, then what the run knows).
    pub fn or(mut self, other: Settings) -> Settings {
        self.executions_mode = self.executions_mode.or(other.executions_mode);
        self.workers = self.workers.or(other.workers);
        self.worker_concurrency = self.worker_concurrency.or(other.worker_concurrency);
        self.runner_limit = self.runner_limit.or(other.runner_limit);
        self.runners_per_worker = self.runners_per_worker.or(other.runners_per_worker);
        self.job_time = self.job_time.or(other.job_time);
        self.code_time = self.code_time.or(other.code_time);
        self.task_memory_mb = self.task_memory_mb.or(other.task_memory_mb);
        self.binary_data_mode = self.binary_data_mode.or(other.binary_data_mode);
        self.db_pool_size = self.db_pool_size.or(other.db_pool_size);
        self.measured = self.measured.or(other.measured);
        self
    }

    /// What the request body of a sweep says about the job: `sleep_ms` is Code time (slot
    /// time only with `"code": false`, a workflow without a Code node), `wait_ms` the external
    /// wait, `alloc_mb` the per-task memory.
    pub fn from_body(body: Option<&serde_json::Value>) -> Settings {
        let num = |k: &str| body.and_then(|b| b.get(k)).and_then(|v| v.as_f64());
        let sleep = num("sleep_ms");
        let wait = num("wait_ms").unwrap_or(0.0);
        let has_code = body
            .and_then(|b| b.get("code"))
            .and_then(|v| v.as_bool())
            .unwrap_or(true);
        Settings {
            job_time: sleep.map(|s| {
                Sourced::new(
                    (s + wait) / 1000.0,
                    Provenance::Body("request body (sleep_ms + wait_ms)".into()),
                )
            }),
            // Without a Code node there is no Code time, whatever the job's length.
            code_time: match has_code {
                true => sleep.map(|s| {
                    Sourced::new(
                        s / 1000.0,
                        Provenance::Body("request body (sleep_ms)".into()),
                    )
                }),
                false => Some(Sourced::new(
                    0.0,
                    Provenance::Body("request body (code: false, no Code node)".into()),
                )),
            },
            task_memory_mb: num("alloc_mb")
                .filter(|m| *m > 0.0)
                .map(|m| Sourced::new(m, Provenance::Body("request body (alloc_mb)".into()))),
            ..Settings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Limit;

    /// What was measured has a struct of its own and is still written flat, so summaries saved
    /// before the split read back the same and what is written now reads in older tools.
    #[test]
    fn what_was_measured_is_written_flat_and_read_back() {
        let s = Settings {
            db_pool_size: Some(Sourced::new(4, Provenance::Flag("--db-pool-size".into()))),
            measured: Measured {
                db_time: Some(Sourced::new(0.05, Provenance::Measured("pool".into()))),
                db_acquire_p99_s: None,
            },
            ..Settings::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["db_time"]["value"], 0.05);
        assert!(v.get("measured").is_none() && v.get("db_acquire_p99_s").is_none());
        let back: Settings = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        let older = serde_json::json!({
            "workers": null, "worker_concurrency": null, "runner_limit": null,
            "runners_per_worker": null, "job_time": null, "code_time": null,
            "task_memory_mb": null,
            "db_acquire_p99_s": {"value": 0.2, "source": "measured: acquire"}
        });
        let read: Settings = serde_json::from_value(older).unwrap();
        assert_eq!(read.measured.db_acquire_p99_s.map(|d| d.value), Some(0.2));
        assert!(read.measured.db_time.is_none());
    }

    /// A bound's servers carry the provenance of the setting they count, kept through
    /// `summary.json`; a bound saved before the type reads back as recorded, its words kept.
    #[test]
    fn a_bound_s_servers_carry_their_setting_s_provenance_through_json() {
        let s = Settings {
            workers: Some(Sourced::new(3, Provenance::Flag("--workers".into()))),
            worker_concurrency: Some(Sourced::new(
                10,
                Provenance::Deployment("--concurrency of n8n-worker".into()),
            )),
            runner_limit: Some(Sourced::new(5, Provenance::Default("n8n 2.x".into()))),
            job_time: Some(Sourced::new(1.0, Provenance::Body("sleep_ms".into()))),
            ..Settings::default()
        };
        let cap = s.slots_and_runners(0.0).unwrap();
        let of = |l: Limit| cap.bounds.iter().find(|b| b.limit == l).unwrap().clone();
        let (slots, runners) = (of(Limit::WorkerConcurrency), of(Limit::RunnerLimit));
        assert_eq!((slots.servers, runners.servers), (30.0, 15.0));
        assert_eq!(slots.source.kind(), ProvenanceKind::Deployment);
        assert_eq!(runners.source.kind(), ProvenanceKind::Default);
        let v = serde_json::to_value(&slots).unwrap();
        assert_eq!(v["provenance"], "deployment");
        assert_eq!(v["source"], "--concurrency of n8n-worker × 3 workers");
        let back: super::super::Bound = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, slots);
        let mut older = v;
        older.as_object_mut().unwrap().remove("provenance");
        let old: super::super::Bound = serde_json::from_value(older).unwrap();
        assert_eq!(old.source.kind(), ProvenanceKind::Recorded);
        assert_eq!(old.source.words(), slots.source.words());
    }
}
