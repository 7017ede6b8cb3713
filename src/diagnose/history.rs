//! Production history judged like a sweep: the busy windows (the highest-throughput windows and
//! those where jobs waited) become open-model levels — arrivals = completions + the waiting's
//! growth, throughput = completions, time in the system = (slots taken + waiting) ÷ throughput
//! (Little's law), CPU per process — and go through the same verdict, inference and
//! recommendation. What each window shows of saturation is said per window; a queue that holds
//! jobs while slots sit free is `queue-stalled`; resets, gaps, Prometheus' warnings and how
//! coarse n8n's 20 s gauge refresh makes the verdict are findings of their own.

use super::{diagnose, Inputs};
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Settings, Sourced};
use crate::record::diagnosis::Diagnosis;
use crate::record::history::{History, Window, WindowEvidence};
use crate::record::stage::{EndpointObserved, Latency, QueueObserved, QueueSource};
use crate::record::{LoadModel, Role, StageResult};

/// A window at least this share of the highest throughput is busy.
const BUSY_SHARE: f64 = 0.8;
/// Waiting below this many jobs on average is no queue.
const WAITED: f64 = 1.0;
/// One Node process's JavaScript runs on one core.
const NODE_CORE_BOUND: f64 = 0.85;

/// Settings the history itself gives: the exporter's, and the job time from the execution
/// durations of windows where nothing waited.
pub fn settings(h: &History) -> Settings {
    let mut s = Settings::default();
    if let Some(e) = &h.exporter {
        let src = "n8ncap exporter series in Prometheus";
        s.workers = Some(Sourced::new(e.workers.max(1), src));
        s.worker_concurrency = e.worker_concurrency.map(|c| Sourced::new(c, src));
        if let Some(r) = e.runner_capacity {
            s.runner_limit = Some(Sourced::new(r, src));
            s.runners_per_worker = Some(Sourced::new(1, src));
        }
    }
    let calm: Vec<f64> = h
        .windows
        .iter()
        .filter(|w| w.waiting_mean < 0.5 && w.completions >= 3.0)
        .filter_map(|w| w.execution_s)
        .collect();
    // The shortest: a window that mixes in the start of a peak (jobs holding slots while they
    // wait for a runner) or a busy machine only ever adds time to an execution.
    if let Some(least) = calm.iter().copied().reduce(f64::min) {
        s.job_time = Some(Sourced::new(
            least,
            format!(
                "n8n_workflow_execution_duration_seconds: the shortest mean of {} window(s) where no job waited",
                calm.len()
            ),
        ));
    }
    s
}

fn slots(s: &Settings) -> Option<f64> {
    s.worker_concurrency
        .as_ref()
        .map(|c| c.value as f64 * s.worker_count() as f64)
}

/// Marks the busy windows and what each shows.
pub fn mark(h: &mut History, s: &Settings) {
    let top = h
        .windows
        .iter()
        .map(|w| w.throughput_per_s)
        .fold(0.0, f64::max);
    let slots = slots(s);
    let mut prev: Option<f64> = None;
    for w in h.windows.iter_mut() {
        // A window where the load came or went mixes two loads: waiting alone makes it busy
        // only at half the top throughput or more.
        w.busy = top > 0.0
            && (w.throughput_per_s >= BUSY_SHARE * top
                || (w.waiting_mean >= WAITED && w.throughput_per_s >= 0.5 * top));
        let mut ev = Vec::new();
        let taken = match slots {
            Some(c) => w.active_mean >= 0.9 * c,
            None => w.active_mean >= 1.0,
        };
        if w.waiting_mean >= WAITED && taken {
            ev.push(WindowEvidence::JobsWaitedWhileSlotsTaken);
        }
        if let Some(p) = prev {
            let flat = p > 0.0 && (w.throughput_per_s - p).abs() <= 0.05 * p;
            if flat && w.waiting_end > w.waiting_start + 0.5 {
                ev.push(WindowEvidence::CompletionsFlatWhileWaitingGrew);
            }
        }
        if w.cpu.iter().any(|c| c.cores >= NODE_CORE_BOUND) {
            ev.push(WindowEvidence::ProcessAtCpuBound);
        }
        let free = match slots {
            Some(c) => w.active_max < c,
            None => w.active_max < 0.5,
        };
        let workers_up: Vec<String> = w
            .cpu
            .iter()
            .filter(|c| c.role == Role::Worker)
            .map(|c| c.process.clone())
            .collect();
        if w.waiting_mean >= WAITED && w.samples >= 3 && free && !workers_up.is_empty() {
            ev.push(WindowEvidence::QueueStalled);
            w.idle_workers = workers_up;
            w.busy = true;
        }
        w.evidence = ev;
        prev = Some(w.throughput_per_s);
    }
}

