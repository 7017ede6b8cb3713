//! Checks on each response and k6-style thresholds on the aggregates.

use super::profile::Check;
use crate::error::BadInput;
pub use crate::record::stage::{ThresholdMetric, ThresholdResult};
use serde::{Deserialize, Serialize};

/// Runs one check against a response. `json` is parsed once per response, lazily.
pub fn run_check(
    check: &Check,
    status: u16,
    body: &[u8],
    json: &mut Option<Option<serde_json::Value>>,
) -> bool {
    match check {
        Check::Status { status: want } => status == *want,
        Check::BodyContains { body_contains } => {
            let needle = body_contains.as_bytes();
            !needle.is_empty() && body.windows(needle.len()).any(|w| w == needle)
        }
        Check::Json { json: path, equals } => {
            let parsed = json.get_or_insert_with(|| serde_json::from_slice(body).ok());
            match parsed {
                Some(v) => lookup(v, path) == Some(equals),
                None => false,
            }
        }
    }
}

/// Follows a dotted path; numeric segments index arrays. n8n's respond-after-last-node answers
/// with the first item's JSON, so `ok` reads the Code node's `ok` field.
fn lookup<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut cur = v;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        cur = match cur {
            serde_json::Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            serde_json::Value::Object(o) => o.get(seg)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// What a threshold aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    Rate,
    Percentile(f64),
    Avg,
    Max,
    Min,
    Med,
    Count,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Op {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "==")]
    Eq,
}

/// A parsed threshold such as `http_req_duration: p(95)<60000`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Threshold {
    pub metric: ThresholdMetric,
    pub expr: String,
    pub agg: Aggregation,
    pub op: Op,
    pub value: f64,
}

impl Threshold {
    pub fn parse(metric: &str, expr: &str) -> Result<Threshold, BadInput> {
        let bad = |why: &str| {
            BadInput(format!(
                "threshold {metric}: {expr:?} {why}; write it as k6 does, e.g. \
                 http_req_failed: rate<0.05, http_req_duration: p(95)<60000, checks: rate>0.99"
            ))
        };
        let Some(m) = ThresholdMetric::parse(metric) else {
            let known: Vec<&str> = ThresholdMetric::ALL.iter().map(|m| m.name()).collect();
            return Err(bad(&format!(
                "names an unknown metric (known: {})",
                known.join(", ")
            )));
        };
        let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let pos = e
            .find(['<', '>', '='])
            .ok_or_else(|| bad("has no comparison"))?;
        let (lhs, rest) = e.split_at(pos);
        let (op, rhs) = if let Some(r) = rest.strip_prefix("<=") {
            (Op::Le, r)
        } else if let Some(r) = rest.strip_prefix(">=") {
            (Op::Ge, r)
        } else if let Some(r) = rest.strip_prefix("==") {
            (Op::Eq, r)
        } else if let Some(r) = rest.strip_prefix('<') {
            (Op::Lt, r)
        } else if let Some(r) = rest.strip_prefix('>') {
            (Op::Gt, r)
        } else {
            return Err(bad("has an unknown comparison"));
        };
        let value: f64 = rhs
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad("does not end in a finite number"))?;
        let agg = match lhs {
            "rate" => Aggregation::Rate,
            "avg" => Aggregation::Avg,
            "max" => Aggregation::Max,
            "min" => Aggregation::Min,
            "med" => Aggregation::Med,
            "count" => Aggregation::Count,
            p if p.starts_with("p(") && p.ends_with(')') => {
                let q: f64 = p[2..p.len() - 1]
                    .parse()
                    .map_err(|_| bad("has a malformed percentile"))?;
                if !(0.0..=100.0).contains(&q) {
                    return Err(bad("has a percentile outside 0-100"));
                }
                Aggregation::Percentile(q)
            }
            _ => return Err(bad("has an unknown aggregation")),
        };
        use ThresholdMetric as M;
        let fits = matches!(
            (m, agg),
            (M::HttpReqFailed | M::Checks, Aggregation::Rate)
                | (
                    M::HttpReqDuration,
                    Aggregation::Percentile(_)
                        | Aggregation::Avg
                        | Aggregation::Max
                        | Aggregation::Min
                        | Aggregation::Med
                )
                | (
                    M::HttpReqs | M::DroppedIterations,
                    Aggregation::Count | Aggregation::Rate
                )
        );
        if !fits {
            return Err(bad("uses an aggregation that metric does not have"));
        }
        Ok(Threshold {
            metric: m,
            expr: expr.to_string(),
            agg,
            op,
            value,
        })
    }

    pub fn passes(&self, observed: f64) -> bool {
        match self.op {
            Op::Lt => observed < self.value,
            Op::Le => observed <= self.value,
            Op::Gt => observed > self.value,
            Op::Ge => observed >= self.value,
            Op::Eq => (observed - self.value).abs() < 1e-9,
        }
    }
}

pub fn parse_all(
    map: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<Vec<Threshold>, BadInput> {
    let mut out = Vec::new();
    for (metric, exprs) in map {
        for e in exprs {
            out.push(Threshold::parse(metric, e)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_need_a_finite_number() {
        for e in ["rate<NaN", "rate<inf", "rate<-inf", "p(95)<1e999"] {
            let metric = if e.starts_with("p(") {
                "http_req_duration"
            } else {
                "http_req_failed"
            };
            assert!(Threshold::parse(metric, e).is_err(), "{e}");
        }
    }

    #[test]
    fn thresholds_parse_as_k6_writes_them() {
        let t = Threshold::parse("http_req_duration", "p(95)<60000").unwrap();
        assert_eq!(t.agg, Aggregation::Percentile(95.0));
        assert_eq!(t.op, Op::Lt);
        assert!(t.passes(59_999.0) && !t.passes(60_000.0));
        let t = Threshold::parse("checks", "rate > 0.99").unwrap();
        assert!(t.passes(1.0) && !t.passes(0.99));
        assert!(Threshold::parse("http_req_failed", "p(95)<1").is_err());
        assert!(Threshold::parse("latency", "p(95)<1").is_err());
        assert!(Threshold::parse("checks", "rate").is_err());
        assert!(Threshold::parse("http_req_duration", "p(101)<5").is_err());
    }

    #[test]
    fn checks_read_status_json_and_body() {
        let body = br#"{"ok":true,"items":[{"id":7}]}"#;
        let mut j = None;
        assert!(run_check(&Check::Status { status: 200 }, 200, body, &mut j));
        assert!(!run_check(
            &Check::Status { status: 200 },
            500,
            body,
            &mut j
        ));
        let ok = Check::Json {
            json: "ok".into(),
            equals: serde_json::Value::Bool(true),
        };
        assert!(run_check(&ok, 200, body, &mut j));
        let id = Check::Json {
            json: "items.0.id".into(),
            equals: serde_json::json!(7),
        };
        assert!(run_check(&id, 200, body, &mut j));
        let mut j2 = None;
        assert!(!run_check(&ok, 200, b"not json", &mut j2));
        let c = Check::BodyContains {
            body_contains: "\"ok\"".into(),
        };
        assert!(run_check(&c, 200, body, &mut None));
    }
}
