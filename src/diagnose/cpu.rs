//! CPU, the third limit: CPU seconds per execution per process (from the containers' stats or
//! the `/metrics` CPU counter) and the rate each process — and the host as a whole — allows.
//!
//! A Node process (n8n main, worker, runner) runs its JavaScript on one thread: it saturates at
//! about one core (GC and I/O threads add a little, so a saturated worker shows 1–1.4 cores),
//! or at its container's CPU limit when that is lower. The host saturates when every process
//! sharing it together uses its cores.

use crate::model::settings::Provenance;
use crate::model::settings::Sourced;
use crate::record::diagnosis::{CpuSite, CpuUse, Level};
use crate::record::{Role, StageResult};
use std::collections::BTreeMap;

/// Cores a Node process can use for its JavaScript.
pub const NODE_USABLE_CORES: f64 = 1.0;

/// Share of its usable cores at which a site counts as saturated.
pub use crate::model::SATURATED_SHARE;

pub use crate::record::summary::Host;

struct Site {
    role: Option<Role>,
    cores: Vec<f64>,
    limit: Option<f64>,
    /// Event-loop lag read from the process's own `/metrics`, one per stage.
    lag: Vec<f64>,
}

/// The measured ceiling's top level (named in words) and the levels it pools (whose stages are
/// read).
pub type AtCeiling<'a> = (&'a Level, &'a [&'a Level]);

/// The valid stages the levels at the ceiling were merged from.
fn valid_stages<'a>(stages: &'a [StageResult], at: &[&Level]) -> Vec<&'a StageResult> {
    at.iter()
        .flat_map(|l| l.stages.iter())
        .filter_map(|i| stages.get(*i))
        .filter(|s| s.valid)
        .collect()
}

/// CPU per site over the levels `at` the ceiling, whose pooled throughput is `x` executions/s
/// (the CPU read over the same stages the throughput was).
pub fn uses(stages: &[StageResult], at: &[&Level], x: f64, host: &Host) -> Vec<CpuUse> {
    if x <= 0.0 {
        return Vec::new();
    }
    let used = valid_stages(stages, at);
    let mut sites: BTreeMap<String, Site> = BTreeMap::new();
    let from_containers = used
        .iter()
        .any(|s| s.containers.iter().any(|c| c.samples > 0));
    for s in &used {
        if from_containers {
            for c in s.containers.iter().filter(|c| c.samples > 0) {
                let e = sites.entry(c.name.clone()).or_insert(Site {
                    role: Some(c.role),
                    cores: Vec::new(),
                    limit: c.cpu_limit_cores,
                    lag: Vec::new(),
                });
                e.cores.push(c.cpu_percent_mean / 100.0);
                e.lag.extend(lag_of_role(s, c.role));
            }
        } else {
            for e in s.endpoints.iter().filter(|e| e.samples > 0) {
                let site = sites.entry(e.url.clone()).or_insert(Site {
                    role: e.role,
                    cores: Vec::new(),
                    limit: None,
                    lag: Vec::new(),
                });
                site.cores.push(e.cpu_percent_mean / 100.0);
                site.lag.extend(lag_of(e));
            }
        }
    }
    let mut out: Vec<CpuUse> = sites
        .into_iter()
        .filter_map(|(name, site)| process_use(name, site, x, host))
        .collect();
    if let Some(h) = host_use(&out, &used, x, host) {
        out.push(h);
    }
    out
}

/// The processes sampled at the ceiling (the levels `at` it) whose CPU read 0 in every valid
/// stage: their counters did not move (several roles in one process, as `sim all`) or are
/// absent, so they bound nothing — which is not the same as CPU never having been watched.
pub fn read_zero(stages: &[StageResult], at: &[&Level]) -> Vec<String> {
    let mut moved: BTreeMap<String, bool> = BTreeMap::new();
    for s in valid_stages(stages, at) {
        let containers = s.containers.iter().filter(|c| c.samples > 0);
        for (name, pct) in containers.map(|c| (&c.name, c.cpu_percent_mean)) {
            *moved.entry(name.clone()).or_default() |= pct > 0.0;
        }
        let endpoints = s.endpoints.iter().filter(|e| e.samples > 0);
        for (name, pct) in endpoints.map(|e| (&e.url, e.cpu_percent_mean)) {
            *moved.entry(name.clone()).or_default() |= pct > 0.0;
        }
    }
    moved
        .into_iter()
        .filter(|(_, m)| !m)
        .map(|(n, _)| n)
        .collect()
}

/// An endpoint's mean event-loop lag, when it was scraped and the figure is physically
/// possible (finite, not negative, under a minute).
fn lag_of(e: &crate::record::stage::EndpointObserved) -> Option<f64> {
    let lag = e.eventloop_lag_mean_s;
    (e.samples > 0 && lag.is_finite() && (0.0..60.0).contains(&lag)).then_some(lag)
}

