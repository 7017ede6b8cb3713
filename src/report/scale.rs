//! `n8ncap scale`'s table and prose: the ceiling at each worker count with what the added
//! workers gained, the verdict, the fitted law and the plan for a target rate.

use super::svg::{Chart, Mark, Series};
use super::table::{fitted, laid_out};
use crate::record::scaling::{ScalePoint, ScaleSweep, Scaling};

pub fn scaling_table(s: &Scaling) -> String {
    let mut t = fitted();
    t.set_header(vec![
        "workers",
        "ceiling /s (95 %)",
        "limit that caps",
        "added workers gained",
        "run",
    ]);
    for p in &s.points {
        t.add_row(vec![
            p.workers.to_string(),
            p.ceiling.map_or("not reached".into(), |c| {
                format!("{:.2} ({:.2}–{:.2})", c[0], c[1], c[2])
            }),
            p.limit.clone().unwrap_or_else(|| "—".into()),
            match (&p.not_joined, p.efficiency) {
                (Some(_), _) => "not all joined: left out".into(),
                (None, Some(e)) => format!("{:.0} % of linear", e * 100.0),
                (None, None) => "—".into(),
            },
            p.run.clone(),
        ]);
    }
    let width = super::width::output_width();
    let mut out = laid_out(&mut t);
    out.push_str(&format!(
        "\n{}\n",
        super::width::fold(&format!("Scale-out: {}", s.verdict), width)
    ));
    if let Some(f) = &s.fit {
        let mut line = format!(
            "  law: X(N) = {:.2} N ÷ (1 + σ (N − 1) + κ N (N − 1)), σ {:.4} ({:.4}–{:.4}), κ {:.5} ({:.5}–{:.5}), fit within {:.1} %",
            f.lambda_per_s, f.sigma, f.sigma_range[0], f.sigma_range[1], f.kappa, f.kappa_range[0], f.kappa_range[1], f.rms_error * 100.0
        );
        if let Some(n) = f.diminishing_from {
            line.push_str(&diminishing(f, n, &s.shared));
        }
        if let (Some(p), Some(c)) = (f.peak_workers, f.ceiling_per_s) {
            line.push_str(&format!("; peak {c:.1}/s at {p:.0} workers, fewer beyond"));
        } else if let Some(c) = f.ceiling_per_s.filter(|_| f.sigma_range[0] > 0.0) {
            line.push_str(&format!("; approaches {c:.1}/s"));
        }
        out.push_str(&super::width::fold(&line, width));
        out.push('\n');
    }
    if let Some(p) = &s.plan {
        let head = match p.workers {
            Some(n) => format!("  plan for {:.1}/s: {n} workers", p.target_per_s),
            None => format!("  plan for {:.1}/s: none", p.target_per_s),
        };
        out.push_str(&super::width::fold(&format!("{head} — {}", p.note), width));
        out.push('\n');
        let w = &p.per_worker;
        let mut each = Vec::new();
        if let Some(c) = w.worker_concurrency {
            each.push(format!("concurrency {c}"));
        }
        match (w.runners, w.runner_limit) {
            (Some(r), Some(l)) => each.push(format!("{r} runner(s) of limit {l}")),
            (None, Some(l)) => each.push(format!("runner limit {l}")),
            _ => {}
        }
        each.push(format!(
            "DB_POSTGRESDB_POOL_SIZE {} ({})",
            w.db_pool_size, w.db_pool_source
        ));
        out.push_str(&super::width::fold(
            &format!("    each worker: {}", each.join(", ")),
            width,
        ));
        out.push('\n');
        if let Some(n) = p.webhook_processors {
            out.push_str(&format!("    webhook processors: {n}\n"));
        }
        if let Some(c) = p.postgres_connections {
            out.push_str(&super::width::fold(
                &format!(
                    "    Postgres connections at the pools' most: {c} (max_connections must \
                     allow them beside the reserved 3; Postgres' default is 100)"
                ),
                width,
            ));
            out.push('\n');
        }
    }
    out
}

