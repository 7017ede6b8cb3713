//! k6 interop: reads what k6 users already have — `--summary-export` JSON (one aggregate) and
//! `--out json` (one point per request, aggregated here into stages: one per scenario, or by the
//! `vus` level over time) — into [`StageResult`]s, so `diagnose` can judge runs made with k6.

use crate::error::BadInput;
use crate::record::stage::{Latency, StageResult};
use crate::record::LoadModel;
use std::path::Path;

/// Largest k6 summary read (k6's --summary-export is a few KB).
const MAX_SUMMARY_BYTES: u64 = 16 << 20;

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
pub(crate) fn mark_validity(s: &mut StageResult) {
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
    let v = summary_json(path)?;
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
    let durations = [
        ms("med")?,
        ms("avg")?,
        ms("min")?,
        ms("p(90)")?,
        ms("p(95)")?,
        ms("p(99)")?,
        ms("max")?,
    ];
    let mut s = blank_stage(0, format!("{vus} in flight (k6 summary)"), vus);
    s.requests = count as u64;
    s.request_rate = rate;
    s.window_s = if rate > 0.0 { count / rate } else { 0.0 };
    s.duration_s = s.window_s;
    s.error_rate = failed;
    s.ok = (count * (1.0 - failed)).round() as u64;
    s.check_pass_rate = checks;
    s.throughput_rps = rate * (1.0 - failed) * checks.min(1.0);
    s.throughput_ci = count_interval(s.throughput_rps, s.window_s);
    s.latency = latency(durations);
    // Iterations (a VU's whole loop, think time included) for Little's law on the VUs — only
    // when the users never moved (vus min = max): a summary of steps mixes them.
    let held = matches!(
        (num("vus", "min", max_vus)?, num("vus", "max", max_vus)?),
        (Some(a), Some(b)) if a == b
    );
    if let (true, Some(per_s), Some(mean_ms)) = (
        held,
        num("iterations", "rate", big)?,
        num("iteration_duration", "avg", big)?,
    ) {
        s.iterations = Some(crate::record::stage::IterationFigures {
            per_s,
            mean_s: mean_ms / 1000.0,
        });
    }
    mark_validity(&mut s);
    Ok(vec![s])
}

/// The file as JSON, refused with the place it stops being JSON.
fn summary_json(path: &Path) -> Result<serde_json::Value, BadInput> {
    serde_json::from_str(&read(path)?).map_err(|e| {
        BadInput(format!(
            "{} is not JSON (line {}, column {}): is it k6's --summary-export output?",
            path.display(),
            e.line(),
            e.column()
        ))
    })
}

/// A summary keeps no time series: the count's Poisson interval on `x` over `window_s` (wider
/// than a closed loop's real spread, so an inferred limit is never surer than the data).
fn count_interval(x: f64, window_s: f64) -> Option<[f64; 2]> {
    let good = x * window_s;
    (good >= 1.0).then(|| {
        let half = 1.96 / good.sqrt();
        [(x * (1.0 - half)).max(0.0), x * (1.0 + half)]
    })
}

/// The summary's `http_req_duration` (med, avg, min, p90, p95, p99, max in ms) as a latency.
/// A percentile the summary left out is the next one k6 did write (k6 exports p90 and p95 by
/// default, not p99), never a lower one: p99 below p95 cannot be.
fn latency([med, avg, min, p90, p95, p99, max]: [Option<f64>; 7]) -> Option<Latency> {
    med.map(|med| {
        let p90 = p90.unwrap_or(med);
        let p95 = p95.unwrap_or(p90);
        Latency {
            mean_ms: avg.unwrap_or(med),
            min_ms: min.unwrap_or(0.0),
            p50_ms: med,
            p90_ms: p90,
            p95_ms: p95,
            p99_ms: p99.or(max).unwrap_or(p95),
            max_ms: max.or(p99).unwrap_or(p95),
        }
    })
}

pub use crate::util::parse_rfc3339 as parse_time;

/// `k6 run --summary-export FILE` as a source of evidence: the whole run as one stage, with
/// the request body when given (for the job time).
pub struct K6Summary<'a> {
    pub path: &'a Path,
    pub body: Option<&'a str>,
}

impl crate::record::evidence::Source for K6Summary<'_> {
    async fn evidence(self) -> anyhow::Result<crate::record::evidence::Evidence> {
        let stages = from_summary(self.path)?;
        let s = summary(stages, &self.path.display().to_string(), self.body)?;
        Ok(crate::record::evidence::Evidence::of(s))
    }
}

/// Wraps stages read from k6 output in a summary, with the request body when given (for the
/// job time).
pub fn summary(
    stages: Vec<StageResult>,
    origin: &str,
    body: Option<&str>,
) -> Result<crate::record::Summary, BadInput> {
    let body = match body {
        Some(b) => Some(serde_json::from_str::<serde_json::Value>(b).map_err(|e| {
            BadInput(format!(
                "--body is not JSON ({e}): write e.g. '{{\"sleep_ms\":1000}}'"
            ))
        })?),
        None => None,
    };
    let mut s = crate::record::Summary::new(
        &format!("k6: {origin}"),
        crate::record::LoadModel::Closed,
        "",
        body,
        std::time::SystemTime::now(),
    );
    s.scenarios = mix(&stages);
    s.stages = stages;
    Ok(s)
}

/// k6 scenarios that ran at once: each one's share of the requests, with its job unknown
/// (measured at 1 in flight when the run has such a level, else given by flags).
fn mix(stages: &[StageResult]) -> Vec<crate::record::summary::ScenarioInfo> {
    let mut names: Vec<(String, u64)> = Vec::new();
    for c in stages.iter().flat_map(|s| s.scenarios.iter()) {
        match names.iter_mut().find(|(n, _)| *n == c.name) {
            Some(e) => e.1 += c.requests,
            None => names.push((c.name.clone(), c.requests)),
        }
    }
    let total: u64 = names.iter().map(|n| n.1).sum();
    names
        .into_iter()
        .map(|(name, n)| crate::record::summary::ScenarioInfo {
            url: format!("k6 scenario {name}"),
            name,
            method: String::new(),
            share: n as f64 / total.max(1) as f64,
            body: None,
            body_info: Default::default(),
            job_time_s: None,
            code_time_s: None,
        })
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
        let stages = crate::load::k6series::from_json(&path, Some(0.0)).unwrap();
        let _ = std::fs::remove_file(&path);
        let s = &stages[0];
        assert_eq!((s.requests, s.ok), (4, 2));
        assert_eq!(s.errors.http_status.get(&503), Some(&1));
        assert_eq!(s.errors.io, 1);
        assert!(!s.errors.http_status.contains_key(&0));
    }
}
