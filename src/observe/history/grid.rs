//! A series on the range's grid: each sample checked before it counts (a missing or impossible
//! one is a gap with its reason, a counter that falls is a reset), a counter's increases per
//! step, the selector a metric is read with and a series' target.

use crate::observe::prometheus::Series;
use crate::record::history::{CounterReset, History, HistoryGap};
use std::collections::BTreeMap;

/// Gaps listed one by one (the rest are counted).
pub(super) const MAX_LISTED_GAPS: usize = 50;
/// A queue gauge above this many jobs is not a reading (as for a live scrape).
const MAX_JOBS: f64 = 1e6;

pub(super) fn selector(metric: &str, matchers: &[String]) -> String {
    if matchers.is_empty() {
        metric.to_string()
    } else {
        format!("{metric}{{{}}}", matchers.join(","))
    }
}

/// One series on the step grid: a value per step, or why there is none.
pub(super) struct Grid {
    pub(super) name: String,
    pub(super) values: Vec<Option<f64>>,
}

pub(super) fn grid(s: &Series, name: String, start: f64, step: f64, n: usize) -> Grid {
    let mut values = vec![None; n];
    for (t, v) in &s.points {
        let i = ((t - start) / step).round();
        if i >= 0.0 && (i as usize) < n {
            values[i as usize] = Some(*v);
        }
    }
    Grid { name, values }
}

/// Keeps what can be true: finite, non-negative, gauges at most [`MAX_JOBS`]; the rest become
/// gaps, counted and listed.
pub(super) fn check(g: &mut Grid, gauge: bool, start: f64, step: f64, h: &mut History) {
    let mut open: Option<(usize, String)> = None;
    let n = g.values.len();
    for i in 0..=n {
        let why = if i == n {
            None
        } else {
            match g.values[i] {
                None => Some("no sample (a scrape failed, or the target was down)".to_string()),
                Some(v) if !v.is_finite() => {
                    Some(format!("{v}: not a number a counter or gauge can hold"))
                }
                Some(v) if v < 0.0 => Some(format!("{v}: negative")),
                Some(v) if gauge && v > MAX_JOBS => Some(format!("{v:e} jobs: beyond any queue")),
                _ => None,
            }
        };
        if why.is_some() && i < n {
            g.values[i] = None;
            h.gap_steps += 1;
        }
        match (&open, why) {
            (None, Some(w)) => open = Some((i, w)),
            (Some(_), Some(_)) => {}
            (Some((from, w)), None) => {
                if h.gaps.len() < MAX_LISTED_GAPS {
                    h.gaps.push(HistoryGap {
                        series: g.name.clone(),
                        from: start + *from as f64 * step,
                        to: start + i as f64 * step,
                        reason: w.clone(),
                    });
                }
                open = None;
            }
            (None, None) => {}
        }
    }
}

/// Per-step increases of a counter; a fall is a reset (recorded, no figure for that step).
pub(super) fn increases(g: &Grid, start: f64, step: f64, h: &mut History) -> Vec<Option<f64>> {
    let mut out = vec![None; g.values.len()];
    let mut last: Option<(usize, f64)> = None;
    let most = most_per_s(&g.name);
    for (i, v) in g.values.iter().enumerate() {
        let Some(v) = *v else {
            continue;
        };
        if let Some((j, p)) = last {
            let per_s = (v - p) / ((i - j) as f64 * step);
            if v >= p && per_s > most {
                // A rise no n8n can make (1e15 completions/s, a million cores): a gap with
                // its reason, never a rate.
                h.gap_steps += 1;
                if h.gaps.len() < MAX_LISTED_GAPS {
                    h.gaps.push(HistoryGap {
                        series: g.name.clone(),
                        from: start + j as f64 * step,
                        to: start + i as f64 * step,
                        reason: format!(
                            "rose {per_s:.3e}/s: beyond any n8n (at most {most:.0e}/s)"
                        ),
                    });
                }
            } else if v >= p {
                // Across a gap the rise is no figure: the gap shortens the time a rate is
                // taken over, it is never spread into completions of the steps it covered.
                if i == j + 1 {
                    out[i] = Some(v - p);
                }
            } else {
                h.resets.push(CounterReset {
                    series: g.name.clone(),
                    at: start + i as f64 * step,
                    from: p,
                    to: v,
                });
            }
        }
        last = Some((i, v));
    }
    out
}

/// The fastest a counter of n8n's can rise: executions (completions, failures, the
/// histogram's count) 10⁵/s — n8n's published peak is about 220/s per instance; CPU seconds
/// 1 024 cores; a histogram's sum of seconds 10⁵ executions/s of up to a day each.
pub(super) fn most_per_s(name: &str) -> f64 {
    if name.starts_with("n8n_process_cpu_seconds_total") {
        1024.0
    } else if name.starts_with("n8n_workflow_execution_duration_seconds_sum") {
        1e5 * 86_400.0
    } else {
        1e5
    }
}

/// A target's `job` and `instance`, with every control character escaped: a label value is
/// outside text, and a raw newline in it would forge lines in tables and findings.
pub(super) fn key(labels: &BTreeMap<String, String>) -> (String, String) {
    let label = |k: &str| {
        crate::util::escape_control(labels.get(k).map_or("", String::as_str)).into_owned()
    };
    (label("job"), label("instance"))
}
