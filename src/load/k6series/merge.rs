//! Many k6 outputs read as one run (k6-operator's pods, any distributed k6): each file's clock
//! aligned to the first's from where their `vus` steps overlap, the files cut to the span they
//! all cover (a file that ended early is a gap, not a level change), then requests, iterations
//! and dropped iterations merged by time and the virtual users summed per instant.

use super::*;
use crate::record::summary::MergedFile;

/// A skew smaller than this is within k6's one-second sampling of `vus`: not corrected.
pub const SKEW_S: f64 = 1.0;
/// The most two files' clocks may differ before they are refused as different runs.
pub const MOST_SKEW_S: f64 = 300.0;

/// When `vus` changed, and in which direction (+1 up, −1 down).
fn changes(vus: &[(f64, f64)]) -> Vec<(f64, f64)> {
    vus.windows(2)
        .filter(|w| w[1].1 != w[0].1)
        .map(|w| (w[1].0, (w[1].1 - w[0].1).signum()))
        .collect()
}

/// How far `b`'s clock runs ahead of `a`'s: the median, over `b`'s `vus` changes, of the time to
/// `a`'s nearest change in the same direction; without changes, the first samples' difference.
fn offset(a: &Series, b: &Series) -> Option<f64> {
    let (ca, cb) = (changes(&a.vus), changes(&b.vus));
    let mut diffs: Vec<f64> = cb
        .iter()
        .filter_map(|(t, dir)| {
            ca.iter()
                .filter(|(_, d)| d == dir)
                .map(|(u, _)| t - u)
                .min_by(|x, y| x.abs().total_cmp(&y.abs()))
        })
        .filter(|d| d.abs() <= MOST_SKEW_S)
        .collect();
    if diffs.is_empty() {
        let first = |s: &Series| s.vus.first().map(|v| v.0);
        return Some(first(b)? - first(a)?);
    }
    diffs.sort_by(f64::total_cmp);
    Some(diffs[diffs.len() / 2])
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

/// Merges `files` (name, series) into one series, with what was done to each.
pub fn merge(files: Vec<(String, Series)>) -> Result<(Series, Vec<MergedFile>), BadInput> {
    let Some(first) = files.first().map(|f| f.1.clone()) else {
        return Err(BadInput("no k6 output to read".into()));
    };
    let mut series = Vec::new();
    let mut books = Vec::new();
    for (name, mut s) in files {
        let ahead = offset(&first, &s).unwrap_or(0.0);
        if ahead.abs() > MOST_SKEW_S {
            return Err(BadInput(format!(
                "{name}: its run starts {ahead:.0} s from the first file's: not one run — give the outputs of one distributed run"
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
        // Far-apart runs are refused.
        let far = file(1000.0, &[(1000.0, 2.0)], 1010.0);
        let x = file(100.0, &[(100.0, 2.0)], 110.0);
        assert!(merge(vec![("x".into(), x), ("far".into(), far)]).is_err());
    }
}
