//! n8n's production history from a Prometheus-compatible API: which processes there are (main
//! is the target exposing the queue gauges, a `role` label overrides, every other target with
//! n8n's process metrics is a worker), the queue gauges and counters on main, CPU per process,
//! execution durations, and the settings `n8ncap exporter` published — cut into windows.
//! Every sample is checked before it counts: a missing or impossible one (NaN, ±Inf, negative,
//! a gauge above 10⁶ jobs) is a gap with its reason, a counter that falls is a reset (its step
//! gives no figure), so no restart is ever turned into throughput.
//!
//! Main's series are read at every step and cut into windows first; each process's (CPU,
//! memory, lag, pool, `up`) only over the windows a judgement can use, per window when there
//! are many (`grain`). The processes listed, and the worker counts from `up` or CPU, are those
//! of the windows read; `kube_deployment_status_replicas` counts every window.
//!
//! A range read is a source of evidence ([`Range`]): its windows made into stages by
//! `stages.rs`.
//!
//! Not here: judging the stages and windows (`diagnose::history`).

use super::prometheus::{Api, PromError, Series};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::record::evidence::{Evidence, Source as EvidenceSource};
use crate::record::history::{ExporterSettings, History, Process, Window};
use crate::record::Role;
use std::collections::BTreeMap;

use grid::{check, grid, increases, key, selector, Grid, MAX_LISTED_GAPS};

/// Most steps per series read at once (a week at 15 s); a longer range is read in parts.
pub const MAX_STEPS: f64 = 40_320.0;
/// Most steps per series a range is read at (30 days at 1 s).
pub const MAX_TOTAL_STEPS: f64 = 2_592_000.0;

/// What to read.
#[derive(Debug, Clone)]
pub struct Query {
    pub start: f64,
    pub end: f64,
    /// Label matchers selecting the deployment, each `name="value"` (or `=~`, `!=`).
    pub matchers: Vec<String>,
    /// The step, when given (`--step`).
    pub step: Option<f64>,
    /// The window, when given (`--window`); else 60 s.
    pub window: Option<f64>,
}

