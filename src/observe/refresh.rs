//! When n8n refreshed a counter it publishes once per refresh (main's queue counters and gauges,
//! every `N8N_METRICS_QUEUE_METRICS_INTERVAL`, 20 s by default), told from the raw samples a
//! scraper stored: the period is measured from the data, never assumed, and each change of
//! value is put back at the refresh tick that made it. A rate is then taken between two ticks —
//! completions counted between refreshes over the time between them — not between the edges of
//! a window that hold three or four refreshes (± one refresh's worth each).
//!
//! How: a change seen at scrape `t_i` (the value differs from the scrape before, at `t_{i−1}`)
//! was refreshed in `(t_{i−1}, t_i]`. With a period P, every such arc holds a tick `φ + kP`:
//! the period is the largest P for which the arcs of a neighbourhood share one phase, and the
//! phase they share pins each tick to a fraction of the scrape interval. Where the scrapes are
//! coarser than the refresh (60 s scrapes of a 20 s refresh) no phase can be told: the tick is
//! the middle of what it could be, said with its half-width.
//!
//! Pure: samples in, ticks out. Not here: reading Prometheus (`history`), judging (`diagnose`).

/// A change of the counter, put back at the refresh that made it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    /// When n8n refreshed the value (Unix seconds, estimated).
    pub at: f64,
    /// How far `at` may be off, either way (s).
    pub half_width: f64,
    pub value: f64,
    /// The value fell: the process restarted, and counting starts again from this tick.
    pub reset: bool,
}

/// What the raw samples of one counter say of its refreshes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Refreshes {
    /// The refresh period the changes pin (s), when they do.
    pub period_s: Option<f64>,
    pub ticks: Vec<Tick>,
    /// The first usable sample (an anchor for the first change) and the last.
    pub first: Option<(f64, f64)>,
    pub last: Option<(f64, f64)>,
}

/// Executions per second no n8n reaches (its published peak is about 220/s per instance).
const MAX_RISE_PER_S: f64 = 1e5;

/// Periods tried, in steps of this: n8n's interval is whole seconds (a neighbouring period
/// half a second off can still fit one neighbourhood's arcs, a whole second cannot).
const PERIOD_STEP_S: f64 = 1.0;
/// The longest refresh period looked for.
const MAX_PERIOD_S: f64 = 300.0;
/// Arcs per neighbourhood whose phase must agree (short enough that timer drift over it is
/// nothing, long enough that a wrong period shows).
const BLOCK: usize = 24;
/// An arc constrains a period P only when it is at most this share of P long: a longer one
/// holds most phases by chance (60 s arcs of a 70 s period hold 6 phases in 7).
const NARROW: f64 = 0.75;
/// Share of constraining arcs a period must hold.
const AGREE: f64 = 0.9;
/// Constraining arcs needed before a period is believed.
const MIN_ARCS: usize = 6;
/// Arcs are taken as they are, half-open: with any slack two neighbouring arcs would share
/// their common end, and a period twice the true one would fit every arc. Timer and scrape
/// jitter of milliseconds moves a tick out of its arc only when it falls within milliseconds
/// of a scrape, which [`AGREE`] leaves room for.
const SLACK_S: f64 = 0.0;
/// The changes read to find the period (the latest ones).
const MAX_ARCS_FOR_PERIOD: usize = 4000;

/// The arc of a change: refreshed in `(lo, hi]`.
#[derive(Debug, Clone, Copy)]
struct Arc {
    lo: f64,
    hi: f64,
    value: f64,
    reset: bool,
}

/// The ticks of a counter's raw samples (time, value), sorted by time. A sample that is not
/// finite or negative is passed over (it is a gap, counted where it was read).
pub fn refreshes(samples: &[(f64, f64)], fallback_period_s: f64) -> Refreshes {
    let mut good: Vec<(f64, f64)> = Vec::with_capacity(samples.len());
    for &(t, v) in samples {
        if !(t.is_finite() && v.is_finite() && v >= 0.0) {
            continue;
        }
        // A rise no n8n can make is passed over too (it is counted as a gap on the step grid).
        if let Some(&(t0, v0)) = good.last() {
            if t <= t0 || (v > v0 && (v - v0) / (t - t0) > MAX_RISE_PER_S) {
                continue;
            }
        }
        good.push((t, v));
    }
    let mut arcs = Vec::new();
    for w in good.windows(2) {
        let ((t0, v0), (t1, v1)) = (w[0], w[1]);
        if t1 > t0 && v1 != v0 {
            arcs.push(Arc {
                lo: t0,
                hi: t1,
                value: v1,
                reset: v1 < v0,
            });
        }
    }
    let period = period_of(&arcs);
    let lag = period.unwrap_or(fallback_period_s.max(PERIOD_STEP_S));
    let ticks = arcs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (at, half_width) = period.and_then(|p| pinned(&arcs, i, p)).unwrap_or_else(|| {
                // The value was refreshed at most one period (and at most one scrape) ago.
                let w = (a.hi - a.lo).min(lag);
                (a.hi - w / 2.0, w / 2.0)
            });
            Tick {
                at,
                half_width,
                value: a.value,
                reset: a.reset,
            }
        })
        .collect();
    Refreshes {
        period_s: period,
        ticks,
        first: good.first().copied(),
        last: good.last().copied(),
    }
}

