//! `report.html`: one self-contained file (no network, no script), charts as inline SVG —
//! throughput against load with the model's curve and its ceilings, latency against load with
//! the baseline, slots taken / waiting / runner tasks per stage, memory per container over time
//! — then the stage table (validity first), the diagnosis and the recommendation in words.

use super::svg::{esc, Chart, Mark, Series};
use crate::record::diagnosis::Level;
use crate::record::timeline::Event;
use crate::record::{Diagnosis, LoadModel, Recommendation, Summary};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One reading of the timeline, as far as the report needs it.
#[derive(Default)]
pub struct Timeline {
    /// container → role, points (t, MiB)
    pub containers: BTreeMap<String, (String, Vec<(f64, f64)>)>,
    /// endpoint → (RSS MiB, heap MiB) over time
    pub rss: BTreeMap<String, Vec<(f64, f64)>>,
    pub heap: BTreeMap<String, Vec<(f64, f64)>>,
}

impl Timeline {
    pub fn from_events(events: &[Event]) -> Timeline {
        let mut t = Timeline::default();
        for e in events {
            match e {
                Event::Container {
                    t: time,
                    name,
                    role,
                    memory_bytes,
                    ..
                } => t
                    .containers
                    .entry(name.clone())
                    .or_insert((role.word().to_string(), Vec::new()))
                    .1
                    .push((*time, *memory_bytes as f64 / 1048576.0)),
                Event::Metrics {
                    t: time,
                    url,
                    role,
                    rss_bytes,
                    heap_used_bytes,
                    ..
                } => {
                    let name = role.map(|r| r.word().to_string()).unwrap_or(url.clone());
                    if let Some(r) = rss_bytes {
                        t.rss
                            .entry(name.clone())
                            .or_default()
                            .push((*time, r / 1048576.0));
                    }
                    if let Some(h) = heap_used_bytes {
                        t.heap.entry(name).or_default().push((*time, h / 1048576.0));
                    }
                }
                _ => {}
            }
        }
        t
    }
}

pub fn render(s: &Summary, events: &[Event]) -> String {
    let timeline = Timeline::from_events(events);
    let d: Option<&Diagnosis> = s.diagnosis.as_ref();
    // Drawn in the order of load, whatever order they ran in (an adaptive search steps down).
    let mut by_load: Vec<Level> = d.map(|d| d.levels.clone()).unwrap_or_default();
    by_load.sort_by(|a, b| a.level.magnitude().total_cmp(&b.level.magnitude()));
    let levels = by_load.as_slice();
    let mut charts = vec![
        throughput_chart(s, d, levels),
        latency_chart(d, levels),
        slots_chart(d, levels),
    ];
    charts.extend(memory_chart(&timeline));
    page(s, d, s.recommendation.as_ref(), &charts)
}

/// Throughput against load: measured points with their intervals, the model's curves, the
/// ceilings.
fn throughput_chart(s: &Summary, d: Option<&Diagnosis>, levels: &[Level]) -> Chart {
    let mut thr = Chart {
        id: "throughput".into(),
        title: "Throughput against in-flight load".into(),
        x_label: if s.stages.iter().any(|x| x.rate.is_some()) {
            "arrivals/s".into()
        } else {
            "in flight".into()
        },
        y_label: "req/s".into(),
        series: vec![Series {
            name: "measured".into(),
            points: levels
                .iter()
                .filter(|l| l.valid)
                .map(|l| (l.level.magnitude(), l.throughput.mean))
                .collect(),
            bars: levels
                .iter()
                .filter(|l| l.valid)
                .map(|l| (l.throughput.low, l.throughput.high))
                .collect(),
            mark: Mark::Dots,
        }],
        hlines: Vec::new(),
        note: None,
    };
    if let Some(d) = d {
        if let (Some(cap), false) = (
            &d.capacity,
            d.curve.is_empty() || s.model != LoadModel::Closed,
        ) {
            thr.series.push(Series {
                name: "model: fixed job times (bound)".into(),
                points: d
                    .curve
                    .iter()
                    .map(|p| (p.in_flight as f64, p.bound))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Dashed,
            });
            thr.series.push(Series {
                name: "model: varying job times".into(),
                points: d
                    .curve
                    .iter()
                    .map(|p| (p.in_flight as f64, p.mva))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Dotted,
            });
            thr.hlines.push((
                cap.worker_bound(),
                format!("worker-bound {:.2}", cap.worker_bound()),
            ));
            if cap.runner_bound().is_finite() {
                thr.hlines.push((
                    cap.runner_bound(),
                    format!("runner-bound {:.2}", cap.runner_bound()),
                ));
            }
        }
    }
    thr
}