/// The scrape interval: the median spacing of n8n's CPU counter's raw samples in the last
/// 5 minutes of the range (a range selector at an instant gives the samples as scraped).
async fn scrape_interval(src: &Api, q: &Query) -> Option<f64> {
    let expr = format!(
        "{}[5m]",
        selector("n8n_process_cpu_seconds_total", &q.matchers)
    );
    let (data, _) = src
        .get(
            "/api/v1/query",
            &[("query", expr), ("time", format!("{:.3}", q.end))],
        )
        .await
        .ok()?;
    let mut gaps: Vec<f64> = super::prometheus::matrix(data)
        .ok()?
        .iter()
        .flat_map(|s| {
            s.points
                .windows(2)
                .map(|w| w[1].0 - w[0].0)
                .collect::<Vec<_>>()
        })
        .filter(|d| *d > 0.0)
        .collect();
    if gaps.len() < 2 {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    Some(gaps[gaps.len() / 2])
}

/// How often a series changed value (median spacing of its changes), when it changed enough.
fn refresh_of(g: &Grid, step: f64) -> Option<f64> {
    let mut changes = Vec::new();
    let mut last: Option<(usize, f64)> = None;
    for (i, v) in g.values.iter().enumerate() {
        let Some(v) = *v else { continue };
        match last {
            Some((_, p)) if p == v => {}
            Some((j, _)) => {
                changes.push(i - j);
                last = Some((i, v));
            }
            None => last = Some((i, v)),
        }
    }
    if changes.len() < 4 {
        return None;
    }
    changes.sort_unstable();
    Some(changes[changes.len() / 2] as f64 * step)
}

/// The step: `--step`, else the scrape interval, else the range ÷ [`MAX_STEPS`] when that is
/// coarser; with the reason, for the output.
fn choose_step(q: &Query, interval: Option<f64>) -> (f64, Provenance) {
    if let Some(s) = q.step {
        return (s, Provenance::Flag("--step".into()));
    }
    let floor = ((q.end - q.start).max(0.0) / MAX_STEPS).ceil().max(1.0);
    match interval {
        Some(i) if i >= floor => (
            i.round().max(1.0),
            Provenance::Measured(format!(
                "the scrape interval (≈ {i:.1} s between samples in the range's last 5 minutes)"
            )),
        ),
        Some(i) => (
            floor,
            Provenance::Default(format!(
                "the range ÷ {MAX_STEPS:.0} steps (the scrape interval, ≈ {i:.1} s, is finer)"
            )),
        ),
        None => (
            floor.max(15.0),
            Provenance::Assumed(
                "15 s (no scrape interval could be read), or the range ÷ 40 320 steps".into(),
            ),
        ),
    }
}

impl History {
    /// A reading of `q` at `step`, before any series is read.
    fn empty(source: String, q: &Query, step: Sourced<f64>, interval: Option<f64>) -> History {
        History {
            source,
            start: q.start,
            end: q.end,
            matchers: q.matchers.clone(),
            step_s: step,
            scrape_interval_s: interval,
            queue_refresh_s: None,
            queue_refresh_by: String::new(),
            tick_half_width_s: None,
            window_s: 0.0,
            processes: Vec::new(),
            windows: Vec::new(),
            gap_steps: 0,
            gaps: Vec::new(),
            resets: Vec::new(),
            warnings: Vec::new(),
            exporter: None,
            workers_by: None,
            host_by: None,
        }
    }
}

/// The step grid of the range: every series read is put on it and checked there.
#[derive(Clone, Copy)]
struct Steps {
    start: f64,
    step: f64,
    n: usize,
}

impl Steps {
    /// `s` on the grid, named by its metric and target, impossible samples made gaps.
    fn checked(&self, s: &Series, metric: &str, gauge: bool, h: &mut History) -> Grid {
        let (job, inst) = key(&s.labels);
        let name = format!("{metric}{{job={job},instance={inst}}}");
        let mut g = grid(s, name, self.start, self.step, self.n);
        check(&mut g, gauge, self.start, self.step, h);
        g
    }

    /// Main's figure of `metric`: the series with the most samples (every main reports the
    /// same queue, read from Redis).
    fn main(&self, v: &[Series], metric: &str, gauge: bool, h: &mut History) -> Option<Grid> {
        let s = v.iter().max_by_key(|s| s.points.len())?;
        Some(self.checked(s, metric, gauge, h))
    }

    fn increases(&self, g: &Grid, h: &mut History) -> Vec<Option<f64>> {
        increases(g, self.start, self.step, h)
    }

    /// The per-step increases of every series of a counter, added: a step counts where any
    /// series had one.
    fn summed(&self, v: &[Series], metric: &str, h: &mut History) -> Option<Vec<Option<f64>>> {
        let mut out: Option<Vec<Option<f64>>> = None;
        for s in v {
            let g = self.checked(s, metric, false, h);
            let inc = self.increases(&g, h);
            let o = out.get_or_insert_with(|| vec![None; inc.len()]);
            for (a, b) in o.iter_mut().zip(inc) {
                if let Some(b) = b {
                    *a = Some(a.unwrap_or(0.0) + b);
                }
            }
        }
        out
    }
}

/// Main's series (indices into [`READ`]), read at every step over the whole range; the rest
/// are each process's, read over the usable windows (`grain`).
const MAIN_READ: [usize; 6] = [0, 1, 2, 3, 7, 8];

/// n8n's series; Prometheus' warnings kept.
const READ: [&str; 12] = [
    "n8n_scaling_mode_queue_jobs_active",
    "n8n_scaling_mode_queue_jobs_waiting",
    "n8n_scaling_mode_queue_jobs_completed",
    "n8n_scaling_mode_queue_jobs_failed",
    "n8n_process_cpu_seconds_total",
    "n8n_process_resident_memory_bytes",
    "n8n_nodejs_eventloop_lag_seconds",
    "n8n_workflow_execution_duration_seconds_sum",
    "n8n_workflow_execution_duration_seconds_count",
    // n8n's database pool (N8N_METRICS_INCLUDE_DB_POOL_METRICS), per process.
    "n8n_db_pool_connections_active",
    "n8n_db_pool_connections_max",
    "n8n_db_pool_requests_pending",
];

/// Raw samples read at most, for the completion counter's refresh ticks (past it, the step
/// grid's increases are used, with their coarser interval).
pub const MAX_RAW_POINTS: usize = 2_000_000;

/// Reads the range and cuts it into windows: at once up to [`MAX_STEPS`] steps per series,
/// in parts of at most that many beyond (`chunks`), so memory is bounded by a part.
pub async fn read(src: &Api, q: &Query) -> Result<History, PromError> {
    let interval = scrape_interval(src, q).await;
    let (step, why) = choose_step(q, interval);
    let mut h = if (q.end - q.start) / step > MAX_STEPS {
        chunks::read(src, q, Sourced::new(step, why), interval, MAX_STEPS).await?
    } else {
        read_one(src, q, Sourced::new(step, why), interval).await?
    };
    node::attach(src, &mut h).await;
    Ok(h)
}

/// A range to read from a Prometheus within a deadline, as evidence judged under `flags`.
pub struct Range {
    pub source: Api,
    pub query: Query,
    /// How long the whole read may take, and the flag's words for it (`--deadline 10m`).
    pub deadline: (std::time::Duration, String),
    /// The settings given: the stages are made under them and what the history says.
    pub flags: Settings,
    /// The cores of n8n's one host (`--host-cores`), read against its scraped processes where
    /// node_exporter is not scraped.
    pub host_cores: Option<f64>,
}

impl Range {
    /// The range's windows, read within the deadline; an error names the API (credentials
    /// redacted) and what to change.
    pub async fn history(&self) -> anyhow::Result<History> {
        let (deadline, said) = &self.deadline;
        tokio::time::timeout(*deadline, read(&self.source, &self.query))
            .await
            .unwrap_or_else(|_| {
                Err(PromError::Transport(format!(
                    "the history was not read within --deadline {said} (a shorter range, a larger --step or a narrower --match reads less)"
                )))
            })
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", self.source.shown))
            .map(|mut h| {
                if let Some(cores) = self.host_cores {
                    node::given_host_cores(&mut h, cores);
                }
                h
            })
    }

    /// What the range is shown as: `prometheus: URL`.
    pub fn title(&self) -> String {
        format!("prometheus: {}", self.source.shown)
    }
}

impl EvidenceSource for Range {
    async fn evidence(self) -> anyhow::Result<Evidence> {
        let h = self.history().await?;
        Ok(evidence(h, self.flags.clone(), &self.title()))
    }
}

/// The range read in parts of at most `most_steps` steps per series, as a month is read (the
/// same windows as one read, cut on the same edges).
pub async fn read_in_parts(src: &Api, q: &Query, most_steps: f64) -> Result<History, PromError> {
    let interval = scrape_interval(src, q).await;
    let (step, why) = choose_step(q, interval);
    chunks::read(src, q, Sourced::new(step, why), interval, most_steps).await
}

/// The range read at once, each process's series per window when processes × steps is past
/// `budget` (0: always), as a month of many workers is read.
pub async fn read_within_budget(src: &Api, q: &Query, budget: f64) -> Result<History, PromError> {
    let interval = scrape_interval(src, q).await;
    let (step, why) = choose_step(q, interval);
    let bounds = Bounds {
        budget,
        ..Bounds::default()
    };
    read_within(src, q, (Sourced::new(step, why), interval), bounds).await
}

/// The range read at once at `step`.
async fn read_one(
    src: &Api,
    q: &Query,
    step: Sourced<f64>,
    interval: Option<f64>,
) -> Result<History, PromError> {
    read_within(src, q, (step, interval), Bounds::default()).await
}

/// What bounds a read's memory: each process's series at every step while processes × steps
/// is within `budget` (else per window), and its figures kept only in windows at half of `top`
/// (the highest throughput of the parts read before) or with jobs waiting.
#[derive(Clone, Copy)]
struct Bounds {
    budget: f64,
    top: f64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            budget: grain::FINE_POINTS,
            top: 0.0,
        }
    }
}

