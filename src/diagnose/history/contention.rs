//! Contention in history: the job time n8n's histogram measured where nothing waited against
//! the slot time at load, while the slots were full. A real n8n 2.41.1 scaled to 3 workers on a
//! 2-core host held 27.2/s: every job slowed from 0.42 to 0.55 s as n8n's processes together
//! used about 1.7 of the 2 cores, so the 15 slots filled although no configured limit was
//! reached. Read with the quiet job time, that ceiling looks like a lower runner limit (X × C
//! = 11.4 tasks "inferred"); it is a shared resource — the host's CPU when the processes'
//! cores add up to it. n8n exposes no host figure: when Prometheus scrapes node_exporter on
//! n8n's host, its busy cores against the host's say so (and stand in for n8n processes that
//! were not scraped); else the words say what would tell.

use crate::findings::{Finding, FindingId, Severity};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::Capping;
use crate::model::WAITED_JOBS as WAITED;
use crate::record::diagnosis::{CpuSite, CpuUse};
use crate::record::StageResult;

/// Growth of the slot time past the quiet job time that counts as contention (beyond the
/// histogram's own spread at a steady load).
pub const GROWTH: f64 = 1.15;

/// n8n's processes' cores together at load from which a slower job is contention.
pub const BUSY_CORES: f64 = 1.0;

/// The share of the host's cores busy (node_exporter) from which the host's CPU is full.
pub const HOST_FULL: f64 = 0.85;

/// The share of the host's cores (`--host-cores`) n8n's scraped processes alone use from which
/// the host's CPU is full: what is not scraped — the runners (child processes of the workers),
/// Postgres, Redis, the callers — takes the rest. Lab 2's real n8n 2.41.1 at 3 workers: main
/// and the workers 1.58 of 2 cores (0.79), the host about 1.9 busy.
pub const PROCESSES_FULL: f64 = 0.75;

/// The host's reading: busy cores, its cores, whether from n8n's processes alone.
type HostRead = (f64, f64, bool);

/// Whether `host` reads full.
fn full(host: Option<HostRead>) -> bool {
    host.is_some_and(|(b, n, only)| {
        n > 0.0 && b >= if only { PROCESSES_FULL } else { HOST_FULL } * n
    })
}

/// n8n's processes' cores (the sum of every scraped process's CPU) and event-loop lag (the
/// highest mean) in a stage.
fn processes(st: &StageResult) -> (f64, f64) {
    let cores = st
        .endpoints
        .iter()
        .filter(|e| e.samples > 0)
        .map(|e| e.cpu_percent_mean / 100.0)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .sum();
    let lag = st
        .endpoints
        .iter()
        .filter(|e| e.samples > 0 && e.eventloop_lag_mean_s.is_finite())
        .map(|e| e.eventloop_lag_mean_s)
        .fold(0.0, f64::max);
    (cores, lag)
}

/// Weighted (by windows) means over stages: throughput, slot time, cores, lag.
fn pooled(stages: &[&StageResult]) -> Option<(f64, f64, f64, f64)> {
    let mut acc = (0.0, 0.0, 0.0, 0.0, 0.0);
    for st in stages {
        let h = st.history.as_ref()?;
        let w = h.windows.max(1) as f64;
        let slot = h.slot_time_s?;
        let (cores, lag) = processes(st);
        acc = (
            acc.0 + w * st.throughput_rps,
            acc.1 + w * slot,
            acc.2 + w * cores,
            acc.3 + w * lag,
            acc.4 + w,
        );
    }
    (acc.4 > 0.0).then(|| (acc.0 / acc.4, acc.1 / acc.4, acc.2 / acc.4, acc.3 / acc.4))
}

/// The host's busy cores (weighted by windows) and its cores over the stages that read them.
fn host(stages: &[&StageResult]) -> Option<HostRead> {
    let read: Vec<(f64, crate::record::history::HostCpu)> = stages
        .iter()
        .filter_map(|st| {
            let h = st.history.as_ref()?;
            Some((h.windows.max(1) as f64, h.host?))
        })
        .collect();
    let w: f64 = read.iter().map(|(w, _)| w).sum();
    (w > 0.0).then(|| {
        (
            read.iter().map(|(w, h)| w * h.busy_cores).sum::<f64>() / w,
            read.iter().map(|(_, h)| h.cores).fold(0.0, f64::max),
            read.iter().any(|(_, h)| h.processes_only),
        )
    })
}