/// The largest period whose ticks fall in (almost) every arc, neighbourhood by neighbourhood.
fn period_of(arcs: &[Arc]) -> Option<f64> {
    let arcs = &arcs[arcs.len().saturating_sub(MAX_ARCS_FOR_PERIOD)..];
    let steps = (MAX_PERIOD_S / PERIOD_STEP_S) as usize;
    for k in (1..=steps).rev() {
        let p = k as f64 * PERIOD_STEP_S;
        let narrow: Vec<Arc> = arcs
            .iter()
            .copied()
            .filter(|a| a.hi - a.lo + 2.0 * SLACK_S <= NARROW * p)
            .collect();
        if narrow.len() < MIN_ARCS {
            continue;
        }
        let held: usize = narrow
            .chunks(BLOCK)
            .map(|b| best_phase(b, p).map_or(0, |(_, n, _, _)| n))
            .sum();
        if held as f64 >= AGREE * narrow.len() as f64 {
            return Some(p);
        }
    }
    None
}

/// The phase (mod `p`) that the most arcs of `b` hold: (phase, how many, how far below and
/// above it every holding arc still agrees).
fn best_phase(b: &[Arc], p: f64) -> Option<(f64, usize, f64, f64)> {
    let mut best: Option<(f64, usize, f64, f64)> = None;
    for c in b {
        let x = c.hi.rem_euclid(p);
        let (mut n, mut below, mut above) = (0, f64::INFINITY, f64::INFINITY);
        for a in b {
            let len = a.hi - a.lo + 2.0 * SLACK_S;
            if len > NARROW * p {
                continue;
            }
            // How far x lies after the arc's start, round the circle.
            let d = (x - (a.lo - SLACK_S)).rem_euclid(p);
            if d > 0.0 && d <= len {
                n += 1;
                below = below.min(d);
                above = above.min(len - d);
            }
        }
        if best.is_none_or(|(_, m, _, _)| n > m) {
            best = Some((x, n, below, above));
        }
    }
    best
}

/// The tick of arc `i` from the phase its neighbourhood agrees on: (time, half-width).
fn pinned(arcs: &[Arc], i: usize, p: f64) -> Option<(f64, f64)> {
    let from = i.saturating_sub(BLOCK / 2);
    let to = (from + BLOCK).min(arcs.len());
    let (x, n, below, above) = best_phase(&arcs[from..to], p)?;
    if n < 2 || !below.is_finite() || !above.is_finite() {
        return None;
    }
    let mid = x + (above - below) / 2.0;
    let half = (above + below) / 2.0;
    let a = arcs[i];
    let at = a.hi - (a.hi - mid).rem_euclid(p);
    (at > a.lo - SLACK_S && half < p / 2.0).then_some((at, half))
}

/// Completions between ticks in `[from, to)`: (count, seconds they were counted over,
/// ± seconds of the two ends). A window with no change but samples inside counted nothing
/// over its length; a reset starts a new count at its tick. None when nothing in or before
/// the window says what the counter did.
pub fn between(r: &Refreshes, from: f64, to: f64) -> Option<(f64, f64, f64)> {
    let inside: Vec<usize> = (0..r.ticks.len())
        .filter(|&i| r.ticks[i].at >= from && r.ticks[i].at < to)
        .collect();
    let period = r.period_s;
    let Some(&first) = inside.first() else {
        // No change: nothing completed, if the counter was seen before the window and stood
        // for a whole period after it (a completion in the window shows at the next tick).
        let lag = period.unwrap_or(fallback_lag(r));
        let (f, l) = (r.first?, r.last?);
        let next = r.ticks.iter().find(|t| t.at >= to).map_or(l.0, |t| t.at);
        return (f.0 < to && l.0 >= to + lag && next >= to + lag).then_some((
            0.0,
            to - from.max(f.0),
            0.0,
        ));
    };
    let (mut count, mut span) = (0.0, 0.0);
    let mut seg_start: Option<(f64, f64)> = None;
    // The anchor before the window: the tick before the first, or the first sample.
    let t0 = r.ticks[first];
    if !t0.reset {
        let anchor = if first > 0 {
            Some((r.ticks[first - 1].at, r.ticks[first - 1].value))
        } else {
            r.first.filter(|(t, _)| *t < t0.at)
        };
        if let Some((at, v)) = anchor {
            // Between the anchor and the first change the counter stood: what the first
            // change counts came in its last period.
            let at = match period {
                Some(p) => at.max(t0.at - p),
                None => at,
            };
            seg_start = Some((at, v));
        }
    }
    for &i in &inside {
        let t = r.ticks[i];
        match seg_start {
            Some((at, v)) if !t.reset => {
                count += t.value - v;
                span += t.at - at;
            }
            _ => {}
        }
        seg_start = Some((t.at, t.value));
    }
    let ends = r.ticks[first].half_width + r.ticks[*inside.last()?].half_width;
    (span > 0.0).then_some((count, span, ends))
}

