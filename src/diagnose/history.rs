//! Production history judged like a sweep: the busy windows (the highest-throughput windows and
//! those where jobs waited) become open-model levels — arrivals = completions + the waiting's
//! growth, throughput = completions, time in the system = (slots taken + waiting) ÷ throughput
//! (Little's law), CPU per process — and go through the same verdict, inference and
//! recommendation. What each window shows of saturation is said per window; a queue that holds
//! jobs while slots sit free is `queue-stalled`; resets, gaps, Prometheus' warnings and how
//! coarse n8n's 20 s gauge refresh makes the verdict are findings of their own.

use super::{diagnose, Inputs};
use crate::findings::{Finding, FindingId};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::DEFAULT_OVERHEAD_S;
use crate::record::diagnosis::Diagnosis;
use crate::record::history::{History, Window, WindowEvidence};
use crate::record::stage::{
    DbPoolObserved, EndpointObserved, HistoryFigures, Latency, QueueObserved, QueueSource,
};
use crate::record::{LoadModel, Role, StageResult};

/// A window at least this share of the highest throughput is busy.
const BUSY_SHARE: f64 = 0.8;
/// Waiting below this many jobs on average is no queue.
const WAITED: f64 = 1.0;
/// One Node process's JavaScript runs on one core.
use super::cpu::SATURATED_SHARE as NODE_CORE_BOUND;

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

