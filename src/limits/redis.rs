//! Redis' one thread: the queue's Redis runs every command of Bull — main's enqueue, each
//! worker's pickup, lock renewals, completions — on one core, so its CPU per execution caps the
//! whole deployment however many workers share it. One for the deployment. Its bound is
//! measured, not set: Redis' usable cores (one thread) ÷ its CPU seconds per execution. No n8n
//! setting raises it; a faster core, a host of its own, or less written to the queue per
//! execution do. Bull keeps one queue's keys in one hash slot, so a Redis Cluster does not
//! spread it.

use super::Membership;
use super::{Ceiling, Dialect, Kind, Named, Scope, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Capacity, Job, Limit};
use crate::record::diagnosis::{CpuUse, Diagnosis};
use crate::record::scaling::SharedLimit;
use crate::record::Role;

pub struct Redis;

const RELIEF: &str = "give Redis a faster core (or its own node), keep other clients off the \
                      queue's Redis, and check the job data each execution writes to the queue; \
                      more workers will not help";

/// Redis' CPU site, when it is the one whose CPU binds.
fn site<'a>(c: &Ceiling<'a>) -> Option<&'a CpuUse> {
    super::cpu::binding(c.cpu).filter(|u| u.is_process_of(Role::Redis))
}

impl Kind for Redis {
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
        Some(Role::Redis)
    }

    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        super::server_cpu(
            d,
            (Limit::Redis, RELIEF),
            Role::Redis,
            "its commands run on one thread",
        )
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        super::reading::slot_and_runner_readings(s)
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    fn saturated(&self, _s: &Settings, c: &Ceiling) -> bool {
        site(c).is_some()
    }

    fn caps_measured(
        &self,
        _s: &Settings,
        cap: Option<&Capacity>,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<Verdict> {
        site(c).map(|u| verdict(u.clone(), cap, c, findings))
    }

    /// One Redis however many workers a plan runs: its measured bound holds as is.
    fn predicted(&self, d: &[CpuUse], _now: &Settings, _plan: &Settings) -> Vec<(f64, Limit)> {
        super::cpu::per_role_bound(d, Role::Redis)
            .map(|b| (b, Limit::Redis))
            .into_iter()
            .collect()
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        self.caps_measured(n.s, Some(n.cap), n.ceiling, findings)
            .unwrap_or(Verdict {
                limit: None,
                text: "Redis was named, but its CPU was not measured saturated".into(),
                cpu: None,
            })
    }

    /// Every execution passes the queue once, whatever its workflow: not shared out by kind.
    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    fn raise(&self, d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        let x = d.measured_ceiling.as_ref().map(|m| m.mean).unwrap_or(0.0);
        let per = d.cpu_limit.as_ref().map(|u| u.cpu_s_per_execution);
        Err(NoPlan(format!(
            "Redis' one thread caps at {x:.2} req/s{}: no n8n setting raises it — {RELIEF}",
            per.map(|p| format!(" ({:.2} ms of Redis CPU per execution)", p * 1000.0))
                .unwrap_or_default(),
        )))
    }

    /// Redis' core is the deployment's shape, not a setting of the plan's processes.
    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}

/// Redis caps at `u`: its finding with the cores and CPU per execution, and the verdict that
/// more workers will not help.
fn verdict(u: CpuUse, cap: Option<&Capacity>, c: &Ceiling, findings: &mut Vec<Finding>) -> Verdict {
    let x = c.x.mean;
    let f = Finding::new(
        FindingId::RedisCaps,
        format!("Redis caps throughput at {x:.2} req/s: its one thread ({}) is at its core", u.name),
    )
    .evidence(format!(
        "{:.2} cores used of {:.1} usable ({}); {:.2} ms of Redis CPU per execution → {:.2} executions/s",
        u.cores_used,
        u.usable_cores.value,
        u.usable_cores.source,
        u.cpu_s_per_execution * 1000.0,
        u.bound_per_s
    ));
    let f = super::cpu::site_figures(f, x, &u, "redis_bound_per_s")
        .why("Every execution is enqueued, picked up, locked and completed through Bull's commands on Redis' one thread: more workers only add commands to it.")
        .fix(RELIEF);
    findings.push(super::cpu::settings_allow(f, cap));
    Verdict {
        limit: Some(Limit::Redis.into()),
        text: format!(
            "Redis caps throughput: {} measured from {} on; Redis ({}) uses {:.2} cores at {:.2} ms of CPU per execution, which allows {:.2} executions/s. More workers will not help: give Redis a faster core or a host of its own.",
            c.x.describe("req/s"),
            c.first.words(),
            u.name,
            u.cores_used,
            u.cpu_s_per_execution * 1000.0,
            u.bound_per_s
        ),
        cpu: Some(u),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::diagnosis::CpuSite;

    /// A saturated Redis is relieved as the server every worker shares (its kind's relief, never
    /// "more workers"), and a plan meets its bound once, whatever the plan's workers.
    #[test]
    fn redis_is_one_for_the_deployment_and_bounds_every_plan_once() {
        let relief = super::super::server_relief(Role::Redis).unwrap();
        assert_eq!(relief, RELIEF);
        assert!(!relief.contains("add workers"));
        use crate::model::settings::{Provenance, Sourced};
        let u = CpuUse {
            site: CpuSite::Process,
            role: Some(Role::Redis),
            name: "redis".into(),
            cores_used: 0.95,
            cpu_s_per_execution: 0.004,
            usable_cores: Sourced::new(1.0, Provenance::Default("one thread".into())),
            bound_per_s: 250.0,
            saturated: true,
            eventloop_lag_s: None,
        };
        let now = Settings::default();
        let plan = Settings {
            workers: Some(Sourced::new(8, Provenance::Flag("--workers".into()))),
            ..Settings::default()
        };
        let b = Redis.predicted(std::slice::from_ref(&u), &now, &plan);
        assert_eq!(b, [(250.0, Limit::Redis)]);
    }
}
