//! Closed or open: per scenario, from how its iterations start.

use super::segment::vus_steps;
use super::*;

/// A scenario is closed when its iteration starts follow iteration ends far more often than
/// chance would make them; without iteration points, when it dropped nothing.
pub fn closed_scenarios(s: &Series) -> Vec<bool> {
    let mut ends: Vec<Vec<f64>> = vec![Vec::new(); s.scenarios.len()];
    for (end, _, sc) in &s.iters {
        ends[*sc].push(*end);
    }
    // A file stamped to the second (k6's default CSV) cannot show the coincidence: there the
    // `vus` gauge tells — held for several samples running under a closed executor, moving
    // with the busy users under an arrival-rate one.
    let coarse = s.resolution_s >= 0.05;
    let held_share = {
        let steps = vus_steps(&s.vus, f64::NEG_INFINITY, f64::INFINITY);
        let total: f64 = steps.iter().map(|x| x.1 - x.0 + 1.0).sum();
        let held: f64 = steps
            .iter()
            .filter(|x| x.1 - x.0 >= 2.5)
            .map(|x| x.1 - x.0 + 1.0)
            .sum();
        if total > 0.0 {
            held / total
        } else {
            1.0
        }
    };
    (0..s.scenarios.len())
        .map(|sc| {
            let e = &ends[sc];
            let dropped = s.dropped.iter().any(|d| d.1 == sc);
            if coarse {
                return !dropped && held_share >= 0.5;
            }
            // Only arrival-rate executors drop iterations.
            if dropped || e.len() < 10 {
                return !dropped;
            }
            let span = (e[e.len() - 1] - e[0]).max(1e-3);
            let lambda = e.len() as f64 / span;
            let window = COINCIDE_S + s.resolution_s;
            let chance = 1.0 - (-lambda * window).exp();
            let starts = s.iters.iter().filter(|i| i.2 == sc).map(|i| i.0 - i.1);
            let (mut hit, mut n) = (0usize, 0usize);
            for st in starts {
                n += 1;
                let k = e.partition_point(|x| *x < st - window);
                if e.get(k).is_some_and(|x| *x <= st + 0.001 + s.resolution_s) {
                    hit += 1;
                }
            }
            let f = hit as f64 / n.max(1) as f64;
            f >= 0.5 && f > chance + 0.3
        })
        .collect()
}
