//! A history as evidence: its windows marked (busy, what each shows of saturation) and made
//! into open-model stages — arrivals = completions + the waiting's growth, throughput =
//! completions, time in the system = (slots taken + waiting) ÷ throughput (Little's law), CPU
//! and the database pool per process — each saturated period pooled into one stage; the
//! settings the history itself gives (the exporter's, the job time where nothing waited, the
//! workers counted). A whole range is [`super::Range`], a [`Source`]; each worker count's part
//! of one is [`by_workers`].
//!
//! Not here: judging the stages (`diagnose::history`).

use crate::model::settings::{Provenance, Settings, Sourced};
use crate::model::{SATURATED_SHARE, WAITED_JOBS as WAITED};
use crate::record::evidence::Evidence;
#[cfg(doc)]
use crate::record::evidence::Source;
use crate::record::history::{History, HostCpu, Window, WindowEvidence};
use crate::record::stage::{
    DbPoolObserved, EndpointObserved, HistoryFigures, Latency, QueueObserved, QueueSource,
};
use crate::record::{LoadModel, Role, StageResult, Summary};

/// The history as evidence under `flags`: the settings it is judged with ([`known`]), its
/// windows marked, its stages.
pub fn evidence(mut h: History, flags: Settings, title: &str) -> Evidence {
    let settings = known(flags, &h);
    mark(&mut h, &settings);
    let mut summary = Summary::new(
        title,
        LoadModel::Open,
        "",
        None,
        std::time::SystemTime::now(),
    );
    summary.stages = stages(&h);
    summary.settings = Some(settings);
    Evidence {
        summary,
        windows: Some(h),
    }
}

/// The counts the history's windows held, fewest first, each with its windows; a window
/// where workers came or went belongs to none. Nor does the first window after the count
/// changed (or was not known): it holds the change's wake — the count before's backlog
/// draining, a load paused for the step, a new worker not yet taking jobs — and its rate is the
/// step's, not the count's (a CI run read 2 workers at 4.2/s from such a window, for 7.0/s
/// steady). A count seen in no window but such ones keeps them: the history has no better.
pub fn split(h: &History) -> Vec<(u32, History)> {
    let mut counts: Vec<u32> = h.windows.iter().filter_map(|w| w.workers).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .map(|n| {
            let held = |i: usize| h.windows[i].workers == Some(n);
            let steady = |i: usize| i > 0 && held(i) && held(i - 1);
            let any_steady = (0..h.windows.len()).any(steady);
            let mut part = h.with_windows(|_| false);
            part.windows = (0..h.windows.len())
                .filter(|&i| if any_steady { steady(i) } else { held(i) })
                .map(|i| h.windows[i].clone())
                .collect();
            (n, part)
        })
        .collect()
}

/// One worker count's windows of a history read once: a run at that count, as an evidence
/// source (its stages made from those windows, with the count read from the history in place
/// of any other in the flags).
pub struct AtWorkers {
    pub workers: u32,
    part: History,
    flags: Settings,
    title: String,
}

impl crate::record::evidence::Source for AtWorkers {
    async fn evidence(self) -> anyhow::Result<Evidence> {
        Ok(evidence(self.part, self.flags, &self.title))
    }
}

/// Each worker count the history held, fewest first, as a run at that count. The job time is
/// the whole range's where nothing waited (unless given): a count's own quiet windows may all be
/// at load already — lab 2's 3 workers were never quiet under 0.49 s for the workflow's 0.42 s,
/// which hid the host's contention from that count.
pub fn by_workers(h: &History, flags: &Settings, title: &str) -> Vec<AtWorkers> {
    let by = h.workers_by.clone().unwrap_or_default();
    let whole = settings(h).job_time.map(|j| {
        Sourced::new(
            j.value,
            j.source
                .with_note(" (over the whole range, every worker count)"),
        )
    });
    split(h)
        .into_iter()
        .map(|(n, part)| {
            let mut f = flags.clone();
            if f.job_time.is_none() {
                f.job_time = whole.clone();
            }
            f.workers = Some(Sourced::new(
                n,
                Provenance::Measured(format!(
                    "Prometheus: {n} worker(s) by {by} through {} window(s)",
                    part.windows.len()
                )),
            ));
            AtWorkers {
                workers: n,
                part,
                flags: f,
                title: format!("{title} ({n} workers)"),
            }
        })
        .collect()
}

