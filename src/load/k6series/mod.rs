//! k6 time series (`--out json`, `--out csv`) read as k6 ran them: one reader for every
//! executor.
//!
//! - **Which model.** A closed executor (`constant-vus`, `ramping-vus`, `per-vu-iterations`,
//!   `shared-iterations`) starts a virtual user's next iteration the moment its last one ends;
//!   an arrival-rate executor starts iterations on a clock, whenever others end. So a scenario
//!   whose iteration starts coincide with iteration ends (within [`COINCIDE_S`]) far more often
//!   than chance is closed; else open. Without `iteration_duration` points, `dropped_iterations`
//!   (only arrival-rate executors emit it) says open.
//! - **Closed levels are held steps** of k6's `vus` gauge (sampled once a second): a span where
//!   it stays constant. After a warm-up (the step's p50 response, at least `--k6-warmup`), the
//!   window must hold at least [`RESPONSES_PER_VU`] responses per virtual user and last at
//!   least [`MIN_WINDOW_S`]; else the step is part of a ramp. What lies between held steps is a
//!   ramp window: reported, never judged as a level.
//! - **Open levels are held arrival rates**: one-second bins of arrivals (iteration starts plus
//!   dropped iterations) that stay within counting noise of each other for at least
//!   [`MIN_WINDOW_S`]. Throughput is completions by completion time; what arrived and did not
//!   complete is the backlog.
//! - **A request belongs to the window in which it started.** k6 stamps a point when the
//!   request ends: start = time − `http_req_duration`.
//!
//! The room's files, one job each: `read` (the JSON and CSV formats, bounded), `detect` (closed
//! or open, per scenario), `segment` (held steps, held rates and the ramps between), `figures`
//! (a window's statistics); the throughput's interval is `load::stats::interval`, which
//! n8ncap's own sweeps use too.

mod detect;
mod figures;
mod merge;
mod read;

/// A k6 output file (JSON or CSV, plain or gzipped), read and checked.
pub fn read_file(path: &std::path::Path) -> Result<Series, crate::error::BadInput> {
    read::read(path)
}
mod segment;
#[cfg(test)]
mod tests;

pub use detect::closed_scenarios;
pub use read::{plausible_span, read, read_csv, read_json};
pub use segment::{closed_spans, open_spans, Span};

use crate::error::BadInput;
use crate::record::StageResult;
use figures::stage_of;

/// Longest line of k6 output (one point is a few hundred bytes).
const MAX_LINE: u64 = 1 << 20;
/// Most requests read (memory stays under a few GB).
pub const MAX_POINTS: usize = 20_000_000;
/// An iteration start this close after another's end is the same virtual user going on.
pub const COINCIDE_S: f64 = 0.004;
/// A closed level needs this many responses per virtual user in its window…
pub const RESPONSES_PER_VU: f64 = 3.0;
/// …and every level a window at least this long.
pub const MIN_WINDOW_S: f64 = 3.0;

/// One request as k6 reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Req {
    /// When it ended (k6's point time), s since the epoch.
    pub end: f64,
    /// `http_req_duration`, s.
    pub dur: f64,
    pub failed: bool,
    pub check_ok: bool,
    pub status: u16,
    pub scenario: usize,
}

impl Req {
    pub fn start(&self) -> f64 {
        self.end - self.dur
    }
    fn good(&self) -> bool {
        !self.failed && self.check_ok
    }
}

/// A k6 run's points that matter here.
#[derive(Debug, Default, Clone)]
pub struct Series {
    pub reqs: Vec<Req>,
    /// (end, duration s, scenario) of each iteration.
    pub iters: Vec<(f64, f64, usize)>,
    /// k6's `vus` gauge: (time, value).
    pub vus: Vec<(f64, f64)>,
    /// `dropped_iterations`: (time, scenario, count).
    pub dropped: Vec<(f64, usize, f64)>,
    pub scenarios: Vec<String>,
    /// Time resolution of the file, s (0 for k6's JSON; 1 for its default CSV).
    pub resolution_s: f64,
}

/// The warm-up rule: given (`Some`) or automatic.
#[derive(Debug, Clone, Copy)]
pub struct Warmup(pub Option<f64>);

