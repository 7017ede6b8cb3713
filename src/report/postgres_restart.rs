//! `n8ncap postgres-restart`'s table: the stop and start of Postgres, n8n's 503s, its return
//! against the recovery's prediction, the requests in flight by outcome, the executions left and
//! the n8n processes after it, and the verdict.

use super::table::{fitted, laid_out};
use crate::record::postgres_restart::PostgresRestart;

pub fn table(r: &PostgresRestart) -> String {
    let width = super::width::output_width();
    let mut t = fitted();
    t.set_header(vec!["", "value", "from"]);
    let mut row = |k: &str, v: String, from: String| {
        t.add_row(vec![k.to_string(), v, from]);
    };
    row(
        "Postgres stopped",
        format!(
            "{} at {:.1} s, started again {}",
            r.stop.what,
            r.stop.stopped_s,
            r.stop
                .started_s
                .map_or("— not started (see the verdict)".into(), |s| format!(
                    "at {s:.1} s"
                ))
        ),
        r.stop.how.word().to_string(),
    );
    let rec = &r.recovery.value;
    row(
        "n8n's recovery",
        format!(
            "ping every {:.0} s, {} failures, backoff {:.0}–{:.0} s",
            rec.ping_s, rec.max_failures, rec.backoff_min_s, rec.backoff_max_s
        ),
        r.recovery.source.words(),
    );
    row(
        "503 not ready",
        match r.first_not_ready_after_stop_s {
            Some(f) => format!("{} calls, the first {f:.1} s after the stop", r.not_ready),
            None => "none".into(),
        },
        "this load's answers".into(),
    );
    let [lo, hi] = r.predicted.back_after_start_s;
    row(
        "OK again",
        r.back_after_start_s
            .map_or("not within the run".into(), |b| {
                format!("{b:.1} s after Postgres started")
            }),
        format!("predicted {lo:.1}–{hi:.1} s (the backoff's next try)"),
    );
    row(
        "in flight at the stop",
        r.in_flight.words(),
        format!("predicted {} lost", r.predicted.in_flight_lost),
    );
    row(
        "sent after the stop",
        format!("{} answered OK, {} not", r.after_ok, r.after_lost),
        "this load's requests".into(),
    );
    if let Some(l) = r
        .executions_left
        .as_ref()
        .filter(|l| l.not_counted.is_none())
    {
        row(
            "executions left",
            format!("{} running, {} new", l.running, l.new),
            "Postgres (--postgres)".into(),
        );
    }
    for p in &r.processes {
        row(
            &format!("{} ({})", p.name, p.role.word()),
            if p.exited {
                format!("exited, restarted {}×", p.restarts)
            } else {
                "kept running".into()
            },
            p.db_line.clone().unwrap_or_default(),
        );
    }
    let mut out = laid_out(&mut t);
    out.push_str(&format!("\n{}\n", super::width::fold(&r.verdict, width)));
    out
}
