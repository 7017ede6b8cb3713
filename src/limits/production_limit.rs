//! The production limit: `N8N_CONCURRENCY_PRODUCTION_LIMIT` on main in regular mode, where one
//! process runs every execution; it is that process's only slot count (held for S).

use super::reading::{inferred, pct, reading};
use super::slots::slot_most;
use super::Membership;
use super::{Ceiling, Dialect, Key, Kind, Named, Process, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Job, Limit};
use crate::record::diagnosis::Diagnosis;

pub struct ProductionLimit;

impl Kind for ProductionLimit {
    fn membership(&self) -> Membership {
        Membership {
            set: true,
            headline: true,
            ..Membership::default()
        }
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

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        let (cap, job, ceiling) = (n.cap, n.job, n.ceiling);
        let x = ceiling.x.mean;
        let st = ceiling.s;
        let at = ceiling.at();
        let (c, r) = (cap.slots(), cap.runner_tasks());
        let u_w = x * st / c.max(1) as f64;
        let src =
            n.s.worker_concurrency
                .as_ref()
                .map(|v| format!(" ({})", v.source))
                .unwrap_or_default();
        findings.push(
            n.base(Finding::new(FindingId::ProductionLimitCaps,
                format!("The production limit caps throughput at {x:.2} req/s: main runs {c} executions at once (regular mode)"),
            ))
            .evidence(format!(
                "{:.1} executions in progress (X × S = {x:.2} × {st:.2} s) = {} of N8N_CONCURRENCY_PRODUCTION_LIMIT {c}{}; {at}",
                x * st,
                pct(u_w),
                src
            ))
            .evidence(format!(
                "the internal runner's {r} tasks ÷ Code time {:.2} s = {:.2} req/s leave room; executions beyond the limit wait in main's concurrency queue, not in Redis",
                job.code_s, cap.runner_bound()
            ))
            .why("In regular mode one process runs every execution: the production limit is its only slot count, and its one JavaScript thread is the next ceiling.")
            .fix(format!(
                "raise N8N_CONCURRENCY_PRODUCTION_LIMIT on main (now {c}) while main's CPU has room; past one core, switch to queue mode (EXECUTIONS_MODE=queue, Redis, workers each with a runner)"
            )),
        );
        Verdict {
            limit: Some(Limit::ProductionLimit.into()),
            text: format!(
                "The production limit caps throughput (regular mode): {at}; {c} executions at once ÷ S {st:.2} s = {:.2} req/s (the internal runner allows {:.2}).",
                cap.worker_bound(), cap.runner_bound()
            ),
            cpu: None,
        }
    }

    /// Main's production limit is not shared out by kind of job.
    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    /// Main's slots are raised as worker concurrency is (the plan's worker is main).
    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        super::slots::raise_slots(d, current, job)
    }

    fn lines(&self, plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        if !plan.is_regular() {
            return Vec::new();
        }
        vec![SettingLine::new(
            Process::Main,
            Key::Env("N8N_CONCURRENCY_PRODUCTION_LIMIT"),
            plan.worker_concurrency_or_default(),
        )]
    }
}
