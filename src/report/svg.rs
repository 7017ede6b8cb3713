//! A small SVG plotting kit for the self-contained report: a chart of series (measured points
//! joined by a thin line, model curves dashed or dotted, gauges as lines) on nice axes, with a
//! legend; and `esc`, outside text made safe for HTML. It knows nothing of n8n: the page
//! (`html.rs`) says what to draw.

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

/// Outside text as HTML: markup characters as entities, and every control character but a line
/// break or a tab shown escaped (`\u{1b}`), so no input puts an escape sequence in a page.
pub(super) fn esc(s: &str) -> String {
    let shown: String = s
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect();
    shown
        .replace('&', "&amp;")
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

/// An axis from 0 that ends at or just past `v`: its tick step is 1, 2, 2.5 or 5 × a power of
/// ten, with 4 to 6 steps, and the axis ends on a tick (0, 5, 10 … 30 rather than 0, 6, 12 … 30).
fn nice_axis(v: f64) -> (f64, f64) {
    if v <= 0.0 || !v.is_finite() {
        return (1.0, 0.2);
    }
    let mag = 10f64.powf((v / 5.0).log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|step| (v / step).ceil() <= 6.0)
        .unwrap_or(10.0 * mag);
    ((v / step).ceil().max(1.0) * step, step)
}

/// The ticks of an axis from 0 to `max` by `step` (computed by index, so no sum drifts).
fn ticks(max: f64, step: f64) -> impl Iterator<Item = f64> {
    let n = (max / step).round() as usize;
    (0..=n).map(move |i| i as f64 * step)
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
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
        let (xmax, xstep) = nice_axis(all_x.fold(0.0, f64::max));
        let (ymax, ystep) = nice_axis(all_y.filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.08);
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
        for yv in ticks(ymax, ystep) {
            let y = sy(yv);
            let _ = write!(
                s,
                r##"<line x1="{ML}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" font-size="12" text-anchor="end" {font}>{}</text>"##,
                ML + pw,
                ML - 6.0,
                y + 4.0,
                fmt_num(yv),
            );
        }
        for xv in ticks(xmax, xstep) {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" font-size="12" text-anchor="middle" {font}>{}</text>"#,
                sx(xv),
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
            // A line is drawn along x, whatever order the points were measured in (an adaptive
            // search visits 16 before 10): a curve, never a zig-zag.
            let mut along = ser.points.clone();
            along.sort_by(|a, b| a.0.total_cmp(&b.0));
            let pts: Vec<String> = along
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", f.sx(*x), f.sy(*y)))
                .collect();
            match ser.mark {
                Mark::Line => {
                    let _ = write!(
                        s,
                        r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
                        pts.join(" ")
                    );
                }
                // A model curve is thinner and paler than what was measured, so where the two
                // agree the measured points and their line still show on top of it.
                Mark::Dashed | Mark::Dotted => {
                    let _ = write!(
                        s,
                        r#"<polyline class="series model" fill="none" stroke="{c}" stroke-width="1.5" stroke-opacity="0.55"{} points="{}"/>"#,
                        dash(&ser.mark),
                        pts.join(" ")
                    );
                }
                Mark::Dots => {
                    let _ = write!(
                        s,
                        r#"<polyline class="series measured" fill="none" stroke="{c}" stroke-width="2.2" points="{}"/>"#,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_a_tick_with_round_steps() {
        for (v, max, step) in [
            (40.0, 40.0, 10.0),
            (25.0, 25.0, 5.0),
            (33.0, 40.0, 10.0),
            (27.0, 30.0, 5.0),
            (0.3, 0.3, 0.05),
            (1.2, 1.2, 0.2),
            (7.0, 8.0, 2.0),
            (1e6, 1e6, 2e5),
        ] {
            let (m, s) = nice_axis(v);
            assert!((m - max).abs() < 1e-9 * max, "{v}: max {m}, not {max}");
            assert!((s - step).abs() < 1e-9 * step, "{v}: step {s}, not {step}");
            let n = ticks(m, s).count();
            assert!((5..=7).contains(&n), "{v}: {n} ticks");
            assert!(m >= v, "{v}: the axis ends below its data");
        }
        // Every tick is a round figure: 1, 2, 2.5 or 5 × a power of ten, times a whole number.
        let shown: Vec<String> = ticks(1.2, 0.2).map(fmt_num).collect();
        assert_eq!(shown, ["0", "0.2", "0.4", "0.6", "0.8", "1", "1.2"]);
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(f64::NAN), (1.0, 0.2));
    }

    #[test]
    fn a_line_follows_x_whatever_order_the_points_came_in() {
        let chart = Chart {
            id: "t".into(),
            title: "t".into(),
            x_label: "in flight".into(),
            y_label: "req/s".into(),
            series: vec![Series {
                name: "measured".into(),
                // An adaptive search's order: 1, 2, 4, 8, 16, then back to 10 and 9.
                points: [1.0f64, 2.0, 4.0, 8.0, 16.0, 10.0, 9.0]
                    .iter()
                    .map(|x| (*x, x.min(9.0_f64)))
                    .collect(),
                bars: Vec::new(),
                mark: Mark::Dots,
            }],
            hlines: Vec::new(),
            note: None,
        };
        let svg = chart.svg();
        let at = svg.find("points=\"").unwrap() + 8;
        let xs: Vec<f64> = svg[at..svg[at..].find('"').unwrap() + at]
            .split(' ')
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(xs.windows(2).all(|w| w[0] <= w[1]), "{xs:?}");
    }
}
