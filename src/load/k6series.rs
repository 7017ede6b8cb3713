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

use super::stats::summarize;
use crate::error::BadInput;
use crate::record::stage::{Flow, IterationFigures, Ramp, ScenarioResult, StageResult};
use crate::record::LoadModel;
use hdrhistogram::Histogram;
use std::io::{BufRead, Read};
use std::path::Path;

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
/// Batches the window is cut into for the throughput's interval.
const BATCHES: usize = 6;

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

/// One point before it is sorted into the series.
struct Point<'a> {
    metric: &'a str,
    time: f64,
    value: f64,
    scenario: &'a str,
    status: u16,
}

struct Builder {
    s: Series,
    /// How the file names a point's value, for errors: `data.value` (JSON), `metric_value` (CSV).
    value_field: &'static str,
    /// `checks` points (time, passed) and `http_req_failed` points, joined to requests later.
    checks: Vec<(f64, bool)>,
    fails: Vec<(f64, bool)>,
}

impl Builder {
    fn new(value_field: &'static str) -> Builder {
        Builder {
            s: Series::default(),
            value_field,
            checks: Vec::new(),
            fails: Vec::new(),
        }
    }

    fn scenario(&mut self, name: &str, at: &str) -> Result<usize, BadInput> {
        if let Some(i) = self.s.scenarios.iter().position(|s| s == name) {
            return Ok(i);
        }
        if self.s.scenarios.len() >= 1000 {
            return Err(BadInput(format!("{at}: more than 1000 scenarios")));
        }
        self.s.scenarios.push(name.to_string());
        Ok(self.s.scenarios.len() - 1)
    }

    fn add(&mut self, p: Point, at: &str) -> Result<(), BadInput> {
        let max = match p.metric {
            "vus" => crate::record::stage::MAX_IN_FLIGHT as f64,
            "http_req_duration" | "iteration_duration" => 1e12,
            "dropped_iterations" => 1e9,
            _ => 1.0,
        };
        if !(p.value.is_finite() && (0.0..=max).contains(&p.value)) {
            return Err(BadInput(format!(
                "{at}: {} of a {} point is {}: it must be a number from 0 to {max}",
                self.value_field, p.metric, p.value
            )));
        }
        match p.metric {
            "http_req_duration" => {
                if self.s.reqs.len() >= MAX_POINTS {
                    return Err(BadInput(format!(
                        "{at}: more than {MAX_POINTS} requests: split the run, or use \
                         --summary-export"
                    )));
                }
                let scenario = self.scenario(p.scenario, at)?;
                self.s.reqs.push(Req {
                    end: p.time,
                    dur: p.value / 1000.0,
                    failed: false,
                    check_ok: true,
                    status: p.status,
                    scenario,
                });
            }
            "iteration_duration" => {
                let sc = self.scenario(p.scenario, at)?;
                self.s.iters.push((p.time, p.value / 1000.0, sc));
            }
            "dropped_iterations" => {
                let sc = self.scenario(p.scenario, at)?;
                self.s.dropped.push((p.time, sc, p.value));
            }
            "http_req_failed" => self.fails.push((p.time, p.value != 0.0)),
            "checks" => self.checks.push((p.time, p.value != 0.0)),
            "vus" => self.s.vus.push((p.time, p.value)),
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self, shown: &str) -> Result<Series, BadInput> {
        let s = &mut self.s;
        if s.reqs.is_empty() {
            return Err(BadInput(format!(
                "{shown} has no http_req_duration points: is it k6's --out json or --out csv \
                 output?"
            )));
        }
        let by_end = |a: &Req, b: &Req| a.end.total_cmp(&b.end);
        s.reqs.sort_by(by_end);
        self.fails.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.checks.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.vus.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.dropped.sort_by(|a, b| a.0.total_cmp(&b.0));
        // k6 writes one http_req_failed point per request, at its time: joined in order. A
        // file without them (or with a different count) says failure by status.
        let paired = self.fails.len() == s.reqs.len();
        let mut check_i = 0;
        for (i, r) in s.reqs.iter_mut().enumerate() {
            r.failed = if paired {
                self.fails[i].1
            } else {
                r.status == 0 || r.status >= 400
            };
            // A check is written after its request ends: the first at or after it.
            while check_i < self.checks.len() && self.checks[check_i].0 < r.end {
                check_i += 1;
            }
            r.check_ok = self.checks.get(check_i).map(|c| c.1).unwrap_or(true);
        }
        Ok(self.s)
    }
}

fn status_of(text: &str) -> u16 {
    text.trim().parse::<u64>().map_or(0, |v| v.min(999) as u16)
}

const WANTED: [&str; 6] = [
    "http_req_duration",
    "http_req_failed",
    "checks",
    "vus",
    "iteration_duration",
    "dropped_iterations",
];

/// Reads lines of at most [`MAX_LINE`] bytes, calling `f(line number, line)`.
fn each_line(
    path: &Path,
    what: &str,
    mut f: impl FnMut(usize, &[u8]) -> Result<(), BadInput>,
) -> Result<(), BadInput> {
    let shown = path.display().to_string();
    let file = crate::util::open_regular_file(path, what)?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut line_no = 0usize;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| BadInput(format!("cannot read {shown}: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        if n as u64 > MAX_LINE {
            return Err(BadInput(format!(
                "{shown}:{line_no}: a line longer than {} MiB: not {what}",
                MAX_LINE >> 20
            )));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(line_no, &line)?;
    }
}

/// `k6 run --out json=FILE`.
pub fn read_json(path: &Path) -> Result<Series, BadInput> {
    let shown = path.display().to_string();
    let mut b = Builder::new("data.value");
    each_line(path, "k6 JSON output", |line_no, line| {
        let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
            BadInput(format!(
                "{shown}:{line_no}: not k6 JSON output (column {})",
                e.column()
            ))
        })?;
        if v.get("type").and_then(|t| t.as_str()) != Some("Point") {
            return Ok(());
        }
        let metric = v.get("metric").and_then(|m| m.as_str()).unwrap_or("");
        if !WANTED.contains(&metric) {
            return Ok(());
        }
        let data = &v["data"];
        let at = format!("{shown}:{line_no}");
        let Some(time) = data
            .get("time")
            .and_then(|t| t.as_str())
            .and_then(super::k6::parse_time)
        else {
            return Err(BadInput(format!(
                "{at}: data.time of a {metric} point is not an RFC 3339 time"
            )));
        };
        let Some(value) = data.get("value").and_then(|x| x.as_f64()) else {
            return Err(BadInput(format!(
                "{at}: data.value of a {metric} point is {}: it must be a number",
                crate::wire::url::truncate(&data["value"].to_string(), 40)
            )));
        };
        let tags = &data["tags"];
        let status = tags
            .get("status")
            .map(|x| match x {
                serde_json::Value::String(s) => status_of(s),
                other => other.as_u64().map_or(0, |v| v.min(999) as u16),
            })
            .unwrap_or(0);
        b.add(
            Point {
                metric,
                time,
                value,
                scenario: tags
                    .get("scenario")
                    .and_then(|s| s.as_str())
                    .unwrap_or("default"),
                status,
            },
            &at,
        )
    })?;
    b.finish(&shown)
}

