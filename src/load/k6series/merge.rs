//! Many k6 outputs read as one run (k6-operator's pods, any distributed k6): each file's clock
//! aligned to the first's from where their `vus` curves overlap, the files cut to the span they
//! all cover (a file that ended early is a gap, not a level change), then requests, iterations
//! and dropped iterations merged by time and the virtual users summed per instant.

use super::*;
use crate::record::summary::MergedFile;

/// A skew smaller than this is within k6's one-second sampling of `vus`: not corrected.
pub const SKEW_S: f64 = 1.0;
/// The most two files' clocks are searched apart for their skew.
pub const MOST_SKEW_S: f64 = 120.0;

/// The step that offsets are tried at, s.
const STEP_S: f64 = 0.05;

/// A file's `vus` at `t` as a share of its most: its latest sample, 0 before its first sample
/// and a second past its last (the gauge is sampled once a second).
fn share_at(vus: &[(f64, f64)], most: f64, t: f64) -> f64 {
    let i = vus.partition_point(|v| v.0 <= t);
    match (i, vus.last()) {
        (0, _) | (_, None) => 0.0,
        (_, Some(last)) if t > last.0 + 1.0 => 0.0,
        _ => vus[i - 1].1 / most,
    }
}

/// How far `b`'s clock runs ahead of `a`'s, from where their `vus` curves overlap: the offset
/// (within ±[`MOST_SKEW_S`], by [`STEP_S`]) at which `b`'s curve, each as a share of its
/// most (pods may run different numbers of users), lies closest to `a`'s — ramps, steps and
/// the runs' edges all count — the middle of the offsets that fit equally well (a step is
/// known to a second). None when either file has no `vus` samples.
fn offset(a: &Series, b: &Series) -> Option<f64> {
    let most = |s: &Series| s.vus.iter().map(|v| v.1).fold(0.0, f64::max);
    let (ma, mb) = (most(a), most(b));
    if a.vus.is_empty() || b.vus.is_empty() || ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    let from = a.vus[0].0;
    let to = a.vus[a.vus.len() - 1].0 + 1.0;
    // Σ |a − b| over a's span, read every `dt` seconds, with b moved by `d`.
    let misfit = |d: f64, dt: f64| {
        let n = ((to - from) / dt).ceil() as usize;
        (0..=n)
            .map(|k| {
                let t = from + k as f64 * dt;
                (share_at(&a.vus, ma, t) - share_at(&b.vus, mb, t + d)).abs() * dt
            })
            .sum::<f64>()
    };
    // Coarse: whole seconds over the range, read every 0.5 s (coarser for a long run: at most
    // 20 000 reads per offset); fine: STEP_S around the best.
    let coarse_dt = 0.5f64.max((to - from) / 20_000.0);
    let coarse = (-(MOST_SKEW_S as i64)..=MOST_SKEW_S as i64)
        .map(|d| (d as f64, misfit(d as f64, coarse_dt)))
        .min_by(|x, y| x.1.total_cmp(&y.1).then(x.0.abs().total_cmp(&y.0.abs())))?;
    // The best fit at the search's edge, or no better than no overlap at all, is no fit: the
    // clocks may be further apart.
    let alone = misfit(f64::INFINITY, coarse_dt);
    if coarse.0.abs() >= MOST_SKEW_S || coarse.1 >= alone * (1.0 - 1e-9) {
        return Some(f64::INFINITY.copysign(coarse.0));
    }
    // Read at STEP_S, or coarser for a long run (at most 200 000 reads per offset tried).
    let dt = STEP_S.max((to - from) / 200_000.0);
    let fine: Vec<(f64, f64)> = (-40..=40)
        .map(|k| coarse.0 + k as f64 * STEP_S)
        .map(|d| (d, misfit(d, dt)))
        .collect();
    let best = fine.iter().map(|f| f.1).fold(f64::INFINITY, f64::min);
    let ties: Vec<f64> = fine
        .iter()
        .filter(|f| f.1 <= best + 1e-9 * (1.0 + best))
        .map(|f| f.0)
        .collect();
    Some((ties[0] + ties[ties.len() - 1]) / 2.0)
}

fn shift(s: &mut Series, by: f64) {
    for r in &mut s.reqs {
        r.end += by;
    }
    for i in &mut s.iters {
        i.0 += by;
    }
    for v in &mut s.vus {
        v.0 += by;
    }
    for d in &mut s.dropped {
        d.0 += by;
    }
}