/// The range read at once at `step`, within `bounds`.
async fn read_within(
    src: &Api,
    q: &Query,
    (step, interval): (Sourced<f64>, Option<f64>),
    bounds: Bounds,
) -> Result<History, PromError> {
    let mut h = History::empty(src.shown.clone(), q, step.clone(), interval);
    let step = step.value;
    let range = (q.end - q.start).max(0.0);
    let g = Steps {
        start: q.start,
        step,
        n: ((range / step).floor() as usize + 1).max(1),
    };
    let [active, waiting, completed, failed, dur_sum, dur_count] =
        read_main(src, q, step, &mut h).await?;
    h.exporter = exporter(src, q).await;
    let a = g.main(&active, READ[0], true, &mut h);
    let w = g.main(&waiting, READ[1], true, &mut h);
    let c = g.main(&completed, READ[2], false, &mut h);
    let f = g.main(&failed, READ[3], false, &mut h);
    let ticks = completion_ticks(src, q, interval).await;
    refresh(&mut h, ticks.as_ref(), [c.as_ref(), a.as_ref()]);
    let done = c.as_ref().map(|x| g.increases(x, &mut h));
    let fail = f.as_ref().map(|x| g.increases(x, &mut h));
    // Every series of the execution histogram counts (each workflow, status and process).
    let dsum = g.summed(&dur_sum, READ[7], &mut h);
    let dcnt = g.summed(&dur_count, READ[8], &mut h);
    let refresh = h.queue_refresh_s.unwrap_or(step);
    h.window_s = q
        .window
        .unwrap_or(60.0)
        .max(3.0 * refresh)
        .max(5.0 * step)
        .min(range.max(step));
    let per = ((h.window_s / step).round() as usize).max(1);
    let series = Series5 {
        a: a.as_ref(),
        w: w.as_ref(),
        done: done.as_deref(),
        ticks: ticks.as_ref(),
        fail: fail.as_deref(),
        dsum: dsum.as_deref(),
        dcnt: dcnt.as_deref(),
    };
    let mut cut = Vec::new();
    let mut i = 0;
    while i < g.n {
        let j = (i + per).min(g.n);
        if let Some(win) = window(&series, i, j, q.start, step, refresh) {
            h.windows.push(win);
            cut.push(i..j);
        }
        i = j;
    }
    per_process(src, q, (&g, per), (cut, &active), bounds, &mut h).await?;
    Ok(h)
}

