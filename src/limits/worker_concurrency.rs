//! Worker concurrency, the slots: `worker --concurrency` (n8n 2.x: `N8N_CONCURRENCY_PRODUCTION_LIMIT` when set
//! on a worker overrides it), one slot held for the whole execution S. Bound Σc ÷ S.

use super::reading::{inferred, pct, reading, source_of};
use super::slots::slot_most;
use super::{Ceiling, Dialect, Key, Kind, Named, Process, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Bound, Job, Limit};
use crate::record::diagnosis::Diagnosis;

pub struct WorkerConcurrency;

impl Kind for WorkerConcurrency {
    fn bound(&self, s: &Settings, job: Job) -> Option<Bound> {
        super::model_bound(s, job, Limit::WorkerConcurrency)
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        reading(&s.worker_concurrency, "worker concurrency")
            .into_iter()
            .collect()
    }

    fn inferred_here(&self, s: &Settings) -> bool {
        inferred(&s.worker_concurrency)
    }

    fn most(&self, bound: f64, c: &Ceiling) -> f64 {
        slot_most(bound, c)
    }

    fn reached_alone(
        &self,
        s: &Settings,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<(Verdict, f64)> {
        let wc = s
            .worker_concurrency
            .as_ref()
            .filter(|_| s.runner_limit.is_none())?;
        let x = c.x.mean;
        let slots = wc.value as f64 * s.worker_count() as f64;
        let u = x * c.s / slots;
        if u < super::MATCH {
            return None;
        }
        let at = c.at();
        findings.push(
            Finding::new(
                FindingId::WorkerConcurrencyCaps,
                format!("Worker concurrency caps throughput at {x:.2} req/s: {slots:.0} slots"),
            )
            .evidence(format!(
                "{:.1} executions in progress (X × S = {x:.2} × {:.2} s) = {} of {slots:.0} slots ({}); {at}",
                x * c.s,
                c.s,
                pct(u),
                wc.source
            ))
            .evidence("the runner limit is not known: the runners ran every Code task the slots handed them")
            .figure("throughput_per_s", x)
            .figure("executions_in_progress", x * c.s)
            .figure("worker_slots", slots)
            .fix("raise worker concurrency or add workers — each with its runner, keeping runner capacity ≥ the slots that run Code"),
        );
        let v = Verdict {
            limit: Some(Limit::WorkerConcurrency.into()),
            text: format!(
                "Worker concurrency caps throughput: {at}; {slots:.0} slots ÷ S {:.2} s = {:.2} req/s.",
                c.s,
                slots / c.s
            ),
            cpu: None,
        };
        Some((v, slots / c.s))
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        if n.s.is_regular() {
            // Regular mode's slots are main's production limit.
            return super::production_limit::ProductionLimit.caps(n, findings);
        }
        let (cap, job, ceiling) = (n.cap, n.job, n.ceiling);
        let x = ceiling.x.mean;
        let (c, r, st) = (cap.slots(), cap.runner_tasks(), ceiling.s);
        let u_w = x * st / c.max(1) as f64;
        let at = ceiling.at();
        findings.push(
            n.base(Finding::new(
                FindingId::WorkerConcurrencyCaps,
                format!("Worker concurrency caps throughput at {x:.2} req/s: {c} slots"),
            ))
            .evidence(format!(
                "{:.1} executions in progress (X × S = {x:.2} × {st:.2} s) = {} of {c} slots{}; {at}",
                x * st,
                pct(u_w),
                source_of(&n.s.worker_concurrency)
            ))
            .evidence(format!(
                "runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s leaves room",
                job.code_s, cap.runner_bound()
            ))
            .fix("raise worker concurrency (--concurrency / N8N_CONCURRENCY_PRODUCTION_LIMIT) or add workers — each with its runner, keeping runner capacity ≥ the slots that run Code"),
        );
        Verdict {
            limit: Some(Limit::WorkerConcurrency.into()),
            text: format!(
                "Worker concurrency caps throughput: {at}; {c} slots ÷ S {st:.2} s = {:.2} req/s (runners allow {:.2}).",
                cap.worker_bound(), cap.runner_bound()
            ),
            cpu: None,
        }
    }

    fn shared_as(&self) -> Option<super::Share> {
        Some(super::SLOTS)
    }

    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        super::slots::raise_slots(d, current, job)
    }

    fn lines(&self, plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
        if plan.is_regular() {
            return Vec::new();
        }
        let (replicas, concurrency) = match dialect {
            Dialect::HelmOfficial => (
                Key::Value("queueMode.workerReplicaCount"),
                Key::Value("queueMode.workerConcurrency"),
            ),
            Dialect::HelmCommunity => {
                (Key::Value("worker.count"), Key::Value("worker.concurrency"))
            }
            Dialect::Compose | Dialect::K8s => (Key::Replicas, Key::Arg("--concurrency=")),
        };
        // The worker count is written only when the plan changes it: a count it did not
        // propose would pin replicas that the deployment (or its autoscaler) sets.
        let replicas = Settings::proposed(&plan.workers)
            .then(|| SettingLine::new(Process::Worker, replicas, plan.worker_count()));
        replicas
            .into_iter()
            .chain([SettingLine::new(
                Process::Worker,
                concurrency,
                plan.worker_concurrency_or_default(),
            )])
            .collect()
    }
}