/// The span a file covers: its first `vus` sample (or request start) to its last sample (or
/// request end).
fn span(s: &Series) -> (f64, f64) {
    let starts = s
        .vus
        .iter()
        .map(|v| v.0)
        .chain(s.reqs.iter().map(Req::start));
    let ends = s
        .vus
        .iter()
        .map(|v| v.0)
        .chain(s.reqs.iter().map(|r| r.end));
    (
        starts.fold(f64::INFINITY, f64::min),
        ends.fold(f64::NEG_INFINITY, f64::max),
    )
}

/// Σ of every file's `vus` at each instant one of them was sampled (a file counts its latest
/// sample), within `(from, to)`.
fn summed_vus(files: &[Series], (from, to): (f64, f64)) -> Vec<(f64, f64)> {
    let mut times: Vec<f64> = files
        .iter()
        .flat_map(|s| s.vus.iter().map(|v| v.0))
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    times
        .into_iter()
        .map(|t| {
            let total = files
                .iter()
                .map(|s| {
                    let i = s.vus.partition_point(|v| v.0 <= t);
                    if i == 0 {
                        0.0
                    } else {
                        s.vus[i - 1].1
                    }
                })
                .sum();
            (t, total)
        })
        .collect()
}

/// One load generator's output given twice (the same file, or a copy): its requests would be
/// counted twice and the ceiling doubled.
fn same_output_twice(files: &[(String, Series)]) -> Result<(), BadInput> {
    for (i, (a, sa)) in files.iter().enumerate() {
        if let Some((b, _)) = files[i + 1..]
            .iter()
            .find(|(_, sb)| !sa.reqs.is_empty() && sa.reqs == sb.reqs && sa.vus == sb.vus)
        {
            return Err(BadInput(format!(
                "{a} and {b} hold the same requests at the same times: one load generator's \
                 output given twice (or a copy of it) would count its load twice — give each \
                 generator's file once"
            )));
        }
    }
    Ok(())
}

/// Merges `files` (name, series) into one series, with what was done to each.
pub fn merge(files: Vec<(String, Series)>) -> Result<(Series, Vec<MergedFile>), BadInput> {
    let Some(first) = files.first().map(|f| f.1.clone()) else {
        return Err(BadInput("no k6 output to read".into()));
    };
    same_output_twice(&files)?;
    let (series, mut books) = aligned(&first, files)?;
    let spans: Vec<(f64, f64)> = series.iter().map(span).collect();
    let from = spans.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
    let to = spans.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    if to <= from {
        return Err(BadInput(
            "the k6 outputs do not overlap in time: they are not one distributed run".into(),
        ));
    }
    let mut out = Series {
        resolution_s: series.iter().map(|s| s.resolution_s).fold(0.0, f64::max),
        vus: summed_vus(&series, (from, to)),
        ..Series::default()
    };
    for (s, book) in series.iter().zip(books.iter_mut()) {
        // Scenarios by name: the same scenario in two files is one.
        let index: Vec<usize> = s
            .scenarios
            .iter()
            .map(|n| match out.scenarios.iter().position(|m| m == n) {
                Some(i) => i,
                None => {
                    out.scenarios.push(n.clone());
                    out.scenarios.len() - 1
                }
            })
            .collect();
        let inside = |t: f64| t >= from && t <= to;
        for r in &s.reqs {
            if inside(r.start()) && inside(r.end) {
                out.reqs.push(Req {
                    scenario: index[r.scenario],
                    ..*r
                });
            } else {
                book.cut_requests += 1;
            }
        }
        out.iters.extend(
            s.iters
                .iter()
                .filter(|i| inside(i.0))
                .map(|(t, d, sc)| (*t, *d, index[*sc])),
        );
        out.dropped.extend(
            s.dropped
                .iter()
                .filter(|d| inside(d.0))
                .map(|(t, sc, n)| (*t, index[*sc], *n)),
        );
    }
    out.reqs.sort_by(|a, b| a.end.total_cmp(&b.end));
    out.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.dropped.sort_by(|a, b| a.0.total_cmp(&b.0));
    if out.reqs.len() > MAX_POINTS {
        return Err(BadInput(format!(
            "the k6 outputs hold more than {MAX_POINTS} requests together: cut them to the run"
        )));
    }
    Ok((out, books))
}

