//! A reader of Prometheus' HTTP API (`/api/v1/query_range`, `/api/v1/query`, `/api/v1/series`),
//! as Prometheus, Thanos, Mimir and VictoriaMetrics serve it: http or https (with a CA file),
//! a bearer token or basic auth from an environment variable or a file (never a flag value,
//! never printed), a timeout per request, long ranges cut into queries of at most
//! [`MAX_POINTS_PER_QUERY`] steps. Prometheus' own error answers and its warnings (partial data)
//! come back as what they are.
//!
//! Not here: which series n8n has and what they mean (`observe::history`).

use crate::error::BadInput;
use crate::wire::tls;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::time::Duration;

/// Prometheus refuses a range query of more than 11 000 points per series.
pub const MAX_POINTS_PER_QUERY: f64 = 10_000.0;
/// Series one query may match: a deployment's processes are tens, a selector that matches
/// thousands has selected more than one deployment (and memory would grow with each).
pub const MAX_SERIES: usize = 2_000;
/// Largest answer read (a week at 15 s for 50 series is about 20 MB per query).
const MAX_ANSWER: usize = 256 << 20;

/// How requests authenticate. The secret is kept only here and sent only in the header.
#[derive(Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Bearer(String),
    /// `user:password`.
    Basic(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::None => "no auth",
            Auth::Bearer(_) => "bearer token (not shown)",
            Auth::Basic(_) => "basic auth (not shown)",
        })
    }
}

impl Auth {
    /// From the environment variable or the file the user named: a token, or `user:password`.
    pub fn load(
        token_env: Option<&str>,
        token_file: Option<&std::path::Path>,
        basic_env: Option<&str>,
        basic_file: Option<&std::path::Path>,
    ) -> Result<Auth, BadInput> {
        let from_env = |name: &str, what: &str| {
            std::env::var(name)
                .map(|v| v.trim().to_string())
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    BadInput(format!(
                        "{what}: the environment variable {name} is not set (or empty)"
                    ))
                })
        };
        let from_file = |p: &std::path::Path, what: &str| {
            crate::util::read_text_file(p, 64 << 10, what)
                .map(|t| t.trim().to_string())
                .and_then(|t| {
                    if t.is_empty() {
                        Err(BadInput(format!(
                            "{what} {} is empty: an empty credential would be sent as one",
                            p.display()
                        )))
                    } else {
                        Ok(t)
                    }
                })
        };
        let given = [
            token_env.is_some(),
            token_file.is_some(),
            basic_env.is_some(),
            basic_file.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(BadInput(
                "give one way to authenticate to Prometheus: a token or basic auth, from a variable or a file"
                    .into(),
            ));
        }
        let auth = if let Some(n) = token_env {
            Auth::Bearer(from_env(n, "--prometheus-token-env")?)
        } else if let Some(p) = token_file {
            Auth::Bearer(from_file(p, "--prometheus-token-file")?)
        } else if let Some(n) = basic_env {
            Auth::Basic(from_env(n, "--prometheus-basic-auth-env")?)
        } else if let Some(p) = basic_file {
            Auth::Basic(from_file(p, "--prometheus-basic-auth-file")?)
        } else {
            Auth::None
        };
        match &auth {
            Auth::Basic(b) if !b.contains(':') => Err(BadInput(
                "basic auth must read user:password (the value is not shown)".into(),
            )),
            Auth::Bearer(t) | Auth::Basic(t) if t.chars().any(|c| c.is_control()) => Err(
                BadInput("the Prometheus credential holds a control character or a line break: give it on one line".into()),
            ),
            _ => Ok(auth),
        }
    }

    fn header(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
            Auth::Basic(b) => Some(format!("Basic {}", base64(b.as_bytes()))),
        }
    }
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Percent-encodes a query parameter (RFC 3986 unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What went wrong, as Prometheus or the connection said it.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    /// Prometheus answered `"status": "error"` (bad query, timeout, unavailable).
    #[error("Prometheus answered {status} {error_type}: {error}")]
    Api {
        status: u16,
        error_type: String,
        error: String,
    },
    #[error("{0}")]
    Transport(String),
    /// Not Prometheus' API (a login page, a proxy's error, garbage).
    #[error("not a Prometheus API answer: {0}")]
    Malformed(String),
}