/// Windows as one open-model stage: what arrived, what completed, slots and waiting from the
/// gauges, time in the system by Little's law, CPU per process. A saturated period is pooled
/// into one stage: its completions over the time between its first and last refresh tick (the
/// windows tile tick to tick), so its rate is the period's, never its best window's; the
/// interval holds the ends' tick uncertainty and the spread between the windows.
pub fn stage(i: usize, ws: &[&Window], h: &History) -> StageResult {
    let (first, last) = (ws[0], ws[ws.len() - 1]);
    let label = if ws.len() == 1 {
        format!("window {}–{}", clock(first.start), clock(last.end))
    } else {
        format!(
            "saturated period {}–{} ({} windows)",
            clock(first.start),
            clock(last.end),
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

fn clock(t: f64) -> String {
    if !(0.0..253_402_300_800.0).contains(&t) {
        return format!("{t:.0}");
    }
    crate::util::utc_rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t))
}

/// A busy window where jobs waited in Redis while the workers were up and taking them, or
/// where main's one thread was at its CPU bound (its intake): the stack was at its ceiling.
fn saturated(w: &Window) -> bool {
    let intake = w
        .cpu
        .iter()
        .any(|c| c.role == Role::Main && c.cores >= NODE_CORE_BOUND);
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

/// The service time of a history's stages: the slot time n8n's execution histogram measured
/// where nothing waited (the job time it recorded), else the job or Code time given, never
/// above the slot time measured at saturation, else that slot time itself — which may hold
/// time spent waiting for a runner, and is said so.
pub fn service_time(stages: &[StageResult], s: &Settings) -> Option<(Sourced<f64>, f64)> {
    // The job time the history measured (n8n's histogram where nothing waited), not one given.
    let measured = |p: &Provenance| matches!(p, Provenance::Measured(_));
    if let Some(j) = s.job_time.as_ref().filter(|j| measured(&j.source)) {
        return Some((
            Sourced::new(
                j.value,
                Provenance::Measured(format!(
                    "{} (the slot time of an execution that waited for nothing)",
                    j.source
                )),
            ),
            0.0,
        ));
    }
    let at_saturation = stages
        .iter()
        .filter(|st| st.queue.as_ref().is_some_and(|q| q.waiting_mean >= WAITED))
        .filter_map(|st| st.history.and_then(|h| h.slot_time_s))
        .reduce(f64::min);
    let given = s
        .job_time
        .as_ref()
        .map(|j| (j.value, "the job time given"))
        .or(s
            .code_time
            .as_ref()
            .map(|c| (c.value, "the Code time given (a workflow of one Code node)")));
    match (given, at_saturation) {
        (Some((g, what)), d) => {
            let assumed = g + DEFAULT_OVERHEAD_S;
            let v = d.map_or(assumed, |d| assumed.min(d.max(g)));
            Some((
                Sourced::new(
                    v,
                    Provenance::Assumed(format!("{what}, {g:.3} s, with n8n's overhead, at most the slot time measured at saturation")),
                ),
                (v - g).max(0.0),
            ))
        }
        (None, Some(d)) => Some((
            Sourced::new(
                d,
                Provenance::Inferred(format!("{HISTOGRAM} at saturation: the time an execution held its slot, which may include waiting for a runner task (give --code-time or --job-time to tell)")),
            ),
            0.0,
        )),
        (None, None) => None,
    }
}

const HISTOGRAM: &str = "n8n_workflow_execution_duration_seconds";

/// The history judged: its busy windows as levels (saturated periods pooled), through the same
/// verdict; findings of the history's own added.
pub fn judge(
    h: &mut History,
    flags: Settings,
    timeout_s: Option<f64>,
) -> (Diagnosis, Vec<StageResult>) {
    let settings = known(flags.clone(), h);
    mark(h, &settings);
    let stages = stages(h);
    let inputs = Inputs {
        service_time: super::ServiceTime::of(&stages, &settings),
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
    gauges_above_settings(h, &flags, &mut extra);
    if let Some(more) = slots_bind(&stages, h, &d, &mut extra) {
        d.verdict.push(' ');
        d.verdict.push_str(&more);
    }
    extra.append(&mut d.findings);
    extra.sort_by_key(|f| std::cmp::Reverse(f.severity));
    d.findings = extra;
    (d, stages)
}

/// Little's law at the slots, from what n8n exposes: over the saturated stages pooled (each
/// weighted by its windows), completions/s × the slot time of n8n's execution histogram against
/// the slots the gauge says were taken while jobs waited. Holding, it is direct evidence that
/// the slots are where executions queue; failing, one of the two readings is wrong, and it is
/// said. Answers the words the verdict needs when the slot time alone cannot say what fills a
/// slot.
fn slots_bind(
    stages: &[StageResult],
    h: &History,
    d: &Diagnosis,
    out: &mut Vec<Finding>,
) -> Option<String> {
    let held: Vec<Held> = stages
        .iter()
        .filter_map(|st| {
            let q = st
                .queue
                .as_ref()
                .filter(|q| q.waiting_mean >= WAITED && q.samples > 0)?;
            let figures = st.history.as_ref()?;
            Some((st, q, figures.slot_time_s?, figures.windows.max(1) as f64))
        })
        .collect();
    let weight: f64 = held.iter().map(|h| h.3).sum();
    if held.is_empty() || weight <= 0.0 {
        return None;
    }
    let mean = |f: &dyn Fn(&Held) -> f64| held.iter().map(|h| f(h) * h.3).sum::<f64>() / weight;
    let x = mean(&|h| h.0.throughput_rps);
    let in_slots = mean(&|h| h.0.throughput_rps * h.2);
    let slot = in_slots / x.max(1e-9);
    let q = QueueObserved {
        active_mean: mean(&|h| h.1.active_mean),
        waiting_mean: mean(&|h| h.1.waiting_mean),
        ..Default::default()
    };
    let labels: Vec<&str> = held.iter().map(|h| h.0.label.as_str()).collect();
    let ratio = in_slots / q.active_mean.max(1e-9);
    let at = format!(
        "{x:.2} completions/s × slot time {slot:.3} s = {in_slots:.1} executions in slots; the gauge: {:.1} slots taken while {:.1} jobs waited ({})",
        q.active_mean,
        q.waiting_mean,
        labels.join(", ")
    );
    // A gauge refreshed every r s lags the load's edges by up to r: over the time pooled, that
    // moves its mean by up to r ÷ that time, beside the law's own tolerance.
    let pooled_s = weight * h.window_s;
    let lag = h.queue_refresh_s.unwrap_or(0.0).max(0.0) / pooled_s.max(1e-9);
    let tolerance = LITTLE_AT_SLOTS + lag.min(1.0);
    if (ratio - 1.0).abs() > tolerance {
        out.push(
            Finding::new(
                FindingId::SettingsDisagree,
                format!(
                    "Little's law at the slots fails: {in_slots:.1} executions in slots by the counter and the histogram, {:.1} by the slots gauge",
                    q.active_mean
                ),
            )
            .evidence(at)
            .figure("executions_in_slots", in_slots)
            .figure("slots_taken", q.active_mean)
            .fix("one reading is wrong: a stale gauge (main's N8N_METRICS_QUEUE_METRICS_INTERVAL against the window), or a selector that holds executions of other deployments in the histogram"),
        );
        return None;
    }
    let ambiguous = d
        .service_time
        .as_ref()
        .is_some_and(|s| !matches!(s.source, Provenance::Measured(_)));
    let mut f = Finding::new(
        FindingId::SlotsBind,
        format!(
            "Little's law at the slots: {in_slots:.1} executions held slots ≈ the {:.1} slots taken while jobs waited: the slots are where executions queue",
            q.active_mean
        ),
    )
    .evidence(at)
    .figure("throughput_per_s", x)
    .figure("slot_time_s", slot)
    .figure("executions_in_slots", in_slots)
    .figure("slots_taken", q.active_mean)
    .figure("waiting", q.waiting_mean);
    let more = ambiguous.then(|| {
        let why = format!(
            "Whether a slot's {slot:.2} s is the workflow's own work or work plus waiting for a runner task, n8n's metrics cannot tell (n8n exposes no runner metric): give --code-time (or --runner-limit) to tell."
        );
        f = f.clone().evidence(why.clone());
        why
    });
    out.push(f);
    more
}

/// A saturated stage Little's law at the slots pools: the stage, its queue, its slot time and
/// the windows it pooled (its weight).
type Held<'a> = (&'a StageResult, &'a QueueObserved, f64, f64);

/// Little's law at the slots holds within this share (the gauge's refresh against the window).
const LITTLE_AT_SLOTS: f64 = 0.2;

/// Slots taken above what the settings given allow: the settings are not the ones running
/// (or the selector holds more workers than were counted).
fn gauges_above_settings(h: &History, flags: &Settings, out: &mut Vec<Finding>) {
    let Some(c) = &flags.worker_concurrency else {
        return;
    };
    let slots = c.value as f64 * flags.worker_count() as f64;
    let Some(w) = h
        .windows
        .iter()
        .filter(|w| w.samples > 0)
        .max_by(|a, b| a.active_mean.total_cmp(&b.active_mean))
        .filter(|w| w.active_mean > slots * 1.05 + 0.5)
    else {
        return;
    };
    out.push(
        Finding::new(
            FindingId::SettingsDisagree,
            format!(
                "n8n's slots gauge read {:.1} slots taken on average, more than the {slots:.0} the settings given allow",
                w.active_mean
            ),
        )
        .evidence(format!(
            "{}–{}: n8n_scaling_mode_queue_jobs_active {:.1} on average (at most {:.0}); worker concurrency {} × {} worker(s) ({})",
            clock(w.start),
            clock(w.end),
            w.active_mean,
            w.active_max,
            c.value,
            flags.worker_count(),
            c.source
        ))
        .figure("slots_taken", w.active_mean)
        .figure("worker_slots", slots)
        .fix("check --worker-concurrency and --workers against the deployment (n8ncap inspect reads them); the verdict follows the gauges"),
    );
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

#[cfg(test)]
mod tests;
