//! No runner attached anywhere (runner capacity 0): every Code task waits out the task request
//! timeout and fails, whatever the other settings allow.

use super::reading::{reading, source_of};
use super::Membership;
use super::{Dialect, Kind, Named, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Capping, Job};
use crate::record::diagnosis::Diagnosis;

/// No runner attached anywhere: every Code task waits out the task request timeout.
pub struct NoRunner;

impl Kind for NoRunner {
    /// A state of the verdict, no kind: in no list.
    fn membership(&self) -> Membership {
        Membership::default()
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        [
            reading(&s.runner_limit, "runner limit"),
            reading(&s.runners_per_worker, "runners per worker"),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    fn refuted(&self, n: &Named, findings: &mut Vec<Finding>) -> Option<Settings> {
        let (s, ceiling) = (n.s, n.ceiling);
        let x = ceiling.x.mean;
        if x <= 0.0 {
            return None;
        }
        findings.push(
            Finding::new(
                FindingId::SettingsDisagree,
                format!(
                    "The settings read give no runner task (runner capacity 0), yet {x:.2} executions/s completed"
                ),
            )
            .evidence(format!(
                "runner limit {}, runners per worker {}: {}",
                source_of(&s.runner_limit),
                source_of(&s.runners_per_worker),
                ceiling.at()
            ))
            .figure("measured_per_s", x)
            .figure("runner_capacity", 0.0)
            .fix("check the runner settings where they run (n8ncap inspect): the runners' N8N_RUNNERS_MAX_CONCURRENCY, and which worker each attaches to"),
        );
        Some(Settings {
            runner_limit: None,
            runners_per_worker: None,
            ..s.clone()
        })
    }

    fn caps(&self, _n: &Named, _findings: &mut Vec<Finding>) -> Verdict {
        Verdict {
            limit: Some(Capping::NoRunner),
            text: "No runner is attached: every Code task fails after the task request timeout."
                .into(),
            cpu: None,
        }
    }

    fn plannable(&self) -> Result<(), NoPlan> {
        Err("no runner takes the Code tasks: attach a runner to every worker first (worker-without-runner)".into())
    }

    /// A missing runner is not shared out by kind of job.
    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    fn raise(&self, _d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        Err("no runner takes the Code tasks: attach a runner to every worker first".into())
    }

    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}

/// Executions that fail after the task request timeout with no limit named: no runner takes
/// the Code tasks (a worker without a runner was found), so the verdict says that.
pub fn when_no_runner_takes(v: Verdict, findings: &[Finding]) -> Verdict {
    let no_runner = findings
        .iter()
        .any(|f| f.id == FindingId::WorkerWithoutRunner);
    if no_runner && v.limit.is_none() {
        Verdict {
            limit: Some(Capping::NoRunner),
            text: "Executions fail after the task request timeout: no runner takes the Code tasks."
                .into(),
            cpu: None,
        }
    } else {
        v
    }
}
