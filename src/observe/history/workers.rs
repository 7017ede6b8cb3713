//! How many workers ran at each step of a history: from the worker Deployment's replicas
//! (kube-state-metrics' `kube_deployment_status_replicas`, when one worker Deployment is
//! there, and the scrapes do not contradict it), else from the worker targets Prometheus scraped up (`up` = 1), else from the worker
//! processes whose CPU counter has a sample at the step. Each step's count is checked (a whole
//! number, at most [`MAX_WORKERS`]); a window holds a count only when every reading in it
//! agrees, so a window where workers came or went is judged at no count.

use super::grain::PerProcess;
use super::{key, selector, Query, Steps};
use crate::observe::prometheus::{Api, Series};
use crate::record::history::Process;
use crate::record::Role;

/// More workers than any deployment runs: a reading above it is not a count.
pub const MAX_WORKERS: f64 = 10_000.0;

/// The count at each step (None: no reading), and how it was told.
pub struct Counts {
    pub per_step: Vec<Option<u32>>,
    pub by: String,
}

/// A count read from a value: whole, finite, within [`MAX_WORKERS`].
fn count(v: f64) -> Option<u32> {
    (v.is_finite() && (0.0..=MAX_WORKERS).contains(&v) && (v - v.round()).abs() < 1e-6)
        .then(|| v.round() as u32)
}

/// The user's matchers a kube-state-metrics series can carry: its namespace, not n8n's job or
/// instance.
fn namespace_only(q: &Query) -> Vec<String> {
    q.matchers
        .iter()
        .filter(|m| m.trim_start().starts_with("namespace"))
        .cloned()
        .collect()
}

/// The worker Deployment's replicas on the grid, when exactly one Deployment named like a
/// worker's answers.
async fn replicas(src: &Api, q: &Query, g: &Steps) -> Option<Counts> {
    let mut m = namespace_only(q);
    m.push("deployment=~\".*worker.*\"".into());
    let found = src
        .query_range(
            &selector("kube_deployment_status_replicas", &m),
            q.start,
            q.end,
            g.step,
        )
        .await
        .ok()?;
    let [one] = found.series.as_slice() else {
        return None;
    };
    let per_step = on_grid(one, g)
        .into_iter()
        .map(|v| v.and_then(count))
        .collect();
    let name = one
        .labels
        .get("deployment")
        .cloned()
        .unwrap_or_else(|| "?".into());
    Some(Counts {
        per_step,
        by: format!("kube_deployment_status_replicas of Deployment {name}"),
    })
}

fn on_grid(s: &Series, g: &Steps) -> Vec<Option<f64>> {
    let mut v = vec![None; g.n];
    for (t, x) in &s.points {
        let i = ((t - g.start) / g.step).round();
        if i >= 0.0 && (i as usize) < g.n {
            v[i as usize] = Some(*x);
        }
    }
    v
}

/// The worker targets scraped up at each entry of the spans the processes were read over: `up`
/// of every target a worker process was read from. Read per window (a coarse grain), a target
/// counts when it was up at any scrape of the window (`max_over_time`).
async fn targets_up(
    src: &Api,
    q: &Query,
    procs: &PerProcess,
    workers: &[&Process],
) -> Option<Vec<(usize, Vec<Option<u32>>)>> {
    let mut out = Vec::new();
    let mut any = false;
    for r in &procs.spans {
        let g = procs.grid_of(r);
        let up = selector("up", &q.matchers);
        let expr = if procs.grain > 1 {
            format!("max_over_time({up}[{:.0}s])", g.step)
        } else {
            up
        };
        let end = g.start + (g.n.max(1) - 1) as f64 * g.step;
        let up = src.query_range(&expr, g.start, end, g.step).await.ok()?;
        let ours: Vec<&Series> = up
            .series
            .iter()
            .filter(|s| {
                let (job, inst) = key(&s.labels);
                workers.iter().any(|p| p.job == job && p.instance == inst)
            })
            .collect();
        any |= !ours.is_empty();
        let grids: Vec<Vec<Option<bool>>> = ours
            .iter()
            .map(|s| up_between_flaps(&on_grid(s, &g)))
            .collect();
        // Entry 0 of the span's grid is the one before it.
        let per_entry = (1..g.n)
            .map(|i| {
                let read: Vec<bool> = grids.iter().filter_map(|v| v[i]).collect();
                // An entry where no target has a sample is no reading (Prometheus was down).
                (!read.is_empty()).then(|| read.iter().filter(|up| **up).count() as u32)
            })
            .collect();
        out.push((r.start, per_entry));
    }
    any.then_some(out)
}