/// Main's series over the range (active, waiting, completed, failed, and the execution
/// histogram's sum and count), saying how far a long history is on stderr.
async fn read_main(
    src: &Api,
    q: &Query,
    step: f64,
    h: &mut History,
) -> Result<[Vec<Series>; 6], PromError> {
    let mut read: Vec<Vec<Series>> = Vec::with_capacity(MAIN_READ.len());
    // A long history takes a while: say how far it is (on stderr).
    let long = q.end - q.start > 86_400.0;
    for (i, k) in MAIN_READ.iter().enumerate() {
        if long {
            eprintln!(
                "n8ncap: reading {} ({}/{})",
                READ[*k],
                i + 1,
                MAIN_READ.len()
            );
        }
        let m = src
            .query_range(&selector(READ[*k], &q.matchers), q.start, q.end, step)
            .await?;
        h.warnings.extend(m.warnings);
        read.push(m.series);
    }
    Ok(<[Vec<Series>; 6]>::try_from(read).unwrap_or_else(|_| unreachable!()))
}

/// Each process's series, read only over the windows a judgement can use, and the workers of
/// each window: into the windows `cut` made of the grid's steps.
async fn per_process(
    src: &Api,
    q: &Query,
    (g, per): (&Steps, usize),
    (cut, active): (Vec<std::ops::Range<usize>>, &[Series]),
    bounds: Bounds,
    h: &mut History,
) -> Result<(), PromError> {
    let step = g.step;
    // Each process's series only over the windows a judgement can use (memory and the points
    // read are a month's busy hours, not the month): see `chunks::usable`.
    let top = h
        .windows
        .iter()
        .map(|w| w.throughput_per_s)
        .fold(bounds.top, f64::max);
    let usable: Vec<bool> = h.windows.iter().map(|w| chunks::usable(w, top)).collect();
    let spans: Vec<std::ops::Range<usize>> = cut
        .iter()
        .zip(&usable)
        .filter(|(_, u)| **u)
        .map(|(r, _)| r.clone())
        .collect();
    let procs = grain::read(src, q, (g, per), &spans, (active, bounds.budget), h).await?;
    let counts = workers::counts(src, q, g, &h.processes, &procs).await;
    h.workers_by = counts.as_ref().map(|c| c.by.clone());
    for ((w, r), u) in h.windows.iter_mut().zip(cut).zip(usable) {
        w.workers = counts
            .as_ref()
            .and_then(|c| workers::of_window(&c.per_step, r.start, r.end));
        if u {
            w.cpu = procs.figures(r.start, r.end, step);
        }
    }
    Ok(())
}

