//! Each process's series — CPU, resident memory, event-loop lag, database pool — read only
//! where a judgement can use them, at the grain the range affords.
//!
//! Only the usable windows' spans are read: main's series say first which windows are busy or
//! had jobs waiting (`chunks::usable`), and the per-process series, which are most of the
//! points of a deployment with many workers, are asked for those spans alone (a month with a
//! two-hour daily peak reads a tenth of it).
//!
//! While processes × steps stays within [`FINE_POINTS`] every step is read, as main's series
//! are. Past it (a month of 200 workers is 35 million steps) Prometheus is asked for one value
//! per window instead: the CPU counter at the windows' edges, the gauges as `max_over_time`
//! (memory, lag, the pool's size) or `avg_over_time` (connections in use, requests pending)
//! over each window. A window's CPU is then the counter's rise over the window, its peaks are
//! seen on every raw sample rather than on the step grid, and its pool has its means but not
//! its per-step peaks.

use super::{key, processes, selector, Query, Steps, READ};
use crate::observe::prometheus::{Api, PromError, Series};
use crate::record::history::{History, ProcessCpu};
use crate::record::Role;
use std::collections::BTreeMap;
use std::ops::Range;

/// Most process × step values read at every step; a range past it is read per window.
pub(super) const FINE_POINTS: f64 = 1_500_000.0;
/// Usable windows this many windows apart or closer are read as one span.
const JOIN_WINDOWS: usize = 4;

/// A process's values by entry, one run per span read.
#[derive(Default)]
pub(super) struct Entries(Vec<(usize, Vec<Option<f64>>)>);

impl Entries {
    /// The values of entries `r`, when one span read holds them all.
    pub fn get(&self, r: Range<usize>) -> Option<&[Option<f64>]> {
        self.0.iter().find_map(|(from, v)| {
            (r.start >= *from && r.end <= from + v.len()).then(|| &v[r.start - from..r.end - from])
        })
    }

    fn add(&mut self, from: usize, v: Vec<Option<f64>>) {
        if !v.is_empty() {
            self.0.push((from, v));
        }
    }
}

/// One process's series: CPU increases, resident memory, event-loop lag, database pool (in
/// use, the pool's size, requests pending); an entry per step (grain 1) or per window.
pub(super) struct Proc {
    pub name: String,
    pub role: Role,
    pub cpu: Entries,
    pub rss: Entries,
    pub lag: Entries,
    pub pool: [Entries; 3],
}

/// Every process's series over the spans read, and the grain they were read at.
pub(super) struct PerProcess {
    pub procs: Vec<Proc>,
    /// Steps per entry: 1, or the window's steps.
    pub grain: usize,
    /// The spans read, in entries.
    pub spans: Vec<Range<usize>>,
    /// The step grid (entry e of a coarse grain is window e).
    pub grid: Steps,
}

impl PerProcess {
    /// Each process's figures over the steps `i..j` (a window).
    pub fn figures(&self, i: usize, j: usize, step: f64) -> Vec<ProcessCpu> {
        figures(self, i, j, step)
    }

    /// The entries of steps `i..j` (a window's one entry at a coarse grain).
    pub fn entries(&self, i: usize, j: usize) -> Range<usize> {
        if self.grain <= 1 {
            i..j
        } else {
            let k = i / self.grain;
            k..k + 1
        }
    }

    /// The grid span `r` is read on: its entries, after the one before its first (a
    /// counter's rise into the first entry needs the sample before it).
    pub fn grid_of(&self, r: &Range<usize>) -> Steps {
        let g = &self.grid;
        Steps {
            start: g.start + ((r.start * self.grain) as f64 - 1.0) * g.step,
            step: self.grain as f64 * g.step,
            n: r.end - r.start + 1,
        }
    }
}

/// The spans of the usable windows `usable` (each `i..j` in steps), in entries of `grain`
/// steps, near ones joined.
fn spans(usable: &[Range<usize>], grain: usize, per: usize) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let gap = JOIN_WINDOWS * per.max(1) / grain.max(1);
    for w in usable {
        let e = if grain <= 1 {
            w.clone()
        } else {
            w.start / grain..w.start / grain + 1
        };
        match out.last_mut() {
            Some(last) if e.start <= last.end + gap => last.end = e.end.max(last.end),
            _ => out.push(e),
        }
    }
    out
}

