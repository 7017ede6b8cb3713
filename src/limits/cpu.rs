//! CPU: one process (a Node process runs its JavaScript on one core) or the host's cores. Its
//! bound is measured, not set: usable cores ÷ CPU seconds per execution at the saturated site.
//! No concurrency setting raises it; more processes (up to the host's cores) or more cores do.

use super::Membership;
use super::{Ceiling, Dialect, Kind, Named, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Capacity, Job, Limit};
use crate::record::diagnosis::{CpuSite, CpuUse, Diagnosis};
use crate::record::Role;

pub struct Cpu;

/// The site whose CPU binds: the saturated one that allows the least.
pub fn binding(uses: &[CpuUse]) -> Option<&CpuUse> {
    uses.iter()
        .filter(|u| u.saturated)
        .min_by(|a, b| a.bound_per_s.total_cmp(&b.bound_per_s))
}

/// What one more process of `role` adds, and what the host allows, for predictions.
pub fn per_role_bound(uses: &[CpuUse], role: Role) -> Option<f64> {
    uses.iter()
        .filter(|u| u.is_process_of(role))
        .map(|u| u.bound_per_s)
        .min_by(f64::total_cmp)
}

pub fn host_bound(uses: &[CpuUse]) -> Option<&CpuUse> {
    uses.iter().find(|u| u.site == CpuSite::Host)
}

impl Kind for Cpu {
    fn membership(&self) -> Membership {
        Membership {
            measured: true,
            ..Membership::default()
        }
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        super::reading::slot_and_runner_readings(s)
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    fn saturated(&self, _s: &Settings, c: &Ceiling) -> bool {
        binding(c.cpu).is_some()
    }

    fn caps_measured(
        &self,
        _s: &Settings,
        cap: Option<&Capacity>,
        c: &Ceiling,
        findings: &mut Vec<Finding>,
    ) -> Option<Verdict> {
        binding(c.cpu).map(|site| verdict(site.clone(), cap, c, findings))
    }

    /// A process's CPU bound scales with how many of it the plan runs; main is one (regular
    /// mode: queue mode's main is main's intake); the host's cores are the host's.
    fn predicted(&self, d: &[CpuUse], now: &Settings, plan: &Settings) -> Vec<(f64, Limit)> {
        let scale = |role: Role, n_now: u32, n_new: u32| {
            per_role_bound(d, role).map(|b| b / n_now.max(1) as f64 * n_new as f64)
        };
        let processes = [
            scale(Role::Worker, now.worker_count(), plan.worker_count()),
            scale(
                Role::Runner,
                now.worker_count() * now.runners_per_worker_count(),
                plan.worker_count() * plan.runners_per_worker_count(),
            ),
            // In queue mode main's CPU is main's intake's bound.
            per_role_bound(d, Role::Main).filter(|_| plan.is_regular()),
        ];
        processes
            .into_iter()
            .flatten()
            .map(|b| (b, Limit::Cpu))
            .chain(host_bound(d).map(|h| (h.bound_per_s, Limit::HostCpu)))
            .collect()
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        match binding(n.ceiling.cpu) {
            Some(site) => verdict(site.clone(), Some(n.cap), n.ceiling, findings),
            None => Verdict {
                limit: None,
                text: "CPU was named, but no CPU site was measured saturated".into(),
                cpu: None,
            },
        }
    }

    /// Every execution holds a slot while it waits for the CPU: the slots are what a mix shares.
    fn shared_as(&self) -> Option<super::Share> {
        Some(super::SLOTS)
    }

    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        match d.cpu_limit.as_ref() {
            Some(site) => raise(d, site, current, job),
            None => Err("CPU caps, but no site was measured to raise".into()),
        }
    }

    /// More processes are the worker and runner lines; CPU has no setting of its own.
    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}