/// One series of a matrix: its labels and its points (Unix seconds, value; "NaN" and "±Inf"
/// are kept as such for the reader to judge).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(f64, f64)>,
}

/// A range query's answer: the series, and Prometheus' warnings (partial data).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    pub series: Vec<Series>,
    pub warnings: Vec<String>,
}

/// A Prometheus-compatible API.
#[derive(Debug, Clone)]
pub struct Api {
    /// Base URL, e.g. `https://prometheus.example:9090` or `…/prometheus` behind a prefix.
    pub base: crate::wire::url::HttpUrl,
    pub shown: String,
    pub auth: Auth,
    pub ca_cert: Option<std::path::PathBuf>,
    pub timeout: Duration,
}

impl Api {
    pub fn new(
        url: &str,
        auth: Auth,
        ca_cert: Option<&std::path::Path>,
        timeout: Duration,
    ) -> Result<Api, BadInput> {
        let base = crate::wire::url::HttpUrl::parse(url, "--prometheus")?;
        if let Some(p) = ca_cert {
            crate::util::read_text_file(p, 4 << 20, "--ca-cert")?;
        }
        Ok(Api {
            base,
            shown: crate::wire::url::redact(url),
            auth,
            ca_cert: ca_cert.map(|p| p.to_path_buf()),
            timeout,
        })
    }

    /// GETs `path?query` under the base URL; answers Prometheus' JSON `data` (and warnings).
    pub async fn get(
        &self,
        path: &str,
        params: &[(&str, String)],
    ) -> Result<(Data, Vec<String>), PromError> {
        let prefix = self.base.path_and_query.trim_end_matches('/');
        let prefix = prefix.split('?').next().unwrap_or("");
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let target = format!("{prefix}{path}?{}", query.join("&"));
        let (status, body) = tokio::time::timeout(self.timeout, self.fetch(&target))
            .await
            .map_err(|_| {
                PromError::Transport(format!(
                    "{} did not answer within {:?} (raise --prometheus-timeout, or query a shorter range)",
                    self.shown, self.timeout
                ))
            })??;
        parse_answer(status, &body)
    }