/// A CSV timestamp in any of k6's `timeFormat`s: `unix` (s, the default), `unix_milli`,
/// `unix_micro`, `unix_nano`, `rfc3339`, `rfc3339_nano`. Returns (seconds, resolution s).
fn csv_time(text: &str) -> Option<(f64, f64)> {
    let t = text.trim();
    if t.contains('T') {
        let s = super::k6::parse_time(t)?;
        let frac = t
            .split_once('.')
            .map(|(_, f)| f.chars().take_while(|c| c.is_ascii_digit()).count());
        return Some((s, frac.map_or(1.0, |d| 10f64.powi(-(d as i32)))));
    }
    let v: f64 = t.parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0)?;
    // Seconds since 1970 up to the year 5138 are below 1e11; then ms, µs, ns.
    let (scale, res): (f64, f64) = if v < 1e11 {
        (1.0, 1.0)
    } else if v < 1e14 {
        (1e-3, 1e-3)
    } else if v < 1e17 {
        (1e-6, 1e-6)
    } else {
        (1e-9, 1e-9)
    };
    let res = if t.contains('.') { res.min(1e-3) } else { res };
    Some((v * scale, res))
}

/// Where a k6 CSV file keeps what we read, from its header.
#[derive(Clone, Copy)]
struct CsvColumns {
    metric: usize,
    time: usize,
    value: usize,
    scenario: Option<usize>,
    status: Option<usize>,
}

/// `k6 run --out csv=FILE`: the header names the columns.
pub fn read_csv(path: &Path) -> Result<Series, BadInput> {
    let shown = path.display().to_string();
    let mut b = Builder::new("metric_value");
    let mut cols: Option<CsvColumns> = None;
    let mut resolution: f64 = 0.0;
    each_line(path, "k6 CSV output", |line_no, line| {
        let text = std::str::from_utf8(line)
            .map_err(|_| BadInput(format!("{shown}:{line_no}: not UTF-8: not k6 CSV output")))?;
        let fields = split_csv(text.trim_end_matches(['\n', '\r']));
        let Some(CsvColumns {
            metric: m,
            time: t,
            value: v,
            scenario: sc,
            status: st,
        }) = cols
        else {
            let find = |name: &str| fields.iter().position(|f| f == name);
            match (find("metric_name"), find("timestamp"), find("metric_value")) {
                (Some(m), Some(t), Some(v)) => {
                    cols = Some(CsvColumns {
                        metric: m,
                        time: t,
                        value: v,
                        scenario: find("scenario"),
                        status: find("status"),
                    });
                    return Ok(());
                }
                _ => {
                    return Err(BadInput(format!(
                        "{shown}:{line_no}: no metric_name, timestamp and metric_value columns: \
                         is it k6's --out csv output?"
                    )))
                }
            }
        };
        let metric = fields.get(m).map(String::as_str).unwrap_or("");
        if !WANTED.contains(&metric) {
            return Ok(());
        }
        let at = format!("{shown}:{line_no}");
        let Some((time, res)) = fields.get(t).and_then(|x| csv_time(x)) else {
            return Err(BadInput(format!(
                "{at}: the timestamp of a {metric} point is not a time (unix seconds, ms, µs, \
                 ns or RFC 3339)"
            )));
        };
        resolution = resolution.max(res);
        let Some(value) = fields.get(v).and_then(|x| x.trim().parse::<f64>().ok()) else {
            return Err(BadInput(format!(
                "{at}: the metric_value of a {metric} point is not a number"
            )));
        };
        let scenario = sc
            .and_then(|i| fields.get(i))
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        let status = st.and_then(|i| fields.get(i)).map_or(0, |s| status_of(s));
        b.add(
            Point {
                metric,
                time,
                value,
                scenario,
                status,
            },
            &at,
        )
    })?;
    let mut s = b.finish(&shown)?;
    s.resolution_s = resolution;
    Ok(s)
}

/// One CSV line's fields (RFC 4180 quoting, which k6 uses for values with commas).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Reads either format: a CSV starts with k6's header.
pub fn read(path: &Path) -> Result<Series, BadInput> {
    let mut head = [0u8; 16];
    let n = crate::util::open_regular_file(path, "k6 output")?
        .read(&mut head)
        .unwrap_or(0);
    let s = if head[..n].starts_with(b"metric_name") {
        read_csv(path)
    } else {
        read_json(path)
    }?;
    plausible_span(&s).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    Ok(s)
}

/// A run's requests lie within the longest run n8ncap accepts (30 days): points years apart
/// (a clock jump, an edited file) would spread a handful of requests over centuries and make
/// a "level" of 1e-9 req/s.
/// How long before k6's first `vus` sample a request may have started (the gauge's first
/// sample comes about a second into the run).
const BEFORE_THE_RUN_S: f64 = 5.0;

