//! `n8ncap drain`'s table: the stop, the requests in flight at the signal by outcome, the
//! prediction beside them, the seconds around the signal, and the verdict.

use super::table::{fitted, laid_out};
use crate::record::drain::Drain;

pub fn table(d: &Drain) -> String {
    let width = super::width::output_width();
    let mut t = fitted();
    t.set_header(vec!["", "value", "from"]);
    let mut rows = Vec::new();
    stop_rows(d, &mut rows);
    outcome_rows(d, &mut rows);
    for [k, v, from] in rows {
        t.add_row(vec![k, v, from]);
    }
    let mut out = laid_out(&mut t);
    out.push_str(&seconds(d));
    out.push_str(&format!("\n{}\n", super::width::fold(&d.verdict, width)));
    out
}

type Rows = Vec<[String; 3]>;

fn row(rows: &mut Rows, k: &str, v: String, from: String) {
    rows.push([k.to_string(), v, from]);
}

/// The load and the stop: the rate, how and when the worker was stopped, what it said.
fn stop_rows(d: &Drain, rows: &mut Rows) {
    row(
        rows,
        "rate offered",
        format!("{:.2}/s", d.rate_per_s.value),
        d.rate_per_s.source.words(),
    );
    row(
        rows,
        "stopped",
        format!("{} at {:.1} s", d.stop.what, d.stop.signal_s),
        match (d.stop.grace_s, d.stop.signal, d.stop.how) {
            (_, crate::model::drain::StopSignal::Kill, crate::record::drill::Via::Docker) => {
                "SIGKILL through the Docker API".into()
            }
            (Some(g), _, _) => format!("SIGTERM through the Docker API, SIGKILL after {g:.0} s"),
            (_, crate::model::drain::StopSignal::Kill, _) => {
                "the stop command (it kills, --signal KILL)".into()
            }
            (None, _, _) => "the stop command".into(),
        },
    );
    if let Some(e) = d.stop.exited_after_s {
        row(
            rows,
            "exited after",
            format!("{e:.1} s"),
            d.stop
                .exit_code
                .map_or(String::new(), |c| format!("exit code {c}")),
        );
    }
    row(
        rows,
        "held at the signal",
        d.stop.held_logged.map_or("—".into(), |h| h.to_string()),
        "its log: \"Waiting for N active executions to finish\"".into(),
    );
    if let Some(a) = d.stop.aborted_logged {
        row(
            rows,
            "Code tasks aborted",
            a.to_string(),
            "its log: \"Task aborted because the n8n instance was shutting down\"".into(),
        );
    }
}

/// What the stop cost, the prediction beside it, and the recovery.
fn outcome_rows(d: &Drain, rows: &mut Rows) {
    let f = &d.in_flight;
    row(
        rows,
        "in flight at the signal",
        f.words(),
        "this load's requests".into(),
    );
    if let Some(t) = f.last_failure_after_s {
        row(
            rows,
            "last failure answered",
            format!("{t:.1} s after the signal"),
            "the requests in flight that failed".into(),
        );
    }
    if let Some(n) = d.n8n_failed {
        row(
            rows,
            "n8n's failed executions",
            format!("{n:.0}"),
            "main's n8n_scaling_mode_queue_jobs_failed over the run".into(),
        );
    }
    if let (Some(p), Some(b)) = (d.predicted, &d.budget_s) {
        row(
            rows,
            "predicted",
            format!("{:.1} lost of {:.1} held", p.lost, p.held),
            format!("Code tasks had {:.1} s: {}", b.value, b.source.words()),
        );
    }
    if let Some((s, latest)) = &d.stalled_answer_s {
        row(
            rows,
            "a killed worker's jobs answered",
            format!("{:.0}–{latest:.0} s after the kill", s.value),
            s.source.words(),
        );
    }
    if let Some(j) = &d.job_p50_s {
        row(
            rows,
            "job time (p50, p99)",
            format!(
                "{:.2} s, {}",
                j.value,
                d.job_p99_s
                    .as_ref()
                    .map_or("—".into(), |p| format!("{:.2} s", p.value))
            ),
            j.source.words(),
        );
    }
    row(
        rows,
        "back at the offered rate",
        d.recovered_after_s
            .map_or("not within the run".into(), |r| {
                format!("{r:.1} s after the signal")
            }),
        "OK answers per second, 3 s windows at 90 %".into(),
    );
}

/// Requests sent, finished and failed per second, from a few seconds before the signal.
fn seconds(d: &Drain) -> String {
    let from = (d.stop.signal_s.floor() as u32).saturating_sub(3);
    let to = from + 20;
    let mut t = fitted();
    t.set_header(vec!["second", "sent", "finished", "failed"]);
    for s in d.seconds.iter().filter(|s| s.t >= from && s.t < to) {
        t.add_row(vec![
            s.t.to_string(),
            s.sent.to_string(),
            s.finished.to_string(),
            s.failed.to_string(),
        ]);
    }
    format!("\n{}", laid_out(&mut t))
}