/// The lag of the one metrics endpoint of `role` in a stage (a container's own process); none
/// when several endpoints share the role and the container's cannot be told.
fn lag_of_role(s: &StageResult, role: Role) -> Option<f64> {
    let mut same = s.endpoints.iter().filter(|e| e.role == Some(role));
    match (same.next(), same.next()) {
        (Some(e), None) => lag_of(e),
        _ => None,
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn process_use(name: String, site: Site, x: f64, host: &Host) -> Option<CpuUse> {
    let cores_used = mean(&site.cores);
    if cores_used <= 0.0 {
        return None;
    }
    let node = matches!(
        site.role,
        Some(Role::Main | Role::Worker | Role::Webhook | Role::Runner | Role::Redis)
    );
    let usable = match (site.limit, node) {
        (Some(l), true) if l < NODE_USABLE_CORES => Sourced::new(
            l,
            Provenance::Deployment("the container's CPU limit".into()),
        ),
        (_, true) => Sourced::new(
            NODE_USABLE_CORES,
            Provenance::Default(
                "one core: a Node process runs its JavaScript on one thread".into(),
            ),
        ),
        (Some(l), false) => Sourced::new(
            l,
            Provenance::Deployment("the container's CPU limit".into()),
        ),
        // A process whose usable cores are unknown bounds nothing; it still counts in the
        // host's total.
        (None, false) => match &host.cores {
            Some(c) => Sourced::new(c.value, c.source.with_note("")),
            None => return None,
        },
    };
    let mut u = site_use(CpuSite::Process, site.role, name, cores_used, x, usable);
    u.eventloop_lag_s = (!site.lag.is_empty()).then(|| mean(&site.lag));
    Some(u)
}

fn site_use(
    site: CpuSite,
    role: Option<Role>,
    name: String,
    cores_used: f64,
    x: f64,
    usable: Sourced<f64>,
) -> CpuUse {
    let per_exec = cores_used / x;
    // A saturated process shows a little more than its usable cores (GC, I/O threads): the
    // rate it allows is never below what it just did.
    let bound = usable.value.max(cores_used) / per_exec;
    CpuUse {
        site,
        role,
        name,
        cores_used,
        cpu_s_per_execution: per_exec,
        saturated: cores_used >= SATURATED_SHARE * usable.value,
        usable_cores: usable,
        bound_per_s: bound,
        eventloop_lag_s: None,
    }
}

/// The cores the work's processes used on the host at every stage, from /proc (the target on
/// this machine): n8n's processes, Postgres, Redis and the load; None unless every stage read it.
fn placed_on_host(used: &[&StageResult]) -> Option<f64> {
    let per_stage: Vec<f64> = used
        .iter()
        .filter(|s| !s.host_processes.is_empty())
        .map(|s| {
            s.host_processes
                .iter()
                .filter(|g| g.stack)
                .map(|g| g.cores)
                .sum()
        })
        .collect();
    (!per_stage.is_empty() && per_stage.len() == used.len()).then(|| mean(&per_stage))
}

fn host_use(procs: &[CpuUse], used: &[&StageResult], x: f64, host: &Host) -> Option<CpuUse> {
    let cores = host.cores.as_ref()?;
    let placed = placed_on_host(used);
    if procs.is_empty() && placed.is_none() {
        return None;
    }
    let mut total: f64 = procs.iter().map(|p| p.cores_used).sum();
    let mut name = "host: the processes observed".to_string();
    if host.shares_client_cpu {
        total += mean(
            &used
                .iter()
                .map(|s| s.client_cpu_percent / 100.0)
                .collect::<Vec<_>>(),
        );
        name.push_str(" and n8ncap itself");
    }
    // All the CPU the work needs, not only the processes a sweep was given.
    if let Some(p) = placed.filter(|p| *p > total) {
        total = p;
        name = "host: the deployment's processes (n8n, its Postgres and Redis) and the load, read from /proc".into();
    } else if let Some(busy) = unplaced_busy(procs, used, placed, host).filter(|b| *b > total) {
        // A run on n8n's own host that placed no CPU per process (an older n8ncap): what it did
        // not observe (workers, Postgres, Redis) is in the host's busy CPU and nowhere else, so
        // the host's own reading stands for the deployment's — said as such.
        total = busy;
        name = "host: its busy CPU per stage (/proc/stat, not placed per process: what was not observed — workers, Postgres, Redis, any other work — counts as the deployment's)".into();
    }
    Some(site_use(
        CpuSite::Host,
        None,
        name,
        total,
        x,
        Sourced::new(cores.value, cores.source.clone()),
    ))
}

/// The most CPU the deployment's unobserved parts (Postgres, Redis, the load's sender) take
/// beside the n8n processes observed, as a share of theirs: lab 2's 0 ms jobs on a real n8n
/// 2.41.1 left about 37 % of the observed processes' CPU to them. More than this, with the
/// workers observed, is other work on the host (`other_work`).
const UNOBSERVED_SHARE: f64 = 0.5;

/// The host's mean busy cores over `used` when they stand for the deployment's CPU: the target
/// is on this host (n8ncap shares its CPU), every stage read /proc/stat, /proc placed nothing
/// per process (a run saved by an n8ncap that did not), and either no worker was observed while
/// the queue held slots taken (the workers ran unobserved on this host), or what the processes
/// observed (`procs`) did not use is within `UNOBSERVED_SHARE` of what they did.
fn unplaced_busy(
    procs: &[CpuUse],
    used: &[&StageResult],
    placed: Option<f64>,
    host: &Host,
) -> Option<f64> {
    let cores = host.cores.as_ref()?.value;
    // Today's runs on this host read /proc (empty only when n8ncap served the target itself):
    // the host's busy CPU is then never the deployment's (other tests, a build beside it).
    if !host.shares_client_cpu || placed.is_some() || used.iter().any(|s| s.host_placed) {
        return None;
    }
    let busy: Vec<f64> = used
        .iter()
        .filter_map(|s| s.host_cpu_percent)
        .map(|p| p / 100.0)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .collect();
    if busy.is_empty() || busy.len() < used.len() {
        return None;
    }
    let busy = mean(&busy).min(cores);
    let observed: f64 = procs.iter().map(|p| p.cores_used).sum();
    let workers_seen = procs.iter().any(|p| p.role == Some(Role::Worker));
    let slots_taken = used
        .iter()
        .any(|s| s.queue.as_ref().is_some_and(|q| q.active_mean > 0.0));
    let unobserved_workers = !workers_seen && slots_taken;
    (unobserved_workers || busy - observed <= UNOBSERVED_SHARE * observed).then_some(busy)
}

/// Other work on the host counts once it takes this many cores and this share of them.
const OTHER_WORK_CORES: f64 = 0.25;
const OTHER_WORK_SHARE: f64 = 0.10;

/// The host's CPU used by work outside the stack at the ceiling (`top`, named in its words, and
/// the levels `at` it, whose stages are read): this machine's busy CPU (`/proc/stat`, when it is
/// n8n's host) less what the stack's processes and n8ncap used.
/// It is never the stack's CPU — a build or another load beside the sweep makes the host busy
/// whatever caps the stack, and a CPU per execution taken from it equals the measured ceiling by
/// construction — so it is a validity finding with its share, never a CPU verdict.
pub fn other_work(
    stages: &[StageResult],
    (top, at): AtCeiling,
    uses: &[CpuUse],
    host: &Host,
) -> Option<crate::findings::Finding> {
    let cores = host.cores.as_ref()?;
    let used = valid_stages(stages, at);
    let busy: Vec<f64> = used
        .iter()
        .filter_map(|s| s.host_cpu_percent)
        .map(|p| p / 100.0)
        .collect();
    if busy.is_empty() || busy.len() < used.len() {
        return None;
    }
    // Without the stack's own CPU (no process or container measured) the two cannot be told
    // apart: nothing is said.
    let stack = uses.iter().find(|u| u.site == CpuSite::Host)?.cores_used;
    let other = (mean(&busy).min(cores.value) - stack).max(0.0);
    if other < OTHER_WORK_CORES || other < OTHER_WORK_SHARE * cores.value {
        return None;
    }
    let f = crate::findings::Finding::new(
        crate::findings::FindingId::HostShared,
        format!(
            "{other:.1} of {:.0} cores were used by processes outside the stack at {}: the ceiling measured may be the contention's",
            cores.value,
            top.words()
        ),
    )
    .evidence(format!(
        "the host was {:.2} cores busy (/proc/stat); the stack's processes and n8ncap used {stack:.2}",
        mean(&busy)
    ))
    .figure("other_cores", other)
    .figure("host_cores", cores.value)
    .figure("stack_cores", stack)
    .why("CPU taken by other work (a build, another load, another tenant) slows the stack without being its limit: no setting of n8n's raises it, and a CPU per execution read from the host's total would call it n8n's.");
    Some(match outside(&used, mean(&busy)) {
        Some(words) => f.evidence(words),
        None => f,
    })
}

/// What /proc placed outside the work at every stage, by program, and what it could not place
/// (processes that ended within the stage, interrupts): said, never called the stack's.
fn outside(used: &[&StageResult], busy: f64) -> Option<String> {
    if used.iter().any(|s| s.host_processes.is_empty()) {
        return None;
    }
    let mut by: BTreeMap<&str, f64> = BTreeMap::new();
    let mut all = 0.0;
    for s in used {
        for g in &s.host_processes {
            all += g.cores / used.len() as f64;
            if !g.stack {
                *by.entry(g.group.as_str()).or_default() += g.cores / used.len() as f64;
            }
        }
    }
    let mut named: Vec<(&str, f64)> = by.into_iter().filter(|(_, c)| *c >= 0.05).collect();
    named.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut words: Vec<String> = named
        .iter()
        .take(5)
        .map(|(g, c)| format!("{g} {c:.2}"))
        .collect();
    let unplaced = busy - all;
    if unplaced >= 0.1 {
        words.push(format!(
            "{unplaced:.2} not placed on any process (processes that ended within the stage, the kernel's interrupts)"
        ));
    }
    (!words.is_empty()).then(|| format!("outside the work, by /proc: {}", words.join(", ")))
}
