//! k6's `--out json` and `--out csv` files read into a [`Series`], bounded: lines, points and
//! the run's span are checked before anything is judged.

use super::*;
use crate::error::BadInput;
use std::io::{BufRead, Read};
use std::path::Path;

/// One point before it is sorted into the series.
pub(super) struct Point<'a> {
    metric: &'a str,
    time: f64,
    value: f64,
    scenario: &'a str,
    status: u16,
}

pub(super) struct Builder {
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

pub(super) fn status_of(text: &str) -> u16 {
    text.trim().parse::<u64>().map_or(0, |v| v.min(999) as u16)
}

pub(super) const WANTED: [&str; 6] = [
    "http_req_duration",
    "http_req_failed",
    "checks",
    "vus",
    "iteration_duration",
    "dropped_iterations",
];

/// Reads lines of at most [`MAX_LINE`] bytes, calling `f(line number, line)`.
pub(super) fn each_line(
    path: &Path,
    what: &str,
    mut f: impl FnMut(usize, &[u8]) -> Result<(), BadInput>,
) -> Result<(), BadInput> {
    let shown = path.display().to_string();
    let mut reader = open(path, what)?;
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
            .and_then(crate::load::k6::parse_time)
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
pub(super) fn csv_time(text: &str) -> Option<(f64, f64)> {
    let t = text.trim();
    if t.contains('T') {
        let s = crate::load::k6::parse_time(t)?;
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
pub(super) struct CsvColumns {
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
pub(super) fn split_csv(line: &str) -> Vec<String> {
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

/// The file's text, through gzip when it starts with gzip's magic bytes (k6's
/// `--out json=FILE.gz` and `--out csv=FILE.gz` write it so).
fn open(path: &Path, what: &str) -> Result<Box<dyn BufRead>, BadInput> {
    let mut file = std::io::BufReader::new(crate::util::open_regular_file(path, what)?);
    let gzip = file
        .fill_buf()
        .map(|b| b.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    Ok(if gzip {
        Box::new(std::io::BufReader::new(
            flate2::bufread::MultiGzDecoder::new(file),
        ))
    } else {
        Box::new(file)
    })
}

/// Reads either format, plain or gzipped: a CSV starts with k6's header.
pub fn read(path: &Path) -> Result<Series, BadInput> {
    let mut head = Vec::with_capacity(16);
    let _ = open(path, "k6 output")?.take(16).read_to_end(&mut head);
    let n = head.len();
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
pub(super) const BEFORE_THE_RUN_S: f64 = 5.0;

/// How far outside its requests' span a `vus` sample may lie (a setup, a delayed scenario).
const STRAY_S: f64 = 3600.0;

pub fn plausible_span(s: &Series) -> Result<(), BadInput> {
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
        ).into());
    }
    // k6 samples `vus` from the run's start to its end: a sample far outside the requests'
    // span is a point with an impossible time, not a stretch of the run.
    if let Some((t, _)) = s
        .vus
        .iter()
        .find(|(t, _)| !s.reqs.is_empty() && (*t < first - STRAY_S || *t > last + STRAY_S))
    {
        return Err(format!(
            "a vus sample at {t:.0} s since 1970 lies {:.1} hours outside its requests' span: no \
             k6 run samples its users that far from its requests — an edited or corrupted file; \
             cut the file to the run",
            ((first - t).max(t - last)) / 3600.0
        )
        .into());
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
    )
    .into())
}