/// p50 and p95 against load, with the service time.
fn latency_chart(d: Option<&Diagnosis>, levels: &[Level]) -> Chart {
    let mut lat = Chart {
        id: "latency".into(),
        title: "p50 and p95 against load".into(),
        x_label: "in flight".into(),
        y_label: "ms".into(),
        series: vec![
            Series {
                name: "p50".into(),
                points: levels
                    .iter()
                    .filter(|l| l.valid)
                    .filter_map(|l| l.p50_ms.map(|p| (l.level.magnitude(), p)))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Line,
            },
            Series {
                name: "p95".into(),
                points: levels
                    .iter()
                    .filter(|l| l.valid)
                    .filter_map(|l| l.p95_ms.as_ref().map(|p| (l.level.magnitude(), p.mean)))
                    .collect(),
                bars: levels
                    .iter()
                    .filter(|l| l.valid)
                    .filter_map(|l| l.p95_ms.as_ref().map(|p| (p.low, p.high)))
                    .collect(),
                mark: Mark::Dots,
            },
        ],
        hlines: Vec::new(),
        note: None,
    };
    if let Some(st) = d.and_then(|d| d.service_time.as_ref()) {
        lat.hlines.push((
            st.value * 1000.0,
            format!("service time S {:.0} ms", st.value * 1000.0),
        ));
    }
    lat
}

/// Slots taken and jobs waiting (n8n's gauges) against runner tasks (X × C).
fn slots_chart(d: Option<&Diagnosis>, levels: &[Level]) -> Chart {
    let code_s = d.and_then(|d| d.settings.code_time.as_ref().map(|c| c.value));
    let mut q = Chart {
        id: "slots".into(),
        title: "Slots taken, jobs waiting, runner tasks running".into(),
        x_label: "in flight".into(),
        y_label: "jobs".into(),
        series: vec![
            Series {
                name: "slots taken (n8n)".into(),
                points: levels
                    .iter()
                    .filter_map(|l| l.slots_taken.map(|v| (l.level.magnitude(), v)))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Line,
            },
            Series {
                name: "waiting (n8n)".into(),
                points: levels
                    .iter()
                    .filter_map(|l| l.waiting.map(|v| (l.level.magnitude(), v)))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Line,
            },
        ],
        hlines: Vec::new(),
        note: None,
    };
    if levels.iter().all(|l| l.slots_taken.is_none()) {
        q.note = Some(
            "No slots-taken or waiting figures: n8n's queue gauges were not watched, or were \
             coarser than the stages (n8n refreshes them every N8N_METRICS_QUEUE_METRICS_INTERVAL, \
             20 s by default). Set it lower (e.g. 1) and pass --queue-metrics-interval, or read the \
             queue directly with --redis."
                .into(),
        );
    }
    if let Some(c) = code_s {
        q.series.push(Series {
            name: "runner tasks (model: X × C)".into(),
            points: levels
                .iter()
                .filter(|l| l.valid)
                .map(|l| (l.level.magnitude(), l.throughput.mean * c))
                .collect(),
            bars: Vec::new(),
            mark: Mark::Dashed,
        });
    }
    q
}

