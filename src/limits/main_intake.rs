//! Main's intake: in queue mode every production webhook is received, written and enqueued by
//! main (or a webhook processor, `n8n webhook`) on one Node.js thread, so main's CPU per
//! execution caps the whole deployment however many workers wait behind it (n8n 2.41: about
//! 27 ms, near 37/s on one core). Its bound is measured, not set: main's usable cores ÷ its CPU
//! seconds per execution. No worker or runner setting raises it; webhook processors or a
//! faster core do. In regular mode main also runs the executions: its CPU is CPU's, not this.

use super::Membership;
use super::{Ceiling, Dialect, Kind, Named, Scope, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Capacity, Job, Limit};
use crate::record::diagnosis::{CpuUse, Diagnosis};
use crate::record::scaling::SharedLimit;
use crate::record::Role;

pub struct MainIntake;

const RELIEF: &str = "add webhook processors (`n8n webhook`) behind the load balancer for \
                      production webhooks, or give main a faster core; more workers will not help";

/// Main's event loop lagging this long (mean over the top run's scrapes) is its intake at its
/// bound whatever its CPU reads: a request then waits a tenth of a second before main reads it.
/// At n8n's 27 ms of main CPU per execution that is a thread about 88 % busy (M/D/1: wait =
/// ρ ÷ 2(1 − ρ) × service); idle, n8n's main lags 0–8 ms (fixtures/n8n-real).
pub const LAG_SATURATED_S: f64 = 0.1;

/// The share of its core main must use for its lag to be its own thread's: a main that lags
/// with CPU to spare waits for the host's cores, not for its thread. Lab 2's real n8n on a full
/// 2-core host: main lagged 110 ms at 0.21 of its core. At [`LAG_SATURATED_S`] and n8n's 27 ms
/// per execution the thread is about 88 % busy; half its core leaves room for GC and I/O.
pub const LAG_OWN_SHARE: f64 = 0.5;

/// Main's CPU site, when it is the one whose CPU binds, in queue mode.
fn site<'a>(s: &Settings, c: &Ceiling<'a>) -> Option<&'a CpuUse> {
    super::cpu::binding(c.cpu)
        .filter(|u| u.is_process_of(Role::Main))
        .filter(|_| !s.is_regular())
}

impl Kind for MainIntake {
    fn membership(&self) -> Membership {
        Membership {
            measured: true,
            shared: true,
            ..Membership::default()
        }
    }

    fn scope(&self) -> Scope {
        Scope::Deployment { relief: RELIEF }
    }

    fn server(&self) -> Option<Role> {
        Some(Role::Main)
    }

    /// Main's CPU as the top count's run measured it: the bound its one thread allows, reached
    /// when saturated or when its event loop lagged [`LAG_SATURATED_S`] or more.
    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        let m = d.cpu.iter().find(|u| u.is_process_of(Role::Main))?;
        let lagging = m.eventloop_lag_s.filter(|l| *l >= LAG_SATURATED_S);
        let own = m.cores_used >= LAG_OWN_SHARE * m.usable_cores.value;
        let mut evidence = vec![format!(
            "main ({}) used {:.2} cores of {:.1}: {:.1} ms of CPU per execution, so its one \
             JavaScript thread takes at most {:.1} executions/s",
            m.name,
            m.cores_used,
            m.usable_cores.value,
            m.cpu_s_per_execution * 1000.0,
            m.bound_per_s
        )];
        if let Some(lag) = m.eventloop_lag_s {
            evidence.push(format!(
                "its event loop lagged {:.0} ms on average{}",
                lag * 1000.0,
                match (lagging.is_some(), own) {
                    (true, true) => format!(
                        " (≥ {:.0} ms: requests waited for its one thread)",
                        LAG_SATURATED_S * 1000.0
                    ),
                    (true, false) => " with its core mostly idle: the host's cores were \
                                      contended, not main's thread"
                        .to_string(),
                    _ => String::new(),
                }
            ));
        }
        Some(SharedLimit {
            kind: Limit::MainIntake,
            bound_per_s: Some(m.bound_per_s),
            reached: m.saturated || lagging.is_some() && own,
            evidence,
            fix: RELIEF.into(),
        })
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        super::reading::slot_and_runner_readings(s)
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    fn saturated(&self, s: &Settings, c: &Ceiling) -> bool {
        site(s, c).is_some()
    }

    fn caps_measured(
        &self,
        s: &Settings,
        cap: Option<&Capacity>,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<Verdict> {
        site(s, c).map(|u| verdict(u.clone(), cap, c, findings))
    }

    /// Main is one process however many workers a plan runs: its measured bound holds as is.
    fn predicted(&self, d: &[CpuUse], _now: &Settings, plan: &Settings) -> Vec<(f64, Limit)> {
        super::cpu::per_role_bound(d, Role::Main)
            .filter(|_| !plan.is_regular())
            .map(|b| (b, Limit::MainIntake))
            .into_iter()
            .collect()
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        self.caps_measured(n.s, Some(n.cap), n.ceiling, findings)
            .unwrap_or(Verdict {
                limit: None,
                text: "Main's intake was named, but main's CPU was not measured saturated".into(),
                cpu: None,
            })
    }

    /// Every execution passes main once, whatever its workflow: not shared out by kind of job.
    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    fn before_the_workers(&self) -> bool {
        true
    }

    fn raise(&self, d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        let x = d.measured_ceiling.as_ref().map(|m| m.mean).unwrap_or(0.0);
        let per = d.cpu_limit.as_ref().map(|u| u.cpu_s_per_execution);
        Err(NoPlan(format!(
            "main's intake caps at {x:.2} req/s{}: no worker or runner setting raises it — {}",
            per.map(|p| format!(" ({p:.3} CPU s per execution on main)"))
                .unwrap_or_default(),
            RELIEF
        )))
    }

    /// Webhook processors are a deployment's shape, not a setting of the plan's processes.
    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}

/// Main's intake caps at `u`: its finding with main's cores and CPU per execution, and the
/// verdict that more workers will not help.
fn verdict(u: CpuUse, cap: Option<&Capacity>, c: &Ceiling, findings: &mut Vec<Finding>) -> Verdict {
    let x = c.x.mean;
    let f = Finding::new(
        FindingId::MainIntakeCaps,
        format!("Main's intake caps throughput at {x:.2} req/s: main ({}) is at its core", u.name),
    )
    .evidence(format!(
        "{:.2} cores used of {:.1} usable ({}); {:.3} CPU s per execution on main → {:.2} executions/s",
        u.cores_used, u.usable_cores.value, u.usable_cores.source, u.cpu_s_per_execution, u.bound_per_s
    ));
    let f = super::cpu::site_figures(f, x, &u, "main_intake_bound_per_s")
        .why("Every production webhook passes main's one JavaScript thread before any worker sees it: more workers, slots or runners only wait behind it.")
        .fix(RELIEF);
    findings.push(super::cpu::settings_allow(f, cap));
    Verdict {
        limit: Some(Limit::MainIntake.into()),
        text: format!(
            "Main's intake caps throughput: {} measured from {} on; main ({}) uses {:.2} cores at {:.3} CPU s per execution, which allows {:.2} executions/s. More workers will not help: add webhook processors (n8n webhook) or give main a faster core.",
            c.x.describe("req/s"),
            c.first.words(),
            u.name,
            u.cores_used,
            u.cpu_s_per_execution,
            u.bound_per_s
        ),
        cpu: Some(u),
    }
}
