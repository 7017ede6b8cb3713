//! Worker concurrency, the slots: `worker --concurrency` (n8n 2.x: `N8N_CONCURRENCY_PRODUCTION_LIMIT` when set
//! on a worker overrides it), one slot held for the whole execution S. Bound Σc ÷ S.

use super::reading::{inferred, pct, reading, source_of, whole, AtCeiling};
use super::slots::slot_most;
use super::Membership;
use super::{Ceiling, Dialect, Key, Kind, Named, Process, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Provenance, Settings, Sourced};
use crate::model::{Bound, Job, Limit};
use crate::record::diagnosis::{Diagnosis, Level};

pub struct WorkerConcurrency;

impl Kind for WorkerConcurrency {
    fn membership(&self) -> Membership {
        Membership {
            set: true,
            alone: true,
            headline: true,
            ..Membership::default()
        }
    }

    /// Worker concurrency, when unknown: first from the queue gauges (slots taken while jobs
    /// waited in Redis); then at a saturated level where no job waited while neither setting
    /// is known (at least the slots taken); else from X × S when the runner limit is known and
    /// not reached.
    fn infer(&self, s: &mut Settings, levels: &[Level], ceiling: Option<&Ceiling>) {
        let workers = s.worker_count() as f64;
        if s.worker_concurrency.is_none() {
            let slots = levels
                .iter()
                .filter(|l| l.valid && l.waiting.unwrap_or(0.0) >= 1.0)
                .filter_map(slots_believed)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            if let Some(per) = slots
                .map(|v| (v / workers).round() as u32)
                .filter(|p| *p > 0)
            {
                s.worker_concurrency = Some(Sourced::new(
                    per, Provenance::Inferred("inferred: slots taken (n8n_scaling_mode_queue_jobs_active) while jobs waited in Redis".into())));
            }
        }
        let Some(c) = ceiling else { return };
        let Some(at) = AtCeiling::of(s, c) else {
            return;
        };
        // Saturated while no job waited in the queue: the worker had slots to spare, so something
        // behind the slots queued the jobs — the runners, CPU aside. Worker concurrency is then at
        // least the slots taken; the runner limit is what ran.
        if s.worker_concurrency.is_none() && s.runner_limit.is_none() {
            if let Some(taken) = c
                .level
                .slots_taken
                .filter(|t| *t >= 1.0 && c.level.waiting.is_some_and(|w| w < 1.0))
            {
                // Every execution in n8n held a slot (none waited): at least the slots the gauge
                // counted, or Little's law at the slots (n8n's execution histogram) when the gauge
                // lags. Not the level's in-flight: on a busy host part of it sits in main's intake
                // and response, outside any slot, so it can count slots that are not there.
                // The gauge never counts more than there are (its mean's ceiling is a whole lower
                // bound); Little's figure can read a little over, so it is rounded.
                let little = c.level.executions_in_slots.unwrap_or(0.0);
                let per = ((taken / workers).ceil())
                    .max((little / workers).round())
                    .max(1.0) as u32;
                s.worker_concurrency = Some(Sourced::new(
                    per,
                    Provenance::Inferred(format!(
                        "inferred: at least {per} — slots taken at {} while no job waited in the queue",
                        c.level.words()
                    )),
                ));
            }
        }
        let rpw = s.runners_per_worker_count().max(1) as f64;
        if let (None, Some(r)) = (&s.worker_concurrency, &s.runner_limit) {
            let cap = r.value as f64 * rpw * workers;
            let (x, in_progress) = (at.x, at.in_progress);
            if at.tasks < super::MATCH * cap && in_progress >= 0.5 {
                let k = c.s / workers;
                s.worker_concurrency = Some(Sourced::inferred(
                    x * k,
                    whole([c.x.low * k, c.x.high * k]),
                    format!(
                        "inferred from one saturated level ({}): {x:.2} req/s × S {:.2} s = {in_progress:.1} executions in progress",
                        c.level.words(),
                        c.s
                    ),
                ));
            }
        }
    }

    fn bound(&self, s: &Settings, job: Job) -> Option<Bound> {
        super::model_bound(s, job, Limit::WorkerConcurrency)
    }

    fn unknown(&self, s: &Settings) -> Option<&'static str> {
        s.worker_concurrency
            .is_none()
            .then_some("worker concurrency (--worker-concurrency)")
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

/// Slots taken as a level saw them: main's gauge, unless it counts half again more than Little's
/// law at the slots allows (completions × n8n's slot time: executions cannot hold more slots
/// than they spend time in) — a gauge counting jobs finished but not yet cleared from Bull's
/// active list on a starved host. Below that the gauge stands: Little's figure from windows on
/// a busy host reads a little low (counts and durations cut at different edges).
fn slots_believed(l: &Level) -> Option<f64> {
    // The readings taken while a job waited count every slot; the mean over all readings
    // also counts moments the queue ran dry.
    let gauge = l.slots_full.or(l.slots_taken)?;
    match l.executions_in_slots {
        Some(little) if gauge > 1.5 * little => Some(little),
        _ => Some(gauge),
    }
}
