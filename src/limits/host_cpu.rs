//! The host's CPU: every process on one host (or the containers observed, together) shares its
//! cores, so workers added there share them too, and other work on the host takes them from
//! the stack. One for the deployment's host. In one run a saturated host is named by CPU
//! (`cpu.rs`, with the host as its site); across worker counts it is what stops scale-out.

use super::Membership;
use super::{Dialect, Kind, Named, Scope, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Job, Limit};
use crate::record::diagnosis::{CpuSite, CpuUse, Diagnosis};
use crate::record::scaling::SharedLimit;

pub struct HostCpu;

const RELIEF: &str = "put workers on more nodes (or a bigger host); workers sharing these cores \
                      share their CPU, and other work on the host takes it from them";

impl Kind for HostCpu {
    fn membership(&self) -> Membership {
        Membership {
            shared: true,
            ..Membership::default()
        }
    }

    fn scope(&self) -> Scope {
        Scope::Deployment { relief: RELIEF }
    }

    /// The host's cores as the top count's run used them, reached when saturated or when other
    /// work took them (`host-shared`); a history whose every job slowed at load with the slots
    /// full (`job-time-grows`) reached it too, measured or not.
    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        let taken = d.findings.iter().find(|f| f.id == FindingId::HostShared);
        let mut out = d.cpu.iter().find(|u| u.site == CpuSite::Host).map(|h| {
            let mut evidence = vec![format!(
                "{} used {:.2} of {:.1} cores ({})",
                h.name.strip_prefix("host: ").unwrap_or(&h.name),
                h.cores_used,
                h.usable_cores.value,
                h.usable_cores.source
            )];
            evidence.extend(taken.map(|f| f.title.clone()));
            SharedLimit {
                kind: Limit::HostCpu,
                bound_per_s: Some(h.bound_per_s),
                reached: h.saturated || taken.is_some(),
                evidence,
                fix: RELIEF.into(),
            }
        });
        if let Some(g) = d.findings.iter().find(|f| f.id == FindingId::JobTimeGrows) {
            match out.as_mut() {
                Some(l) => {
                    l.reached = true;
                    l.evidence.push(g.title.clone());
                }
                None => {
                    out = Some(SharedLimit {
                        kind: Limit::HostCpu,
                        bound_per_s: g.get("throughput_per_s"),
                        reached: true,
                        evidence: g.evidence.clone(),
                        fix: RELIEF.into(),
                    })
                }
            }
        }
        out
    }

    fn readings(&self, _s: &Settings) -> Vec<String> {
        Vec::new()
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    /// The host caps one run as CPU's site (`cpu.rs`), never through settings.
    fn caps(&self, _n: &Named, _findings: &mut Vec<Finding>) -> Verdict {
        super::named_elsewhere("the host's CPU", "CPU (its site the host)")
    }

    fn shared_as(&self) -> Option<super::Share> {
        Some(super::SLOTS)
    }

    fn raise(&self, _d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        Err(NoPlan(format!(
            "the host's CPU caps: {RELIEF}; no setting raises it"
        )))
    }

    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}

/// A history's host full at load (`diagnose::history::contention`): its CPU caps, one verdict —
/// the job time's growth (`finding`) first as an error, the verdict's `words`, the host as the
/// site, and no slot limit read from the quiet job time beside it.
pub fn host_contended(
    finding: Finding,
    words: String,
    host: CpuUse,
    findings: &mut Vec<Finding>,
) -> Verdict {
    findings.retain(|f| !MISREAD.contains(&f.id));
    findings.insert(0, finding.with_severity(crate::findings::Severity::Error));
    Verdict {
        limit: Some(Limit::Cpu.into()),
        text: words,
        cpu: Some(host),
    }
}

/// Whether `v` is [`host_contended`]'s.
pub fn is_host_contended(v: &Verdict, findings: &[Finding]) -> bool {
    v.limit == Some(Limit::Cpu.into())
        && findings
            .first()
            .is_some_and(|f| f.id == FindingId::JobTimeGrows)
}

/// The slot limits' findings a verdict read from the quiet job time where the host's CPU was
/// full: each read the contention as its own limit.
const MISREAD: [FindingId; 2] = [FindingId::RunnerLimitCaps, FindingId::WorkerConcurrencyCaps];