/// Reads every process's series over the usable windows (`usable`, each `i..j` of `per`
/// steps at most) of `g`: at every step while processes × steps is within `budget`, else per
/// window. Sets `h.processes` (main: a target of `active`).
pub(super) async fn read(
    src: &Api,
    q: &Query,
    (g, per): (&Steps, usize),
    usable: &[Range<usize>],
    (active, budget): (&[Series], f64),
    h: &mut History,
) -> Result<PerProcess, PromError> {
    let mut out = PerProcess {
        procs: Vec::new(),
        grain: per.max(1),
        spans: spans(usable, per.max(1), per),
        grid: *g,
    };
    // The CPU counter at the first span's window edges says how many processes there are,
    // for a window's worth of steps fewer points. A Prometheus that cannot answer it is read
    // at every step.
    let first = match out.spans.first() {
        Some(r) if per > 1 => read_at(src, q, READ[4], None, &out.grid_of(r)).await.ok(),
        _ => None,
    };
    let many = first.as_ref().is_some_and(|(cpu, _)| {
        let mut targets: Vec<(String, String)> = cpu.iter().map(|s| key(&s.labels)).collect();
        targets.sort();
        targets.dedup();
        targets.len() as f64 * g.n as f64 > budget
    });
    if !many {
        out.grain = 1;
        out.spans = spans(usable, 1, per);
    }
    let long = q.end - q.start > 86_400.0;
    if long {
        let at = if many { "per window" } else { "at every step" };
        eprintln!(
            "n8ncap: reading each process's series over {} span(s) ({at})",
            out.spans.len()
        );
    }
    let mut first = first.filter(|_| many);
    let mut seen: Vec<Series> = Vec::new();
    let mut by_name: BTreeMap<String, Proc> = BTreeMap::new();
    for r in out.spans.clone() {
        let sub = out.grid_of(&r);
        let cpu = first.take();
        let read = read_span(src, q, (&sub, many), cpu, h).await?;
        let [cpu, rss, lag, p_active, p_max, p_pending] = read;
        // The processes found so far (labels only: the points are read into entries).
        for s in &cpu {
            if !seen.iter().any(|x| key(&x.labels) == key(&s.labels)) {
                seen.push(Series {
                    labels: s.labels.clone(),
                    points: Vec::new(),
                });
            }
        }
        h.processes = processes(active, &seen);
        let pool = [p_active, p_max, p_pending];
        for (name, role, mut v) in per_process(&sub, (&cpu, &rss, &lag), &pool, h) {
            let p = by_name.entry(name.clone()).or_insert_with(|| Proc {
                name,
                role,
                cpu: Entries::default(),
                rss: Entries::default(),
                lag: Entries::default(),
                pool: Default::default(),
            });
            // Entry 0 of the span's grid is the one before it: entry k + 1 is span entry k.
            let put = |e: &mut Entries, v: &mut Option<Vec<Option<f64>>>| {
                if let Some(mut v) = v.take() {
                    v.remove(0);
                    e.add(r.start, v);
                }
            };
            put(&mut p.cpu, &mut v[0]);
            put(&mut p.rss, &mut v[1]);
            put(&mut p.lag, &mut v[2]);
            for (e, x) in p.pool.iter_mut().zip(&mut v[3..]) {
                put(e, x);
            }
        }
    }
    h.processes = processes(active, &seen);
    out.procs = by_name.into_values().collect();
    Ok(out)
}

/// The six per-process series over one span's grid `sub` (per window when `many`): CPU
/// (`cpu` when already read), memory, lag, the pool's three gauges.
async fn read_span(
    src: &Api,
    q: &Query,
    (sub, many): (&Steps, bool),
    mut cpu: Option<(Vec<Series>, Vec<String>)>,
    h: &mut History,
) -> Result<[Vec<Series>; 6], PromError> {
    let over = if many {
        [
            None,
            Some("max"),
            Some("max"),
            Some("avg"),
            Some("max"),
            Some("avg"),
        ]
    } else {
        [None; 6]
    };
    let mut read: Vec<Vec<Series>> = Vec::with_capacity(6);
    for (k, metric) in [4, 5, 6, 9, 10, 11]
        .into_iter()
        .map(|i| READ[i])
        .enumerate()
    {
        let (series, warnings) = match cpu.take().filter(|_| k == 0) {
            Some(c) => c,
            None => read_at(src, q, metric, over[k], sub).await?,
        };
        h.warnings.extend(warnings);
        read.push(series);
    }
    Ok(<[Vec<Series>; 6]>::try_from(read).unwrap_or_else(|_| unreachable!()))
}