pub fn plausible_span(s: &Series) -> Result<(), String> {
    let starts = s.reqs.iter().map(|r| r.start());
    let first = starts.clone().fold(f64::INFINITY, f64::min);
    let last = s
        .reqs
        .iter()
        .map(|r| r.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let most = crate::util::MAX_DURATION.as_secs_f64();
    // k6 samples the `vus` gauge from the run's first second: a request that started well
    // before it (end − http_req_duration) started before the run — a duration no request had.
    let run_start = s.vus.iter().map(|(t, _)| *t).fold(f64::INFINITY, f64::min);
    if let Some(r) = s
        .reqs
        .iter()
        .find(|r| run_start.is_finite() && r.start() < run_start - BEFORE_THE_RUN_S)
    {
        return Err(format!(
            "a request of {:.0} s (http_req_duration) ending at {:.3} would have started {:.0} s before the run's first vus sample: no request outlasts its run — an edited or corrupted file",
            r.dur,
            r.end,
            run_start - r.start()
        ));
    }
    if s.reqs.is_empty() || last - first <= most {
        return Ok(());
    }
    let when = |t: f64| {
        if (0.0..253_402_300_800.0).contains(&t) {
            crate::util::utc_rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t))
        } else {
            format!("{t:.0} s since 1970")
        }
    };
    Err(format!(
        "its requests span {:.0} days, from {} to {}: no k6 run lasts more than 30 days — some \
         points carry an impossible time (a clock jump or an edited file); cut the file to the run",
        (last - first) / 86_400.0,
        when(first),
        when(last)
    ))
}

/// The warm-up rule: given (`Some`) or automatic.
#[derive(Debug, Clone, Copy)]
pub struct Warmup(pub Option<f64>);

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
            if e.len() < 10 {
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

/// A span of the run and what it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    /// A held step: `vus` constant from `from` to `to`.
    Held { from: f64, to: f64, vus: u32 },
    /// Between held steps: the users moved.
    Ramp {
        from: f64,
        to: f64,
        vus_from: u32,
        vus_to: u32,
    },
    /// An open model's held arrival rate.
    Rate { from: f64, to: f64, offered: f64 },
    /// An open model's moving rate.
    RateRamp {
        from: f64,
        to: f64,
        offered_from: f64,
        offered_to: f64,
    },
}

/// Steps of the `vus` gauge between `from` and `to`: (first sample, last sample, value).
fn vus_steps(vus: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64, u32)> {
    let mut out: Vec<(f64, f64, u32)> = Vec::new();
    for (t, v) in vus.iter().filter(|(t, _)| *t >= from && *t <= to) {
        let v = v.round() as u32;
        match out.last_mut() {
            Some(last) if last.2 == v => last.1 = *t,
            _ => out.push((*t, *t, v)),
        }
    }
    out
}