    async fn fetch(&self, target: &str) -> Result<(u16, Bytes), PromError> {
        let t = |e: &dyn std::fmt::Display| {
            PromError::Transport(format!(
                "{}: {}",
                self.shown,
                crate::wire::url::truncate(&e.to_string(), 200)
            ))
        };
        let (host, port) = (self.base.host.as_str(), self.base.port);
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| t(&e))?;
        let stream = if self.base.https {
            let c = tls::connector(host, self.ca_cert.as_deref(), false).map_err(|e| t(&e.0))?;
            let s = c
                .connector
                .connect(c.name.clone(), tcp)
                .await
                .map_err(|e| t(&format!("TLS: {e}")))?;
            tls::Stream::Tls(Box::new(s))
        } else {
            tls::Stream::Plain(tcp)
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| t(&e))?;
        tokio::spawn(conn);
        let mut req = hyper::Request::get(target)
            .header(hyper::header::HOST, self.base.authority())
            .header(hyper::header::ACCEPT, "application/json");
        if let Some(h) = self.auth.header() {
            req = req.header(hyper::header::AUTHORIZATION, h);
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| t(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| t(&e))?;
        let status = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    t(&format!(
                        "the answer is larger than {} MiB: query a shorter range or a larger step",
                        MAX_ANSWER >> 20
                    ))
                } else {
                    t(&e)
                }
            })?
            .to_bytes();
        Ok((status, body))
    }

    /// A range query, cut into queries of at most [`MAX_POINTS_PER_QUERY`] steps, joined by
    /// series (the same labels).
    pub async fn query_range(
        &self,
        query: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Matrix, PromError> {
        let mut out = Matrix::default();
        let mut index: BTreeMap<Vec<(String, String)>, usize> = BTreeMap::new();
        let span = step * MAX_POINTS_PER_QUERY;
        let mut from = start;
        while from <= end {
            let to = (from + span - step).min(end);
            let (data, warnings) = self
                .get(
                    "/api/v1/query_range",
                    &[
                        ("query", query.to_string()),
                        ("start", fmt_time(from)),
                        ("end", fmt_time(to)),
                        ("step", fmt_time(step)),
                    ],
                )
                .await?;
            out.warnings.extend(warnings);
            let asked = ((to - from) / step).floor() as usize + 1;
            let series = matrix(data)?;
            if out.series.len().max(series.len()) > MAX_SERIES {
                return Err(PromError::Malformed(format!(
                    "{query} matched {} series, more than the {MAX_SERIES} read: narrow it with --match",
                    series.len()
                )));
            }
            for s in series {
                if s.points.len() > asked + 1 {
                    return Err(PromError::Malformed(format!(
                        "{} points answered for the {asked} steps asked: not a range query's answer",
                        s.points.len()
                    )));
                }
                let key: Vec<(String, String)> = s.labels.clone().into_iter().collect();
                match index.get(&key) {
                    Some(i) => out.series[*i].points.extend(s.points),
                    None => {
                        index.insert(key, out.series.len());
                        out.series.push(s);
                    }
                }
            }
            from = to + step;
        }
        Ok(out)
    }

    /// The raw samples of `selector` in `(start, end]`, as scraped (their own timestamps, not a
    /// step grid), read with range selectors at instants, `chunk` seconds at a time and at most
    /// `max_points` in all (None past it: the caller keeps its step grid).
    pub async fn raw(
        &self,
        selector: &str,
        (start, end): (f64, f64),
        chunk: f64,
        max_points: usize,
    ) -> Result<Option<Vec<Series>>, PromError> {
        let mut out: Vec<Series> = Vec::new();
        let mut total = 0usize;
        let chunk = chunk.max(1.0);
        let mut from = start;
        while from < end {
            let to = (from + chunk).min(end);
            let ms = ((to - from) * 1000.0).round().max(1.0) as u64;
            let (data, _) = self
                .get(
                    "/api/v1/query",
                    &[
                        ("query", format!("{selector}[{ms}ms]")),
                        ("time", fmt_time(to)),
                    ],
                )
                .await?;
            for s in matrix(data)? {
                total += s.points.len();
                if total > max_points {
                    return Ok(None);
                }
                match out.iter_mut().find(|o| o.labels == s.labels) {
                    Some(o) => o.points.extend(s.points),
                    None => out.push(s),
                }
            }
            from = to;
        }
        for s in &mut out {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            s.points.dedup_by(|a, b| a.0 == b.0);
        }
        Ok(Some(out))
    }

    /// An instant query's vector: (labels, value) at `time`.
    pub async fn query(
        &self,
        query: &str,
        time: f64,
    ) -> Result<Vec<(BTreeMap<String, String>, f64)>, PromError> {
        let (data, _) = self
            .get(
                "/api/v1/query",
                &[("query", query.to_string()), ("time", fmt_time(time))],
            )
            .await?;
        if data.result_type != "vector" {
            return Err(PromError::Malformed(format!(
                "resultType {:?}, not a vector",
                data.result_type
            )));
        }
        data.result
            .into_iter()
            .map(|r| {
                let v = r
                    .value
                    .ok_or_else(|| PromError::Malformed("a vector sample has no value".into()))?;
                Ok((r.metric, v.1 .0))
            })
            .collect()
    }
}

fn fmt_time(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A value as Prometheus writes it, a string ("4.5", "NaN", "+Inf"), read straight to f64.
#[derive(Debug, Clone, Copy)]
pub struct Num(pub f64);

impl<'de> serde::Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number as a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Num, E> {
                v.parse::<f64>()
                    .map(Num)
                    .map_err(|_| E::custom("a value that is not a number"))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// One series (matrix) or sample (vector) of an answer, read without a JSON tree: a week of
/// points costs 16 bytes each, not a parsed document.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RawSeries {
    #[serde(default)]
    pub metric: BTreeMap<String, String>,
    #[serde(default)]
    pub values: Option<Vec<(f64, Num)>>,
    #[serde(default)]
    pub value: Option<(f64, Num)>,
}

/// The `data` of a success answer.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Data {
    #[serde(rename = "resultType")]
    pub result_type: String,
    pub result: Vec<RawSeries>,
}