/// The host's reading (node_exporter) on the finding, when there is one.
fn with_host(f: Finding, host: Option<HostRead>, full: bool) -> Finding {
    let Some((b, n, only)) = host else { return f };
    f.figure("host_busy_cores", b)
        .figure("host_cores", n)
        .evidence(format!(
        "the host ({}): {b:.2} of {n:.0} cores busy at load{}",
        if only {
            "n8n's scraped processes against --host-cores; the runners, Postgres and Redis not scraped"
        } else {
            "node_exporter's node_cpu_seconds_total"
        },
        if full {
            ": full"
        } else {
            ": not full, so another shared resource (the database, an external call) is likelier"
        }
    ))
}

/// What the job time's growth under load says.
pub struct Grown {
    pub finding: Finding,
    /// The verdict's words when the verdict named a slot limit it had to infer (that inference
    /// read the quiet job time as the job time at load), or none.
    pub words: Option<String>,
    /// The host as the CPU site that caps, when its reading was full at load.
    pub host: Option<CpuUse>,
}

/// The job time's growth under load while the slots were full ([`Grown`]).
pub fn grows(
    stages: &[StageResult],
    service_time: Option<&Sourced<f64>>,
    capping: Option<Capping>,
    settings: &Settings,
) -> Option<Grown> {
    let quiet = service_time
        .filter(|s| matches!(s.source, Provenance::Measured(_)) && s.value > 0.0)?
        .value;
    let full: Vec<&StageResult> = stages
        .iter()
        .filter(|st| st.queue.as_ref().is_some_and(|q| q.waiting_mean >= WAITED))
        .collect();
    let calm: Vec<&StageResult> = stages
        .iter()
        .filter(|st| st.queue.as_ref().is_some_and(|q| q.waiting_mean < WAITED))
        .filter(|st| st.throughput_rps > 0.0)
        .collect();
    let (x, slot, cores, lag) = pooled(&full)?;
    let growth = slot / quiet;
    if !(growth.is_finite() && growth >= GROWTH && x > 0.0) {
        return None;
    }
    let at_calm = pooled(&calm);
    // A runner limit below the slots also lengthens the slot time (executions wait for a task
    // inside their slot), with little CPU: the growth is contention only where the processes
    // worked hard — a core or more together. (Event-loop lag alone is not enough: a busy host's
    // other work lags a CPU-free process too; it is evidence beside the cores.)
    let host = host(&full);
    let host_full = self::full(host);
    // A host read and not full does not explain the slots' time: a limit below the slots (a
    // runner limit: executions wait for a task inside their slot) is named instead — lab 2's
    // runner-bound shape (runner 2 of 5 slots, 0.5 s jobs) used about 1 of its 2 cores while
    // its slots held jobs for 1.25 s.
    if !host_full && (host.is_some() || cores < BUSY_CORES) {
        return None;
    }
    let mut f = Finding::new(
        FindingId::JobTimeGrows,
        format!(
            "Every job slowed under load: {quiet:.3} s where nothing waited, {slot:.3} s while the slots were full (+{:.0} %): a shared resource — the host's CPU when n8n's processes' cores add up to it — fills the slots, not a lower limit",
            (growth - 1.0) * 100.0
        ),
    )
    .figure("job_time_quiet_s", quiet)
    .figure("job_time_load_s", slot)
    .figure("growth", growth)
    .figure("throughput_per_s", x)
    .figure("n8n_cores_at_load", cores)
    .evidence(format!(
        "job time side by side: {quiet:.3} s quiet (n8n_workflow_execution_duration_seconds where nothing waited), {slot:.3} s at {x:.2}/s with jobs waiting"
    ))
    .evidence(format!(
        "n8n's scraped processes used {cores:.2} cores together at load ({:.1} ms of CPU per execution){}",
        cores / x * 1000.0,
        at_calm
            .map(|(xc, _, cc, _)| format!(", {cc:.2} at {xc:.2}/s quietly"))
            .unwrap_or_default()
    ))
    .with_severity(Severity::Warning)
    .why("A job slower at load than alone, with its slots full, is a resource every job shares — the host's cores (Node processes, Postgres, Redis on one machine), Postgres, or an external call — not a runner limit or worker concurrency: no slot setting raises it.")
    .fix("compare n8n's processes' cores with the host's (node_exporter's node_cpu_seconds_total, or the machine's cores): near them, the host's CPU caps — spread the workers over more hosts or cores; else look at the database and the workflow's external calls");
    f = with_host(f, host, host_full);
    if lag > 0.0 {
        let lag_calm = at_calm.map_or(0.0, |c| c.3);
        f = f.figure("eventloop_lag_load_s", lag).evidence(format!(
            "event-loop lag {:.1} ms at load against {:.1} ms quietly (the highest process's mean)",
            lag * 1000.0,
            lag_calm * 1000.0
        ));
    }
    let words = verdict_words(
        (quiet, slot, cores, x),
        (host, host_full),
        capping,
        settings,
    );
    Some(Grown {
        finding: f,
        words,
        host: host.filter(|_| host_full).map(|h| host_site(h, x)),
    })
}