/// The run's stages: per sequential scenario (k6 `startTime`), then per held step or rate.
pub fn stages(s: &Series, warm: Warmup) -> Result<Vec<StageResult>, BadInput> {
    let closed = closed_scenarios(s);
    // Scenarios in the order they first sent a request, with their spans (by start time).
    let mut order: Vec<usize> = Vec::new();
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for r in &s.reqs {
        match order.iter().position(|o| *o == r.scenario) {
            Some(k) => {
                spans[k].0 = spans[k].0.min(r.start());
                spans[k].1 = spans[k].1.max(r.end);
            }
            None => {
                order.push(r.scenario);
                spans.push((r.start(), r.end));
            }
        }
    }
    let groups: Vec<(Vec<usize>, f64, f64)> = if order.len() > 1 && sequential(&spans) {
        order
            .iter()
            .zip(&spans)
            .map(|(sc, sp)| (vec![*sc], sp.0, sp.1))
            .collect()
    } else {
        let from = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
        let to = spans.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        vec![(order.clone(), from, to)]
    };
    let mut out = Vec::new();
    for (scs, from, to) in groups {
        let reqs: Vec<&Req> = s
            .reqs
            .iter()
            .filter(|r| scs.contains(&r.scenario))
            .collect();
        // A mix is judged in the model that carried most of its requests.
        let closed_share = reqs.iter().filter(|r| closed[r.scenario]).count();
        let is_closed = 2 * closed_share >= reqs.len();
        let name = if scs.len() == 1 {
            s.scenarios[scs[0]].clone()
        } else {
            "mix".to_string()
        };
        let spans = if is_closed {
            closed_spans(s, &reqs, warm, from, to)
        } else {
            open_spans(s, &reqs, &scs, from, to)
        };
        for span in spans {
            let st = stage_of(out.len(), &name, s, &reqs, &scs, &span, warm)?;
            // A window no request started in (the run's end, a ramp down) says nothing.
            if st.requests == 0 && st.ramp.is_some() {
                continue;
            }
            out.push(st);
        }
    }
    if out.is_empty() {
        return Err(BadInput("no request in the k6 output".into()));
    }
    Ok(out)
}

/// Scenarios are stages of their own only when they ran one after another: two that overlap
/// by more than a tenth of the shorter one ran at once, as a mix.
fn sequential(spans: &[(f64, f64)]) -> bool {
    spans.iter().enumerate().all(|(i, a)| {
        spans[i + 1..].iter().all(|b| {
            let overlap = a.1.min(b.1) - a.0.max(b.0);
            overlap <= 0.1 * (a.1 - a.0).min(b.1 - b.0)
        })
    })
}

/// k6's time series as a source of evidence: one output (`--out json=FILE` or `csv=FILE`), or
/// the outputs of one distributed run merged (with what was done to each file); `warmup_s` as
/// [`from_json`]'s.
pub struct K6Series<'a> {
    pub files: &'a [std::path::PathBuf],
    pub warmup_s: Option<f64>,
    pub body: Option<&'a str>,
}

impl crate::record::evidence::Source for K6Series<'_> {
    async fn evidence(self) -> anyhow::Result<crate::record::evidence::Evidence> {
        let summary = match self.files {
            [] => return Err(BadInput("no k6 output given".into()).into()),
            [one] => super::k6::summary(
                from_json(one, self.warmup_s)?,
                &one.display().to_string(),
                self.body,
            )?,
            files => {
                let (stages, books) = from_files(files, self.warmup_s)?;
                let mut s = super::k6::summary(
                    stages,
                    &format!("{} files of one run", files.len()),
                    self.body,
                )?;
                s.merged_from = books;
                s
            }
        };
        Ok(crate::record::evidence::Evidence::of(summary))
    }
}

/// `k6 run --out json=FILE` or `--out csv=FILE`: held steps, held rates and the ramps between
/// them; `warmup_s` is the least warm-up of each level (None: automatic).
pub fn from_json(
    path: &std::path::Path,
    warmup_s: Option<f64>,
) -> Result<Vec<StageResult>, BadInput> {
    let series = read(path)?;
    stages(&series, Warmup(warmup_s))
}

/// Several outputs of one distributed k6 run (JSON or CSV, mixed) read as one run: clocks
/// aligned, the files cut to the span they all cover, points merged by time, virtual users
/// summed (see `merge`); with what was done to each file.
pub fn from_files(
    paths: &[std::path::PathBuf],
    warmup_s: Option<f64>,
) -> Result<(Vec<StageResult>, Vec<crate::record::summary::MergedFile>), BadInput> {
    let files = paths
        .iter()
        .map(|p| Ok((p.display().to_string(), read(p)?)))
        .collect::<Result<Vec<_>, BadInput>>()?;
    let (series, books) = merge::merge(files)?;
    Ok((stages(&series, Warmup(warmup_s))?, books))
}
