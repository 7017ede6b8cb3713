//! k6 interop: reads what k6 users already have — `--summary-export` JSON (one aggregate) and
//! `--out json` (one point per request, aggregated here into stages: one per scenario, or by the
//! `vus` level over time) — into [`StageResult`]s, so `diagnose` can judge runs made with k6.

use super::stats::summarize;
use crate::error::BadInput;
use crate::record::stage::{Latency, StageResult};
use crate::record::LoadModel;
use hdrhistogram::Histogram;
use std::io::{BufRead, Read};
use std::path::Path;

/// Largest k6 summary read (k6's --summary-export is a few KB).
const MAX_SUMMARY_BYTES: u64 = 16 << 20;
/// Longest line of k6 JSON output (one point is a few hundred bytes).
const MAX_POINT_LINE: u64 = 1 << 20;
/// Most requests read from k6 JSON output (memory stays under a few GB).
const MAX_POINTS: usize = 20_000_000;

fn read(path: &Path) -> Result<String, BadInput> {
    crate::util::read_text_file(path, MAX_SUMMARY_BYTES, "k6 summary")
}

fn blank_stage(index: usize, label: String, vus: u32) -> StageResult {
    StageResult {
        vus: Some(vus),
        ..StageResult::empty(index, label, LoadModel::Closed)
    }
}

/// Validity as n8ncap's own sweep decides it (errors < 5 %, checks > 99 %).
fn judge(s: &mut StageResult) {
    s.invalid_reasons.clear();
    if s.requests == 0 {
        s.invalid_reasons
            .push("no request completed in the steady window".into());
    }
    if s.error_rate >= 0.05 {
        s.invalid_reasons.push(format!(
            "http_req_failed rate<0.05 (observed {:.4})",
            s.error_rate
        ));
    }
    if s.check_pass_rate <= 0.99 {
        s.invalid_reasons.push(format!(
            "checks rate>0.99 (observed {:.4})",
            s.check_pass_rate
        ));
    }
    s.valid = s.invalid_reasons.is_empty();
}