fn raise(d: &Diagnosis, site: &CpuUse, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
    let x = d.measured_ceiling.as_ref().map(|m| m.mean).unwrap_or(0.0);
    let workers = current.worker_count();
    match (site.site, site.role) {
        (CpuSite::Process, Some(Role::Worker)) => {
            let host = host_bound(&d.cpu).map(|h| h.bound_per_s);
            if host.is_some_and(|h| h < x * 1.1) {
                return Err(NoPlan(format!(
                    "the host's CPU is already near its cores at {x:.2} req/s: more workers on it add nothing — add cores or another host"
                )));
            }
            // Each worker's share of the measured throughput is what one more worker adds.
            let per_worker = site.bound_per_s / workers as f64;
            let slots =
                current.worker_concurrency_or_default() as f64 / job.service_time().max(1e-9);
            let per_worker = per_worker.min(slots);
            let (wanted, why) = match host {
                Some(h) => (
                    (h / per_worker).floor() as u32,
                    format!("workers up to the host's CPU bound {h:.2} req/s at {per_worker:.2} req/s each"),
                ),
                None => (workers + 1, "one more worker (the host's CPU was not measured)".into()),
            };
            Ok(current
                .clone()
                .propose(|s| &mut s.workers, wanted.max(workers + 1), why))
        }
        (CpuSite::Process, Some(Role::Runner)) => {
            let runners = current.runners_per_worker_count();
            let why = "one more runner per worker: a runner is one Node process, its CPU caps";
            Ok(current
                .clone()
                .propose(
                    |s| &mut s.runner_limit,
                    current
                        .runner_limit_or_default()
                        .saturating_mul(runners)
                        .div_ceil(runners + 1)
                        .max(1),
                    why,
                )
                .propose(|s| &mut s.runners_per_worker, runners + 1, why))
        }
        // In queue mode main's CPU is main's intake (`main_intake.rs`); here main runs every
        // execution.
        (CpuSite::Process, Some(Role::Main)) => Err(NoPlan(format!(
            "regular mode: main's one thread caps at {x:.2} req/s ({:.3} CPU s per execution) and runs every execution — switch to queue mode (finding queue-mode-lifts-cpu says what it needs)",
            site.cpu_s_per_execution
        ))),
        (CpuSite::Process, role) => Err(NoPlan(format!(
            "{} caps at {x:.2} req/s ({:.3} CPU s per execution): {}",
            process_words(role, &site.name),
            site.cpu_s_per_execution,
            process_relief(role)
        ))),
        (CpuSite::Host, _) => Err(NoPlan(format!(
            "the host's CPU caps at {x:.2} req/s: add cores or another host; no setting raises it"
        ))),
    }
}

/// A saturated process named by its role (Redis' and Postgres' own, never "the host's").
fn process_words(role: Option<Role>, name: &str) -> String {
    match role {
        Some(Role::Redis) => format!("Redis' one thread ({name})"),
        Some(Role::Postgres) => format!("Postgres' CPU ({name})"),
        Some(r) => format!("the CPU of {} ({name})", r.word()),
        None => format!("the CPU of a process ({name})"),
    }
}

/// What relieves a saturated process that no worker or runner setting raises. Main in queue
/// mode is main's intake (`main_intake.rs`), in regular mode the plan's own refusal above.
fn process_relief(role: Option<Role>) -> &'static str {
    match role {
        // Bull keeps one queue's keys in one hash slot: a Redis Cluster does not spread it.
        Some(Role::Redis) => {
            "Redis runs commands on one core: give it a faster core or a host of its own (a Redis Cluster does not spread one Bull queue); no n8n setting raises it"
        }
        Some(Role::Postgres) => {
            "give Postgres more cores, or write less per execution (EXECUTIONS_DATA_SAVE_ON_SUCCESS=none, pruning); no worker setting raises it"
        }
        Some(Role::Webhook) => {
            "add webhook processors (n8n webhook): each takes its share of the intake"
        }
        Some(Role::Worker) => {
            "add workers, each with its runner (N8N_RUNNERS_TASK_BROKER_URI pointing at it), up to the host's cores"
        }
        Some(Role::Runner) => "add runners per worker (each runner is one Node process)",
        Some(Role::Main) => {
            "regular mode: main runs every execution on its one thread — move to queue mode with workers, or give main a faster core"
        }
        Some(Role::Other) | None => {
            "a process outside n8n's roles: no n8n setting raises it — give it more CPU or move it off this host"
        }
    }
}

