//! Production history judged like a sweep: its stages (made by its source,
//! `observe::history::stages`: the busy windows as open-model levels, each saturated period
//! pooled) go through the same verdict, inference and recommendation, with the service time
//! from n8n's slot times. What the windows show beyond the stages are findings of their own: a
//! queue that holds jobs while slots sit free is `queue-stalled`; resets, gaps, Prometheus'
//! warnings and how coarse n8n's 20 s gauge refresh makes the verdict; slots gauges above the
//! settings; Little's law at the slots.

use super::{diagnose, Inputs};
use crate::findings::{Finding, FindingId};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::{DEFAULT_OVERHEAD_S, WAITED_JOBS as WAITED};
use crate::record::diagnosis::Diagnosis;
use crate::record::evidence::Evidence;
use crate::record::history::{History, Window, WindowEvidence};
use crate::record::stage::QueueObserved;
use crate::record::StageResult;

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

/// A history's evidence judged: its stages through the same diagnosis as a run's, with the
/// settings its source knew; the findings of its windows added, and the verdict says the range
/// it read. `flags` are the settings given (a slots gauge above them is a finding).
pub fn judge_windows(ev: &Evidence, flags: &Settings, timeout_s: Option<f64>) -> Diagnosis {
    let settings = ev.summary.settings.clone().unwrap_or_default();
    let stages = &ev.summary.stages;
    let inputs = Inputs {
        service_time: super::ServiceTime::of(stages, &settings),
        settings,
        task_request_timeout_s: timeout_s,
        ..Inputs::default()
    };
    let mut d = diagnose(stages, &inputs);
    let Some(h) = &ev.windows else {
        return d;
    };
    let busy = h.windows.iter().filter(|w| w.busy).count();
    d.verdict = format!(
        "From Prometheus history ({busy} busy window(s) of {:.0} s in {}–{}): {}",
        h.window_s,
        crate::util::clock(h.start),
        crate::util::clock(h.end),
        d.verdict
    );
    if busy == 0 {
        d.verdict = format!(
            "From Prometheus history ({}–{}): no window saw load — no completions in n8n_scaling_mode_queue_jobs_completed{}.",
            crate::util::clock(h.start),
            crate::util::clock(h.end),
            if h.windows.is_empty() { " (no series matched: check --match and that main exposes the queue metrics)" } else { "" }
        );
    }
    let mut extra = Vec::new();
    stalled(h, &mut extra);
    coarse(h, &mut extra);
    resets_and_gaps(h, &mut extra);
    gauges_above_settings(h, flags, &mut extra);
    if let Some(more) = slots_bind(stages, h, &d, &mut extra) {
        d.verdict.push(' ');
        d.verdict.push_str(&more);
    }
    extra.append(&mut d.findings);
    extra.sort_by_key(|f| std::cmp::Reverse(f.severity));
    d.findings = extra;
    d
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
            crate::util::clock(w.start),
            crate::util::clock(w.end),
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
            crate::util::clock(first.start)
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
            crate::util::clock(win.start),
            crate::util::clock(win.end),
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
                crate::util::clock(r.at)
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
                crate::util::clock(g.from),
                crate::util::clock(g.to),
                g.reason
            ));
        }
        for w in h.warnings.iter().take(3) {
            f = f.evidence(format!("Prometheus: {w} (partial data)"));
        }
        out.push(f.why("A step without a sample (a failed scrape, a target down, a value no counter can hold) counts in no window: the windows' figures cover only the steps that were there."));
    }
}

pub(crate) mod contention;
#[cfg(test)]
mod tests;