/// With no period found, the longest a change can have waited to be seen: the widest arc.
fn fallback_lag(r: &Refreshes) -> f64 {
    r.ticks
        .iter()
        .map(|t| 2.0 * t.half_width)
        .fold(PERIOD_STEP_S, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that n8n refreshes every `refresh` s (first tick at `phase`), with `rate`
    /// completions per second, scraped every `scrape` s from 0 to `len`.
    fn scraped(rate: f64, refresh: f64, phase: f64, scrape: f64, len: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut t = 0.0;
        while t <= len {
            // The value published at the last tick at or before t.
            let k = ((t - phase) / refresh).floor();
            let tick = phase + k * refresh;
            let v = if tick < 0.0 {
                0.0
            } else {
                (rate * tick).floor()
            };
            out.push((t, v));
            t += scrape;
        }
        out
    }

    #[test]
    fn the_period_is_measured_from_the_changes() {
        for (refresh, scrape) in [(20.0, 15.0), (20.0, 1.0), (2.0, 1.5), (20.0, 7.0)] {
            let s = scraped(12.5, refresh, 3.3, scrape, 1200.0 * refresh / 20.0);
            let r = refreshes(&s, 20.0);
            assert_eq!(
                r.period_s,
                Some(refresh),
                "refresh {refresh}, scrape {scrape}"
            );
        }
        // Scraped every 60 s, a 20 s refresh cannot be told: no period is claimed.
        let r = refreshes(&scraped(12.5, 20.0, 3.3, 60.0, 1200.0), 20.0);
        assert_eq!(r.period_s, None);
    }

    #[test]
    fn a_steady_rate_between_ticks_is_within_5_percent_at_15_and_60_s_scrapes() {
        for scrape in [15.0, 60.0] {
            let s = scraped(12.5, 20.0, 7.0, scrape, 600.0);
            let r = refreshes(&s, 20.0);
            // Pooled over the whole stretch.
            let (c, span, ends) = between(&r, 30.0, 590.0).unwrap();
            let x = c / span;
            assert!((x / 12.5 - 1.0).abs() < 0.05, "scrape {scrape}: {x}");
            assert!(
                c / (span + ends) <= 12.5 && 12.5 <= c / (span - ends),
                "{x} ± {ends}"
            );
            // Windows of 75 s tile: their counts add up to the pooled one.
            let mut sum = (0.0, 0.0);
            let mut t = 30.0;
            while t < 590.0 {
                if let Some((c, s, _)) = between(&r, t, (t + 75.0).min(590.0)) {
                    sum = (sum.0 + c, sum.1 + s);
                }
                t += 75.0;
            }
            assert!((sum.0 / sum.1 / 12.5 - 1.0).abs() < 0.05, "{sum:?}");
        }
    }

    #[test]
    fn at_a_15_s_scrape_each_window_is_far_closer_than_a_refresh_worth() {
        // The windows of the issue: 75 s windows of a steady 12.5/s read 8.2–14.9 when cut at
        // window edges; cut at ticks each is within a few per cent.
        let s = scraped(12.5, 20.0, 7.0, 15.0, 900.0);
        let r = refreshes(&s, 20.0);
        let mut t = 60.0;
        while t + 75.0 < 880.0 {
            let (c, span, _) = between(&r, t, t + 75.0).unwrap();
            assert!((c / span / 12.5 - 1.0).abs() < 0.05, "{t}: {}", c / span);
            t += 75.0;
        }
    }

    #[test]
    fn a_reset_starts_a_new_count_and_a_quiet_counter_counts_zero() {
        let mut s = scraped(10.0, 2.0, 0.5, 1.0, 60.0);
        // The process restarts at 60 s: its counter starts again.
        let after: Vec<(f64, f64)> = scraped(10.0, 2.0, 0.5, 1.0, 60.0)
            .into_iter()
            .map(|(t, v)| (t + 61.0, v))
            .collect();
        s.extend(after);
        let r = refreshes(&s, 20.0);
        assert!(r.ticks.iter().any(|t| t.reset));
        let (c, span, _) = between(&r, 40.0, 90.0).unwrap();
        assert!((c / span / 10.0 - 1.0).abs() < 0.1, "{}", c / span);
        // A counter that stands still counted nothing over the window.
        let flat: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 42.0)).collect();
        let r = refreshes(&flat, 20.0);
        assert_eq!(between(&r, 10.0, 50.0), Some((0.0, 40.0, 0.0)));
        // Impossible samples are passed over, never counted.
        let bad = vec![
            (0.0, 1.0),
            (1.0, f64::NAN),
            (2.0, -5.0),
            (3.0, 2.7e306),
            (4.0, 1.0),
        ];
        assert!(refreshes(&bad, 20.0).ticks.is_empty());
    }
}