/// Closed model: held steps and the ramps between them, in time order.
pub fn closed_spans(s: &Series, reqs: &[&Req], warm: Warmup, from: f64, to: f64) -> Vec<Span> {
    let steps = vus_steps(&s.vus, from, to);
    if steps.is_empty() {
        // No `vus` gauge: one level at the most requests ever in flight at once.
        return vec![Span::Held {
            from,
            to,
            vus: max_in_flight(reqs),
        }];
    }
    // The gauge is sampled (each second): the users were already at the first sample's count
    // when the run began (a ramp there falls in the warm-up), and stayed at the last one's until
    // the run ended.
    let last = steps.len() - 1;
    let steps: Vec<(f64, f64, u32)> = steps
        .iter()
        .enumerate()
        .map(|(k, &(a, b, v))| {
            (
                if k == 0 { from.min(a) } else { a },
                if k == last { to.max(b) } else { b },
                v,
            )
        })
        .collect();
    let held: Vec<bool> = steps
        .iter()
        .map(|&(a, b, v)| {
            v > 0 && {
                let (w0, w1) = window(reqs, a, b, warm, s.resolution_s);
                let started = reqs
                    .iter()
                    .filter(|r| r.start() >= w0 && r.start() < w1)
                    .count();
                w1 - w0 >= MIN_WINDOW_S && started as f64 >= RESPONSES_PER_VU * v as f64
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut ramp_from: Option<(f64, u32)> = Some((from, 0));
    for (k, &(a, b, v)) in steps.iter().enumerate() {
        if held[k] {
            if let Some((t0, v0)) = ramp_from.take() {
                if a - t0 > 1e-6 {
                    out.push(Span::Ramp {
                        from: t0,
                        to: a,
                        vus_from: v0,
                        vus_to: v,
                    });
                }
            }
            out.push(Span::Held {
                from: a,
                to: b,
                vus: v,
            });
            ramp_from = Some((b, v));
        } else if ramp_from.is_none() {
            ramp_from = Some((a, v));
        }
    }
    if let Some((t0, v0)) = ramp_from {
        let last = steps.last().map_or(0, |s| s.2);
        if to - t0 > 1e-6 && out.iter().any(|s| matches!(s, Span::Held { .. })) {
            out.push(Span::Ramp {
                from: t0,
                to,
                vus_from: v0,
                vus_to: last,
            });
        } else if out.is_empty() {
            out.push(Span::Ramp {
                from,
                to,
                vus_from: steps[0].2,
                vus_to: last,
            });
        }
    }
    out
}

fn max_in_flight(reqs: &[&Req]) -> u32 {
    let mut ev: Vec<(f64, i32)> = reqs
        .iter()
        .flat_map(|r| [(r.start(), 1), (r.end, -1)])
        .collect();
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in ev {
        cur += d;
        max = max.max(cur);
    }
    max.max(1) as u32
}

/// The steady window of a span: after the warm-up — the given one, or automatically two p50
/// responses of the requests that started in the span and at least 1 s; at most a third of
/// the span — and after the file's time resolution.
///
/// The window also ends one p95 response before the last response of the run when that tail
/// started fewer than half the requests the window's rate predicts: k6 does not report the
/// requests a `gracefulStop` cuts, which makes the end of a run look idle.
fn window(reqs: &[&Req], from: f64, to: f64, warm: Warmup, resolution: f64) -> (f64, f64) {
    let mut durs: Vec<f64> = reqs
        .iter()
        .filter(|r| r.start() >= from && r.start() < to)
        .map(|r| r.dur)
        .collect();
    durs.sort_by(f64::total_cmp);
    let p50 = durs.get(durs.len() / 2).copied().unwrap_or(0.0);
    let p95 = durs.get(durs.len() * 95 / 100).copied().unwrap_or(0.0);
    let w = match warm.0 {
        Some(given) => given,
        None => (2.0 * p50).max(1.0),
    };
    let w = w.min((to - from) / 3.0).max(resolution);
    let w0 = from + w;
    let run_end = reqs.iter().map(|r| r.end).fold(f64::NEG_INFINITY, f64::max);
    let cut = run_end - p95;
    if cut >= to || cut <= w0 {
        return (w0, to);
    }
    // Censored when the tail started fewer than half the requests the window's rate predicts.
    let count = |a: f64, b: f64| {
        reqs.iter()
            .filter(|r| r.start() >= a && r.start() < b)
            .count() as f64
    };
    let expected = count(w0, cut) / (cut - w0) * (to - cut);
    let w1 = if expected >= 2.0 && count(cut, to) < 0.5 * expected {
        cut
    } else {
        to
    };
    (w0, w1)
}

/// Runs of bins within counting noise of their median, neighbouring runs at the same rate
/// merged: k6 schedules arrivals on a clock, so a held rate varies by about one arrival per
/// second, and a bin that strayed (k6 late to start arrivals, a coarse time) does not cut a
/// held rate in two.
fn held_runs(count: &[f64], full: usize, tol: &dyn Fn(f64) -> f64) -> Vec<(usize, usize)> {
    // Runs of bins within counting noise of their median: k6 schedules arrivals on a clock,
    // so a held rate varies by about one arrival per second.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < full {
        let mut end = start + 1;
        while end < full {
            let mut v: Vec<f64> = count[start..=end].to_vec();
            v.sort_by(f64::total_cmp);
            let med = v[v.len() / 2];
            if count[start..=end]
                .iter()
                .all(|c| (c - med).abs() <= tol(med) + 1e-9)
            {
                end += 1;
            } else {
                break;
            }
        }
        runs.push((start, end));
        start = end;
    }
    // Neighbouring runs at the same rate (within the noise) are one: a bin that strayed (k6
    // late to start arrivals, a coarse time) does not cut a held rate in two.
    let mean = |a: usize, b: usize| count[a..b].iter().sum::<f64>() / (b - a) as f64;
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in runs {
        match merged.last_mut() {
            Some(last)
                if {
                    let (m1, m2) = (mean(last.0, last.1), mean(a, b));
                    (m1 - m2).abs() <= tol(m1.max(m2))
                } =>
            {
                last.1 = b
            }
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// Open model: held arrival rates and the moves between them.
pub fn open_spans(s: &Series, reqs: &[&Req], scenarios: &[usize], from: f64, to: f64) -> Vec<Span> {
    // Bins of a second; of two resolutions when the file's times are coarse.
    let width = (2.0 * s.resolution_s).max(1.0);
    let bins = (((to - from) / width).ceil() as usize).max(1);
    let mut count = vec![0f64; bins];
    let bin = |t: f64| (((t - from).max(0.0) / width) as usize).min(bins - 1);
    let use_iters = s.iters.iter().any(|i| scenarios.contains(&i.2));
    if use_iters {
        for (end, d, sc) in &s.iters {
            if scenarios.contains(sc) && end - d >= from && end - d <= to {
                count[bin(end - d)] += 1.0;
            }
        }
    } else {
        for r in reqs {
            count[bin(r.start())] += 1.0;
        }
    }
    for (t, sc, n) in &s.dropped {
        if scenarios.contains(sc) && *t >= from && *t <= to {
            count[bin(*t)] += n;
        }
    }
    // The last bin is usually cut short by the end of the run.
    let full = if ((to - from) / width).fract() > 1e-9 && bins > 1 {
        bins - 1
    } else {
        bins
    };
    // Coarse times move an arrival into the next bin: noise of a count, not a move.
    let coarse = s.resolution_s >= 0.05;
    let tol = |med: f64| {
        let t = 1.5f64.max(0.08 * med);
        if coarse {
            t.max(1.5 * med.sqrt())
        } else {
            t
        }
    };
    let runs = held_runs(&count, full, &tol);
    let min_bins = (MIN_WINDOW_S / width).ceil() as usize + 1;
    let mut out = Vec::new();
    let mut ramp: Option<(usize, usize)> = None;
    let rate = |a: usize, b: usize| count[a..b].iter().sum::<f64>() / ((b - a) as f64 * width);
    let t = |k: usize| from + k as f64 * width;
    let flush = |ramp: &mut Option<(usize, usize)>, out: &mut Vec<Span>| {
        if let Some((a, b)) = ramp.take() {
            out.push(Span::RateRamp {
                from: t(a),
                to: t(b),
                offered_from: count[a] / width,
                offered_to: count[b - 1] / width,
            });
        }
    };
    for (a, b) in runs {
        // A held rate is a load level only when something arrived in most of its bins: the
        // drain after k6's arrivals stop (completions, a dropped-iterations count at the end)
        // is no level of 0.1/s.
        if b - a >= min_bins && rate(a, b) * width >= 1.0 {
            flush(&mut ramp, &mut out);
            out.push(Span::Rate {
                from: t(a),
                to: t(b),
                offered: rate(a, b),
            });
        } else {
            ramp = Some(match ramp {
                Some((ra, _)) => (ra, b),
                None => (a, b),
            });
        }
    }
    flush(&mut ramp, &mut out);
    out
}

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

fn hist() -> Result<Histogram<u32>, BadInput> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).map_err(|e| BadInput(e.to_string()))
}

fn record(h: &mut Histogram<u32>, dur_s: f64) {
    let _ = h.record(((dur_s * 1e6) as u64).clamp(1, 3_600_000_000));
}

/// Batch means over the window, widened by the one response per user an edge can cut.
pub(crate) fn interval(
    starts: &[f64],
    (w0, w1): (f64, f64),
    x: f64,
    good_share: f64,
    n_users: f64,
    resolution: f64,
) -> [f64; 2] {
    let len = w1 - w0;
    let n = starts.len() as f64;
    if n < 2.0 || len <= 0.0 {
        return [x, x];
    }
    let half_edge = x * n_users / n / 2.0;
    // Batches shorter than two ticks of the file's clock measure the clock: then the counting
    // (Poisson) interval.
    let k = ((len / (2.0 * resolution).max(0.5)) as usize).min(BATCHES);
    if k < 3 {
        let half = (1.96 * x / n.sqrt()).hypot(half_edge);
        return [(x - half).max(0.0), x + half];
    }
    let mut counts = vec![0f64; k];
    for t in starts {
        let i = (((t - w0) / len * k as f64) as usize).min(k - 1);
        counts[i] += 1.0;
    }
    let rates: Vec<f64> = counts
        .iter()
        .map(|c| c / (len / k as f64) * good_share)
        .collect();
    let e = crate::record::Estimate::of(&rates);
    let half_batch = (e.high - e.low) / 2.0;
    let half = (half_batch.powi(2) + half_edge.powi(2)).sqrt();
    [(x - half).max(0.0), x + half]
}

/// An open window's figures: throughput is what completed in it (by completion time), what
/// arrived and did not complete is the backlog (its books in `flow`).
fn open_window(
    st: &mut StageResult,
    s: &Series,
    reqs: &[&Req],
    scs: &[usize],
    span: &Span,
    (w0, w1): (f64, f64),
    started: &[&&Req],
) {
    let in_window = |t: f64| t >= w0 && t < w1;
    let per_s = |k: u64| {
        if st.window_s > 0.0 {
            k as f64 / st.window_s
        } else {
            0.0
        }
    };
    let completed: Vec<&&Req> = reqs.iter().filter(|r| in_window(r.end)).collect();
    let done_good = completed.iter().filter(|r| r.good()).count() as u64;
    let running_at = |t: f64| reqs.iter().filter(|r| r.start() < t && r.end >= t).count() as u64;
    let dropped: f64 = s
        .dropped
        .iter()
        .filter(|d| scs.contains(&d.1) && in_window(d.0))
        .map(|d| d.2)
        .sum();
    let dropped = dropped.round() as u64;
    let flow = Flow::of(
        st.window_s,
        (started.len() as u64, dropped),
        completed.len() as u64,
        (running_at(w0), running_at(w1)),
        started.iter().filter(|r| r.end >= w1).count() as u64,
    );
    st.dropped_iterations = dropped;
    st.rate = Some(flow.offered_per_s);
    // A moving rate is a window, never a level (see `diagnose::ramp`): its ends in arrivals
    // per second.
    if let Span::RateRamp {
        offered_from,
        offered_to,
        ..
    } = span
    {
        st.ramp = Some(Ramp {
            from: offered_from.round() as u32,
            to: offered_to.round() as u32,
        });
    }
    st.request_rate = per_s(flow.completions);
    st.throughput_rps = per_s(done_good);
    st.flow = Some(flow);
    let ends: Vec<f64> = completed.iter().map(|r| r.end).collect();
    st.throughput_ci = Some(interval(
        &ends,
        (w0, w1),
        st.throughput_rps,
        done_good as f64 / completed.len().max(1) as f64,
        0.0,
        s.resolution_s,
    ));
}

#[allow(clippy::too_many_arguments)]
fn stage_of(
    index: usize,
    name: &str,
    s: &Series,
    reqs: &[&Req],
    scs: &[usize],
    span: &Span,
    warm: Warmup,
) -> Result<StageResult, BadInput> {
    let (model, from, to) = match span {
        Span::Held { from, to, .. } | Span::Ramp { from, to, .. } => {
            (LoadModel::Closed, *from, *to)
        }
        Span::Rate { from, to, .. } | Span::RateRamp { from, to, .. } => {
            (LoadModel::Open, *from, *to)
        }
    };
    let judged = matches!(span, Span::Held { .. } | Span::Rate { .. });
    let (w0, w1) = if judged {
        window(reqs, from, to, warm, s.resolution_s)
    } else {
        (from, to)
    };
    let mut st = StageResult::empty(index, label_of(span, name), model);
    st.duration_s = (to - from).max(0.0);
    st.warmup_s = (w0 - from).max(0.0);
    st.window_s = (w1 - w0).max(0.0);
    let in_window = |t: f64| t >= w0 && t < w1;
    // Closed: the requests that started in the window. Open: those too for latency (measured
    // from the intended start), but throughput counts what completed in it.
    let started: Vec<&&Req> = reqs.iter().filter(|r| in_window(r.start())).collect();
    st.warmup_requests = reqs
        .iter()
        .filter(|r| r.start() >= from && r.start() < w0)
        .count() as u64;
    let mut h = hist()?;
    let mut per: Vec<PerScenario> = vec![(0, 0, 0, None); s.scenarios.len()];
    let (mut bad, mut good) = (0u64, 0u64);
    for r in &started {
        record(&mut h, r.dur);
        if r.failed {
            bad += 1;
            match r.status {
                0 => st.errors.io += 1,
                code => *st.errors.http_status.entry(code).or_insert(0) += 1,
            }
        }
        good += u64::from(r.good());
        let e = &mut per[r.scenario];
        e.0 += 1;
        e.1 += u64::from(!r.failed);
        e.2 += u64::from(r.good());
        let hh = match &mut e.3 {
            Some(hh) => hh,
            None => e.3.insert(hist()?),
        };
        record(hh, r.dur);
    }
    let n = started.len() as u64;
    let per_s = |k: u64| {
        if st.window_s > 0.0 {
            k as f64 / st.window_s
        } else {
            0.0
        }
    };
    st.requests = n;
    st.ok = n - bad;
    st.error_rate = if n > 0 { bad as f64 / n as f64 } else { 0.0 };
    st.check_pass_rate = if n > 0 {
        started.iter().filter(|r| r.check_ok).count() as f64 / n as f64
    } else {
        1.0
    };
    st.latency = summarize(&h);
    match span {
        Span::Held { .. } | Span::Ramp { .. } => {
            st.request_rate = per_s(n);
            st.throughput_rps = per_s(good);
            closed_window(&mut st, s, span, (w0, w1), &started, good);
        }
        Span::Rate { .. } | Span::RateRamp { .. } => {
            open_window(&mut st, s, reqs, scs, span, (w0, w1), &started)
        }
    }
    st.iterations = iterations_in(s, scs, (w0, w1));
    if per.iter().filter(|e| e.0 > 0).count() > 1 {
        st.scenarios = scenario_parts(&st, s, &per, (good, n));
    }
    super::k6::judge(&mut st);
    Ok(st)
}

/// A closed span's users: a held step's, with its throughput's interval; a ramp's middle.
fn closed_window(
    st: &mut StageResult,
    s: &Series,
    span: &Span,
    (w0, w1): (f64, f64),
    started: &[&&Req],
    good: u64,
) {
    match span {
        Span::Held { vus, .. } => {
            st.vus = Some(*vus);
            let starts: Vec<f64> = started.iter().map(|r| r.start()).collect();
            let share = good as f64 / (started.len() as u64).max(1) as f64;
            st.throughput_ci = Some(interval(
                &starts,
                (w0, w1),
                st.throughput_rps,
                share,
                *vus as f64,
                s.resolution_s,
            ));
        }
        Span::Ramp {
            vus_from, vus_to, ..
        } => {
            st.vus = Some((*vus_from + *vus_to).div_ceil(2));
            st.ramp = Some(Ramp {
                from: *vus_from,
                to: *vus_to,
            });
        }
        Span::Rate { .. } | Span::RateRamp { .. } => {}
    }
}

/// A span's label as the tables show it.
fn label_of(span: &Span, name: &str) -> String {
    match span {
        Span::Held { vus, .. } => format!("{vus} in flight (k6 {name}, held step)"),
        Span::Ramp {
            vus_from, vus_to, ..
        } => format!("ramp {vus_from}→{vus_to} (k6 {name})"),
        Span::Rate { offered, .. } => format!("{offered:.1}/s offered (k6 {name})"),
        Span::RateRamp {
            offered_from,
            offered_to,
            ..
        } => format!("rate ramp {offered_from:.0}→{offered_to:.0}/s (k6 {name})"),
    }
}

/// Iterations started in the window: Little's law for scripts with think time.
fn iterations_in(s: &Series, scs: &[usize], (w0, w1): (f64, f64)) -> Option<IterationFigures> {
    let its: Vec<&(f64, f64, usize)> = s
        .iters
        .iter()
        .filter(|i| scs.contains(&i.2) && i.0 - i.1 >= w0 && i.0 - i.1 < w1)
        .collect();
    (!its.is_empty() && w1 > w0).then(|| IterationFigures {
        per_s: its.len() as f64 / (w1 - w0),
        mean_s: its.iter().map(|i| i.1).sum::<f64>() / its.len() as f64,
    })
}

/// Per scenario of the window: requests, answered, good answers, latency.
type PerScenario = (u64, u64, u64, Option<Histogram<u32>>);

/// Each scenario's part of a window: its share of the good answers times the window's
/// throughput, so the parts add up to the whole.
fn scenario_parts(
    st: &StageResult,
    s: &Series,
    per: &[PerScenario],
    (good, n): (u64, u64),
) -> Vec<ScenarioResult> {
    per.iter()
        .enumerate()
        .filter(|(_, e)| e.0 > 0)
        .map(|(k, (n_k, ok, good_k, hh))| ScenarioResult {
            name: s.scenarios[k].clone(),
            requests: *n_k,
            ok: *ok,
            throughput_rps: st.throughput_rps * *good_k as f64 / good.max(1) as f64,
            request_rate: st.request_rate * *n_k as f64 / n.max(1) as f64,
            share: *n_k as f64 / n.max(1) as f64,
            latency: hh.as_ref().and_then(summarize),
            error_rate: (*n_k - *ok) as f64 / *n_k as f64,
            errors: Default::default(),
            checks: Vec::new(),
            check_pass_rate: *good_k as f64 / *n_k as f64,
            bytes_sent: 0,
            bytes_received: 0,
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// A stack of `slots` servers of `job` s each, FIFO (the simulator's runner in miniature).
    struct Pool {
        free: Vec<f64>,
        job: f64,
    }

    impl Pool {
        fn new(slots: usize, job: f64) -> Pool {
            Pool {
                free: vec![0.0; slots],
                job,
            }
        }
        /// Response end of a request arriving at `t` (arrivals come in time order).
        fn serve(&mut self, t: f64) -> f64 {
            let (k, f) = self
                .free
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            let end = t.max(f) + self.job;
            self.free[k] = end;
            end + 0.002
        }
    }

    const T0: f64 = 1_796_022_000.0;

    #[test]
    fn points_centuries_apart_are_refused_not_judged() {
        let now = 1.8e9;
        let mut s = Series {
            reqs: (0..100).map(|i| req(now + i as f64 * 0.1, 0.05)).collect(),
            ..Series::default()
        };
        assert!(plausible_span(&s).is_ok());
        // One point in the year 9999.
        s.reqs.push(req(253_402_000_000.0, 0.05));
        let e = plausible_span(&s).unwrap_err();
        assert!(e.contains("9999-"), "{e}");
    }

    #[test]
    fn a_request_longer_than_its_run_is_refused() {
        let now = 1.8e9;
        let mut s = Series {
            reqs: (0..100)
                .map(|i| req(now + 2.0 + i as f64 * 0.1, 0.05))
                .collect(),
            vus: (0..15).map(|i| (now + 1.0 + i as f64, 4.0)).collect(),
            ..Series::default()
        };
        assert!(plausible_span(&s).is_ok());
        // A minute-long request at the start is fine; one of 29 days is not.
        s.reqs.push(req(now + 61.0, 60.0));
        assert!(plausible_span(&s).is_ok());
        s.reqs.push(req(now + 9.0, 29.0 * 86_400.0));
        let e = plausible_span(&s).unwrap_err();
        assert!(e.contains("before the run"), "{e}");
    }

    fn req(end: f64, dur: f64) -> Req {
        Req {
            end,
            dur,
            failed: false,
            check_ok: true,
            status: 200,
            scenario: 0,
        }
    }

    /// A closed loop: VU `i` starts at `on[i]` (s from the start) and loops until `end`; k6's
    /// `vus` gauge each second.
    fn closed(on: &[f64], end: f64, pool: &mut Pool) -> Series {
        let mut s = Series {
            scenarios: vec!["default".into()],
            ..Series::default()
        };
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = on
            .iter()
            .enumerate()
            .map(|(i, t)| Reverse(((t * 1e6) as u64, i)))
            .collect();
        while let Some(Reverse((t_us, i))) = heap.pop() {
            let t = t_us as f64 / 1e6;
            if t >= end {
                continue;
            }
            let done = pool.serve(t);
            s.reqs.push(req(T0 + done, done - t));
            s.iters.push((T0 + done, done - t, 0));
            heap.push(Reverse(((done * 1e6).round() as u64, i)));
        }
        for sec in 0..=(end as usize) {
            let v = on.iter().filter(|t| **t <= sec as f64).count();
            s.vus.push((T0 + sec as f64, v as f64));
        }
        s.reqs.sort_by(|a, b| a.end.total_cmp(&b.end));
        s.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
        s
    }

    /// ramping-vus: 0→4 over 4 s, 4 held 14 s, →16 over 4 s, 16 held 14 s (the run).
    fn ramp_on() -> Vec<f64> {
        let mut on: Vec<f64> = (0..4).map(|i| i as f64).collect();
        on.extend((0..12).map(|i| 18.0 + i as f64 / 3.0));
        on
    }

    fn held(stages: &[StageResult]) -> Vec<&StageResult> {
        stages.iter().filter(|s| s.ramp.is_none()).collect()
    }

    #[test]
    fn a_ramp_with_two_held_steps_gives_two_levels_and_windows() {
        // 5 runner tasks of 0.4 s: 12.5/s at most; 4 users get 4 ÷ 0.402 ≈ 9.95/s.
        let s = closed(&ramp_on(), 36.0, &mut Pool::new(5, 0.4));
        let stages = stages(&s, Warmup(None)).unwrap();
        let levels = held(&stages);
        assert_eq!(
            levels.iter().map(|l| l.vus).collect::<Vec<_>>(),
            vec![Some(4), Some(16)]
        );
        assert!((levels[0].throughput_rps - 4.0 / 0.402).abs() < 0.35);
        assert!((levels[1].throughput_rps - 12.5).abs() < 0.5);
        // Each level's interval holds the truth and no level beats N ÷ R_min.
        let ci = levels[1].throughput_ci.unwrap();
        assert!(ci[0] <= 12.5 && 12.5 <= ci[1], "{ci:?}");
        for l in &levels {
            let lat = l.latency.as_ref().unwrap();
            let n = l.vus.unwrap() as f64;
            assert!(
                // A window's edges cut at most one response per user.
                l.request_rate <= n / (lat.min_ms / 1000.0) * (1.0 + n / l.requests as f64),
                "{} {:?}",
                l.request_rate,
                lat
            );
            assert!(crate::diagnose::levels::impossible(l).is_none());
        }
        // The ramps are windows, never levels: one before each held step.
        let ramps: Vec<_> = stages.iter().filter_map(|s| s.ramp).collect();
        assert!(!ramps.is_empty() && ramps.len() <= 3, "{ramps:?}");
        assert!(ramps.iter().any(|r| r.from == 4 && r.to == 16), "{ramps:?}");
        // Every request is counted at most once, in the window it started in; only the run's
        // last response or so per user (started after the last users stopped) is left out.
        let total: u64 = stages.iter().map(|s| s.requests + s.warmup_requests).sum();
        let all = s.reqs.len() as u64;
        assert!(total <= all && total + 16 >= all, "{total} of {all}");
    }

    #[test]
    fn a_step_too_short_to_settle_is_a_ramp() {
        // 2 users for 10 s, 8 users for 2 s, 12 users for 12 s; 1 s jobs on 20 slots.
        let mut on = vec![0.0, 0.0];
        on.extend([10.0; 6]);
        on.extend([12.0; 4]);
        let s = closed(&on, 24.0, &mut Pool::new(20, 1.0));
        let stages = stages(&s, Warmup(None)).unwrap();
        let vus: Vec<_> = held(&stages).iter().map(|l| l.vus).collect();
        assert_eq!(vus, vec![Some(2), Some(12)]);
        // 2 s at 8 users cannot hold 3 responses each after a warm-up: inside a ramp window.
        assert!(stages
            .iter()
            .any(|s| s.ramp.is_some_and(|r| r.from == 2 && r.to == 12)));
    }

    #[test]
    fn a_request_straddling_a_step_change_belongs_to_the_step_it_started_in() {
        // 1 user, 3 s jobs; at 12 s a second user joins. The request that started at 9 s ends
        // at 12 s — stamped in the second step, started in the first.
        let s = closed(&[0.0, 12.0], 30.0, &mut Pool::new(4, 3.0));
        let st = stages(&s, Warmup(Some(0.0))).unwrap();
        let first = st.iter().find(|x| x.vus == Some(1) && x.ramp.is_none());
        let first = first.expect("a held step at 1 user");
        // Starts 0, 3, 6, 9 (s): four requests, none of them counted again later.
        assert_eq!(first.requests + first.warmup_requests, 4);
        let total: u64 = st.iter().map(|x| x.requests + x.warmup_requests).sum();
        let all = s.reqs.len() as u64;
        assert!(total <= all && total + 2 >= all, "{total} of {all}");
    }

    /// An arrival-rate executor: `rate(t)` arrivals per second, each one request.
    fn open(rate: impl Fn(f64) -> f64, end: f64, pool: &mut Pool) -> Series {
        let mut s = Series {
            scenarios: vec!["default".into()],
            ..Series::default()
        };
        let mut t = 0.0;
        while t < end {
            let done = pool.serve(t);
            s.reqs.push(req(T0 + done, done - t));
            s.iters.push((T0 + done, done - t, 0));
            t += 1.0 / rate(t);
        }
        s.reqs.sort_by(|a, b| a.end.total_cmp(&b.end));
        s.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
        sample_vus(&mut s, 0..=(end as usize));
        s
    }

    /// k6's `vus` gauge once a second: the requests in flight at each second.
    fn sample_vus(s: &mut Series, secs: std::ops::RangeInclusive<usize>) {
        for sec in secs {
            let at = T0 + sec as f64;
            let busy = s
                .reqs
                .iter()
                .filter(|r| r.start() <= at && r.end > at)
                .count();
            s.vus.push((at, busy as f64));
        }
    }

    #[test]
    fn held_arrival_rates_are_levels_and_the_moving_rate_is_a_window() {
        // 8/s for 15 s, a ramp to 20/s over 5 s, 20/s for 15 s; 12.5/s of capacity.
        let rate = |t: f64| {
            if t < 15.0 {
                8.0
            } else if t < 20.0 {
                8.0 + (t - 15.0) / 5.0 * 12.0
            } else {
                20.0
            }
        };
        let s = open(rate, 35.0, &mut Pool::new(5, 0.4));
        assert_eq!(closed_scenarios(&s), vec![false]);
        let st = stages(&s, Warmup(None)).unwrap();
        let levels = held(&st);
        assert_eq!(
            levels.len(),
            2,
            "{:?}",
            st.iter().map(|x| &x.label).collect::<Vec<_>>()
        );
        assert!((levels[0].rate.unwrap() - 8.0).abs() < 0.5);
        assert!((levels[0].throughput_rps - 8.0).abs() < 0.5);
        assert!((levels[1].rate.unwrap() - 20.0).abs() < 1.0);
        // Past the ceiling: completions are the capacity, the rest is backlog growth.
        assert!((levels[1].throughput_rps - 12.5).abs() < 0.5);
        let f = levels[1].flow.unwrap();
        assert!(f.backlog_growth_per_s > 5.0, "{f:?}");
        assert_eq!(
            f.arrivals as i64 - f.completions as i64,
            f.backlog_end as i64 - f.backlog_start as i64
        );
        assert!(st.iter().any(|x| x.ramp.is_some()));
    }

    #[test]
    fn the_drain_after_the_arrivals_stop_is_no_level() {
        // 20/s for 15 s against 12.5/s of capacity: the backlog drains for about 9 s after the
        // last arrival, with one stray count in it (a dropped iteration k6 wrote late).
        let mut s = open(|_| 20.0, 15.0, &mut Pool::new(5, 0.4));
        let last = s.reqs.last().unwrap().end;
        assert!(last - T0 > 22.0, "{}", last - T0);
        // k6 samples its VUs through the drain (gracefulStop) too.
        sample_vus(&mut s, 16..=((last - T0).ceil() as usize));
        s.dropped.push((last - 2.5, 0, 1.0));
        let st = stages(&s, Warmup(None)).unwrap();
        let levels = held(&st);
        assert_eq!(
            levels.len(),
            1,
            "{:?}",
            st.iter().map(|x| &x.label).collect::<Vec<_>>()
        );
        assert!((levels[0].rate.unwrap() - 20.0).abs() < 1.0);
    }

    /// k6's JSON lines and CSV (unix_milli) of one series.
    fn write_both(s: &Series, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let iso = |t: f64| {
            let off = t - T0;
            let (m, sec) = ((off / 60.0).floor(), off - (off / 60.0).floor() * 60.0);
            format!("2026-11-30T07:{:02}:{:09.6}Z", m as u32, sec)
        };
        let mut j = String::new();
        let mut c = String::from("metric_name,timestamp,metric_value,check,error,error_code,expected_response,group,method,name,proto,scenario,service,status,subproto,tls_version,url,extra_tags,metadata\n");
        let mut point = |metric: &str, t: f64, v: f64, status: &str| {
            j.push_str(&format!(
                "{{\"type\":\"Point\",\"metric\":\"{metric}\",\"data\":{{\"time\":\"{}\",\"value\":{v},\"tags\":{{\"scenario\":\"default\",\"status\":\"{status}\"}}}}}}\n",
                iso(t)
            ));
            c.push_str(&format!(
                "{metric},{},{v},,,,true,,POST,http://x/,HTTP/1.1,default,,{status},,,http://x/,,\n",
                (t * 1000.0).round() as u64
            ));
        };
        for r in &s.reqs {
            point(
                "http_req_duration",
                r.end,
                (r.dur * 1e6).round() / 1e3,
                "200",
            );
            point("http_req_failed", r.end, 0.0, "200");
        }
        for i in &s.iters {
            point("iteration_duration", i.0, (i.1 * 1e6).round() / 1e3, "");
        }
        for v in &s.vus {
            point("vus", v.0, v.1, "");
        }
        let (jp, cp) = (dir.join("run.json"), dir.join("run.csv"));
        std::fs::write(&jp, j).unwrap();
        std::fs::write(&cp, c).unwrap();
        (jp, cp)
    }

    #[test]
    fn the_csv_and_the_json_of_one_run_give_the_same_levels() {
        let s = closed(&ramp_on(), 36.0, &mut Pool::new(5, 0.4));
        let dir = std::env::temp_dir().join(format!("n8ncap-k6series-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (jp, cp) = write_both(&s, &dir);
        let (a, b) = (read(&jp).unwrap(), read(&cp).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(a.reqs.len(), s.reqs.len());
        assert_eq!(b.reqs.len(), s.reqs.len());
        let (sa, sb) = (
            stages(&a, Warmup(None)).unwrap(),
            stages(&b, Warmup(None)).unwrap(),
        );
        let key = |v: &[StageResult]| {
            v.iter()
                .map(|x| (x.vus, x.ramp.is_some(), x.requests))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&sa), key(&sb));
        for (x, y) in sa.iter().zip(&sb) {
            assert!((x.throughput_rps - y.throughput_rps).abs() < 0.05);
        }
        assert_eq!(held(&sa).len(), 2);
    }
}
