//! `report.html`: one self-contained file (no network, no script), charts as inline SVG —
//! throughput against load with the model's curve and its ceilings, latency against load with
//! the baseline, slots taken / waiting / runner tasks per stage, memory per container over time
//! — then the stage table (validity first), the diagnosis and the recommendation in words.

use crate::record::diagnosis::Level;
use crate::record::timeline::Event;
use crate::record::{Diagnosis, LoadModel, Recommendation, Summary};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The chart's drawing units (the SVG scales to the page width; text keeps its proportion).
const W: f64 = 960.0;
const H: f64 = 340.0;
const ML: f64 = 64.0;
const MR: f64 = 24.0;
/// Above the plot: one row per legend line.
const LEGEND_ROW: f64 = 18.0;
const MB: f64 = 44.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// How a series is drawn: measured data as points joined by a thin line (drawn on top), model
/// curves dashed or dotted, observed gauges as lines.
pub enum Mark {
    Line,
    Dots,
    Dashed,
    Dotted,
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Error bars (low, high) per point, same order.
    pub bars: Vec<(f64, f64)>,
    pub mark: Mark,
}

/// A line/scatter chart with labelled horizontal reference lines.
pub struct Chart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub hlines: Vec<(f64, String)>,
    /// A sentence under the title when the chart lacks data it would normally show, and why.
    pub note: Option<String>,
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    // Fine steps: an axis ends near its data, not up to twice past it.
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    /// The legend's entries laid out left to right, wrapped: (x, row) of each.
    fn legend_layout(&self) -> (Vec<(f64, usize)>, usize) {
        let mut out = Vec::new();
        let (mut x, mut row) = (ML, 0usize);
        for ser in &self.series {
            let w = 34.0 + 6.6 * ser.name.chars().count() as f64;
            if x + w > W - MR && x > ML {
                x = ML;
                row += 1;
            }
            out.push((x, row));
            x += w + 14.0;
        }
        let rows = if self.series.is_empty() { 0 } else { row + 1 };
        (out, rows)
    }

    pub fn svg(&self) -> String {
        let all_x = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let all_y = self
            .series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .map(|p| p.1)
                    .chain(s.bars.iter().map(|b| b.1))
            })
            .chain(self.hlines.iter().map(|h| h.0));
        let xmax = nice_max(all_x.fold(0.0, f64::max));
        let ymax = nice_max(all_y.filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.08);
        let (legend, rows) = self.legend_layout();
        let mt = 10.0 + LEGEND_ROW * rows as f64 + 8.0;
        let (pw, ph) = (W - ML - MR, H - mt - MB);
        let f = Frame {
            xmax,
            ymax,
            mt,
            pw,
            ph,
        };
        let (sx, sy) = (|x| f.sx(x), |y| f.sy(y));
        let font = FONT;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {W} {H}" preserveAspectRatio="xMidYMid meet" role="img" aria-label="{}">"#,
            esc(&self.id),
            esc(&self.title)
        );
        let _ = write!(
            s,
            r##"<rect x="{ML}" y="{mt}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>"##
        );
        for i in 0..=5 {
            let (xv, yv) = (xmax * i as f64 / 5.0, ymax * i as f64 / 5.0);
            let (x, y) = (sx(xv), sy(yv));
            let _ = write!(
                s,
                r##"<line x1="{ML}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" font-size="12" text-anchor="end" {font}>{}</text><text x="{x}" y="{}" font-size="12" text-anchor="middle" {font}>{}</text>"##,
                ML + pw,
                ML - 6.0,
                y + 4.0,
                fmt_num(yv),
                mt + ph + 16.0,
                fmt_num(xv)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="13" text-anchor="middle" {font}>{}</text><text x="14" y="{}" font-size="13" text-anchor="middle" {font} transform="rotate(-90 14 {})">{}</text>"#,
            ML + pw / 2.0,
            H - 8.0,
            esc(&self.x_label),
            mt + ph / 2.0,
            mt + ph / 2.0,
            esc(&self.y_label)
        );
        self.ceilings(&f, &mut s);
        self.marks(&f, &mut s);
        self.legend(&legend, &mut s);
        s.push_str("</svg>");
        s
    }

    /// Ceilings: a dashed line across the plot, labelled inside it at the right, above the
    /// line (below it when the previous label is too close), on a white halo.
    fn ceilings(&self, f: &Frame, s: &mut String) {
        let font = FONT;
        let pw = f.pw;
        let mut last_label_y = f64::NEG_INFINITY;
        let mut hl: Vec<&(f64, String)> = self.hlines.iter().collect();
        hl.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (i, (y, label)) in hl.into_iter().enumerate() {
            let c = COLORS[(i + 4) % COLORS.len()];
            let ly = f.sy(*y);
            let mut ty = ly - 5.0;
            if ty - last_label_y < 14.0 {
                ty = ly + 15.0;
            }
            last_label_y = ty;
            let _ = write!(
                s,
                r##"<line class="ceiling" x1="{ML}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="1.5" stroke-dasharray="8 5"/><text class="ceiling-label" x="{}" y="{ty}" font-size="12" text-anchor="end" fill="{c}" stroke="#fff" stroke-width="3" paint-order="stroke" {font}>{}</text>"##,
                ML + pw,
                ML + pw - 6.0,
                esc(label)
            );
        }
    }

    /// The series: curves first, measured points (joined by a thin line) last.
    fn marks(&self, f: &Frame, s: &mut String) {
        // Curves first, measured points last: the model never hides what was measured.
        let order = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| !matches!(s.mark, Mark::Dots))
            .chain(
                self.series
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| matches!(s.mark, Mark::Dots)),
            );
        for (i, ser) in order {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<String> = ser
                .points
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", f.sx(*x), f.sy(*y)))
                .collect();
            match ser.mark {
                Mark::Line | Mark::Dashed | Mark::Dotted => {
                    let _ = write!(
                        s,
                        r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2"{} points="{}"/>"#,
                        dash(&ser.mark),
                        pts.join(" ")
                    );
                }
                Mark::Dots => {
                    let _ = write!(
                        s,
                        r#"<polyline class="series measured" fill="none" stroke="{c}" stroke-width="1.2" stroke-opacity="0.7" points="{}"/>"#,
                        pts.join(" ")
                    );
                    for (k, (x, y)) in ser.points.iter().enumerate() {
                        if let Some((lo, hi)) = ser.bars.get(k) {
                            let _ = write!(
                                s,
                                r#"<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="{c}" stroke-width="1.5"/>"#,
                                f.sx(*x),
                                f.sy(*lo),
                                f.sy(*hi)
                            );
                        }
                        let _ = write!(
                            s,
                            r##"<circle class="point" cx="{:.1}" cy="{:.1}" r="5" fill="{c}" stroke="#fff" stroke-width="1.5"/>"##,
                            f.sx(*x),
                            f.sy(*y)
                        );
                    }
                }
            }
        }
    }

    /// The legend above the plot: a sample of each series' mark and its name.
    fn legend(&self, layout: &[(f64, usize)], s: &mut String) {
        let font = FONT;
        for (i, (ser, (x, row))) in self.series.iter().zip(layout.iter().copied()).enumerate() {
            let c = COLORS[i % COLORS.len()];
            let y = 10.0 + LEGEND_ROW * row as f64 + 9.0;
            let sample = match ser.mark {
                Mark::Dots => format!(
                    r##"<line x1="{x}" x2="{}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="1.2"/><circle cx="{}" cy="{y}" r="4.5" fill="{c}" stroke="#fff"/>"##,
                    x + 24.0,
                    x + 12.0
                ),
                _ => format!(
                    r#"<line x1="{x}" x2="{}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="2"{}/>"#,
                    x + 24.0,
                    dash(&ser.mark)
                ),
            };
            let _ = write!(
                s,
                r#"<g class="legend">{sample}<text x="{}" y="{}" font-size="12" {font}>{}</text></g>"#,
                x + 30.0,
                y + 4.0,
                esc(&ser.name)
            );
        }
    }
}

