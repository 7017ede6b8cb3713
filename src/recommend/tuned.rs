//! An autoscaler tuned by its own replay: given arrivals, the generated object's minimum, target
//! and maximum are chosen by replaying candidates through the same model as `replay`
//! (`model::autoscaler`) — the fewest worker-hours whose longest queue wait stays within a bound
//! and that loses nothing at scale-down — and the deployed object, when it does better on the
//! same arrivals, is kept and said so.

use crate::model::autoscaler::{replay, Metric, Policy, Replay, Workload};
use crate::model::settings::{Provenance, Sourced};
use crate::model::OPERATING_SHARE;
use crate::record::autoscaler::AutoscalerPlan;

/// The arrivals and the bound a tuning replays against.
pub struct Tuning<'a> {
    pub arrivals: &'a [f64],
    /// Where they came from, for the sources.
    pub from: &'a str,
    /// The workers (with the generated object's shutdown window).
    pub workload: Workload,
    /// The longest queue wait allowed, s (`--max-wait`).
    pub max_wait_s: f64,
}

/// Most minimums tried (the replicas a peak needs past this are tried on a coarser grid).
const MOST_MINIMUMS: u32 = 40;
/// The longest stretch of arrivals the candidates are replayed over, s: past it, the stretch
/// around the peak (where the minimum and the wait are decided) — a week of seconds replayed
/// for every candidate would cost minutes.
const TUNED_OVER_S: usize = 7200;

/// The arrivals the candidates are replayed over: all of them, or the [`TUNED_OVER_S`] around
/// the peak, with its start (s).
fn stretch(arrivals: &[f64]) -> (&[f64], usize) {
    if arrivals.len() <= TUNED_OVER_S {
        return (arrivals, 0);
    }
    let peak = arrivals
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i);
    let start = peak
        .saturating_sub(TUNED_OVER_S / 2)
        .min(arrivals.len() - TUNED_OVER_S);
    (&arrivals[start..start + TUNED_OVER_S], start)
}

/// What a replay of one candidate gave.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    min: u32,
    max: u32,
    target: f64,
    wait_s: f64,
    lost: f64,
    replica_s: f64,
}

impl Outcome {
    fn of(min: u32, max: u32, target: f64, r: &Replay) -> Outcome {
        Outcome {
            min,
            max,
            target,
            wait_s: r.peak_wait_s.0,
            lost: r.lost,
            replica_s: r.replica_s,
        }
    }

    fn keeps(&self, max_wait_s: f64) -> bool {
        self.wait_s <= max_wait_s && self.lost < 0.5
    }

    fn words(&self) -> String {
        format!(
            "longest wait {:.1} s, {:.2} worker-hours, {:.1} executions lost",
            self.wait_s,
            self.replica_s / 3600.0,
            self.lost
        )
    }
}

/// The minimums tried: every count up to [`MOST_MINIMUMS`], past it a geometric grid to `top`.
fn minimums(top: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=top.min(MOST_MINIMUMS)).collect();
    let mut n = f64::from(MOST_MINIMUMS);
    while (n as u32) < top {
        n *= 1.25;
        v.push((n.ceil() as u32).min(top));
    }
    v.dedup();
    v
}