/// A busy window as an open-model stage: what arrived, what completed, slots and waiting from
/// the gauges, time in the system by Little's law, CPU per process.
pub fn stage(i: usize, w: &Window) -> StageResult {
    let label = format!("window {}–{}", clock(w.start), clock(w.end));
    let mut st = StageResult::empty(i, label, LoadModel::Open);
    let grew = (w.waiting_end - w.waiting_start).max(0.0);
    let arrivals = w.completions + w.failures + grew;
    st.rate = Some((arrivals / w.covered_s).max(w.throughput_per_s));
    st.duration_s = w.end - w.start;
    st.window_s = w.covered_s;
    st.requests = (w.completions + w.failures).round() as u64;
    st.ok = w.completions.round() as u64;
    st.throughput_rps = w.throughput_per_s;
    st.request_rate = (w.completions + w.failures) / w.covered_s;
    st.throughput_ci = Some(w.throughput_interval);
    st.error_rate = if st.requests > 0 {
        w.failures / (w.completions + w.failures)
    } else {
        0.0
    };
    st.check_pass_rate = 1.0 - st.error_rate;
    if w.throughput_per_s > 0.0 {
        let r_ms = (w.active_mean + w.waiting_mean) / w.throughput_per_s * 1000.0;
        st.latency = Some(Latency {
            mean_ms: r_ms,
            min_ms: r_ms,
            p50_ms: r_ms,
            p90_ms: r_ms,
            p95_ms: r_ms,
            p99_ms: r_ms,
            max_ms: r_ms,
        });
    }
    st.queue = Some(QueueObserved {
        source: QueueSource::Metrics,
        active_mean: w.active_mean,
        active_max: w.active_max,
        waiting_mean: w.waiting_mean,
        waiting_max: w.waiting_max,
        samples: w.samples,
        gaps: w.gaps,
        coarse: false,
    });
    st.endpoints = w
        .cpu
        .iter()
        .map(|c| EndpointObserved {
            url: c.process.clone(),
            role: Some(c.role),
            samples: w.samples.max(1),
            cpu_percent_mean: c.cores * 100.0,
            rss_max_bytes: c.rss_max_bytes.unwrap_or(0.0),
            rss_mean_bytes: c.rss_max_bytes.unwrap_or(0.0),
            eventloop_lag_max_s: c.eventloop_lag_max_s.unwrap_or(0.0),
            eventloop_lag_mean_s: c.eventloop_lag_max_s.unwrap_or(0.0),
            ..EndpointObserved::default()
        })
        .collect();
    st
}

fn clock(t: f64) -> String {
    if !(0.0..253_402_300_800.0).contains(&t) {
        return format!("{t:.0}");
    }
    crate::util::utc_rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t))
}

/// The history judged: its busy windows as levels, through the same verdict; findings of the
/// history's own added.
pub fn judge(
    h: &mut History,
    flags: Settings,
    timeout_s: Option<f64>,
) -> (Diagnosis, Vec<StageResult>) {
    let settings = flags.or(settings(h));
    mark(h, &settings);
    let stages: Vec<StageResult> = h
        .windows
        .iter()
        .filter(|w| w.busy && w.throughput_per_s > 0.0)
        .enumerate()
        .map(|(i, w)| stage(i, w))
        .collect();
    let inputs = Inputs {
        settings,
        task_request_timeout_s: timeout_s,
        ..Inputs::default()
    };
    let mut d = diagnose(&stages, &inputs);
    let busy = h.windows.iter().filter(|w| w.busy).count();
    d.verdict = format!(
        "From Prometheus history ({busy} busy window(s) of {:.0} s in {}–{}): {}",
        h.window_s,
        clock(h.start),
        clock(h.end),
        d.verdict
    );
    if busy == 0 {
        d.verdict = format!(
            "From Prometheus history ({}–{}): no window saw load — no completions in n8n_scaling_mode_queue_jobs_completed{}.",
            clock(h.start),
            clock(h.end),
            if h.windows.is_empty() { " (no series matched: check --match and that main exposes the queue metrics)" } else { "" }
        );
    }
    let mut extra = Vec::new();
    stalled(h, &mut extra);
    coarse(h, &mut extra);
    resets_and_gaps(h, &mut extra);
    extra.append(&mut d.findings);
    extra.sort_by_key(|f| std::cmp::Reverse(f.severity));
    d.findings = extra;
    (d, stages)
}

