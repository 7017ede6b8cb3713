//! A Prometheus text-format (0.0.4, and the OpenMetrics lines n8n could emit) parser that keeps
//! everything: HELP and TYPE per family, label values unescaped, NaN and ±Inf, optional
//! timestamps (absent stays absent), names with `:`, histogram and summary series attached to
//! their family.
//!
//! Why our own: `prometheus-parse` 0.2.5 drops names with `:`, leaves label escapes raw and
//! stamps samples with the current time; `openmetrics-parser` rejects valid 0.0.4 input.

use crate::error::Implausible;
use std::collections::HashMap;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series name as written (`..._bucket`, `..._sum`, ...).
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub kind: MetricKind,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// One scrape: families in the order they appeared.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub families: Vec<Family>,
    index: HashMap<String, usize>,
}

const SUFFIXES: [&str; 7] = [
    "_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount",
];

impl Exposition {
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.index.get(name).map(|i| &self.families[*i])
    }

    /// The value of the first series with exactly this name (and any labels).
    pub fn value(&self, series: &str) -> Option<f64> {
        self.series(series).next().map(|s| s.value)
    }

    /// Sum over every series with exactly this name (all label combinations).
    pub fn sum(&self, series: &str) -> Option<f64> {
        let mut it = self.series(series).peekable();
        it.peek()?;
        Some(it.map(|s| s.value).sum())
    }

    /// Every sample whose series name is `series`.
    pub fn series<'a>(&'a self, series: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        let fam = self.owner_of(series);
        fam.into_iter()
            .flat_map(|f| f.samples.iter())
            .filter(move |s| s.name == series)
    }

    fn owner_of(&self, series: &str) -> Option<&Family> {
        if let Some(f) = self.family(series) {
            return Some(f);
        }
        SUFFIXES
            .iter()
            .find_map(|suf| series.strip_suffix(suf).and_then(|base| self.family(base)))
    }

    fn family_mut(&mut self, name: &str) -> &mut Family {
        let i = match self.index.get(name) {
            Some(i) => *i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind: MetricKind::Untyped,
                    help: None,
                    samples: Vec::new(),
                });
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        &mut self.families[i]
    }

    /// Which family a sample line belongs to: the family itself, or a declared
    /// histogram/summary/counter whose name plus a known suffix is this series.
    fn family_for_sample(&self, series: &str) -> String {
        if self.index.contains_key(series) {
            return series.to_string();
        }
        for suf in SUFFIXES {
            if let Some(base) = series.strip_suffix(suf) {
                if let Some(f) = self.family(base) {
                    if f.kind != MetricKind::Untyped || f.samples.is_empty() {
                        return base.to_string();
                    }
                }
            }
        }
        series.to_string()
    }
}

/// Longest error message (in characters) about a line of input.
const MAX_QUOTED: usize = 200;

pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut exp = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r').trim_start();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim_start();
            if rest == "EOF" {
                break;
            }
            let mut parts = rest.splitn(3, char::is_whitespace);
            let keyword = parts.next().unwrap_or("");
            let name = parts.next().unwrap_or("");
            let tail = parts.next().unwrap_or("").trim_start();
            match keyword {
                "HELP" if valid_name(name) => {
                    exp.family_mut(name).help = Some(unescape_help(tail));
                }
                "TYPE" if valid_name(name) => {
                    let kind = match tail.trim() {
                        "counter" => MetricKind::Counter,
                        "gauge" => MetricKind::Gauge,
                        "histogram" | "gaugehistogram" => MetricKind::Histogram,
                        "summary" => MetricKind::Summary,
                        "untyped" | "unknown" | "info" | "stateset" => MetricKind::Untyped,
                        other => {
                            return Err(ParseError {
                                line: line_no,
                                message: super::url::truncate(
                                    &format!("unknown metric type {other:?} for {name}"),
                                    MAX_QUOTED,
                                ),
                            })
                        }
                    };
                    exp.family_mut(name).kind = kind;
                }
                _ => {} // other comments (UNIT, free text) carry nothing we use
            }
            continue;
        }
        let sample = parse_sample(line).map_err(|message| ParseError {
            line: line_no,
            // What a message quotes of a bad line is bounded: a 20 MB garbage line must not
            // be repeated into every gap message and the timeline.
            message: super::url::truncate(&message.0, MAX_QUOTED),
        })?;
        let fam = exp.family_for_sample(&sample.name);
        exp.family_mut(&fam).samples.push(sample);
    }
    Ok(exp)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o)
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_sample(line: &str) -> Result<Sample, Implausible> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or_else(|| format!("sample without a value: {line:?}"))?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("invalid metric name {name:?}").into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    // OpenMetrics exemplars follow " # ".
    let rest = match rest.find(" # ") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let mut fields = rest.split_whitespace();
    let value_text = fields
        .next()
        .ok_or_else(|| format!("{name} has no value"))?;
    let value =
        parse_value(value_text).ok_or_else(|| format!("{name}: {value_text:?} is not a number"))?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .or_else(|_| t.parse::<f64>().map(|v| (v * 1000.0) as i64))
                .map_err(|_| format!("{name}: {t:?} is not a timestamp"))?,
        ),
    };
    if let Some(extra) = fields.next() {
        return Err(format!("{name}: unexpected {extra:?} after the value").into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

type Labels = Vec<(String, String)>;

fn parse_labels(s: &str) -> Result<(Labels, &str), Implausible> {
    let mut labels = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b',') {
            i += 1;
        }
        if i >= bytes.len() {
            return Err("unterminated label set".into());
        }
        if bytes[i] == b'}' {
            return Ok((labels, &s[i + 1..]));
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b' ' {
            i += 1;
        }
        let key = &s[start..i];
        if !valid_name(key) {
            return Err(format!("invalid label name {key:?}").into());
        }
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            return Err(format!("label {key} has no '='").into());
        }
        i += 1;
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'"' {
            return Err(format!("label {key} value is not quoted").into());
        }
        i += 1;
        let mut value = String::new();
        let mut closed = false;
        let mut chars = s[i..].char_indices();
        while let Some((off, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, o)) => {
                        value.push('\\');
                        value.push(o)
                    }
                    None => break,
                },
                '"' => {
                    i += off + 1;
                    closed = true;
                    break;
                }
                _ => value.push(c),
            }
        }
        if !closed {
            return Err(format!("label {key} value is not terminated").into());
        }
        labels.push((key.to_string(), value));
    }
}

/// Writes Prometheus text exposition the way prom-client does (HELP, TYPE, samples, blank
/// line): the simulator's /metrics and the exporter use it; [`parse`] reads it back.
pub struct TextWriter {
    pub out: String,
    prefix: String,
}

impl TextWriter {
    pub fn new(prefix: &str) -> Self {
        Self {
            out: String::with_capacity(8192),
            prefix: prefix.to_string(),
        }
    }

    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = write!(
            self.out,
            "# HELP {p}{name} {help}\n# TYPE {p}{name} {kind}\n",
            p = self.prefix
        );
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(&self.prefix);
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", label_value(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", fmt_value(value));
    }

    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
        self.out.push('\n');
    }

    pub fn end_family(&mut self) {
        self.out.push('\n');
    }
}