/// CPU caps at `site`: its finding with the cores and CPU seconds per execution, and the verdict.
pub fn verdict(
    site: CpuUse,
    cap: Option<&Capacity>,
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let where_ = match site.site {
        CpuSite::Host => "the host's CPU".to_string(),
        CpuSite::Process => process_words(site.role, &site.name),
    };
    let f = Finding::new(FindingId::CpuLimitCaps,
        format!("CPU caps throughput at {x:.2} req/s: {where_} is saturated"),
    )
    .evidence(format!(
        "{:.2} cores used of {:.1} usable ({}); {:.3} CPU s per execution → {:.1} usable ÷ {:.3} = {:.2} executions/s",
        site.cores_used,
        site.usable_cores.value,
        site.usable_cores.source,
        site.cpu_s_per_execution,
        site.usable_cores.value.max(site.cores_used),
        site.cpu_s_per_execution,
        site.bound_per_s
    ));
    let f = site_figures(f, x, &site, "cpu_bound_per_s")
        .why("No concurrency setting raises a CPU ceiling: slots and runner tasks only wait for the CPU.");
    let f = settings_allow(f, cap).fix(match site.site {
        CpuSite::Process => process_relief(site.role),
        CpuSite::Host => "more cores or another host: adding processes on this one adds nothing",
    });
    findings.push(f);
    Verdict {
        limit: Some(Limit::Cpu.into()),
        text: format!(
            "CPU caps throughput: {} measured from {} on; {where_} uses {:.2} cores at {:.3} CPU s per execution, which allows {:.2} executions/s.",
            ceiling.x.describe("req/s"),
            ceiling.first.words(),
            site.cores_used,
            site.cpu_s_per_execution,
            site.bound_per_s
        ),
        cpu: Some(site),
    }
}

/// A saturated CPU site's figures on its kind's finding: the throughput `x`, the cores used
/// and usable, the CPU seconds per execution, and the bound they allow (named `bound`).
pub fn site_figures(f: Finding, x: f64, u: &CpuUse, bound: &str) -> Finding {
    f.figure("throughput_per_s", x)
        .figure("cores_used", u.cores_used)
        .figure("usable_cores", u.usable_cores.value)
        .figure("cpu_s_per_execution", u.cpu_s_per_execution)
        .figure(bound, u.bound_per_s)
}

/// What the settings would allow beside a measured bound, when the capacity is known.
pub fn settings_allow(f: Finding, cap: Option<&Capacity>) -> Finding {
    match cap {
        Some(c) => f.evidence(format!(
            "the settings would allow {:.2} req/s (worker-bound {:.2}, runner-bound {:.2})",
            c.ceiling,
            c.worker_bound(),
            c.runner_bound()
        )),
        None => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every role's saturated process is named as itself and relieved by its own means: none
    /// is called the host's CPU, and no two roles share a relief.
    #[test]
    fn a_saturated_process_is_never_called_the_host() {
        let roles = Role::ALL;
        let host = "more cores or another host: adding processes on this one adds nothing";
        let reliefs: std::collections::BTreeSet<&str> =
            roles.iter().map(|r| process_relief(Some(*r))).collect();
        assert_eq!(reliefs.len(), roles.len());
        assert!(!reliefs.contains(host));
        for r in roles {
            assert!(!process_words(Some(r), "c").contains("host"), "{r:?}");
        }
    }
}