/// A window at least this share of the highest throughput is busy.
const BUSY_SHARE: f64 = 0.8;

/// Settings the history itself gives: the exporter's, and the job time from the execution
/// durations of windows where nothing waited.
pub fn settings(h: &History) -> Settings {
    let mut s = Settings::default();
    if let Some(e) = &h.exporter {
        let src = || Provenance::Measured("n8ncap exporter series in Prometheus".into());
        s.workers = Some(Sourced::new(e.workers.max(1), src()));
        s.worker_concurrency = e.worker_concurrency.map(|c| Sourced::new(c, src()));
        if let Some(r) = e.runner_capacity {
            s.runner_limit = Some(Sourced::new(r, src()));
            s.runners_per_worker = Some(Sourced::new(1, src()));
        }
    }
    let workers = h
        .processes
        .iter()
        .filter(|p| p.role == Role::Worker)
        .count() as u32;
    if s.workers.is_none() && workers > 0 {
        s.workers = Some(Sourced::new(
            workers,
            Provenance::Measured(format!(
                "Prometheus: {workers} worker process(es) with n8n's process metrics"
            )),
        ));
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
            Provenance::Measured(format!(
                "n8n_workflow_execution_duration_seconds: the shortest mean of {} window(s) where no job waited",
                calm.len()
            )),
        ));
    }
    s
}