/// A label value as the exposition format escapes it (`\\`, `\"`, `\n`); any other control
/// character (a CR, an ESC from a compose label) is written as its visible escape (`\u{1b}`,
/// read back as that text), so no raw control byte reaches a scraper.
fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(out, "\\\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label value holding ESC and CR (a compose label) leaves no raw control byte in the
    /// text, and reads back as its visible escape.
    #[test]
    fn control_characters_in_label_values_never_reach_the_text_raw() {
        let mut w = TextWriter::new("n8ncap_");
        w.family("x", "gauge", "test");
        w.sample("x", &[("container", "a\u{1b}[31m\rb\"c\n")], 1.0);
        assert!(!w.out.contains(['\u{1b}', '\r']), "{:?}", w.out);
        let parsed = parse(&w.out).unwrap();
        let got = parsed
            .series("n8ncap_x")
            .next()
            .and_then(|s| s.label("container"));
        assert_eq!(got, Some("a\\u{1b}[31m\\u{d}b\"c\n"));
    }

    const EDGE: &str = r#"# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000
# Escaping in label values:
msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9
metric_without_timestamp_and_labels 12.47
job:req:rate5m{job="api"} 3.5
# A weird metric from before the epoch:
something_weird{problem="division by zero"} +Inf -3982045
nan_metric NaN
neg_inf -Inf
# HELP http_request_duration_seconds A histogram of the request duration.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.05"} 24054
http_request_duration_seconds_bucket{le="+Inf"} 144320
http_request_duration_seconds_sum 53423
http_request_duration_seconds_count 144320
# HELP rpc_duration_seconds A summary \\ with \n escapes.
# TYPE rpc_duration_seconds summary
rpc_duration_seconds{quantile="0.5"} 4773
rpc_duration_seconds_sum 1.7560473e+07
rpc_duration_seconds_count 2693
odd_label{v="a}b",}  1
"#;

    #[test]
    fn keeps_every_edge_case() {
        let e = parse(EDGE).unwrap();
        assert_eq!(e.sum("http_requests_total"), Some(1030.0));
        let first = e.series("http_requests_total").next().unwrap();
        assert_eq!(first.timestamp_ms, Some(1_395_066_363_000));
        assert_eq!(first.label("code"), Some("200"));
        let ms = e.series("msdos_file_access_time_seconds").next().unwrap();
        assert_eq!(ms.label("path"), Some(r"C:\DIR\FILE.TXT"));
        assert_eq!(ms.label("error"), Some("Cannot find file:\n\"FILE.TXT\""));
        assert_eq!(e.value("metric_without_timestamp_and_labels"), Some(12.47));
        assert_eq!(
            e.series("metric_without_timestamp_and_labels")
                .next()
                .unwrap()
                .timestamp_ms,
            None
        );
        assert_eq!(e.value("job:req:rate5m"), Some(3.5));
        assert_eq!(e.value("something_weird"), Some(f64::INFINITY));
        assert!(e.value("nan_metric").unwrap().is_nan());
        assert_eq!(e.value("neg_inf"), Some(f64::NEG_INFINITY));
        let h = e.family("http_request_duration_seconds").unwrap();
        assert_eq!(h.kind, MetricKind::Histogram);
        assert_eq!(h.samples.len(), 4);
        assert_eq!(
            e.value("http_request_duration_seconds_count"),
            Some(144_320.0)
        );
        let inf = e
            .series("http_request_duration_seconds_bucket")
            .find(|s| s.label("le") == Some("+Inf"))
            .unwrap();
        assert_eq!(inf.value, 144_320.0);
        let s = e.family("rpc_duration_seconds").unwrap();
        assert_eq!(s.kind, MetricKind::Summary);
        assert_eq!(s.help.as_deref(), Some("A summary \\ with \n escapes."));
        assert_eq!(s.samples.len(), 3);
        assert_eq!(
            e.series("odd_label").next().unwrap().label("v"),
            Some("a}b")
        );
    }

    #[test]
    fn the_writer_and_the_parser_round_trip() {
        let mut w = TextWriter::new("n8n_");
        w.family("x", "gauge", "An x.");
        w.sample("x", &[("path", "C:\\a \"b\"\nc")], f64::INFINITY);
        w.sample("x", &[("path", "plain")], 2.5);
        w.end_family();
        let e = parse(&w.out).unwrap();
        let f = e.family("n8n_x").unwrap();
        assert_eq!(f.kind, MetricKind::Gauge);
        assert_eq!(f.help.as_deref(), Some("An x."));
        assert_eq!(f.samples[0].label("path"), Some("C:\\a \"b\"\nc"));
        assert_eq!(f.samples[0].value, f64::INFINITY);
        assert_eq!(f.samples[1].value, 2.5);
    }

    #[test]
    fn garbage_is_an_error_with_a_line_number() {
        let err = parse("ok 1\nthis is not { a metric\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse("x{a=\"unterminated} 1").is_err());
        assert!(parse("x 1 2 3").is_err());
        assert!(parse("x abc").is_err());
        assert!(parse("<html><body>502 Bad Gateway</body></html>").is_err());
    }
}
