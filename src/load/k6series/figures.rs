//! A window's figures: latency, throughput with its interval, the open model's books, the
//! iterations and each scenario's part.

use super::segment::window;
use super::*;
use crate::load::k6;
use crate::load::stats::{interval, summarize};
use crate::record::stage::{Flow, IterationFigures, Ramp, ScenarioResult};
use crate::record::LoadModel;
use hdrhistogram::Histogram;

pub(super) fn hist() -> Result<Histogram<u32>, BadInput> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).map_err(|e| BadInput(e.to_string()))
}

pub(super) fn record(h: &mut Histogram<u32>, dur_s: f64) {
    let _ = h.record(((dur_s * 1e6) as u64).clamp(1, 3_600_000_000));
}

/// An open window's figures: throughput is what completed in it (by completion time), what
/// arrived and did not complete is the backlog (its books in `flow`).
pub(super) fn open_window(
    st: &mut StageResult,
    s: &Series,
    reqs: &[&Req],
    scs: &[usize],
    span: &Span,
    (w0, w1): (f64, f64),
    started: &[&&Req],
) {
    let in_window = |t: f64| t >= w0 && t < w1;
    let per_s = |k: u64| {
        if st.window_s > 0.0 {
            k as f64 / st.window_s
        } else {
            0.0
        }
    };
    let completed: Vec<&&Req> = reqs.iter().filter(|r| in_window(r.end)).collect();
    let done_good = completed.iter().filter(|r| r.good()).count() as u64;
    let running_at = |t: f64| reqs.iter().filter(|r| r.start() < t && r.end >= t).count() as u64;
    let dropped: f64 = s
        .dropped
        .iter()
        .filter(|d| scs.contains(&d.1) && in_window(d.0))
        .map(|d| d.2)
        .sum();
    let dropped = dropped.round() as u64;
    let flow = Flow::of(
        st.window_s,
        (started.len() as u64, dropped),
        completed.len() as u64,
        (running_at(w0), running_at(w1)),
        started.iter().filter(|r| r.end >= w1).count() as u64,
    );
    st.dropped_iterations = dropped;
    st.rate = Some(flow.offered_per_s);
    // A moving rate is a window, never a level (see `diagnose::ramp`): its ends in arrivals
    // per second.
    if let Span::RateRamp {
        offered_from,
        offered_to,
        ..
    } = span
    {
        st.ramp = Some(Ramp {
            from: offered_from.round() as u32,
            to: offered_to.round() as u32,
        });
    }
    st.request_rate = per_s(flow.completions);
    st.throughput_rps = per_s(done_good);
    st.flow = Some(flow);
    let ends: Vec<f64> = completed.iter().map(|r| r.end).collect();
    st.throughput_ci = Some(interval(
        &ends,
        (w0, w1),
        st.throughput_rps,
        done_good as f64 / completed.len().max(1) as f64,
        0.0,
        s.resolution_s,
    ));
}

#[allow(clippy::too_many_arguments)]
pub(super) fn stage_of(
    index: usize,
    name: &str,
    s: &Series,
    reqs: &[&Req],
    scs: &[usize],
    span: &Span,
    warm: Warmup,
) -> Result<StageResult, BadInput> {
    let (model, from, to) = match span {
        Span::Held { from, to, .. } | Span::Ramp { from, to, .. } => {
            (LoadModel::Closed, *from, *to)
        }
        Span::Rate { from, to, .. } | Span::RateRamp { from, to, .. } => {
            (LoadModel::Open, *from, *to)
        }
    };
    let judged = matches!(span, Span::Held { .. } | Span::Rate { .. });
    let (w0, w1) = if judged {
        window(reqs, from, to, warm, s.resolution_s)
    } else {
        (from, to)
    };
    let mut st = StageResult::empty(index, label_of(span, name), model);
    st.duration_s = (to - from).max(0.0);
    st.warmup_s = (w0 - from).max(0.0);
    st.window_s = (w1 - w0).max(0.0);
    let in_window = |t: f64| t >= w0 && t < w1;
    // Closed: the requests that started in the window. Open: those too for latency (measured
    // from the intended start), but throughput counts what completed in it.
    let started: Vec<&&Req> = reqs.iter().filter(|r| in_window(r.start())).collect();
    st.warmup_requests = reqs
        .iter()
        .filter(|r| r.start() >= from && r.start() < w0)
        .count() as u64;
    let Tally { h, per, bad, good } = tally(&started, s.scenarios.len(), &mut st)?;
    let n = started.len() as u64;
    let per_s = |k: u64| {
        if st.window_s > 0.0 {
            k as f64 / st.window_s
        } else {
            0.0
        }
    };
    st.requests = n;
    st.ok = n - bad;
    st.error_rate = if n > 0 { bad as f64 / n as f64 } else { 0.0 };
    st.check_pass_rate = if n > 0 {
        started.iter().filter(|r| r.check_ok).count() as f64 / n as f64
    } else {
        1.0
    };
    st.latency = summarize(&h);
    match span {
        Span::Held { .. } | Span::Ramp { .. } => {
            st.request_rate = per_s(n);
            st.throughput_rps = per_s(good);
            closed_window(&mut st, s, span, (w0, w1), &started, good);
        }
        Span::Rate { .. } | Span::RateRamp { .. } => {
            open_window(&mut st, s, reqs, scs, span, (w0, w1), &started)
        }
    }
    st.iterations = iterations_in(s, scs, (w0, w1));
    if per.iter().filter(|e| e.0 > 0).count() > 1 {
        st.scenarios = scenario_parts(&st, s, &per, (good, n));
    }
    k6::mark_validity(&mut st);
    Ok(st)
}