#[derive(serde::Deserialize)]
struct Envelope {
    status: Option<String>,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// Prometheus' envelope: `{"status":"success","data":…,"warnings":[…]}` or
/// `{"status":"error","errorType":…,"error":…}`.
pub fn parse_answer(status: u16, body: &[u8]) -> Result<(Data, Vec<String>), PromError> {
    let clean = |s: &str| crate::wire::url::truncate(&crate::util::escape_control(s), 300);
    let v: Envelope = serde_json::from_slice(body).map_err(|e| {
        let head = String::from_utf8_lossy(&body[..body.len().min(120)]).to_string();
        if head.trim_start().starts_with('{') {
            PromError::Malformed(format!("HTTP {status}, {}", clean(&e.to_string())))
        } else {
            PromError::Malformed(format!(
                "HTTP {status}, {}",
                clean(&crate::wire::url::truncate(head.trim(), 120))
            ))
        }
    })?;
    match v.status.as_deref() {
        Some("success") => {
            let data = v
                .data
                .ok_or_else(|| PromError::Malformed("no data in a success answer".into()))?;
            Ok((data, v.warnings.iter().map(|w| clean(w)).collect()))
        }
        Some("error") => Err(PromError::Api {
            status,
            error_type: clean(v.error_type.as_deref().unwrap_or("")),
            error: clean(v.error.as_deref().unwrap_or("")),
        }),
        _ => Err(PromError::Malformed(format!(
            "HTTP {status} without a status field"
        ))),
    }
}

/// A `matrix` result's series.
pub fn matrix(data: Data) -> Result<Vec<Series>, PromError> {
    if data.result_type != "matrix" {
        return Err(PromError::Malformed(format!(
            "resultType {:?}, not a matrix",
            data.result_type
        )));
    }
    data.result
        .into_iter()
        .map(|r| {
            let values = r
                .values
                .ok_or_else(|| PromError::Malformed("a series has no values".into()))?;
            Ok(Series {
                labels: r.metric,
                points: values.into_iter().map(|(t, v)| (t, v.0)).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/prometheus/");

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{FIX}{name}")).unwrap()
    }

    #[test]
    fn captured_answers_read_as_what_they_are() {
        let (data, warnings) = parse_answer(200, &fixture("query_range-completed.json")).unwrap();
        assert!(warnings.is_empty());
        let m = matrix(data).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].labels["job"], "n8n");
        assert_eq!(m[0].points[1].1 - m[0].points[0].1, 12.0);
        // A target killed mid-range: its series just ends (the stale marker is no point).
        let (data, _) = parse_answer(200, &fixture("query_range-cpu-target-down.json")).unwrap();
        let m = matrix(data).unwrap();
        let worker = m.iter().find(|s| s.labels["job"] == "n8n-worker").unwrap();
        let main = m.iter().find(|s| s.labels["job"] == "n8n").unwrap();
        assert!(worker.points.len() < main.points.len());
        // "NaN" is kept as NaN for the reader to judge.
        let (data, _) = parse_answer(200, &fixture("query_range-nan.json")).unwrap();
        assert!(matrix(data).unwrap()[0].points.iter().all(|p| p.1.is_nan()));
        // Partial data: the warnings come back with the data.
        let (_, w) = parse_answer(200, &fixture("query_range-partial.json")).unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("partial response"));
        // Prometheus' errors, with their type and status.
        for (f, status, kind) in [
            ("error-bad-data.json", 400, "bad_data"),
            ("error-too-many-points.json", 400, "bad_data"),
        ] {
            match parse_answer(status, &fixture(f)) {
                Err(PromError::Api {
                    status: s,
                    error_type,
                    error,
                }) => {
                    assert_eq!((s, error_type.as_str()), (status, kind));
                    assert!(!error.is_empty());
                }
                other => panic!("{f}: {other:?}"),
            }
        }
        // A login page or a proxy's error is not an API answer.
        assert!(matches!(
            parse_answer(502, b"<html>Bad Gateway</html>"),
            Err(PromError::Malformed(_))
        ));
        assert!(matches!(
            matrix(serde_json::from_str(r#"{"resultType": "vector", "result": []}"#).unwrap()),
            Err(PromError::Malformed(_))
        ));
    }

    #[test]
    fn basic_auth_is_base64_and_never_shown() {
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        let a = Auth::Basic("user:secret-77".into());
        assert!(!format!("{a:?}").contains("secret"));
        assert_eq!(a.header().unwrap(), "Basic dXNlcjpzZWNyZXQtNzc=");
        assert_eq!(encode("up{job=\"n8n\"}"), "up%7Bjob%3D%22n8n%22%7D");
    }
}