/// Steps a failed scrape makes look down: a target that was up within [`FLAP_STEPS`] before
/// and after a step where `up` was 0 was running through it (a worker busy at its ceiling
/// answers a scrape late; a worker scaled away stays down, or its series ends).
const FLAP_STEPS: usize = 3;

/// `up` on the grid as running or not, failed scrapes between running steps read as running.
fn up_between_flaps(v: &[Option<f64>]) -> Vec<Option<bool>> {
    let up: Vec<Option<bool>> = v.iter().map(|x| x.map(|x| x == 1.0)).collect();
    let near = |from: usize, to: usize| up[from..to].contains(&Some(true));
    (0..up.len())
        .map(|i| match up[i] {
            Some(false) => Some(
                i > 0
                    && near(i.saturating_sub(FLAP_STEPS), i)
                    && near(i + 1, (i + 1 + FLAP_STEPS).min(up.len())),
            ),
            u => u,
        })
        .collect()
}

/// The worker processes with a CPU figure at each entry of the spans read.
fn with_cpu(procs: &PerProcess, workers: &[&Process]) -> Vec<(usize, Vec<Option<u32>>)> {
    let ours: Vec<&super::grain::Proc> = procs
        .procs
        .iter()
        .filter(|p| p.role == Role::Worker && workers.iter().any(|w| w.name() == p.name))
        .collect();
    procs
        .spans
        .iter()
        .map(|r| {
            let per_entry = r
                .clone()
                .map(|e| {
                    let n = ours
                        .iter()
                        .filter(|p| p.cpu.get(e..e + 1).is_some_and(|v| v[0].is_some()))
                        .count();
                    Some(n as u32)
                })
                .collect();
            (r.start, per_entry)
        })
        .collect()
}

/// The count at each step, by the best source the history has: the worker Deployment's
/// replicas over the whole range, unless the scrapes contradict them ([`checked_against`]);
/// else, over the spans the processes were read (the usable
/// windows), the worker targets up or the workers with a CPU figure — an entry of a coarse
/// grain gives the count of each step of its window.
pub(super) async fn counts(
    src: &Api,
    q: &Query,
    g: &Steps,
    processes: &[Process],
    procs: &PerProcess,
) -> Option<Counts> {
    let workers: Vec<&Process> = processes
        .iter()
        .filter(|p| p.role == Role::Worker)
        .collect();
    let declared = replicas(src, q, g).await;
    if workers.is_empty() {
        return declared;
    }
    let scraped = scraped(src, q, g, procs, &workers).await;
    match (declared, scraped) {
        (Some(d), Some(s)) => Some(checked_against(d, s)),
        (d, s) => d.or(s),
    }
}

/// Where the Deployment's replicas and the scrapes both read a count, they must agree: when
/// they differ at more than a tenth of those steps (kube-state-metrics of another cluster or
/// namespace, a Deployment named like the workers that is not theirs), the scrapes — what ran
/// and was read — are used, and the disagreement said.
fn checked_against(declared: Counts, scraped: Counts) -> Counts {
    let both: Vec<(u32, u32)> = declared
        .per_step
        .iter()
        .zip(&scraped.per_step)
        .filter_map(|(d, s)| Some(((*d)?, (*s)?)))
        .collect();
    let differ: Vec<&(u32, u32)> = both.iter().filter(|(d, s)| d != s).collect();
    if both.is_empty() || differ.len() * 10 <= both.len() {
        return declared;
    }
    let (d, s) = differ[0];
    Counts {
        per_step: scraped.per_step,
        by: format!(
            "{} — {} said otherwise at {} of the {} steps both read (e.g. {d} where {s} were \
             scraped): the scrapes are used",
            scraped.by,
            declared.by,
            differ.len(),
            both.len()
        ),
    }
}