/// `metric` on `grid`: as it is (`over` None), or `over`_over_time of it over each step.
async fn read_at(
    src: &Api,
    q: &Query,
    metric: &str,
    over: Option<&str>,
    grid: &Steps,
) -> Result<(Vec<Series>, Vec<String>), PromError> {
    let s = selector(metric, &q.matchers);
    let expr = match over {
        Some(f) => format!("{f}_over_time({s}[{:.0}s])", grid.step),
        None => s,
    };
    let end = grid.start + (grid.n.max(1) - 1) as f64 * grid.step;
    let m = src.query_range(&expr, grid.start, end, grid.step).await?;
    Ok((m.series, m.warnings))
}

/// A process's values on a span's grid: CPU increases, memory, lag, pool in use, its size,
/// requests pending (None: not exposed).
type Values = [Option<Vec<Option<f64>>>; 6];

/// Each process of `h.processes` found in `cpu`: its CPU counter's increases, its resident
/// memory and event-loop lag, its pool's gauges, on `g`.
fn per_process(
    g: &Steps,
    (cpu, rss, lag): (&[Series], &[Series], &[Series]),
    pool: &[Vec<Series>; 3],
    h: &mut History,
) -> Vec<(String, Role, Values)> {
    let mut out = Vec::new();
    for s in cpu {
        let target = key(&s.labels);
        let Some(p) = h
            .processes
            .iter()
            .find(|p| (p.job.clone(), p.instance.clone()) == target)
            .cloned()
        else {
            continue;
        };
        let counter = g.checked(s, READ[4], false, h);
        let cpu = g.increases(&counter, h);
        let mut gauge = |v: &[Series], metric: &str| {
            v.iter()
                .find(|x| key(&x.labels) == target)
                .map(|x| g.checked(x, metric, false, h).values)
        };
        let values = [
            Some(cpu),
            gauge(rss, READ[5]),
            gauge(lag, READ[6]),
            gauge(&pool[0], READ[9]),
            gauge(&pool[1], READ[10]),
            gauge(&pool[2], READ[11]),
        ];
        out.push((p.name(), p.role, values));
    }
    out
}

/// Each process's figures over the steps `i..j` (its CPU cores, memory and lag peaks, pool).
pub(super) fn figures(procs: &PerProcess, i: usize, j: usize, step: f64) -> Vec<ProcessCpu> {
    // Each process's entries of the window: its steps, or its one entry read per window.
    let e = procs.entries(i, j);
    let per_entry = step * procs.grain as f64;
    procs
        .procs
        .iter()
        .filter_map(|p| {
            let (used, k) = p
                .cpu
                .get(e.clone())?
                .iter()
                .flatten()
                .fold((0.0, 0), |(a, k), x| (a + x, k + 1));
            let top = |v: &Entries| v.get(e.clone())?.iter().flatten().copied().reduce(f64::max);
            let pool = [0, 1, 2].map(|k| p.pool[k].get(e.clone()).unwrap_or_default());
            (k > 0).then(|| ProcessCpu {
                process: p.name.clone(),
                role: p.role,
                cores: used / (k as f64 * per_entry),
                rss_max_bytes: top(&p.rss),
                eventloop_lag_max_s: top(&p.lag),
                db_pool: pool_window(pool, e.len()).map(Box::new),
            })
        })
        .collect()
}

/// A window's pool figures from its per-step gauges (connections in use never above the pool:
/// a step that says so is left out).
fn pool_window(
    v: [&[Option<f64>]; 3],
    entries: usize,
) -> Option<crate::record::stage::DbPoolObserved> {
    let steps: Vec<(f64, f64, f64)> = (0..entries)
        .filter_map(|k| {
            let (a, m) = (v[0].get(k).copied()??, v[1].get(k).copied()??);
            let p = v[2].get(k).copied().flatten().unwrap_or(0.0);
            (a <= m && m <= crate::observe::scrape::MAX_POOL).then_some((a, m, p))
        })
        .collect();
    if steps.is_empty() {
        return None;
    }
    let n = steps.len() as f64;
    let sum = |f: fn(&(f64, f64, f64)) -> f64| steps.iter().map(f).sum::<f64>();
    let top = |f: fn(&(f64, f64, f64)) -> f64| steps.iter().map(f).fold(0.0, f64::max);
    Some(crate::record::stage::DbPoolObserved {
        max: top(|s| s.1),
        active_mean: sum(|s| s.0) / n,
        active_max: top(|s| s.0),
        pending_mean: sum(|s| s.2) / n,
        pending_max: top(|s| s.2),
        samples: steps.len() as u32,
        gaps: (entries - steps.len()) as u32,
        ..Default::default()
    })
}
