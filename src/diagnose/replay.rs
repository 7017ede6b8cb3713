//! A replay judged: each autoscaler run over the same arrivals (`model::autoscaler`), the
//! ticks thinned for the record, and the verdict that sets them side by side — which one kept
//! the wait short, and which removed busy workers.

use crate::model::autoscaler::{replay, Policy, Replay, Workload};
use crate::record::autoscaler::ReplayRun;

/// Ticks kept per replay in the record (the peaks are the full run's).
const TICKS_KEPT: usize = 2000;

pub struct Replays {
    pub arrivals_from: String,
    pub arrivals: Vec<f64>,
    pub arrival_gaps: Vec<String>,
    pub workload: Workload,
    pub workload_from: Vec<String>,
    /// Each autoscaler with the shutdown window of the workers it removes, s.
    pub policies: Vec<(Policy, f64)>,
    pub not_replayed: Vec<String>,
}

pub fn judge_replay(i: Replays) -> ReplayRun {
    let n = i.arrivals.len();
    let mean = i.arrivals.iter().sum::<f64>() / n.max(1) as f64;
    let peak = i.arrivals.iter().copied().fold(0.0, f64::max);
    let replays: Vec<Replay> = i
        .policies
        .iter()
        .map(|(p, window_s)| {
            let w = Workload {
                window_s: *window_s,
                ..i.workload
            };
            thin(replay(&i.arrivals, p, &w))
        })
        .collect();
    let mut verdict: Vec<String> = replays.iter().map(words).collect();
    if let [a, b] = replays.as_slice() {
        let hours = |r: &Replay| r.replica_s / 3600.0;
        verdict.push(format!(
            "Side by side: longest wait {} against {}, worker-hours {:.1} against {:.1}, executions lost {:.1} against {:.1}.",
            wait(a.peak_wait_s.0),
            wait(b.peak_wait_s.0),
            hours(a),
            hours(b),
            a.lost,
            b.lost
        ));
    }
    verdict.extend(i.not_replayed.iter().cloned());
    ReplayRun {
        arrivals_from: i.arrivals_from,
        seconds: n,
        arrival_gaps: i.arrival_gaps,
        arrivals_mean_per_s: mean,
        arrivals_peak_per_s: peak,
        workload: i.workload,
        workload_from: i.workload_from,
        replays,
        not_replayed: i.not_replayed,
        verdict: verdict.join(" "),
    }
}

fn wait(s: f64) -> String {
    if s.is_finite() {
        format!("{s:.0} s")
    } else {
        "unbounded (no worker serving)".into()
    }
}

fn words(r: &Replay) -> String {
    let downs: Vec<_> = r.events.iter().filter(|e| e.to < e.from).collect();
    let held: f64 = downs.iter().map(|e| e.held).sum::<f64>() + 0.0;
    format!(
        "{}: backlog peak {:.0} jobs at {} s, longest wait {} at {} s; {}–{} replicas, {:.1} worker-hours; {} scale-down{} removing workers that held {held:.1} executions, {:.1} of them lost.",
        r.name,
        r.peak_waiting.0,
        r.peak_waiting.1,
        wait(r.peak_wait_s.0),
        r.peak_wait_s.1,
        r.replicas_range.0,
        r.replicas_range.1,
        r.replica_s / 3600.0,
        downs.len(),
        if downs.len() == 1 { "" } else { "s" },
        r.lost
    )
}

/// Every `k`-th tick and every tick where the replicas changed, so the record stays small.
fn thin(mut r: Replay) -> Replay {
    let k = r.ticks.len().div_ceil(TICKS_KEPT).max(1);
    if k > 1 {
        let mut last = None;
        r.ticks = r
            .ticks
            .into_iter()
            .enumerate()
            .filter(|(i, t)| {
                let keep = i % k == 0 || last != Some((t.replicas, t.ready));
                last = Some((t.replicas, t.ready));
                keep
            })
            .map(|(_, t)| t)
            .collect();
    }
    r
}