/// The count from the scrapes over the spans the processes were read: the worker targets up,
/// else the workers with a CPU figure.
async fn scraped(
    src: &Api,
    q: &Query,
    g: &Steps,
    procs: &PerProcess,
    workers: &[&Process],
) -> Option<Counts> {
    let (entries, by) = match targets_up(src, q, procs, workers).await {
        Some(e) => (e, "the worker targets scraped up (`up`)".to_string()),
        None => (
            with_cpu(procs, workers),
            "the worker processes with a CPU sample (n8n_process_cpu_seconds_total)".into(),
        ),
    };
    let mut per_step = vec![None; g.n];
    let grain = procs.grain.max(1);
    for (from, v) in entries {
        for (k, c) in v.into_iter().enumerate() {
            let e = from + k;
            for x in per_step.iter_mut().skip(e * grain).take(grain) {
                *x = c;
            }
        }
    }
    let by = if grain > 1 {
        format!("{by}, per window")
    } else {
        by
    };
    Some(Counts { per_step, by })
}

/// The window `i..j`'s count: every reading in it the same, and at least half its steps read.
pub fn of_window(per_step: &[Option<u32>], i: usize, j: usize) -> Option<u32> {
    let read: Vec<u32> = per_step.get(i..j)?.iter().flatten().copied().collect();
    let first = *read.first()?;
    (read.iter().all(|c| *c == first) && 2 * read.len() >= j - i && first > 0).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_a_count_only_when_every_reading_agrees() {
        let v = [
            Some(2),
            Some(2),
            None,
            Some(2),
            Some(4),
            Some(4),
            None,
            None,
        ];
        assert_eq!(of_window(&v, 0, 4), Some(2));
        // Workers came during the window: no count.
        assert_eq!(of_window(&v, 2, 6), None);
        // Fewer than half its steps read.
        assert_eq!(of_window(&v, 5, 8), None);
        assert_eq!(of_window(&v, 4, 6), Some(4));
        // No worker up is no count to judge at.
        assert_eq!(of_window(&[Some(0), Some(0)], 0, 2), None);
    }

    #[test]
    fn a_failed_scrape_between_running_steps_is_no_worker_gone() {
        let v = [
            Some(1.0),
            Some(0.0),
            Some(1.0),
            Some(0.0),
            Some(0.0),
            Some(0.0),
            Some(0.0),
        ];
        let up = up_between_flaps(&v);
        assert_eq!(up[1], Some(true));
        // Down for good: no later step was up.
        assert_eq!(&up[3..], &[Some(false); 4]);
        // A target never up before is down.
        assert_eq!(up_between_flaps(&[Some(0.0), Some(1.0)])[0], Some(false));
    }

    /// kube-state-metrics says 8 and 16 where the scrapes read 1 and 2: the scrapes are used,
    /// and the disagreement said (#61: the per-worker ceiling was 8× too low).
    #[test]
    fn replicas_the_scrapes_contradict_give_way_to_the_scrapes() {
        let c = |v: &[Option<u32>], by: &str| Counts {
            per_step: v.to_vec(),
            by: by.into(),
        };
        let declared = c(&[Some(8), Some(8), Some(16), Some(16)], "replicas");
        let scraped = c(&[Some(1), Some(1), Some(2), None], "up");
        let used = checked_against(declared, scraped);
        assert_eq!(used.per_step, [Some(1), Some(1), Some(2), None]);
        assert!(used.by.contains("3 of the 3 steps"), "{}", used.by);
        let agree = checked_against(
            c(&[Some(2), Some(2), Some(3)], "replicas"),
            c(&[Some(2), None, Some(3)], "up"),
        );
        assert_eq!(
            (agree.per_step[1], agree.by.as_str()),
            (Some(2), "replicas")
        );
    }

    #[test]
    fn a_count_is_a_whole_number_of_workers() {
        assert_eq!(count(3.0), Some(3));
        for bad in [2.5, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            assert_eq!(count(bad), None, "{bad}");
        }
    }
}