/// How often main's queue figures refresh: from the completion counter's raw ticks, else from
/// how often a series on the grid (the counter, else the active gauge) changed.
fn refresh(
    h: &mut History,
    ticks: Option<&super::refresh::Refreshes>,
    on_grid: [Option<&Grid>; 2],
) {
    h.queue_refresh_s = ticks.and_then(|t| t.period_s);
    h.queue_refresh_by = match h.queue_refresh_s {
        Some(_) => "measured: the refresh ticks of the completion counter's raw samples".into(),
        None => String::new(),
    };
    if h.queue_refresh_s.is_none() {
        h.queue_refresh_s = on_grid
            .iter()
            .flatten()
            .find_map(|x| refresh_of(x, h.step_s.value));
        if h.queue_refresh_s.is_some() {
            h.queue_refresh_by =
                "the median spacing of the counter's changes on the step grid".into();
        }
    }
    h.tick_half_width_s = ticks.and_then(|t| {
        let mut v: Vec<f64> = t.ticks.iter().map(|t| t.half_width).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    });
}

/// The completion counter's refresh ticks, from its raw samples on main (the series with the
/// most samples). None when the API gives no raw samples or too many.
async fn completion_ticks(
    src: &Api,
    q: &Query,
    interval: Option<f64>,
) -> Option<super::refresh::Refreshes> {
    let chunk = interval.unwrap_or(15.0).max(1.0) * super::prometheus::MAX_POINTS_PER_QUERY;
    let raw = src
        .raw(
            &selector(READ[2], &q.matchers),
            (q.start, q.end),
            chunk,
            MAX_RAW_POINTS,
        )
        .await
        .ok()??;
    let main = raw.iter().max_by_key(|s| s.points.len())?;
    let r = super::refresh::refreshes(
        &main.points,
        crate::model::n8n_defaults::QUEUE_METRICS_INTERVAL_S,
    );
    (!r.ticks.is_empty()).then_some(r)
}

/// The per-step series a window is cut from.
struct Series5<'a> {
    a: Option<&'a Grid>,
    w: Option<&'a Grid>,
    done: Option<&'a [Option<f64>]>,
    /// The completion counter's refresh ticks, when its raw samples could be read.
    ticks: Option<&'a super::refresh::Refreshes>,
    fail: Option<&'a [Option<f64>]>,
    dsum: Option<&'a [Option<f64>]>,
    dcnt: Option<&'a [Option<f64>]>,
}

/// The slots taken at the steps of `i..j` that read both gauges and where a job waited: every
/// slot was then taken.
fn slots_while_waiting(s: &Series5, i: usize, j: usize) -> Vec<f64> {
    match (s.a, s.w) {
        (Some(a), Some(w)) => (i..j)
            .filter_map(|k| Some((a.values.get(k).copied()??, w.values.get(k).copied()??)))
            .filter(|(_, w)| *w >= 1.0)
            .map(|(a, _)| a)
            .collect(),
        _ => Vec::new(),
    }
}

