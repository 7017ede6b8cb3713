//! `n8ncap outage`'s table: the stop and start of Redis, the requests in flight by outcome, the
//! n8n processes after it, the recovery and the prediction, the seconds around the outage, and
//! the verdict.

use super::table::{fitted, laid_out};
use crate::record::outage::Outage;

pub fn table(o: &Outage) -> String {
    let width = super::width::output_width();
    let f = &o.in_flight;
    let mut t = fitted();
    t.set_header(vec!["", "value", "from"]);
    let mut row = |k: &str, v: String, from: String| {
        t.add_row(vec![k.to_string(), v, from]);
    };
    row(
        "Redis stopped",
        format!(
            "{} at {:.1} s, started again {}",
            o.stop.what,
            o.stop.stopped_s,
            o.stop
                .started_s
                .map_or("— not started (see the verdict)".into(), |s| format!(
                    "at {s:.1} s"
                ))
        ),
        o.stop.how.word().to_string(),
    );
    row(
        "n8n gives Redis",
        format!("{:.1} s", o.threshold_s.value),
        o.threshold_s.source.words(),
    );
    row(
        "in flight at the stop",
        f.words(),
        "this load's requests".into(),
    );
    row(
        "sent after the stop",
        format!("{} answered OK, {} not", o.after_ok, o.after_lost),
        "this load's requests".into(),
    );
    for p in &o.processes {
        row(
            &format!("{} ({})", p.name, p.role.word()),
            match (p.exited, p.running) {
                (true, true) => format!("exited, restarted {}×", p.restarts),
                (true, false) => "exited, still down".into(),
                (false, _) => "kept running".into(),
            },
            p.redis_line.clone().unwrap_or_else(|| {
                p.restart_policy
                    .as_ref()
                    .map_or("no restart policy".into(), |r| format!("restart: {r}"))
            }),
        );
    }
    row(
        "predicted",
        if o.predicted_exit {
            format!("processes exit, {} in flight lost", o.predicted_lost)
        } else {
            "nothing lost".into()
        },
        format!("an outage of {:.1} s against the threshold", o.outage_s),
    );
    row(
        "answers back",
        match (o.recovered_after_start_s, o.first_ok_after_start_s) {
            (Some(r), _) => format!("{r:.1} s after Redis started"),
            (None, Some(first)) => format!("first OK {first:.1} s after Redis started"),
            (None, None) => "not within the run".into(),
        },
        "OK answers per second, 3 s windows at 90 %".into(),
    );
    let mut out = laid_out(&mut t);
    out.push_str(&format!("\n{}\n", super::width::fold(&o.verdict, width)));
    out
}