/// Memory over time per container and endpoint, RSS against the JS heap.
fn memory_chart(timeline: &Timeline) -> Option<Chart> {
    if timeline.containers.is_empty() && timeline.rss.is_empty() {
        return None;
    }
    {
        let mut m = Chart {
            id: "memory".into(),
            title: "Memory over time: containers (docker stats), RSS and JS heap".into(),
            x_label: "seconds".into(),
            y_label: "MiB".into(),
            series: Vec::new(),
            hlines: Vec::new(),
            note: None,
        };
        for (name, (role, pts)) in &timeline.containers {
            m.series.push(Series {
                name: format!("{role} {}", short(name)),
                points: pts.clone(),
                bars: Vec::new(),
                mark: Mark::Line,
            });
        }
        for (url, pts) in &timeline.rss {
            m.series.push(Series {
                name: format!("RSS {}", short(url)),
                points: pts.clone(),
                bars: Vec::new(),
                mark: Mark::Line,
            });
        }
        for (url, pts) in &timeline.heap {
            m.series.push(Series {
                name: format!("heap {}", short(url)),
                points: pts.clone(),
                bars: Vec::new(),
                mark: Mark::Dashed,
            });
        }
        m.series.truncate(8);
        Some(m)
    }
}

/// What ran: the profile, or the adaptive search that chose the levels instead of it.
fn ran(s: &Summary) -> String {
    if s.search.is_empty() {
        s.profile.clone()
    } else {
        format!("adaptive search (profile {}'s request)", s.profile)
    }
}