/// A scale sweep: each step of the scale command, then the runs judged together.
pub fn scale_sweep_table(s: &ScaleSweep) -> String {
    let width = super::width::output_width();
    let mut out = String::new();
    for step in &s.steps {
        let what = if step.restore {
            format!("returned to {}", workers(step.workers))
        } else {
            format!("scaled to {}", workers(step.workers))
        };
        let how = match &step.failure {
            Some(f) => format!("FAILED: the command {f}"),
            None => format!(
                "in {:.1} s, then {:.0} s settle",
                step.seconds, step.settle_s
            ),
        };
        out.push_str(&super::width::fold(
            &format!("{what} ({}) {how}", step.command),
            width,
        ));
        out.push('\n');
        if step.failure.is_some() {
            for line in step
                .output
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(&format!(
        "scale sweep {} (found at {}, {})\n\n",
        s.ended,
        workers(s.original_workers),
        s.original_source
    ));
    match &s.scaling {
        Some(sc) => out.push_str(&scaling_table(sc)),
        None => out.push_str("Fewer than two worker counts were measured: no scale-out verdict.\n"),
    }
    out
}

/// Where one more worker adds under 10 % of one, with the range the fit's σ interval gives —
/// and, when a shared limit with a bound is reached at fewer workers, that limit first: the law
/// alone is not what stops scale-out there.
fn diminishing(
    f: &crate::record::scaling::UslFit,
    n: u32,
    shared: &[crate::record::scaling::SharedLimit],
) -> String {
    const MOST: u32 = 1000;
    let law = f.law();
    let at = |sigma: f64| crate::model::usl::Fit { sigma, ..law }.diminishing_from(0.1, MOST);
    let (sooner, later) = (at(f.sigma_range[1]), at(f.sigma_range[0]));
    let range = match (sooner, later) {
        (Some(a), Some(b)) if a != b => format!(" ({a} to {b} within the fit's interval)"),
        (Some(a), None) => format!(" ({a} to beyond {MOST} within the fit's interval)"),
        _ => String::new(),
    };
    let first = shared
        .iter()
        .filter_map(|l| Some((l, l.bound_per_s?)))
        .filter_map(|(l, b)| Some((l, law.workers_for(b, MOST)?)))
        .min_by_key(|(_, w)| *w);
    match first {
        Some((l, w)) if w < n => format!(
            "; {} stops scale-out first, at about {w} workers — the law alone would flatten from \
             {n}{range}",
            l.kind.words()
        ),
        _ => format!("; from {n} workers on one more adds under 10 % of a worker{range}"),
    }
}

fn workers(n: u32) -> String {
    format!("{n} worker{}", if n == 1 { "" } else { "s" })
}

/// Ceiling against workers: the measured points with their 95 % intervals, the fitted law, the
/// linear line (one worker's ceiling × N) and each shared limit's bound as a level.
pub fn chart(s: &Scaling) -> Chart {
    let measured: Vec<&ScalePoint> = s.points.iter().filter(|p| p.ceiling.is_some()).collect();
    let top = s.points.iter().map(|p| p.workers).max().unwrap_or(1);
    // The curves run a little past the last count, to where the fit says it goes next.
    let reach = (f64::from(top) * 1.25).ceil().max(2.0);
    let steps = 48;
    let along = |f: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        (0..=steps)
            .map(|i| 1.0 + (reach - 1.0) * f64::from(i) / f64::from(steps))
            .map(|n| (n, f(n)))
            .collect()
    };
    let mut series = vec![Series {
        name: "measured ceiling (95 %)".into(),
        points: measured
            .iter()
            .filter_map(|p| p.ceiling.map(|c| (f64::from(p.workers), c[0])))
            .collect(),
        bars: measured
            .iter()
            .filter_map(|p| p.ceiling.map(|c| (c[1], c[2])))
            .collect(),
        mark: Mark::Dots,
    }];
    if let Some(f) = &s.fit {
        let law = f.law();
        series.push(Series {
            name: format!("fitted law (σ {:.3}, κ {:.4})", f.sigma, f.kappa),
            points: along(&|n| law.at(n)),
            bars: Vec::new(),
            mark: Mark::Dashed,
        });
        series.push(Series {
            name: "linear: one worker's ceiling × N".into(),
            points: along(&|n| f.lambda_per_s * n),
            bars: Vec::new(),
            mark: Mark::Dotted,
        });
    }
    let hlines = s
        .shared
        .iter()
        .filter_map(|l| {
            l.bound_per_s.map(|b| {
                let state = if l.reached { "reached" } else { "not reached" };
                (b, format!("{} — {state}", l.words()))
            })
        })
        .collect();
    let left_out: Vec<String> = s
        .points
        .iter()
        .filter(|p| p.not_joined.is_some())
        .map(|p| p.workers.to_string())
        .collect();
    Chart {
        id: "scale".into(),
        title: "Ceiling against workers".into(),
        x_label: "workers".into(),
        y_label: "executions/s".into(),
        series,
        hlines,
        note: match (s.fit.is_none(), left_out.is_empty()) {
            (true, _) => Some("no fit: ceilings at two worker counts at least are needed".into()),
            (false, false) => Some(format!(
                "left out of the fit (not every worker took jobs): {} workers",
                left_out.join(", ")
            )),
            (false, true) => None,
        },
    }
}

/// `scale --format html` (and a scale sweep's): the chart, then `text` (the table and verdict).
pub fn html(s: &Scaling, text: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>n8ncap scale</title>\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:auto}}pre{{white-space:pre-wrap}}</style>\
         </head><body><h1>n8ncap scale</h1>{}<pre>{}</pre></body></html>",
        chart(s).svg(),
        super::svg::esc(text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::scaling::{SharedLimit, UslFit};

    fn point(workers: u32, c: f64, not_joined: bool) -> ScalePoint {
        ScalePoint {
            run: format!("w{workers}"),
            workers,
            workers_source: "--workers".into(),
            ceiling: Some([c, c - 0.5, c + 0.5]),
            limit: None,
            efficiency: None,
            not_joined: not_joined.then(|| "about 2 worker(s) took jobs".into()),
        }
    }

    /// The case (#63): σ 0.0045 (0.0 to 0.126) flattens the law from hundreds of
    /// workers, but main's intake at 35.7/s stops scale-out at about 8: that is said first,
    /// and the law's own point with its range.
    #[test]
    fn a_shared_bound_reached_sooner_is_said_before_the_law_s_flattening() {
        let f = UslFit {
            lambda_per_s: 4.97,
            sigma: 0.0045,
            sigma_range: [0.0, 0.126],
            kappa: 0.0,
            kappa_range: [0.0, 0.0],
            rms_error: 0.0,
            peak_workers: None,
            ceiling_per_s: None,
            diminishing_from: f_law_from(4.97, 0.0045),
        };
        let n = f.diminishing_from.unwrap();
        assert!(n > 100, "{n}");
        let main = SharedLimit {
            kind: crate::model::Limit::MainIntake,
            bound_per_s: Some(35.7),
            reached: false,
            evidence: Vec::new(),
            fix: String::new(),
        };
        let words = diminishing(&f, n, std::slice::from_ref(&main));
        assert!(
            words.contains("stops scale-out first, at about 8 workers"),
            "{words}"
        );
        assert!(words.contains(&format!("flatten from {n}")), "{words}");
        let alone = diminishing(&f, n, &[]);
        assert!(alone.contains("within the fit's interval"), "{alone}");
        assert!(!alone.contains("stops scale-out first"), "{alone}");
    }

    fn f_law_from(lambda: f64, sigma: f64) -> Option<u32> {
        crate::model::usl::Fit {
            lambda,
            sigma,
            kappa: 0.0,
            sigma_range: [sigma, sigma],
            kappa_range: [0.0, 0.0],
            rms_error: 0.0,
        }
        .diminishing_from(0.1, 1000)
    }

    /// The chart holds the measured points with their bars, the law and the linear line over
    /// 1 … 1.25 × the top count, and each shared bound as a level; a point left out is said.
    #[test]
    fn the_chart_has_the_points_the_law_the_line_and_the_bounds() {
        let s = Scaling {
            points: vec![
                point(1, 5.0, false),
                point(2, 10.0, false),
                point(4, 10.0, true),
            ],
            fit: Some(UslFit {
                lambda_per_s: 5.0,
                sigma: 0.0,
                sigma_range: [0.0, 0.01],
                kappa: 0.0,
                kappa_range: [0.0, 0.0],
                rms_error: 0.0,
                peak_workers: None,
                ceiling_per_s: None,
                diminishing_from: None,
            }),
            shared: vec![SharedLimit {
                kind: crate::model::Limit::MainIntake,
                bound_per_s: Some(40.0),
                reached: false,
                evidence: Vec::new(),
                fix: String::new(),
            }],
            verdict: String::new(),
            plan: None,
        };
        let c = chart(&s);
        assert_eq!(c.series.len(), 3);
        assert_eq!(
            c.series[0].points,
            vec![(1.0, 5.0), (2.0, 10.0), (4.0, 10.0)]
        );
        assert_eq!(c.series[0].bars[2], (9.5, 10.5));
        let (law, line) = (&c.series[1].points, &c.series[2].points);
        assert_eq!(law.first(), Some(&(1.0, 5.0)));
        assert_eq!(line.last(), Some(&(5.0, 25.0)));
        assert!((law.last().unwrap().1 - 25.0).abs() < 1e-9);
        assert_eq!(c.hlines[0].0, 40.0);
        assert!(c.note.as_deref().unwrap().ends_with(": 4 workers"));
        let page = html(&s, "table");
        assert_eq!(page.matches("<svg").count(), 1);
    }
}
