//! Levels from a series: held steps of the `vus` gauge (closed), held arrival rates (open),
//! and the ramp windows between them.

use super::*;

/// A span of the run and what it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    /// A held step: `vus` constant from `from` to `to`.
    Held { from: f64, to: f64, vus: u32 },
    /// Between held steps: the users moved.
    Ramp {
        from: f64,
        to: f64,
        vus_from: u32,
        vus_to: u32,
    },
    /// An open model's held arrival rate.
    Rate { from: f64, to: f64, offered: f64 },
    /// An open model's moving rate.
    RateRamp {
        from: f64,
        to: f64,
        offered_from: f64,
        offered_to: f64,
    },
}

/// Steps of the `vus` gauge between `from` and `to`: (first sample, last sample, value).
pub(super) fn vus_steps(vus: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64, u32)> {
    let mut out: Vec<(f64, f64, u32)> = Vec::new();
    for (t, v) in vus.iter().filter(|(t, _)| *t >= from && *t <= to) {
        let v = v.round() as u32;
        match out.last_mut() {
            Some(last) if last.2 == v => last.1 = *t,
            _ => out.push((*t, *t, v)),
        }
    }
    out
}

/// Closed model: held steps and the ramps between them, in time order.
pub fn closed_spans(s: &Series, reqs: &[&Req], warm: Warmup, from: f64, to: f64) -> Vec<Span> {
    let steps = vus_steps(&s.vus, from, to);
    if steps.is_empty() {
        // No `vus` gauge: one level at the most requests ever in flight at once.
        return vec![Span::Held {
            from,
            to,
            vus: max_in_flight(reqs),
        }];
    }
    // The gauge is sampled (each second): the users were already at the first sample's count
    // when the run began (a ramp there falls in the warm-up), and stayed at the last one's until
    // the run ended.
    let last = steps.len() - 1;
    let steps: Vec<(f64, f64, u32)> = steps
        .iter()
        .enumerate()
        .map(|(k, &(a, b, v))| {
            (
                if k == 0 { from.min(a) } else { a },
                if k == last { to.max(b) } else { b },
                v,
            )
        })
        .collect();
    let held: Vec<bool> = steps
        .iter()
        .map(|&(a, b, v)| {
            v > 0 && {
                let (w0, w1) = window(reqs, a, b, warm, s.resolution_s);
                let started = reqs
                    .iter()
                    .filter(|r| r.start() >= w0 && r.start() < w1)
                    .count();
                w1 - w0 >= MIN_WINDOW_S && started as f64 >= RESPONSES_PER_VU * v as f64
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut ramp_from: Option<(f64, u32)> = Some((from, 0));
    for (k, &(a, b, v)) in steps.iter().enumerate() {
        if held[k] {
            if let Some((t0, v0)) = ramp_from.take() {
                if a - t0 > 1e-6 {
                    out.push(Span::Ramp {
                        from: t0,
                        to: a,
                        vus_from: v0,
                        vus_to: v,
                    });
                }
            }
            out.push(Span::Held {
                from: a,
                to: b,
                vus: v,
            });
            ramp_from = Some((b, v));
        } else if ramp_from.is_none() {
            ramp_from = Some((a, v));
        }
    }
    if let Some((t0, v0)) = ramp_from {
        let last = steps.last().map_or(0, |s| s.2);
        if to - t0 > 1e-6 && out.iter().any(|s| matches!(s, Span::Held { .. })) {
            out.push(Span::Ramp {
                from: t0,
                to,
                vus_from: v0,
                vus_to: last,
            });
        } else if out.is_empty() {
            out.push(Span::Ramp {
                from,
                to,
                vus_from: steps[0].2,
                vus_to: last,
            });
        }
    }
    out
}

pub(super) fn max_in_flight(reqs: &[&Req]) -> u32 {
    let mut ev: Vec<(f64, i32)> = reqs
        .iter()
        .flat_map(|r| [(r.start(), 1), (r.end, -1)])
        .collect();
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in ev {
        cur += d;
        max = max.max(cur);
    }
    max.max(1) as u32
}

/// The steady window of a span: after the warm-up — the given one, or automatically two p50
/// responses of the requests that started in the span and at least 1 s; at most a third of
/// the span — and after the file's time resolution.
///
/// The window also ends one p95 response before the last response of the run when that tail
/// started fewer than half the requests the window's rate predicts: k6 does not report the
/// requests a `gracefulStop` cuts, which makes the end of a run look idle.
pub(super) fn window(
    reqs: &[&Req],
    from: f64,
    to: f64,
    warm: Warmup,
    resolution: f64,
) -> (f64, f64) {
    let mut durs: Vec<f64> = reqs
        .iter()
        .filter(|r| r.start() >= from && r.start() < to)
        .map(|r| r.dur)
        .collect();
    durs.sort_by(f64::total_cmp);
    let p50 = durs.get(durs.len() / 2).copied().unwrap_or(0.0);
    let p95 = durs.get(durs.len() * 95 / 100).copied().unwrap_or(0.0);
    let w = match warm.0 {
        Some(given) => given,
        None => (2.0 * p50).max(1.0),
    };
    let w = w.min((to - from) / 3.0).max(resolution);
    let w0 = from + w;
    let run_end = reqs.iter().map(|r| r.end).fold(f64::NEG_INFINITY, f64::max);
    let cut = run_end - p95;
    if cut >= to || cut <= w0 {
        return (w0, to);
    }
    // Censored when the tail started fewer than half the requests the window's rate predicts.
    let count = |a: f64, b: f64| {
        reqs.iter()
            .filter(|r| r.start() >= a && r.start() < b)
            .count() as f64
    };
    let expected = count(w0, cut) / (cut - w0) * (to - cut);
    let w1 = if expected >= 2.0 && count(cut, to) < 0.5 * expected {
        cut
    } else {
        to
    };
    (w0, w1)
}

/// Runs of bins within counting noise of their median, neighbouring runs at the same rate
/// merged: k6 schedules arrivals on a clock, so a held rate varies by about one arrival per
/// second, and a bin that strayed (k6 late to start arrivals, a coarse time) does not cut a
/// held rate in two.
pub(super) fn held_runs(
    count: &[f64],
    full: usize,
    tol: &dyn Fn(f64) -> f64,
) -> Vec<(usize, usize)> {
    // Runs of bins within counting noise of their median: k6 schedules arrivals on a clock,
    // so a held rate varies by about one arrival per second.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < full {
        let mut end = start + 1;
        while end < full {
            let mut v: Vec<f64> = count[start..=end].to_vec();
            v.sort_by(f64::total_cmp);
            let med = v[v.len() / 2];
            if count[start..=end]
                .iter()
                .all(|c| (c - med).abs() <= tol(med) + 1e-9)
            {
                end += 1;
            } else {
                break;
            }
        }
        runs.push((start, end));
        start = end;
    }
    // Neighbouring runs at the same rate (within the noise) are one: a bin that strayed (k6
    // late to start arrivals, a coarse time) does not cut a held rate in two.
    let mean = |a: usize, b: usize| count[a..b].iter().sum::<f64>() / (b - a) as f64;
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in runs {
        match merged.last_mut() {
            Some(last)
                if {
                    let (m1, m2) = (mean(last.0, last.1), mean(a, b));
                    (m1 - m2).abs() <= tol(m1.max(m2))
                } =>
            {
                last.1 = b
            }
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// Open model: held arrival rates and the moves between them.
pub fn open_spans(s: &Series, reqs: &[&Req], scenarios: &[usize], from: f64, to: f64) -> Vec<Span> {
    // Bins of a second; of two resolutions when the file's times are coarse.
    let width = (2.0 * s.resolution_s).max(1.0);
    let bins = (((to - from) / width).ceil() as usize).max(1);
    let mut count = vec![0f64; bins];
    let bin = |t: f64| (((t - from).max(0.0) / width) as usize).min(bins - 1);
    let use_iters = s.iters.iter().any(|i| scenarios.contains(&i.2));
    if use_iters {
        for (end, d, sc) in &s.iters {
            if scenarios.contains(sc) && end - d >= from && end - d <= to {
                count[bin(end - d)] += 1.0;
            }
        }
    } else {
        for r in reqs {
            count[bin(r.start())] += 1.0;
        }
    }
    for (t, sc, n) in &s.dropped {
        if scenarios.contains(sc) && *t >= from && *t <= to {
            count[bin(*t)] += n;
        }
    }
    // The last bin is usually cut short by the end of the run.
    let full = if ((to - from) / width).fract() > 1e-9 && bins > 1 {
        bins - 1
    } else {
        bins
    };
    // Coarse times move an arrival into the next bin: noise of a count, not a move.
    let coarse = s.resolution_s >= 0.05;
    let tol = |med: f64| {
        let t = 1.5f64.max(0.08 * med);
        if coarse {
            t.max(1.5 * med.sqrt())
        } else {
            t
        }
    };
    let runs = held_runs(&count, full, &tol);
    let min_bins = (MIN_WINDOW_S / width).ceil() as usize + 1;
    let mut out = Vec::new();
    let mut ramp: Option<(usize, usize)> = None;
    let rate = |a: usize, b: usize| count[a..b].iter().sum::<f64>() / ((b - a) as f64 * width);
    let t = |k: usize| from + k as f64 * width;
    let flush = |ramp: &mut Option<(usize, usize)>, out: &mut Vec<Span>| {
        if let Some((a, b)) = ramp.take() {
            out.push(Span::RateRamp {
                from: t(a),
                to: t(b),
                offered_from: count[a] / width,
                offered_to: count[b - 1] / width,
            });
        }
    };
    for (a, b) in runs {
        // A held rate is a load level only when something arrived in most of its bins: the
        // drain after k6's arrivals stop (completions, a dropped-iterations count at the end)
        // is no level of 0.1/s.
        if b - a >= min_bins && rate(a, b) * width >= 1.0 {
            flush(&mut ramp, &mut out);
            out.push(Span::Rate {
                from: t(a),
                to: t(b),
                offered: rate(a, b),
            });
        } else {
            ramp = Some(match ramp {
                Some((ra, _)) => (ra, b),
                None => (a, b),
            });
        }
    }
    flush(&mut ramp, &mut out);
    out
}