/// What the requests started in a window add up to: their latency histogram, each scenario's
/// (requests, ok, good, latency), the failed (their errors counted into the stage) and the good.
struct Tally {
    h: Histogram<u32>,
    per: Vec<PerScenario>,
    bad: u64,
    good: u64,
}

fn tally(started: &[&&Req], scenarios: usize, st: &mut StageResult) -> Result<Tally, BadInput> {
    let mut h = hist()?;
    let mut per: Vec<PerScenario> = vec![(0, 0, 0, None); scenarios];
    let (mut bad, mut good) = (0u64, 0u64);
    for r in started {
        record(&mut h, r.dur);
        if r.failed {
            bad += 1;
            match r.status {
                0 => st.errors.io += 1,
                code => *st.errors.http_status.entry(code).or_insert(0) += 1,
            }
        }
        good += u64::from(r.good());
        let e = &mut per[r.scenario];
        e.0 += 1;
        e.1 += u64::from(!r.failed);
        e.2 += u64::from(r.good());
        let hh = match &mut e.3 {
            Some(hh) => hh,
            None => e.3.insert(hist()?),
        };
        record(hh, r.dur);
    }
    Ok(Tally { h, per, bad, good })
}

/// A closed span's users: a held step's, with its throughput's interval; a ramp's middle.
pub(super) fn closed_window(
    st: &mut StageResult,
    s: &Series,
    span: &Span,
    (w0, w1): (f64, f64),
    started: &[&&Req],
    good: u64,
) {
    match span {
        Span::Held { vus, .. } => {
            st.vus = Some(*vus);
            let starts: Vec<f64> = started.iter().map(|r| r.start()).collect();
            let share = good as f64 / (started.len() as u64).max(1) as f64;
            st.throughput_ci = Some(interval(
                &starts,
                (w0, w1),
                st.throughput_rps,
                share,
                *vus as f64,
                s.resolution_s,
            ));
        }
        Span::Ramp {
            vus_from, vus_to, ..
        } => {
            st.vus = Some((*vus_from + *vus_to).div_ceil(2));
            st.ramp = Some(Ramp {
                from: *vus_from,
                to: *vus_to,
            });
        }
        Span::Rate { .. } | Span::RateRamp { .. } => {}
    }
}

/// A span's label as the tables show it.
pub(super) fn label_of(span: &Span, name: &str) -> String {
    match span {
        Span::Held { vus, .. } => format!("{vus} in flight (k6 {name}, held step)"),
        Span::Ramp {
            vus_from, vus_to, ..
        } => format!("ramp {vus_from}→{vus_to} (k6 {name})"),
        Span::Rate { offered, .. } => format!("{offered:.1}/s offered (k6 {name})"),
        Span::RateRamp {
            offered_from,
            offered_to,
            ..
        } => format!("rate ramp {offered_from:.0}→{offered_to:.0}/s (k6 {name})"),
    }
}

/// Iterations started in the window: Little's law for scripts with think time.
pub(super) fn iterations_in(
    s: &Series,
    scs: &[usize],
    (w0, w1): (f64, f64),
) -> Option<IterationFigures> {
    let its: Vec<&(f64, f64, usize)> = s
        .iters
        .iter()
        .filter(|i| scs.contains(&i.2) && i.0 - i.1 >= w0 && i.0 - i.1 < w1)
        .collect();
    (!its.is_empty() && w1 > w0).then(|| IterationFigures {
        per_s: its.len() as f64 / (w1 - w0),
        mean_s: its.iter().map(|i| i.1).sum::<f64>() / its.len() as f64,
    })
}

/// Per scenario of the window: requests, answered, good answers, latency.
type PerScenario = (u64, u64, u64, Option<Histogram<u32>>);

/// Each scenario's part of a window: its share of the good answers times the window's
/// throughput, so the parts add up to the whole.
pub(super) fn scenario_parts(
    st: &StageResult,
    s: &Series,
    per: &[PerScenario],
    (good, n): (u64, u64),
) -> Vec<ScenarioResult> {
    per.iter()
        .enumerate()
        .filter(|(_, e)| e.0 > 0)
        .map(|(k, (n_k, ok, good_k, hh))| ScenarioResult {
            name: s.scenarios[k].clone(),
            requests: *n_k,
            ok: *ok,
            throughput_rps: st.throughput_rps * *good_k as f64 / good.max(1) as f64,
            request_rate: st.request_rate * *n_k as f64 / n.max(1) as f64,
            share: *n_k as f64 / n.max(1) as f64,
            latency: hh.as_ref().and_then(summarize),
            error_rate: (*n_k - *ok) as f64 / *n_k as f64,
            errors: Default::default(),
            checks: Vec::new(),
            check_pass_rate: *good_k as f64 / *n_k as f64,
            bytes_sent: 0,
            bytes_received: 0,
        })
        .collect()
}