fn stalled(h: &History, out: &mut Vec<Finding>) {
    let w: Vec<&Window> = h
        .windows
        .iter()
        .filter(|w| w.evidence.contains(&WindowEvidence::QueueStalled))
        .collect();
    let Some(first) = w.first() else { return };
    let mut workers: Vec<&str> = w
        .iter()
        .flat_map(|w| w.idle_workers.iter().map(String::as_str))
        .collect();
    workers.sort_unstable();
    workers.dedup();
    let mut f = Finding::new(
        FindingId::QueueStalled,
        format!(
            "Jobs waited in Redis while worker slots sat free in {} window(s), from {}",
            w.len(),
            clock(first.start)
        ),
    )
    .figure("windows", w.len() as f64)
    .figure(
        "waiting_max",
        w.iter().map(|w| w.waiting_max).fold(0.0, f64::max),
    );
    for win in w.iter().take(10) {
        f = f.evidence(format!(
            "{}–{}: {:.1} jobs waiting on average, at most {:.0} slots taken, {:.2} completions/s",
            clock(win.start),
            clock(win.end),
            win.waiting_mean,
            win.active_max,
            win.throughput_per_s
        ));
    }
    let f = f.evidence(format!(
        "workers up (scraped) with free slots: {}",
        workers.join(", ")
    ))
    .why("A worker that stops taking jobs (a stalled Bull job, a lost Redis connection) leaves the queue growing while the dashboard shows capacity to spare.")
    .fix("check the workers' logs and their Redis connection (QUEUE_BULL_REDIS_*), and Bull's stalled-job settings (QUEUE_WORKER_LOCK_DURATION, QUEUE_WORKER_STALLED_INTERVAL); restart the workers that hold free slots")
    ;
    out.push(f);
}

fn coarse(h: &History, out: &mut Vec<Finding>) {
    let Some(r) = h.queue_refresh_s else { return };
    if r < 5.0 {
        return;
    }
    let top = h
        .windows
        .iter()
        .map(|w| w.throughput_per_s)
        .fold(0.0, f64::max);
    out.push(
        Finding::new(FindingId::HistoryCoarse,
            format!(
                "n8n refreshed its queue gauges every ≈ {r:.0} s: each {:.0} s window's throughput is known to ± {:.0} %",
                h.window_s,
                r / h.window_s * 100.0
            ),
        )
        .figure("queue_refresh_s", r)
        .figure("window_s", h.window_s)
        .evidence(format!(
            "at the busiest window's {top:.2} completions/s, ± {:.2}/s",
            top * r / h.window_s
        ))
        .why("The completion counter and the slots/waiting gauges move once per N8N_METRICS_QUEUE_METRICS_INTERVAL (20 s by default): a window sees a few values, and a short peak between two refreshes is not seen at all.")
        .fix("set N8N_METRICS_QUEUE_METRICS_INTERVAL=5 (or lower) on main for a finer history"),
    );
}

fn resets_and_gaps(h: &History, out: &mut Vec<Finding>) {
    if !h.resets.is_empty() {
        let mut f = Finding::new(
            FindingId::CounterReset,
            format!(
                "{} counter reset(s): a process restarted (or two answer behind one target)",
                h.resets.len()
            ),
        )
        .figure("resets", h.resets.len() as f64);
        for r in h.resets.iter().take(10) {
            f = f.evidence(format!(
                "{} fell from {:.2} to {:.2} at {}: that step counts nothing",
                r.series,
                r.from,
                r.to,
                clock(r.at)
            ));
        }
        out.push(f.why("A counter that falls starts again from zero with a new process: the step across it is no measurement, and the restart itself is worth knowing (OOM kills, crashes).").fix("find why the process restarted (its logs, the orchestrator's events)"));
    }
    if h.gap_steps > 0 || !h.warnings.is_empty() {
        let mut f = Finding::new(
            FindingId::HistoryGaps,
            format!(
                "{} step(s) of the series had no usable sample; Prometheus warned {} time(s)",
                h.gap_steps,
                h.warnings.len()
            ),
        )
        .figure("gap_steps", h.gap_steps as f64)
        .figure("warnings", h.warnings.len() as f64);
        for g in h.gaps.iter().take(5) {
            f = f.evidence(format!(
                "{} {}–{}: {}",
                g.series,
                clock(g.from),
                clock(g.to),
                g.reason
            ));
        }
        for w in h.warnings.iter().take(3) {
            f = f.evidence(format!("Prometheus: {w} (partial data)"));
        }
        out.push(f.why("A step without a sample (a failed scrape, a target down, a value no counter can hold) counts in no window: the windows' figures cover only the steps that were there."));
    }
}