fn page(
    s: &Summary,
    d: Option<&Diagnosis>,
    r: Option<&Recommendation>,
    charts: &[Chart],
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>n8ncap report — {}</title><style>body{{font-family:sans-serif;max-width:1200px;margin:24px auto;padding:0 16px;color:#222}}table{{border-collapse:collapse;font-size:13px;max-width:100%;display:block;overflow-x:auto}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f4f4f4}}.bad{{color:#b00;font-weight:bold}}.chart{{display:block;width:100%;height:auto;margin:8px 0 24px}}pre{{white-space:pre-wrap;background:#f8f8f8;padding:8px}}.verdict{{font-size:1.1em;font-weight:bold}}dl.figures{{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:14px}}dt{{font-weight:bold}}dd{{margin:0}}.finding{{border-left:4px solid #999;padding:2px 10px;margin:8px 0;background:#fafafa}}.sev-error{{border-color:#b00}}.sev-warning{{border-color:#d80}}.sev-info{{border-color:#28c}}.sev{{text-transform:uppercase;font-size:11px;font-weight:bold}}.why,.fix{{margin:2px 0;font-size:14px}}.note{{color:#555;font-size:14px;margin:0}}</style></head><body>"#,
        esc(&ran(s))
    );
    let _ = write!(
        h,
        "<h1>n8ncap report</h1><p>{} · {} model · {} · {} → {}</p>",
        esc(&ran(s)),
        if s.model == LoadModel::Closed {
            "closed"
        } else {
            "open"
        },
        esc(&s.url),
        esc(&s.started_at),
        esc(&s.finished_at)
    );
    if let Some(d) = d {
        let _ = write!(h, "<h2>Verdict</h2><p><b>{}</b></p>", esc(&d.verdict));
    }
    for c in charts {
        let _ = write!(h, "<h2>{}</h2>", esc(&c.title));
        if let Some(n) = &c.note {
            let _ = write!(h, r#"<p class="note">{}</p>"#, esc(n));
        }
        h.push_str(&c.svg());
    }
    stages_html(&mut h, s);
    scenarios_html(&mut h, s);
    if let Some(d) = d {
        diagnosis_html(&mut h, d);
    }
    if let Some(r) = r {
        recommendation_html(&mut h, r);
    }
    h.push_str("</body></html>\n");
    h
}

/// The stages' table: each stage's load, validity, checks, errors, throughput, latency and
/// the queue's gauges.
fn stages_html(h: &mut String, s: &Summary) {
    h.push_str("<h2>Stages</h2><table><tr><th>stage</th><th>load</th><th>valid</th><th>check %</th><th>error %</th><th>req/s</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>new conns/req</th><th>slots taken</th><th>waiting</th></tr>");
    for st in &s.stages {
        let lat = |f: fn(&crate::record::stage::Latency) -> f64| match (&st.latency, st.valid) {
            (Some(l), true) => format!("{:.0}", f(l)),
            _ => "invalid".into(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td></tr>",
            st.index + 1,
            esc(&st.label),
            if st.valid { "" } else { "bad" },
            if st.valid { "yes" } else { "NO" },
            st.check_pass_rate * 100.0,
            st.error_rate * 100.0,
            st.throughput_rps,
            lat(|l| l.p50_ms),
            lat(|l| l.p95_ms),
            lat(|l| l.p99_ms),
            st.new_conns_per_request,
            st.queue.as_ref().map(|q| format!("{:.1}", q.active_mean)).unwrap_or_default(),
            st.queue.as_ref().map(|q| format!("{:.1}", q.waiting_mean)).unwrap_or_default(),
        );
    }
    h.push_str("</table>");
}

/// The recommendation: its first line, each further line, and the settings as compose.
fn recommendation_html(h: &mut String, r: &Recommendation) {
    let text = super::text::recommendation(r);
    let mut lines = text.lines();
    let _ = write!(
        h,
        "<h2>Recommendation</h2><p><b>{}</b></p><ul>",
        esc(lines
            .next()
            .unwrap_or("")
            .trim_start_matches("Recommendation: "))
    );
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let _ = write!(h, "<li>{}</li>", esc(l.trim()));
    }
    let _ = write!(
        h,
        "</ul><pre>{}</pre>",
        esc(&super::dialect::settings(
            r,
            super::Dialect::Compose,
            &Default::default(),
        ))
    );
}

/// A mix: what each scenario sent, then its figures per stage (they add up to the stage's).
fn scenarios_html(h: &mut String, s: &Summary) {
    if s.scenarios.len() < 2 {
        return;
    }
    h.push_str("<h2>Scenarios</h2><table><tr><th>scenario</th><th>request</th><th>share %</th><th>body</th></tr>");
    for sc in &s.scenarios {
        let files: Vec<String> = sc
            .body_info
            .files
            .iter()
            .map(|f| format!("{} ({} bytes)", f.filename, f.bytes))
            .collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{} {}</td><td>{:.1}</td><td>{} bytes{}</td></tr>",
            esc(&sc.name),
            esc(&sc.method),
            esc(&sc.url),
            sc.share * 100.0,
            sc.body_info.bytes,
            if files.is_empty() {
                String::new()
            } else {
                format!(": {}", esc(&files.join(", ")))
            }
        );
    }
    h.push_str("</table><table><tr><th>stage</th><th>scenario</th><th>requests</th><th>share %</th><th>req/s</th><th>p50 ms</th><th>p95 ms</th><th>error %</th><th>check %</th><th>bytes sent</th><th>bytes received</th></tr>");
    for st in &s.stages {
        for c in &st.scenarios {
            let lat = |f: fn(&crate::record::stage::Latency) -> f64| match &c.latency {
                Some(l) => format!("{:.0}", f(l)),
                None => "—".into(),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
                st.index + 1,
                esc(&c.name),
                c.requests,
                c.share * 100.0,
                c.throughput_rps,
                lat(|l| l.p50_ms),
                lat(|l| l.p95_ms),
                c.error_rate * 100.0,
                c.check_pass_rate * 100.0,
                c.bytes_sent,
                c.bytes_received
            );
        }
    }
    h.push_str("</table>");
}

/// The diagnosis as HTML: the verdict, the figures it rests on (settings, model, capacity, CPU,
/// knee) as a definition list, then each finding with its severity, evidence, why and fix.
fn diagnosis_html(h: &mut String, d: &Diagnosis) {
    let _ = write!(
        h,
        r#"<h2>Diagnosis</h2><p class="verdict">{}</p><dl class="figures">"#,
        esc(&d.verdict)
    );
    let text = super::text::diagnosis(d);
    for line in text
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("Findings"))
    {
        if let Some((k, v)) = line.trim().split_once(": ") {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
        }
    }
    h.push_str("</dl>");
    if !d.findings.is_empty() {
        h.push_str("<h3>Findings</h3>");
    }
    for f in &d.findings {
        let sev = f.severity.word();
        let _ = write!(
            h,
            r#"<div class="finding sev-{sev}"><p><span class="sev">{sev}</span> <code>{}</code> {}</p>"#,
            esc(f.id.as_str()),
            esc(&f.title)
        );
        if !f.evidence.is_empty() {
            h.push_str("<ul>");
            for e in &f.evidence {
                let _ = write!(h, "<li>{}</li>", esc(e));
            }
            h.push_str("</ul>");
        }
        if let Some(w) = &f.why {
            let _ = write!(h, r#"<p class="why">Why: {}</p>"#, esc(w));
        }
        if let Some(x) = &f.fix {
            let _ = write!(h, r#"<p class="fix">Change: {}</p>"#, esc(x));
        }
        h.push_str("</div>");
    }
}

/// A legend's name for a container or URL: without the scheme and the compose project's
/// prefix (`simulated_n8n-worker-runner_1` → `n8n-worker-runner_1`), cut in the middle past
/// 32 characters (whole characters, never inside one).
fn short(s: &str) -> String {
    let s = s.trim_start_matches("http://");
    let s = match s.split_once('_') {
        Some((_, rest)) if rest.contains('_') && !s.contains('/') => rest,
        _ => s,
    };
    let chars: Vec<char> = s.chars().collect();
    if chars.len() > 32 {
        let head: String = chars[..12].iter().collect();
        let tail: String = chars[chars.len() - 19..].iter().collect();
        format!("{head}…{tail}")
    } else {
        s.to_string()
    }
}

/// `compare` as a page: every run's throughput against load on one chart, then the table.
pub fn comparison(c: &crate::record::comparison::RunComparison) -> String {
    let runs = std::iter::once(&c.baseline).chain(c.versus.iter().map(|v| &v.run));
    let chart = Chart {
        id: "throughput".into(),
        title: "Throughput against load, each run".into(),
        x_label: "load".into(),
        y_label: "req/s".into(),
        series: runs
            .map(|r| Series {
                name: r.label.clone(),
                points: r.throughput.clone(),
                bars: Vec::new(),
                mark: Mark::Dots,
            })
            .collect(),
        hlines: Vec::new(),
        note: None,
    };
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>n8ncap compare</title>\
         <style>body{font-family:sans-serif;max-width:1000px;margin:auto}pre{white-space:pre-wrap}</style>\
         </head><body><h1>n8ncap compare</h1>",
    );
    h.push_str(&chart.svg());
    let _ = write!(
        h,
        "<pre>{}</pre></body></html>",
        esc(&super::compare::comparison_table(c))
    );
    h
}

/// Writes `report.html` into a results directory from its summary and timeline.
pub fn write(
    dir: &std::path::Path,
    summary: &crate::record::Summary,
) -> anyhow::Result<std::path::PathBuf> {
    let timeline = crate::record::timeline::read_file(&dir.join(crate::record::dir::TIMELINE));
    let html = render(summary, &timeline);
    let path = dir.join(crate::record::dir::REPORT);
    crate::record::dir::write_atomic(&path, html.as_bytes())?;
    Ok(path)
}