fn window(s: &Series5, i: usize, j: usize, start: f64, step: f64, refresh: f64) -> Option<Window> {
    let steps = |v: Option<&[Option<f64>]>| -> (f64, usize) {
        v.map(|v| {
            v[i..j]
                .iter()
                .flatten()
                .fold((0.0, 0), |(s, k), x| (s + x, k + 1))
        })
        .unwrap_or((0.0, 0))
    };
    let (from, to) = (start + i as f64 * step, start + j as f64 * step);
    let on_ticks = s.ticks.and_then(|r| super::refresh::between(r, from, to));
    let (completions, covered_s, slack) = match on_ticks {
        Some((c, span, ends)) => {
            let x = c / span;
            (c, span, x * ends / span)
        }
        None => {
            let (c, covered) = steps(s.done);
            if covered == 0 {
                return None;
            }
            let covered_s = covered as f64 * step;
            // The counter moves once per refresh: the window's count is known to one
            // refresh's worth.
            (c, covered_s, c / covered_s * refresh.max(step) / covered_s)
        }
    };
    let (failures, _) = steps(s.fail);
    let gauge = |g: Option<&Grid>| -> Vec<f64> {
        g.map(|g| g.values[i..j].iter().flatten().copied().collect())
            .unwrap_or_default()
    };
    let (av, wv) = (gauge(s.a), gauge(s.w));
    let full = slots_while_waiting(s, i, j);
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let x = completions / covered_s;
    let (ds, dn) = (steps(s.dsum).0, steps(s.dcnt).0);
    let gaps = (j - i).saturating_sub(av.len().min(wv.len())) as u32;
    Some(Window {
        start: from,
        end: to,
        covered_s,
        completions,
        failures,
        between_ticks: on_ticks.is_some(),
        throughput_per_s: x,
        throughput_interval: [(x - slack).max(0.0), x + slack],
        active_mean: mean(&av),
        active_max: max(&av),
        waiting_mean: mean(&wv),
        waiting_start: wv.first().copied().unwrap_or(0.0),
        waiting_end: wv.last().copied().unwrap_or(0.0),
        waiting_max: max(&wv),
        active_while_waiting: (!full.is_empty()).then(|| mean(&full)),
        waited_samples: full.len() as u32,
        samples: av.len().min(wv.len()) as u32,
        gaps,
        cpu: Vec::new(),
        execution_s: (dn > 0.0).then(|| ds / dn),
        executions: dn,
        busy: false,
        evidence: Vec::new(),
        idle_workers: Vec::new(),
        workers: None,
        host: None,
    })
}

/// Main: the targets with the queue gauges; a `role` label overrides; every other target with
/// n8n's process metrics is a worker.
fn processes(active: &[Series], cpu: &[Series]) -> Vec<Process> {
    let mains: Vec<(String, String)> = active.iter().map(|s| key(&s.labels)).collect();
    let mut out: Vec<Process> = Vec::new();
    for s in cpu {
        let (job, instance) = key(&s.labels);
        if out.iter().any(|p| p.job == job && p.instance == instance) {
            continue;
        }
        let labelled = s
            .labels
            .get("role")
            .and_then(|r| r.parse::<Role>().ok())
            .filter(|r| matches!(r, Role::Main | Role::Worker | Role::Webhook));
        let (role, role_by) = match labelled {
            Some(r) => (r, "its role label".to_string()),
            None if mains.contains(&(job.clone(), instance.clone())) => {
                (Role::Main, "it exposes the queue gauges".to_string())
            }
            None => (
                Role::Worker,
                "it exposes n8n's process metrics but no queue gauges".to_string(),
            ),
        };
        out.push(Process {
            job,
            instance,
            role,
            role_by,
        });
    }
    out
}

/// What `n8ncap exporter` published, at the end of the range.
async fn exporter(src: &Api, q: &Query) -> Option<ExporterSettings> {
    let wc = src
        .query(&selector("n8ncap_worker_concurrency", &q.matchers), q.end)
        .await
        .ok()?;
    if wc.is_empty() {
        return None;
    }
    let cap = src
        .query(
            &selector("n8ncap_worker_runner_capacity", &q.matchers),
            q.end,
        )
        .await
        .unwrap_or_default();
    let first = |v: &[(BTreeMap<String, String>, f64)]| {
        v.iter()
            .map(|(_, x)| *x)
            .find(|x| x.is_finite() && *x >= 0.0 && *x <= 100_000.0)
            .map(|x| x.round() as u32)
    };
    Some(ExporterSettings {
        workers: wc.len() as u32,
        worker_concurrency: first(&wc),
        runner_capacity: first(&cap),
    })
}

mod chunks;
mod grain;
mod grid;
mod node;
pub use node::given_host_cores;
mod stages;
pub use stages::{by_workers, evidence, known, mark, settings, split, stage, stages, AtWorkers};
#[cfg(test)]
mod tests;
mod workers;
