//! Load levels: stages grouped by level (repeats merged), the service time S, and which levels
//! are saturated.
//!
//! The saturation rule (Little's law): in a closed loop N = X × R̄. Below the ceiling every
//! request is served at once and R̄ stays at the service time S (job time + n8n's overhead);
//! once a limit binds, requests queue and R̄ = N ÷ X_max grows with N. A level whose mean
//! response exceeds [`SATURATION_RATIO`] × S is therefore at the ceiling, and its throughput is
//! the capacity — whatever the other levels did, so one level (a single k6 run) is enough. A
//! level where jobs waited in Redis, or (open model) whose completions fell short of the offered
//! rate or dropped arrivals, is saturated too.

use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::DEFAULT_OVERHEAD_S;
use crate::record::diagnosis::{Level, SaturationSign};
use crate::record::{Estimate, LoadLevel, LoadModel, StageResult};

pub use crate::model::SATURATION_RATIO;

/// Open model: completions below this share of the offered rate mean the stack could not keep
/// up.
const OFFERED_SHARE: f64 = 0.9;

pub fn saturation_rule() -> String {
    format!(
        "a level is saturated when its mean response exceeds {SATURATION_RATIO} × the service time S \
         (Little's law: below the ceiling R = S, above it R = N ÷ X_max), when jobs waited in Redis, \
         or (open model) when completions fell under {:.0} % of the offered rate or arrivals were dropped",
        OFFERED_SHARE * 100.0
    )
}

/// Groups stages by load level (repeats of one level are consecutive).
pub fn group(stages: &[StageResult]) -> Vec<Level> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < stages.len() {
        // A ramp window is no load level (see `ramp`).
        if stages[i].ramp.is_some() {
            i += 1;
            continue;
        }
        let level = stages[i].level();
        let mut j = i + 1;
        while j < stages.len() && stages[j].level() == level && stages[j].repeat > 0 {
            j += 1;
        }
        out.push(merge(level, i, &stages[i..j]));
        i = j;
    }
    out
}