/// Each file's series on the first file's clock: shifted by how far its vus curve is ahead
/// when that is past the skew k6's resolution allows, with its book; a file whose curve matches
/// at no offset is refused.
fn aligned(
    first: &Series,
    files: Vec<(String, Series)>,
) -> Result<(Vec<Series>, Vec<MergedFile>), BadInput> {
    let first_name = files[0].0.clone();
    let mut series = Vec::new();
    let mut books = Vec::new();
    for (name, mut s) in files {
        let ahead = offset(first, &s).unwrap_or(0.0);
        if ahead.is_infinite() {
            return Err(BadInput(format!(
                "{name}: its vus curve matches {first_name}'s at no offset within ±{MOST_SKEW_S:.0} \
                 s: the clocks are further apart than that, or the files are not one run — set \
                 the load generators' clocks (NTP) and run again, or read each file alone"
            )));
        }
        let aligned = ahead.abs() >= SKEW_S;
        if aligned {
            shift(&mut s, -ahead);
        }
        books.push(MergedFile {
            file: name,
            clock_ahead_s: ahead,
            aligned,
            requests: s.reqs.len() as u64,
            cut_requests: 0,
        });
        series.push(s);
    }
    Ok((series, books))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(start: f64, steps: &[(f64, f64)], end: f64) -> Series {
        // vus sampled every second from `start`; `steps`: (from t, value).
        let mut s = Series {
            scenarios: vec!["default".into()],
            ..Series::default()
        };
        let mut t = start;
        while t <= end {
            let v = steps
                .iter()
                .rev()
                .find(|(from, _)| t >= *from)
                .map_or(0.0, |s| s.1);
            s.vus.push((t, v));
            s.reqs.push(Req {
                end: t + 0.5,
                dur: 0.4,
                failed: false,
                check_ok: true,
                status: 200,
                scenario: 0,
            });
            t += 1.0;
        }
        s
    }

    #[test]
    fn a_shifted_clock_is_aligned_and_an_early_end_is_cut_not_a_level() {
        let a = file(100.3, &[(100.0, 2.0), (110.0, 6.0)], 130.0);
        // b ran the same plan, its clock 2 s ahead.
        let b = file(102.6, &[(102.0, 2.0), (112.0, 6.0)], 132.0);
        // c ended 5 s early.
        let c = file(100.8, &[(100.0, 2.0), (110.0, 6.0)], 125.0);
        let (m, books) = merge(vec![("a".into(), a), ("b".into(), b), ("c".into(), c)]).unwrap();
        assert!((books[1].clock_ahead_s - 2.0).abs() < 0.5, "{books:?}");
        assert!(books[1].aligned && !books[2].aligned);
        // The merged run ends with c: nothing after 125.8, so the sum never drops to 12 − 6.
        let last = m.vus.last().unwrap();
        assert!(last.0 <= 125.8 + 1e-9, "{last:?}");
        assert!(
            m.vus.iter().filter(|v| v.0 > 112.0).all(|v| v.1 == 18.0),
            "{:?}",
            m.vus
        );
        assert!(
            books[0].cut_requests > 0 && books[2].cut_requests <= 1,
            "{books:?}"
        );
        assert_eq!(m.scenarios, ["default"]);
        // A ramp of one user a second (k6's ramping-vus): every step is a second from the next,
        // so the nearest step is no guide; the whole curve is.
        let ramp: Vec<(f64, f64)> = (0..8).map(|k| (200.0 + k as f64, k as f64)).collect();
        let ramped = |start: f64| {
            let mut s = file(
                start,
                &ramp
                    .iter()
                    .map(|(t, v)| (t + start - 200.0, *v))
                    .collect::<Vec<_>>(),
                start + 20.0,
            );
            s.vus.retain(|v| v.0 >= start);
            s
        };
        let (r0, r1) = (ramped(200.2), ramped(202.2));
        let (_, books) = merge(vec![("r0".into(), r0), ("r1".into(), r1)]).unwrap();
        assert!((books[1].clock_ahead_s - 2.0).abs() < 0.3, "{books:?}");
        // Runs that do not overlap in time are refused.
        let far = file(1000.0, &[(1000.0, 2.0)], 1010.0);
        let x = file(100.0, &[(100.0, 2.0)], 110.0);
        assert!(merge(vec![("x".into(), x), ("far".into(), far)]).is_err());
    }
}