/// Tunes `plan` by replaying candidates of `generated` (the object as the plan writes it, read
/// back) over `t`'s arrivals; `deployed` is the deployment's own object with its workers'
/// window, when it can be replayed. The plan's minimum, target and maximum take the chosen
/// values, each with the replay result that chose it; its notes say what was compared.
pub fn tune(
    plan: &mut AutoscalerPlan,
    generated: &Policy,
    deployed: Option<(&Policy, f64)>,
    t: &Tuning,
) {
    let w = &t.workload;
    let (arrivals, from_s) = stretch(t.arrivals);
    if arrivals.len() < t.arrivals.len() {
        plan.notes.push(format!(
            "the candidates were replayed over the {} s around the peak ({from_s}–{} s of {} s): \
             the worker-hours compared are that stretch's",
            arrivals.len(),
            from_s + arrivals.len(),
            t.arrivals.len()
        ));
    }
    let peak = arrivals.iter().copied().fold(0.0, f64::max);
    let at_op = OPERATING_SHARE * w.per_worker_per_s;
    if !(peak > 0.0 && at_op > 0.0) {
        plan.notes.push(format!(
            "{}: no arrival to replay; the values come from the run alone",
            t.from
        ));
        return;
    }
    // The peak at 2/3 of a worker's ceiling, one more for a pod that is starting or leaving;
    // never past the shared bound the plan already holds to.
    let needed = (peak / at_op).ceil().max(1.0) as u32;
    let max = (needed + 1).min(plan.max_replicas.value.max(1));
    let (best, closest) = search(plan, generated, arrivals, w, (max, t.max_wait_s));
    let from = t.from;
    let bound = t.max_wait_s;
    let chosen = match best {
        Some(b) => b,
        None => {
            let c = closest.expect("one candidate at least");
            plan.notes.push(format!(
                "no candidate kept the longest wait within {bound:.0} s on {from}: the one that \
                 came closest is written ({}); the peak {peak:.1}/s needs more than {max} \
                 worker(s) at 2/3 of their ceiling, or a shared bound caps the maximum",
                c.words()
            ));
            c
        }
    };
    if let Some((d, window_s)) = deployed {
        let dw = Workload { window_s, ..*w };
        let r = replay(arrivals, d, &dw);
        let target = d.signals.first().map_or(chosen.target, |s| s.1);
        let o = Outcome::of(d.min, d.max, target, &r);
        if o.keeps(bound) && o.replica_s < chosen.replica_s {
            plan.notes.push(format!(
                "the deployed {} does better on {from} ({}) than any candidate ({}): its \
                 minimum and maximum are kept",
                d.name,
                o.words(),
                chosen.words()
            ));
            set(plan, (o.min, o.max.max(o.min), None), &o, t);
            return;
        }
        plan.notes.push(format!(
            "on {from}, this object ({}) against the deployed {} ({})",
            chosen.words(),
            d.name,
            o.words()
        ));
    }
    set(
        plan,
        (chosen.min, chosen.max, Some(chosen.target)),
        &chosen,
        t,
    );
}

/// Every candidate replayed: the cheapest that keeps the wait (if any), and the one whose wait
/// came closest.
fn search(
    plan: &AutoscalerPlan,
    generated: &Policy,
    arrivals: &[f64],
    w: &Workload,
    (max, max_wait_s): (u32, f64),
) -> (Option<Outcome>, Option<Outcome>) {
    let holds = w.per_worker_per_s * w.job_s;
    // The plan's target, and what a worker holds at 1/2, 2/3 and all of its ceiling: a higher
    // one scales later, which the wait bound then judges.
    let mut targets = vec![
        plan.per_replica.value,
        0.5 * holds,
        OPERATING_SHARE * holds,
        holds,
    ];
    targets.retain(|v| v.is_finite() && *v > 0.0);
    let mut best: Option<Outcome> = None;
    let mut closest: Option<Outcome> = None;
    for min in minimums(max) {
        for &target in &targets {
            let mut p = generated.clone();
            p.min = min;
            p.max = max;
            p.signals = vec![(Metric::Held, (target * 10.0).floor().max(1.0) / 10.0)];
            let o = Outcome::of(min, max, p.signals[0].1, &replay(arrivals, &p, w));
            if o.keeps(max_wait_s) && best.is_none_or(|b| o.replica_s < b.replica_s) {
                best = Some(o);
            }
            if closest.is_none_or(|c| o.wait_s < c.wait_s) {
                closest = Some(o);
            }
        }
    }
    (best, closest)
}

/// The plan's values from a replayed outcome, each with the result that chose it.
fn set(
    plan: &mut AutoscalerPlan,
    (min, max, target): (u32, u32, Option<f64>),
    o: &Outcome,
    t: &Tuning,
) {
    let why = format!(
        "replayed on {}: the fewest worker-hours whose longest wait stays within {:.0} s and \
         that loses nothing — {}",
        t.from,
        t.max_wait_s,
        o.words()
    );
    let min_why = match target {
        Some(_) => why.clone(),
        None => format!("kept from the deployed object, {why}"),
    };
    plan.min_replicas = Sourced::new(min, Provenance::Proposed(min_why));
    match target {
        Some(v) => {
            plan.max_replicas = Sourced::new(
                max,
                Provenance::Proposed(format!(
                    "the peak {:.1}/s at 2/3 of one worker's ceiling {:.2}/s, and one more; {why}",
                    t.arrivals.iter().copied().fold(0.0, f64::max),
                    t.workload.per_worker_per_s
                )),
            );
            plan.per_replica = Sourced::new(v, Provenance::Proposed(why));
        }
        // The deployed object's bounds, kept: it did better on these arrivals.
        None => {
            plan.max_replicas = Sourced::new(
                max,
                Provenance::Proposed(format!("kept from the deployed object, {why}")),
            );
        }
    }
}

#[cfg(test)]
mod tests;