/// The host as a CPU site at `x` executions/s. From node_exporter its bound is its cores over
/// its CPU per execution; from n8n's scraped processes alone (what was not scraped took the
/// rest) the host was full at what it did, so `x` is its bound.
fn host_site((busy, cores, only): HostRead, x: f64) -> CpuUse {
    let per_exec = busy / x;
    let (name, source, bound) = if only {
        (
            "host: n8n's scraped processes (the runners, Postgres and Redis not scraped)",
            "--host-cores",
            x,
        )
    } else {
        (
            "host: node_exporter's busy cores",
            "node_exporter's CPUs",
            cores.max(busy) / per_exec,
        )
    };
    CpuUse {
        site: CpuSite::Host,
        role: None,
        name: name.into(),
        cores_used: busy,
        cpu_s_per_execution: per_exec,
        usable_cores: Sourced::new(cores, Provenance::Measured(source.into())),
        bound_per_s: bound,
        saturated: true,
        eventloop_lag_s: None,
    }
}

/// The words that lead the verdict when it needed a slot setting inferred from the quiet job
/// time (or named none): the growth is the shared resource, read wrong as a lower limit.
fn verdict_words(
    (quiet, slot, cores, x): (f64, f64, f64, f64),
    (host, host_full): (Option<HostRead>, bool),
    capping: Option<Capping>,
    settings: &Settings,
) -> Option<String> {
    // A slot limit the verdict inferred from the quiet job time is this growth, read wrong.
    let inferred = |s: &Option<Sourced<u32>>| {
        s.as_ref()
            .is_some_and(|v| matches!(v.source, Provenance::Inferred(_)))
    };
    // A verdict that needed a slot setting inferred (from the quiet job time) or named none.
    let misread = capping.is_none()
        || inferred(&settings.runner_limit)
        || inferred(&settings.worker_concurrency);
    let runner_known = settings
        .runner_limit
        .as_ref()
        .is_some_and(|r| !matches!(r.source, Provenance::Inferred(_)));
    let what = match host {
        Some((b, n, only)) if host_full => format!(
            "the host's CPU ({b:.2} of its {n:.0} cores busy, {})",
            if only {
                "n8n's scraped processes alone"
            } else {
                "node_exporter"
            }
        ),
        _ => "a shared resource (the host's CPU when that is near its cores)".to_string(),
    };
    misread.then(|| {
        format!(
            "The job time grew from {quiet:.3} s quietly to {slot:.3} s at load while the slots filled, and n8n's processes used {cores:.2} cores together: {what} caps throughput at {x:.2}/s, not a lower runner limit or worker concurrency{}.",
            // A full host explains the slots' time; else a runner limit below them could too.
            if runner_known || host_full { "" } else { " (a runner limit below the slots would lengthen the slots too: give --runner-limit to rule it out)" }
        )
    })
}
