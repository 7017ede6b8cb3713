//! `n8ncap replay`'s table and page: each autoscaler's peaks, replicas and scale-downs side by
//! side, the replicas and the backlog every few minutes, and the chart of both over time.

use super::svg::{Chart, Mark, Series};
use super::table::{fitted, laid_out};
use crate::record::autoscaler::ReplayRun;

/// One row's figure from one replay.
type Cell = dyn Fn(&crate::model::autoscaler::Replay) -> String;

pub fn table(r: &ReplayRun) -> String {
    let width = super::width::output_width();
    let mut out = format!(
        "Arrivals: {} — {} s, mean {:.2}/s, peak {:.2}/s{}\n",
        r.arrivals_from,
        r.seconds,
        r.arrivals_mean_per_s,
        r.arrivals_peak_per_s,
        r.arrival_gaps
            .iter()
            .map(|g| format!("; {g}"))
            .collect::<String>()
    );
    for w in &r.workload_from {
        out.push_str(&format!("  {w}\n"));
    }
    let mut t = fitted();
    let mut header = vec!["".to_string()];
    header.extend(r.replays.iter().map(|p| p.name.clone()));
    t.set_header(header);
    let rows: [(&str, &Cell); 6] = [
        ("backlog peak", &|p| {
            format!("{:.0} jobs at {} s", p.peak_waiting.0, p.peak_waiting.1)
        }),
        ("longest wait", &|p| {
            if p.peak_wait_s.0.is_finite() {
                format!("{:.0} s at {} s", p.peak_wait_s.0, p.peak_wait_s.1)
            } else {
                format!("unbounded at {} s", p.peak_wait_s.1)
            }
        }),
        ("replicas", &|p| {
            format!("{}–{}", p.replicas_range.0, p.replicas_range.1)
        }),
        ("scale-downs", &|p| {
            let d: Vec<_> = p.events.iter().filter(|e| e.to < e.from).collect();
            format!(
                "{}, holding {:.1} executions",
                d.len(),
                d.iter().map(|e| e.held).sum::<f64>() + 0.0
            )
        }),
        ("executions lost", &|p| format!("{:.1}", p.lost)),
        ("worker-hours", &|p| format!("{:.1}", p.replica_s / 3600.0)),
    ];
    for (name, f) in rows {
        let mut row = vec![name.to_string()];
        row.extend(r.replays.iter().map(f));
        t.add_row(row);
    }
    out.push_str(&laid_out(&mut t));
    out.push_str(&over_time(r));
    out.push_str(&format!("\n{}\n", super::width::fold(&r.verdict, width)));
    out
}

/// Replicas (serving) and backlog at about twenty moments of the run.
fn over_time(r: &ReplayRun) -> String {
    let step = (r.seconds / 20).max(1) as u32;
    let mut t = fitted();
    let mut header = vec!["time".to_string()];
    for p in &r.replays {
        header.push(format!("{}: replicas (serving), waiting", p.name));
    }
    t.set_header(header);
    let mut at = 0u32;
    while (at as usize) <= r.seconds {
        let mut row = vec![format!("{at} s")];
        for p in &r.replays {
            let tick = p
                .ticks
                .iter()
                .rev()
                .find(|k| k.t <= at.max(1))
                .or(p.ticks.first());
            row.push(tick.map_or("—".into(), |k| {
                format!("{} ({}), {:.0}", k.replicas, k.ready, k.waiting)
            }));
        }
        t.add_row(row);
        at += step;
    }
    format!("\n{}", laid_out(&mut t))
}

pub fn html(r: &ReplayRun) -> String {
    let series = |f: &dyn Fn(&crate::model::autoscaler::Tick) -> f64, what: &str| -> Vec<Series> {
        r.replays
            .iter()
            .map(|p| Series {
                name: format!("{} — {what}", p.name),
                points: p.ticks.iter().map(|k| (f64::from(k.t), f(k))).collect(),
                bars: Vec::new(),
                mark: Mark::Line,
            })
            .collect()
    };
    let charts = [
        Chart {
            id: "replicas".into(),
            title: "Replicas asked for, over time".into(),
            x_label: "s".into(),
            y_label: "replicas".into(),
            series: series(&|k| f64::from(k.replicas), "replicas"),
            hlines: Vec::new(),
            note: None,
        },
        Chart {
            id: "backlog".into(),
            title: "Waiting jobs, over time".into(),
            x_label: "s".into(),
            y_label: "jobs".into(),
            series: series(&|k| k.waiting, "waiting"),
            hlines: Vec::new(),
            note: None,
        },
    ];
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>n8ncap replay</title>\
         <style>body{font-family:sans-serif;max-width:1000px;margin:auto}pre{white-space:pre-wrap}</style>\
         </head><body><h1>n8ncap replay</h1>",
    );
    for c in &charts {
        h.push_str(&c.svg());
    }
    h.push_str(&format!(
        "<pre>{}</pre></body></html>",
        super::svg::esc(&table(r))
    ));
    h
}