/// The settings a history is judged with, and recorded with its windows: the flags, then what
/// the history gives; the Code time alone stands for the job (a workflow of one Code node, as
/// a sweep takes it).
pub fn known(flags: Settings, h: &History) -> Settings {
    let mut s = flags.or(settings(h));
    if s.job_time.is_none() {
        s.job_time = s.code_time.as_ref().map(|c| {
            Sourced::new(
                c.value,
                c.source.with_note(" (the job taken as its one Code node)"),
            )
        });
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
    // The busiest window by what it surely did (its interval's low end): one window read high
    // by its ticks' uncertainty does not make the windows at the real ceiling look idle.
    let top = h
        .windows
        .iter()
        .map(|w| w.throughput_interval[0].min(w.throughput_per_s))
        .fold(0.0, f64::max);
    let top = match top > 0.0 {
        true => top,
        false => h
            .windows
            .iter()
            .map(|w| w.throughput_per_s)
            .fold(0.0, f64::max),
    };
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
        if w.cpu.iter().any(|c| c.cores >= SATURATED_SHARE) {
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

/// Windows as one open-model stage: what arrived, what completed, slots and waiting from the
/// gauges, time in the system by Little's law, CPU per process. A saturated period is pooled
/// into one stage: its completions over the time between its first and last refresh tick (the
/// windows tile tick to tick), so its rate is the period's, never its best window's; the
/// interval holds the ends' tick uncertainty and the spread between the windows.
pub fn stage(i: usize, ws: &[&Window], h: &History) -> StageResult {
    let (first, last) = (ws[0], ws[ws.len() - 1]);
    let label = if ws.len() == 1 {
        format!(
            "window {}–{}",
            crate::util::clock(first.start),
            crate::util::clock(last.end)
        )
    } else {
        format!(
            "saturated period {}–{} ({} windows)",
            crate::util::clock(first.start),
            crate::util::clock(last.end),
            ws.len()
        )
    };
    let mut st = StageResult::empty(i, label, LoadModel::Open);
    let sum = |f: &dyn Fn(&Window) -> f64| ws.iter().map(|w| f(w)).sum::<f64>();
    let covered = sum(&|w| w.covered_s).max(1e-9);
    let (completions, failures) = (sum(&|w| w.completions), sum(&|w| w.failures));
    let grew = (last.waiting_end - first.waiting_start).max(0.0);
    let x = completions / covered;
    let samples = sum(&|w| w.samples as f64).max(1.0);
    let by_samples = |f: &dyn Fn(&Window) -> f64| sum(&|w| f(w) * w.samples as f64) / samples;
    let (active, waiting) = (
        by_samples(&|w| w.active_mean),
        by_samples(&|w| w.waiting_mean),
    );
    let arrivals = completions + failures + grew;
    st.rate = Some((arrivals / covered).max(x));
    st.duration_s = last.end - first.start;
    st.window_s = covered;
    st.requests = (completions + failures).round() as u64;
    st.ok = completions.round() as u64;
    st.throughput_rps = x;
    st.request_rate = (completions + failures) / covered;
    st.throughput_ci = Some(if ws.len() == 1 {
        first.throughput_interval
    } else {
        pooled_interval(x, covered, ws, h)
    });
    st.error_rate = if st.requests > 0 {
        failures / (completions + failures)
    } else {
        0.0
    };
    st.check_pass_rate = 1.0 - st.error_rate;
    if x > 0.0 {
        let r_ms = (active + waiting) / x * 1000.0;
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
    let executions = sum(&|w| w.executions);
    st.history = Some(HistoryFigures {
        windows: ws.len() as u32,
        slot_time_s: (executions > 0.0)
            .then(|| sum(&|w| w.execution_s.unwrap_or(0.0) * w.executions) / executions),
        executions,
        host: host(ws),
    });
    st.queue = Some(QueueObserved {
        source: QueueSource::Metrics,
        active_mean: active,
        active_max: ws.iter().map(|w| w.active_max).fold(0.0, f64::max),
        waiting_mean: waiting,
        waiting_max: ws.iter().map(|w| w.waiting_max).fold(0.0, f64::max),
        active_while_waiting: while_waiting(ws),
        samples: samples as u32,
        gaps: ws.iter().map(|w| w.gaps).sum(),
        coarse: false,
        ..Default::default()
    });
    st.endpoints = endpoints(ws);
    st
}

/// The pooled rate's interval: the two ends' refresh-tick uncertainty over the whole period
/// (one refresh's worth on the step grid), and the spread between its windows (Student's t).
fn pooled_interval(x: f64, covered: f64, ws: &[&Window], h: &History) -> [f64; 2] {
    let ends = if ws.iter().all(|w| w.between_ticks) {
        2.0 * h.tick_half_width_s.unwrap_or(0.0)
    } else {
        h.queue_refresh_s.unwrap_or(h.step_s.value)
    };
    let edges = x * ends / covered;
    // The spread between the windows, as the standard error of their mean at 95 % (normal:
    // each window counts hundreds of completions, and Student's t on three or four windows
    // would make the count itself — exact — look vaguer than the variation it describes).
    let rates: Vec<f64> = ws.iter().map(|w| w.throughput_per_s).collect();
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let spread = 1.96 * (var / n).sqrt();
    let half = (edges * edges + spread * spread).sqrt();
    [(x - half).max(0.0), x + half]
}

/// Each process's CPU over the windows (mean cores, highest memory and lag), and its database
/// pool (the gauges' means over every step read, their peaks).
fn endpoints(ws: &[&Window]) -> Vec<EndpointObserved> {
    type Acc = (Role, Vec<f64>, f64, f64, Vec<DbPoolObserved>);
    let mut by: std::collections::BTreeMap<String, Acc> = std::collections::BTreeMap::new();
    for w in ws {
        for c in &w.cpu {
            let e =
                by.entry(c.process.clone())
                    .or_insert((c.role, Vec::new(), 0.0, 0.0, Vec::new()));
            e.1.push(c.cores);
            e.2 = e.2.max(c.rss_max_bytes.unwrap_or(0.0));
            e.3 = e.3.max(c.eventloop_lag_max_s.unwrap_or(0.0));
            e.4.extend(c.db_pool.as_deref().cloned());
        }
    }
    let samples = ws.iter().map(|w| w.samples).sum::<u32>().max(1);
    by.into_iter()
        .map(|(url, (role, cores, rss, lag, pools))| EndpointObserved {
            url,
            role: Some(role),
            samples,
            cpu_percent_mean: cores.iter().sum::<f64>() / cores.len().max(1) as f64 * 100.0,
            rss_max_bytes: rss,
            rss_mean_bytes: rss,
            eventloop_lag_max_s: lag,
            eventloop_lag_mean_s: lag,
            db_pool: pooled(&pools),
            ..EndpointObserved::default()
        })
        .collect()
}

/// The host's busy cores over the windows that read them (by their length), and its cores.
fn host(ws: &[&Window]) -> Option<HostCpu> {
    let read: Vec<(f64, HostCpu)> = ws
        .iter()
        .filter_map(|w| w.host.map(|h| (w.end - w.start, h)))
        .collect();
    let span: f64 = read.iter().map(|(s, _)| s).sum();
    (span > 0.0).then(|| HostCpu {
        busy_cores: read.iter().map(|(s, h)| s * h.busy_cores).sum::<f64>() / span,
        cores: read.iter().map(|(_, h)| h.cores).fold(0.0, f64::max),
        processes_only: read.iter().any(|(_, h)| h.processes_only),
    })
}

/// The windows' slots taken while jobs waited, weighted by the steps each read.
fn while_waiting(ws: &[&Window]) -> Option<f64> {
    let n: f64 = ws.iter().map(|w| w.waited_samples as f64).sum();
    let total: f64 = ws
        .iter()
        .filter_map(|w| Some(w.active_while_waiting? * w.waited_samples as f64))
        .sum();
    (n > 0.0).then(|| total / n)
}

/// Windows' pool figures as one: means weighted by the steps each read, peaks kept.
fn pooled(pools: &[DbPoolObserved]) -> Option<DbPoolObserved> {
    let n: f64 = pools.iter().map(|p| p.samples as f64).sum();
    if n <= 0.0 {
        return None;
    }
    let mean = |f: fn(&DbPoolObserved) -> f64| {
        pools.iter().map(|p| f(p) * p.samples as f64).sum::<f64>() / n
    };
    let top = |f: fn(&DbPoolObserved) -> f64| pools.iter().map(f).fold(0.0, f64::max);
    Some(DbPoolObserved {
        max: top(|p| p.max),
        active_mean: mean(|p| p.active_mean),
        active_max: top(|p| p.active_max),
        pending_mean: mean(|p| p.pending_mean),
        pending_max: top(|p| p.pending_max),
        samples: n as u32,
        gaps: pools.iter().map(|p| p.gaps).sum(),
        ..DbPoolObserved::default()
    })
}

/// A busy window where jobs waited in Redis while the workers were up and taking them, or
/// where main's one thread was at its CPU bound (its intake): the stack was at its ceiling.
fn saturated(w: &Window) -> bool {
    let intake = w
        .cpu
        .iter()
        .any(|c| c.role == Role::Main && c.cores >= SATURATED_SHARE);
    w.busy
        && (w.waiting_mean >= WAITED || intake)
        && !w.evidence.contains(&WindowEvidence::QueueStalled)
}

/// The stages of a history: each run of adjacent saturated windows pooled into one stage,
/// every other busy window a stage of its own, in time order.
pub fn stages(h: &History) -> Vec<StageResult> {
    let busy: Vec<&Window> = h
        .windows
        .iter()
        .filter(|w| w.busy && w.throughput_per_s > 0.0)
        .collect();
    let mut groups: Vec<Vec<&Window>> = Vec::new();
    for w in busy {
        match groups.last_mut() {
            Some(g)
                if saturated(w)
                    && g.iter().all(|p| saturated(p))
                    && (g[g.len() - 1].end - w.start).abs() < 1e-6 =>
            {
                g.push(w)
            }
            _ => groups.push(vec![w]),
        }
    }
    let groups: Vec<Vec<&Window>> = groups.into_iter().flat_map(trim).collect();
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| stage(i, g, h))
        .collect()
}

/// A saturated period's first and last windows hold the load's arrival and departure: those
/// under [`EDGE_SHARE`] of the period's median rate are stages of their own, not pooled.
fn trim(g: Vec<&Window>) -> Vec<Vec<&Window>> {
    // Two windows: one of them is an edge, and the higher is the median.
    if g.len() < 2 {
        return vec![g];
    }
    let mut rates: Vec<f64> = g.iter().map(|w| w.throughput_per_s).collect();
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let full = |w: &&Window| w.throughput_per_s >= EDGE_SHARE * median;
    let from = g.iter().position(full).unwrap_or(0);
    let to = g.iter().rposition(full).map_or(g.len(), |i| i + 1);
    let mut out: Vec<Vec<&Window>> = g[..from].iter().map(|w| vec![*w]).collect();
    out.push(g[from..to].to_vec());
    out.extend(g[to..].iter().map(|w| vec![*w]));
    out
}

/// See [`trim`]: a window between ticks is a few per cent off the period's rate at most.
const EDGE_SHARE: f64 = 0.9;
