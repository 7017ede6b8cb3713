//! Both: worker slots and runner tasks level, their bounds within `model::INSEPARABLE` of each other,
//! so the data cannot say which caps. Named as the pair, raised as the pair.

use super::reading::inferred;
use super::slots::slot_most;
use super::Membership;
use super::{Ceiling, Dialect, Kind, Named, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Capping, Job};
use crate::record::diagnosis::Diagnosis;

pub struct Both;

impl Kind for Both {
    /// A state of the verdict, no kind: in no list.
    fn membership(&self) -> Membership {
        Membership::default()
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        super::reading::slot_and_runner_readings(s)
    }

    fn inferred_here(&self, s: &Settings) -> bool {
        inferred(&s.runner_limit) || inferred(&s.worker_concurrency)
    }

    fn most(&self, bound: f64, c: &Ceiling) -> f64 {
        slot_most(bound, c)
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        let (cap, job, ceiling) = (n.cap, n.job, n.ceiling);
        let (c, r, st) = (cap.slots(), cap.runner_tasks(), ceiling.s);
        findings.push(
            n.base(Finding::new(FindingId::LimitsInseparable,
                "Runner limit and worker concurrency give nearly the same ceiling; the data cannot say which caps",
            ))
            .evidence(format!(
                "worker concurrency {c} ÷ S {st:.2} s = {:.2} req/s; runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s (within {:.0} %); {}",
                cap.worker_bound(),
                job.code_s,
                cap.runner_bound(),
                crate::model::INSEPARABLE * 100.0,
                ceiling.at()
            ))
            .fix("raise both together (runner capacity ≥ worker concurrency), then sweep again"),
        );
        Verdict {
            limit: Some(Capping::Both),
            text: format!(
                "Throughput tops out at {} — worker concurrency and runner limit allow about the same ({:.2} and {:.2} req/s); raise them as a pair.",
                ceiling.x.describe("req/s"),
                cap.worker_bound(),
                cap.runner_bound()
            ),
            cpu: None,
        }
    }

    /// Every execution holds a slot: the slots are what a mix shares.
    fn shared_as(&self) -> Option<super::Share> {
        Some(super::SLOTS)
    }

    /// Raising worker concurrency raises the runners with it ([`super::runner_limit::with_runners`]).
    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        super::slots::raise_slots(d, current, job)
    }

    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}