/// The plot area and the scales of a chart.
struct Frame {
    xmax: f64,
    ymax: f64,
    mt: f64,
    pw: f64,
    ph: f64,
}

impl Frame {
    fn sx(&self, x: f64) -> f64 {
        ML + x / self.xmax * self.pw
    }

    fn sy(&self, y: f64) -> f64 {
        self.mt + self.ph - (y / self.ymax).clamp(0.0, 1.05) * self.ph
    }
}

const FONT: &str = r#"font-family="sans-serif""#;

/// The stroke pattern of a curve: model curves dashed or dotted.
fn dash(m: &Mark) -> &'static str {
    match m {
        Mark::Dashed => r#" stroke-dasharray="7 4""#,
        Mark::Dotted => r#" stroke-dasharray="2 4" stroke-linecap="round""#,
        _ => "",
    }
}

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
    let levels = d.map(|d| d.levels.as_slice()).unwrap_or(&[]);
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
                cap.worker_bound,
                format!("worker-bound {:.2}", cap.worker_bound),
            ));
            if cap.runner_bound.is_finite() {
                thr.hlines.push((
                    cap.runner_bound,
                    format!("runner-bound {:.2}", cap.runner_bound),
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
        esc(&s.profile)
    );
    let _ = write!(
        h,
        "<h1>n8ncap report</h1><p>{} · {} model · {} · {} → {}</p>",
        esc(&s.profile),
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
    scenarios_html(&mut h, s);
    if let Some(d) = d {
        diagnosis_html(&mut h, d);
    }
    if let Some(r) = r {
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
            esc(&super::text::compose_snippet(r))
        );
    }
    h.push_str("</body></html>\n");
    h
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

/// Writes `report.html` into a results directory from its summary and timeline.
pub fn write(
    dir: &std::path::Path,
    summary: &crate::record::Summary,
) -> anyhow::Result<std::path::PathBuf> {
    let timeline = crate::record::timeline::read_file(&dir.join("timeline.jsonl"));
    let html = render(summary, &timeline);
    let path = dir.join("report.html");
    crate::record::dir::write_atomic(&path, html.as_bytes())?;
    Ok(path)
}