fn merge(level: LoadLevel, first: usize, group: &[StageResult]) -> Level {
    // A partial stage counts only when it is all there is.
    let kept: Vec<&StageResult> = group
        .iter()
        .filter(|s| !s.partial || group.len() == 1)
        .collect();
    let valid: Vec<&StageResult> = kept.iter().copied().filter(|s| s.valid).collect();
    let used = if valid.is_empty() { &kept } else { &valid };
    let mean_over = |f: &dyn Fn(&StageResult) -> Option<f64>| {
        let v: Vec<f64> = used.iter().filter_map(|s| f(s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // Gauges refreshed less often than the stage lasted may describe another level: not used.
    let queue = |s: &StageResult| s.queue.clone().filter(|q| q.samples > 0 && !q.coarse);
    let (throughput, counted) = pooled_throughput(used);
    let impossible = used.iter().find_map(|s| impossible(s));
    let mean_ms = mean_over(&|s| s.latency.as_ref().map(|l| l.mean_ms));
    let in_flight = match level {
        LoadLevel::InFlight(n) => n as f64,
        // Little's law on the open model: what was in flight on average.
        LoadLevel::Rate(_) => throughput.mean * mean_ms.unwrap_or(0.0) / 1000.0,
    };
    let offered_short = match level {
        LoadLevel::Rate(r) => {
            used.iter().any(|s| s.dropped_iterations > 0)
                || (r > 0.0 && throughput.mean < OFFERED_SHARE * r)
        }
        LoadLevel::InFlight(_) => false,
    };
    let waiting = mean_over(&|s| queue(s).map(|q| q.waiting_mean));
    let mut saturated_by = Vec::new();
    if waiting.is_some_and(|w| w >= 1.0) {
        saturated_by.push(SaturationSign::JobsWaitedInRedis);
    }
    if offered_short {
        saturated_by.push(SaturationSign::ThroughputBelowOfferedRate);
    }
    if used.iter().any(|s| intake_at_bound(s)) {
        saturated_by.push(SaturationSign::IntakeAtCpuBound);
    }
    Level {
        level,
        stages: (first..first + group.len()).collect(),
        valid: !kept.is_empty() && kept.iter().all(|s| s.valid) && impossible.is_none(),
        throughput,
        counted,
        requests: used.iter().map(|s| s.requests).sum(),
        mean_ms,
        p50_ms: mean_over(&|s| s.latency.as_ref().map(|l| l.p50_ms)),
        p95_ms: pooled_p95(used),
        slots_taken: mean_over(&|s| queue(s).map(|q| q.active_mean)),
        slots_full: mean_over(&|s| queue(s)?.active_while_waiting),
        executions_in_slots: mean_over(&|s| {
            Some(s.history.as_ref()?.slot_time_s? * s.throughput_rps)
        }),
        waiting,
        error_rate: mean_over(&|s| Some(s.error_rate)).unwrap_or(0.0),
        client_cpu_percent: mean_over(&|s| Some(s.client_cpu_percent)).unwrap_or(0.0),
        in_flight,
        response_ratio: None,
        saturated_by,
        impossible,
        stack_changed: None,
        window: used
            .first()
            .filter(|s| s.history.is_some())
            .map(|s| s.label.clone()),
    }
}

/// A level's throughput from its stages: one window with its own interval (k6 time series)
/// keeps it, repeats give Student's t; and the executions counted over the seconds measured.
fn pooled_throughput(used: &[&StageResult]) -> (Estimate, Option<[f64; 2]>) {
    let xs: Vec<f64> = used.iter().map(|s| s.throughput_rps).collect();
    let seconds: f64 = used.iter().map(|s| s.window_s).sum();
    let counted = (seconds > 0.0).then(|| {
        let events: f64 = used.iter().map(|s| s.throughput_rps * s.window_s).sum();
        [events, seconds]
    });
    let throughput = match used {
        [one] => match one.throughput_ci {
            Some(ci) => Estimate::with_interval(one.throughput_rps, ci),
            None => Estimate::of(&xs),
        },
        _ => Estimate::of(&xs),
    };
    let throughput = match counted {
        Some([events, seconds]) => throughput.with_counting(events, seconds),
        None => throughput,
    };
    (throughput, counted)
}

/// How finely a stage's latency was recorded: n8ncap's histograms keep 3 significant figures
/// (`load::stats`), so a p95 is known to 0.1 % at best, whatever its order statistics span.
const LATENCY_RESOLUTION: f64 = 0.001;

/// A level's p95 from its stages: the repeats' spread, and at least the order statistics' of
/// the answers counted and the recording's resolution (answers that took the same time to the
/// histogram's precision leave an interval of that width, never of none).
fn pooled_p95(used: &[&StageResult]) -> Option<Estimate> {
    let p95s: Vec<f64> = used
        .iter()
        .filter_map(|s| s.latency.as_ref().map(|l| l.p95_ms))
        .collect();
    let p95_half: Vec<f64> = used.iter().filter_map(|s| p95_order_half(s)).collect();
    (!p95s.is_empty()).then(|| {
        let e = Estimate::of(&p95s);
        let half = (p95_half.iter().sum::<f64>() / (p95_half.len().max(1) as f64).powf(1.5))
            .max(e.mean * LATENCY_RESOLUTION);
        Estimate {
            low: e.low.min((e.mean - half).max(0.0)),
            high: e.high.max(e.mean + half),
            ..e
        }
    })
}

/// The p95's 95 % interval from one stage's `requests` answers, as order statistics give it:
/// the ranks n × 0.95 ± 1.96 √(n × 0.95 × 0.05), read between the percentiles the stage kept
/// (p50, p90, p95, p99, max) — half its width, or None without latency or answers.
fn p95_order_half(s: &StageResult) -> Option<f64> {
    let l = s.latency.as_ref()?;
    let n = s.requests as f64;
    if n < 1.0 {
        return None;
    }
    let d = 1.96 * (0.95 * 0.05 / n).sqrt();
    let points = [
        (0.5, l.p50_ms),
        (0.9, l.p90_ms),
        (0.95, l.p95_ms),
        (0.99, l.p99_ms),
        (1.0, l.max_ms),
    ];
    let at = |q: f64| {
        let q = q.clamp(0.5, 1.0);
        points
            .windows(2)
            .find(|w| q <= w[1].0)
            .map(|w| {
                let (q0, v0, q1, v1) = (w[0].0, w[0].1, w[1].0, w[1].1);
                v0 + (v1 - v0) * (q - q0) / (q1 - q0)
            })
            .unwrap_or(l.max_ms)
    };
    let half = (at(0.95 + d) - at(0.95 - d)) / 2.0;
    (half.is_finite() && half >= 0.0).then_some(half)
}

/// Little's law over a window is exact up to the requests its edges cut: at most one per
/// virtual user (N of the n counted), plus [`LITTLE_TOLERANCE`] for the mean's noise and the
/// gaps between a user's iterations.
pub const LITTLE_TOLERANCE: f64 = 0.10;

/// Why a stage's figures cannot be true, if they cannot:
/// - closed: more completions than N users allow at the fastest response (X ≤ N ÷ R_min); in
///   flight (X × R̄) above N; or, with iteration figures, X_iter × R̄_iter away from N;
/// - open: arrivals − completions ≠ backlog growth (the window's books).
pub fn impossible(s: &StageResult) -> Option<String> {
    if s.ramp.is_some() || s.requests == 0 || s.window_s <= 0.0 {
        return None;
    }
    if let Some(f) = &s.flow {
        let lhs = f.arrivals as i64 - f.completions as i64;
        let rhs = f.backlog_end as i64 - f.backlog_start as i64;
        return (lhs != rhs).then(|| {
            format!(
                "arrivals {} − completions {} = {lhs}, but the backlog grew by {rhs} ({} → {}): the window's books do not balance",
                f.arrivals, f.completions, f.backlog_start, f.backlog_end
            )
        });
    }
    let (LoadModel::Closed, Some(n)) = (s.model, s.vus) else {
        return None;
    };
    let lat = s.latency.as_ref()?;
    let n = n.max(1) as f64;
    let x = s.request_rate;
    let tol = LITTLE_TOLERANCE + n / s.requests as f64;
    let r_min = lat.min_ms / 1000.0;
    if r_min > 0.0 && x * r_min > n * (1.0 + tol) {
        return Some(format!(
            "{x:.2} req/s from {n:.0} in flight needs responses of {:.3} s at most, but the fastest took {r_min:.3} s (X ≤ N ÷ R_min = {:.2} req/s)",
            n / x,
            n / r_min
        ));
    }
    let r = lat.mean_ms / 1000.0;
    if x * r > n * (1.0 + tol) {
        return Some(format!(
            "X × R̄ = {x:.2} req/s × {r:.3} s = {:.1} in flight, more than the {n:.0} users (Little's law; tolerance {:.0} %)",
            x * r,
            tol * 100.0
        ));
    }
    if let Some(it) = s.iterations {
        let l = it.per_s * it.mean_s;
        if (l / n - 1.0).abs() > tol {
            return Some(format!(
                "iterations {:.2}/s × {:.3} s = {l:.1} in flight, not the {n:.0} users (Little's law; tolerance {:.0} %)",
                it.per_s,
                it.mean_s,
                tol * 100.0
            ));
        }
    }
    None
}

/// The service time S and n8n's fixed overhead: measured at 1 in flight (mean response), else
/// the job time plus [`DEFAULT_OVERHEAD_S`], said so in the source.
pub fn service_time(levels: &[Level], settings: &Settings) -> (Option<Sourced<f64>>, f64) {
    let job_time = settings.job_time.as_ref().map(|j| j.value);
    let baseline = levels
        .iter()
        .find(|l| l.valid && l.level == LoadLevel::InFlight(1))
        .and_then(|l| l.mean_ms)
        .map(|ms| ms / 1000.0);
    match (baseline, job_time) {
        (Some(s), Some(j)) => (
            Some(Sourced::new(s, Provenance::Measured("measured: mean response at 1 in flight".into()))),
            (s - j).max(0.0),
        ),
        (Some(s), None) => (
            Some(Sourced::new(s, Provenance::Measured("measured: mean response at 1 in flight".into()))),
            s - job_from_response(s),
        ),
        (None, Some(j)) => (
            Some(Sourced::new(
                j + DEFAULT_OVERHEAD_S,
                Provenance::Assumed(format!(
                    "assumed: job time {j:.3} s + n8n's typical overhead {:.0} ms (no level at 1 in flight measured it)",
                    DEFAULT_OVERHEAD_S * 1000.0
                )),
            )),
            DEFAULT_OVERHEAD_S,
        ),
        (None, None) => (least_loaded(levels), DEFAULT_OVERHEAD_S),
    }
}

/// With no level at 1 in flight and no job time: the mean response of the least loaded closed
/// level, an upper bound on S (a response only grows with load), so a level judged saturated
/// against it is saturated against S too. A server that holds 49.4/s at 2 and at 10 in flight
/// (40 → 202 ms) is then saturated at 10, not "no level saturated".
fn least_loaded(levels: &[Level]) -> Option<Sourced<f64>> {
    let (n, ms) = levels
        .iter()
        .filter(|l| l.valid)
        .filter_map(|l| match l.level {
            LoadLevel::InFlight(n) => Some((n, l.mean_ms?)),
            _ => None,
        })
        .filter(|(_, ms)| ms.is_finite() && *ms > 0.0)
        .min_by_key(|(n, _)| *n)?;
    Some(Sourced::new(
        ms / 1000.0,
        Provenance::Measured(format!(
            "at most the mean response at {n} in flight, the least loaded level (no level at 1 in flight measured S)"
        )),
    ))
}

/// The job time in a mean response `s` at 1 in flight when nothing says the job's time: the
/// response less n8n's typical overhead (never below 0). The one place this rule is stated;
/// a mix's workflows (`mix::kinds`) use it per scenario.
pub fn job_from_response(s: f64) -> f64 {
    s - DEFAULT_OVERHEAD_S.min(s)
}

/// A history's stage where main used [`super::cpu::SATURATED_SHARE`] of a core or more: its
/// one JavaScript thread takes no more requests, so the rate is the intake's ceiling whether or
/// not jobs waited behind it. (A sweep sees the same through its response times; its main may
/// be a simulator whose one process holds every role, so only a history is read this way.)
fn intake_at_bound(s: &StageResult) -> bool {
    s.history.is_some()
        && s.endpoints.iter().any(|e| {
            e.role == Some(crate::record::Role::Main)
                && e.cpu_percent_mean >= 100.0 * super::cpu::SATURATED_SHARE
        })
}

/// Marks each level whose mean response is well above S.
pub fn mark_saturation(levels: &mut [Level], service_time_s: Option<f64>) {
    let Some(s) = service_time_s.filter(|s| *s > 0.0) else {
        return;
    };
    for l in levels.iter_mut() {
        let Some(r) = l.mean_ms.map(|ms| ms / 1000.0) else {
            continue;
        };
        l.response_ratio = Some(r / s);
        if crate::model::saturated(r, s)
            && !l
                .saturated_by
                .contains(&SaturationSign::ResponseAboveServiceTime)
        {
            l.saturated_by
                .push(SaturationSign::ResponseAboveServiceTime);
        }
    }
}

/// The capacity: throughput at the saturated valid levels — the best of them, merged with every
/// other within 5 % of it (repeats and a flat plateau give an interval).
pub fn measured_ceiling(levels: &[Level]) -> Option<(Estimate, &Level)> {
    let sat: Vec<&Level> = levels.iter().filter(|l| l.saturated()).collect();
    let top = sat
        .iter()
        .copied()
        .max_by(|a, b| a.throughput.mean.total_cmp(&b.throughput.mean))?;
    if top.throughput.mean <= 0.0 {
        return None;
    }
    let pooled = crate::limits::at_ceiling(levels, top);
    let samples: Vec<f64> = pooled
        .iter()
        .flat_map(|l| l.throughput.samples.clone())
        .collect();
    // One sample: the level's own estimate keeps its interval (a k6 window, a summary's count).
    // Pooled ones keep at least the counting interval of every answer they pooled.
    let x = if samples.len() == 1 {
        top.throughput.clone()
    } else {
        let counted = pooled
            .iter()
            .filter_map(|l| l.counted)
            .fold([0.0, 0.0], |[n, t], [dn, dt]| [n + dn, t + dt]);
        Estimate::of(&samples).with_counting(counted[0], counted[1])
    };
    Some((x, top))
}

/// Whether the levels were chosen by the run that measured them (a sweep's, a k6 script's), not
/// windows a history happened to hold: only then is there a next level to try.
pub fn chosen(levels: &[Level]) -> bool {
    !levels.iter().any(|l| l.window.is_some())
}