/// `k6 run --summary-export FILE`: the whole run as one stage. k6's default summary has no p99:
/// it is reported as the maximum (an upper bound).
pub fn from_summary(path: &Path) -> Result<Vec<StageResult>, BadInput> {
    let v: serde_json::Value = serde_json::from_str(&read(path)?).map_err(|e| {
        BadInput(format!(
            "{} is not JSON (line {}, column {}): is it k6's --summary-export output?",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    let m = v.get("metrics").ok_or_else(|| {
        BadInput(format!(
            "{} has no `metrics`: is it k6's --summary-export output?",
            path.display()
        ))
    })?;
    let shown = path.display().to_string();
    // A value k6 wrote: absent is None; present but not a number, or outside what the metric
    // can be, is refused with the field named — never read as 0.
    let num = |metric: &str, key: &str, max: f64| -> Result<Option<f64>, BadInput> {
        let Some(x) = m.get(metric).and_then(|x| x.get(key)) else {
            return Ok(None);
        };
        match x.as_f64() {
            Some(v) if v.is_finite() && (0.0..=max).contains(&v) => Ok(Some(v)),
            _ => Err(BadInput(format!(
                "{shown}: metrics.{metric}.{key} is {}: it must be a number from 0 to {max}",
                crate::wire::url::truncate(&x.to_string(), 40)
            ))),
        }
    };
    let big = 1e15;
    let count = num("http_reqs", "count", big)?.ok_or_else(|| {
        BadInput(format!(
            "{shown}: no http_reqs count: is it k6's --summary-export output?"
        ))
    })?;
    let rate = num("http_reqs", "rate", big)?.unwrap_or(0.0);
    let max_vus = crate::record::stage::MAX_IN_FLIGHT as f64;
    let vus = num("vus_max", "value", max_vus)?
        .or(num("vus", "value", max_vus)?)
        .or(num("vus", "max", max_vus)?)
        .unwrap_or(1.0) as u32;
    let failed = num("http_req_failed", "value", 1.0)?.unwrap_or(0.0);
    let checks = num("checks", "value", 1.0)?.unwrap_or(1.0);
    let ms = |key: &str| num("http_req_duration", key, big);
    let (med, avg, min, p90, p95, p99, max) = (
        ms("med")?,
        ms("avg")?,
        ms("min")?,
        ms("p(90)")?,
        ms("p(95)")?,
        ms("p(99)")?,
        ms("max")?,
    );
    let mut s = blank_stage(0, format!("{vus} in flight (k6 summary)"), vus);
    s.requests = count as u64;
    s.request_rate = rate;
    s.window_s = if rate > 0.0 { count / rate } else { 0.0 };
    s.duration_s = s.window_s;
    s.error_rate = failed;
    s.ok = (count * (1.0 - failed)).round() as u64;
    s.check_pass_rate = checks;
    s.throughput_rps = rate * (1.0 - failed) * checks.min(1.0);
    s.latency = med.map(|med| Latency {
        mean_ms: avg.unwrap_or(med),
        min_ms: min.unwrap_or(0.0),
        p50_ms: med,
        p90_ms: p90.unwrap_or(med),
        p95_ms: p95.unwrap_or(med),
        p99_ms: p99.or(max).unwrap_or(med),
        max_ms: max.unwrap_or(med),
    });
    judge(&mut s);
    Ok(vec![s])
}

/// Seconds since the epoch from k6's RFC 3339 timestamps ("2026-11-30T07:38:23.463212645Z").
pub fn parse_time(t: &str) -> Option<f64> {
    let (date, rest) = t.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, mo, da) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    if !((1..=9999).contains(&y) && (1..=12).contains(&mo) && (1..=31).contains(&da)) {
        return None;
    }
    let (clock, offset_s) = match rest.find(['Z', '+']).or_else(|| rest.rfind('-')) {
        Some(i) => {
            let off = &rest[i..];
            let secs = if off == "Z" {
                0
            } else {
                let sign = if off.starts_with('-') { -1 } else { 1 };
                let hm: Vec<i64> = off[1..]
                    .split(':')
                    .filter_map(|x| x.parse().ok())
                    .filter(|x| (0..100).contains(x))
                    .collect();
                sign * (hm.first().copied().unwrap_or(0) * 3600
                    + hm.get(1).copied().unwrap_or(0) * 60)
            };
            (&rest[..i], secs)
        }
        None => (rest, 0),
    };
    let mut c = clock.split(':');
    let (h, mi) = (
        c.next()?.parse::<i64>().ok()?,
        c.next()?.parse::<i64>().ok()?,
    );
    let s: f64 = c.next()?.parse().ok()?;
    if !((0..=24).contains(&h) && (0..=59).contains(&mi) && (0.0..62.0).contains(&s)) {
        return None;
    }
    // days from civil (Howard Hinnant).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 - offset_s) as f64 + s)
}

#[derive(Default)]
struct Group {
    first: f64,
    last: f64,
    vus_max: f64,
    /// (time, duration ms, failed, checks ok, status, scenario index)
    points: Vec<(f64, f64, bool, bool, u16, usize)>,
}

/// The points of a k6 JSON output that matter here, by metric.
#[derive(Default)]
struct Points {
    /// (time, scenario index, duration ms)
    /// (time, scenario, duration ms, HTTP status from the point's tags; 0: no response)
    reqs: Vec<(f64, usize, f64, u16)>,
    scenarios: Vec<String>,
    checks: Vec<(f64, bool)>,
    fails: Vec<(f64, bool)>,
    vus: Vec<(f64, f64)>,
}

/// `k6 run --out json=FILE`: per-request points aggregated into stages — one per scenario when
/// the script runs its scenarios one after another (`startTime`), else one per `vus` level,
/// with each scenario's figures when several run at once (a mix) — with the first `warmup_s`
/// of each stage left out of the figures.
pub fn from_json(path: &Path, warmup_s: f64) -> Result<Vec<StageResult>, BadInput> {
    let points = read_points(path)?;
    let names = points.scenarios.clone();
    let mut out = Vec::new();
    for (i, (name, g)) in group(points)
        .into_iter()
        .filter(|(_, g)| !g.points.is_empty())
        .enumerate()
    {
        out.push(stage_of(i, &name, g, warmup_s, &names)?);
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

fn read_points(path: &Path) -> Result<Points, BadInput> {
    let shown = path.display().to_string();
    let file = crate::util::open_regular_file(path, "k6 JSON output")?;
    let mut reader = std::io::BufReader::new(file);
    let mut p = Points::default();
    let mut line = Vec::new();
    let mut line_no = 0usize;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_POINT_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| BadInput(format!("cannot read {shown}: {e}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if n as u64 > MAX_POINT_LINE {
            return Err(BadInput(format!(
                "{shown}:{line_no}: a line longer than {} MiB: not k6 JSON output",
                MAX_POINT_LINE >> 20
            )));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&line).map_err(|e| {
            BadInput(format!(
                "{shown}:{line_no}: not k6 JSON output (column {})",
                e.column()
            ))
        })?;
        if v.get("type").and_then(|t| t.as_str()) != Some("Point") {
            continue;
        }
        let metric = v.get("metric").and_then(|m| m.as_str()).unwrap_or("");
        if !matches!(
            metric,
            "http_req_duration" | "http_req_failed" | "checks" | "vus"
        ) {
            continue;
        }
        let data = &v["data"];
        let Some(t) = data
            .get("time")
            .and_then(|t| t.as_str())
            .and_then(parse_time)
        else {
            return Err(BadInput(format!(
                "{shown}:{line_no}: data.time of a {metric} point is not an RFC 3339 time"
            )));
        };
        let max = match metric {
            "vus" => crate::record::stage::MAX_IN_FLIGHT as f64,
            "http_req_duration" => 1e12,
            _ => 1.0,
        };
        let value = match data.get("value").and_then(|x| x.as_f64()) {
            Some(v) if v.is_finite() && (0.0..=max).contains(&v) => v,
            _ => {
                return Err(BadInput(format!(
                    "{shown}:{line_no}: data.value of a {metric} point is {}: it must be a \
                     number from 0 to {max}",
                    crate::wire::url::truncate(&data["value"].to_string(), 40)
                )))
            }
        };
        let scenario = data["tags"]
            .get("scenario")
            .and_then(|s| s.as_str())
            .unwrap_or("default");
        match metric {
            "http_req_duration" => {
                if p.reqs.len() >= MAX_POINTS {
                    return Err(BadInput(format!(
                        "{shown}: more than {MAX_POINTS} requests: split the run, or use \
                         --summary-export"
                    )));
                }
                let sc = match p.scenarios.iter().position(|s| s == scenario) {
                    Some(i) => i,
                    None if p.scenarios.len() < 1000 => {
                        p.scenarios.push(scenario.to_string());
                        p.scenarios.len() - 1
                    }
                    None => {
                        return Err(BadInput(format!(
                            "{shown}:{line_no}: more than 1000 scenarios"
                        )))
                    }
                };
                let status = data["tags"]
                    .get("status")
                    .and_then(|x| x.as_str().and_then(|s| s.parse().ok()).or(x.as_u64()))
                    .map_or(0, |v| v.min(999) as u16);
                p.reqs.push((t, sc, value, status))
            }
            "http_req_failed" => p.fails.push((t, value != 0.0)),
            "checks" => p.checks.push((t, value != 0.0)),
            _ => p.vus.push((t, value)),
        }
    }
    if p.reqs.is_empty() {
        return Err(BadInput(format!(
            "{shown} has no http_req_duration points: is it k6's --out json output?"
        )));
    }
    Ok(p)
}

/// Requests grouped into stages: by scenario when there are several, else by `vus` level.
fn group(p: Points) -> Vec<(String, Group)> {
    let Points {
        mut reqs,
        scenarios: names,
        checks: mut checks_by_time,
        fails: mut fails_by_time,
        mut vus,
    } = p;
    reqs.sort_by(|a, b| a.0.total_cmp(&b.0));
    fails_by_time.sort_by(|a, b| a.0.total_cmp(&b.0));
    checks_by_time.sort_by(|a, b| a.0.total_cmp(&b.0));
    vus.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Requests and their http_req_failed points come in the same order with equal timestamps.
    let failed_at = |i: usize| fails_by_time.get(i).map(|f| f.1).unwrap_or(false);
    // Scenarios in the order they first sent a request.
    let mut order: Vec<usize> = Vec::new();
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for (t, sc, _, _) in &reqs {
        match order.iter().position(|o| o == sc) {
            Some(k) => spans[k].1 = *t,
            None => {
                order.push(*sc);
                spans.push((*t, *t));
            }
        }
    }
    let by_scenario = order.len() > 1 && sequential(&spans);
    let mut groups: Vec<(String, Group)> = Vec::new();
    let mut group_of_scenario = vec![0usize; names.len()];
    if by_scenario {
        for (g, sc) in order.iter().enumerate() {
            group_of_scenario[*sc] = g;
            groups.push((names[*sc].clone(), Group::default()));
        }
    }
    let level_at = |t: f64| -> f64 {
        match vus.partition_point(|(vt, _)| *vt <= t) {
            0 => vus.first().map(|v| v.1).unwrap_or(1.0),
            i => vus[i - 1].1,
        }
    };
    let mut check_i = 0;
    for (i, (t, sc, d, status)) in reqs.iter().enumerate() {
        while check_i < checks_by_time.len() && checks_by_time[check_i].0 < *t {
            check_i += 1;
        }
        let check_ok = checks_by_time.get(check_i).map(|c| c.1).unwrap_or(true);
        // By scenario: its group. By level: the last group while the level holds, else a new
        // one — constant time per request, whatever the number of levels.
        let idx = if by_scenario {
            group_of_scenario[*sc]
        } else {
            let key = format!("{}", level_at(*t));
            if groups.last().map(|(k, _)| k) != Some(&key) {
                groups.push((key, Group::default()));
            }
            groups.len() - 1
        };
        let g = &mut groups[idx].1;
        if g.points.is_empty() {
            g.first = *t;
        }
        g.last = *t;
        g.vus_max = g.vus_max.max(level_at(*t));
        g.points
            .push((*t, *d, failed_at(i), check_ok, *status, *sc));
    }
    groups
}

fn stage_of(
    i: usize,
    name: &str,
    g: Group,
    warmup_s: f64,
    names: &[String],
) -> Result<StageResult, BadInput> {
    let vus = g
        .vus_max
        .clamp(1.0, crate::record::stage::MAX_IN_FLIGHT as f64) as u32;
    let mut s = blank_stage(i, format!("{vus} in flight (k6 {name})"), vus);
    let span = (g.last - g.first).max(0.0);
    let warm = warmup_s.min(span / 2.0);
    s.duration_s = span;
    s.warmup_s = warm;
    let from = g.first + warm;
    let mut h: Histogram<u32> =
        Histogram::new_with_bounds(1, 3_600_000_000, 3).map_err(|e| BadInput(e.to_string()))?;
    let (mut n, mut bad, mut checks_ok) = (0u64, 0u64, 0u64);
    let mut per_scenario: Vec<(u64, u64, u64, Histogram<u32>)> = Vec::new();
    for (t, d, f, c, status, sc) in &g.points {
        if *t < from {
            s.warmup_requests += 1;
            continue;
        }
        n += 1;
        let _ = h.record(((d * 1000.0) as u64).clamp(1, 3_600_000_000));
        if *f {
            bad += 1;
            // k6 tags a request that got no answer with status 0: a broken or refused
            // connection, not an HTTP status.
            match *status {
                0 => s.errors.io += 1,
                code => *s.errors.http_status.entry(code).or_insert(0) += 1,
            }
        }
        if *c {
            checks_ok += 1;
        }
        while per_scenario.len() <= *sc {
            per_scenario.push((0, 0, 0, h.clone()));
            if let Some(last) = per_scenario.last_mut() {
                last.3.reset();
            }
        }
        let e = &mut per_scenario[*sc];
        e.0 += 1;
        e.1 += u64::from(!*f);
        e.2 += u64::from(!*f && *c);
        let _ = e.3.record(((d * 1000.0) as u64).clamp(1, 3_600_000_000));
    }
    s.window_s = (g.last - from).max(0.0);
    s.requests = n;
    s.ok = n - bad;
    s.error_rate = if n > 0 { bad as f64 / n as f64 } else { 0.0 };
    s.check_pass_rate = if n > 0 {
        checks_ok as f64 / n as f64
    } else {
        0.0
    };
    let per_s = |k: u64| {
        if s.window_s > 0.0 {
            k as f64 / s.window_s
        } else {
            0.0
        }
    };
    s.request_rate = per_s(n);
    s.throughput_rps = per_s((n - bad).min(checks_ok));
    s.latency = summarize(&h);
    if per_scenario.iter().filter(|e| e.0 > 0).count() > 1 {
        s.scenarios = mix_of(&s, &per_scenario, names);
    }
    judge(&mut s);
    Ok(s)
}

/// Several k6 scenarios at once: each one's part of the stage.
fn mix_of(
    s: &StageResult,
    per: &[(u64, u64, u64, Histogram<u32>)],
    names: &[String],
) -> Vec<crate::record::stage::ScenarioResult> {
    let good_all: u64 = per.iter().map(|e| e.2).sum();
    per.iter()
        .enumerate()
        .filter(|(_, e)| e.0 > 0)
        .map(
            |(k, (n, ok, good, h))| crate::record::stage::ScenarioResult {
                name: names.get(k).cloned().unwrap_or_default(),
                requests: *n,
                ok: *ok,
                throughput_rps: s.throughput_rps * *good as f64 / good_all.max(1) as f64,
                request_rate: s.request_rate * *n as f64 / s.requests.max(1) as f64,
                share: *n as f64 / s.requests.max(1) as f64,
                latency: summarize(h),
                error_rate: (*n - *ok) as f64 / *n as f64,
                errors: Default::default(),
                checks: Vec::new(),
                check_pass_rate: *good as f64 / *n as f64,
                bytes_sent: 0,
                bytes_received: 0,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k6_times_parse() {
        let t = parse_time("2026-11-30T07:38:23.463212645Z").unwrap();
        assert!((t - 1_796_024_303.463_212_6).abs() < 1e-3, "{t}");
        let z = parse_time("2026-11-30T08:38:23.5+01:00").unwrap();
        assert!((z - 1_796_024_303.5).abs() < 1e-6, "{z}");
        assert!(parse_time("yesterday").is_none());
    }

    #[test]
    fn failures_keep_their_status_and_no_answer_is_io() {
        let point = |t: &str, metric: &str, value: u32, status: &str| {
            format!(
                "{{\"type\":\"Point\",\"metric\":\"{metric}\",\"data\":{{\"time\":\"2026-11-30T07:38:{t}Z\",\"value\":{value},\"tags\":{{\"status\":\"{status}\"}}}}}}\n"
            )
        };
        let mut text = String::new();
        for (i, status) in ["200", "503", "0", "200"].iter().enumerate() {
            let t = format!("{:02}.0", 20 + i);
            text.push_str(&point(&t, "http_req_duration", 100, status));
            let failed = u32::from(*status != "200");
            text.push_str(&point(&t, "http_req_failed", failed, status));
        }
        let path =
            std::env::temp_dir().join(format!("n8ncap-k6-status-{}.json", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let stages = from_json(&path, 0.0).unwrap();
        let _ = std::fs::remove_file(&path);
        let s = &stages[0];
        assert_eq!((s.requests, s.ok), (4, 2));
        assert_eq!(s.errors.http_status.get(&503), Some(&1));
        assert_eq!(s.errors.io, 1);
        assert!(!s.errors.http_status.contains_key(&0));
    }
}
