//! The executions' Postgres stopped for a while and started again under a steady load (`n8ncap
//! postgres-restart`). What n8n 2.41.1 did in the project's third lab (the reference facts,
//! "Postgres away for 15 s under load"): every webhook call answered HTTP 503 "Database is not
//! ready!" at once from the stop; OK again only at its recovery's first try past Postgres'
//! return (`model::db_recovery`: 3.9 and 5.0 s after a 15 s outage, 22 s after a 45 s one); the
//! executions in flight at the stop left `running` for good and their callers never answered;
//! no process exits. The action is `super::stop_start`'s (the Docker API or the operator's
//! commands), the executions left are read from Postgres after the load (`--postgres`), the n8n
//! processes and their last line about the database from Docker (`--project`).

use super::engine::{Loaded, Plan};
use super::fates::{in_flight_at, recovery, timeline};
use super::stop_start::Away;
use super::{Drill, Listed};
use crate::actuate::outage::Outager;
use crate::error;
use crate::model::db_recovery::Recovery;
use crate::model::settings::Sourced;
use crate::record::db::ExecutionsLeft;
use crate::record::dir::DrillFile;
use crate::record::drain::Sent;
use crate::record::drill::StopStart;
use crate::record::postgres_restart::{DbProcess, PostgresRestart, Predicted};
use crate::util::Interrupt;
use std::time::{Duration, Instant};

/// n8n's answer while it holds its database not connected.
pub const NOT_READY: u16 = 503;

/// What the drill knows before the load.
#[derive(Debug, Clone)]
pub struct Known {
    pub target: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    /// Seconds Postgres stays down.
    pub down_for_s: f64,
    pub recovery: Sourced<Recovery>,
}

/// The restart, ready: how Postgres is stopped, when, what is known, and where to count the
/// executions left (the DSN, never shown; n8n's table prefix).
pub struct PostgresRestartDrill {
    away: Away,
    known: Known,
    postgres: Option<(String, String)>,
}

impl PostgresRestartDrill {
    pub fn new(
        outager: Outager,
        known: Known,
        stop_at: Duration,
        postgres: Option<(String, String)>,
    ) -> PostgresRestartDrill {
        let down_for = Duration::from_secs_f64(known.down_for_s);
        PostgresRestartDrill {
            away: Away::new((outager, "Postgres"), stop_at, down_for),
            known,
            postgres,
        }
    }

    /// The executions the run left `new` or `running`, read once Postgres is back.
    async fn left(&self) -> Option<ExecutionsLeft> {
        let (dsn, prefix) = self.postgres.as_ref()?;
        let since = self.away.since_unix() as f64;
        Some(
            match crate::observe::postgres::executions_left(dsn, since, prefix).await {
                Ok(l) => l,
                Err(e) => ExecutionsLeft {
                    since_unix: since,
                    not_counted: Some(e.0),
                    ..Default::default()
                },
            },
        )
    }
}

impl Drill for PostgresRestartDrill {
    const LISTED: Listed = Listed {
        name: "postgres-restart",
        file: DrillFile::PostgresRestart,
        action: "stop",
        left_alone: "Postgres was left alone",
    };
    type Done = StopStart;
    type Record = PostgresRestart;

    fn plan(&self) -> Plan {
        self.away.plan(self.known.rate_per_s, self.known.duration_s)
    }

    async fn before(&mut self) {
        self.away.before().await;
    }

    fn act<'a>(
        &'a self,
        load_start: Instant,
        interrupt: &'a Interrupt,
    ) -> impl std::future::Future<Output = StopStart> + Send + 'a {
        self.away.act(load_start, interrupt)
    }

    async fn judge(self, loaded: Loaded<StopStart>) -> PostgresRestart {
        let line_in = crate::observe::db_watch::recovery_line_in;
        let processes = (self.away.processes(line_in).await.into_iter())
            .map(|p| DbProcess {
                name: p.name,
                role: p.role,
                exited: p.exited,
                running: p.running,
                restarts: p.restarts,
                db_line: p.redis_line,
            })
            .collect();
        let left = self.left().await;
        let stop = loaded.stop.expect("judged only after the action");
        let mut r = judge_restart(self.known, (&loaded.sent, loaded.dropped), stop);
        r.processes = processes;
        r.executions_left = left;
        r.verdict = verdict(&r);
        r
    }

    fn status(r: &PostgresRestart) -> i32 {
        // Postgres not started again, or never stopped: no restart judged.
        if r.stop.started_s.is_none() || r.stop.down_s.is_none() {
            error::EXIT_FAILED
        } else {
            error::EXIT_OK
        }
    }

    fn emit(r: &PostgresRestart, format: crate::report::Format) -> anyhow::Result<()> {
        crate::report::emit(&crate::report::views::PostgresRestart(r), format)
    }
}

/// Every request's fate against the stop and the start, and the prediction (the verdict is
/// said once the processes and the executions left are known).
pub fn judge_restart(
    i: Known,
    (sent, dropped): (&[Sent], u64),
    stop: StopStart,
) -> PostgresRestart {
    let seconds = timeline(sent, i.duration_s);
    let at = stop.stopped_s;
    let in_flight = in_flight_at(sent, at);
    let not_ready: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.outcome == crate::record::drain::Outcome::Answered(NOT_READY))
        .collect();
    let first_not_ready_after_stop_s = not_ready
        .iter()
        .filter_map(|s| s.ended_s)
        .filter(|e| *e >= at)
        .map(|e| e - at)
        .min_by(f64::total_cmp);
    let after: Vec<&Sent> = sent.iter().filter(|s| s.sent_s >= at).collect();
    let after_ok = after.iter().filter(|s| s.ok()).count() as u64;
    let start = stop.started_s;
    let sent_after_start = start.map_or(0, |st| sent.iter().filter(|s| s.sent_s >= st).count());
    let back_after_start_s = start.and_then(|st| {
        sent.iter()
            .filter(|s| s.sent_s >= st && s.ok())
            .map(|s| s.sent_s - st)
            .min_by(f64::total_cmp)
    });
    let recovered_after_start_s =
        start.and_then(|st| recovery(&seconds, i.rate_per_s, st, i.duration_s - 1.0));
    let r = i.recovery.value;
    let up = start.map_or(i.down_for_s, |st| (st - at).max(0.0));
    let (lo, hi) = r.back_after_up(up);
    let (rlo, rhi) = r.recovery_starts();
    let slack = slack_s(i.rate_per_s);
    let back_agrees = back_after_start_s
        .filter(|_| stop.down_s.is_some())
        .map(|b| b >= lo - slack && b <= hi + slack);
    PostgresRestart {
        back_agrees,
        target: i.target,
        rate_per_s: i.rate_per_s,
        duration_s: i.duration_s,
        down_for_s: i.down_for_s,
        recovery: i.recovery,
        dropped,
        not_ready: not_ready.len() as u64,
        first_not_ready_after_stop_s,
        sent_after_start: sent_after_start as u64,
        back_after_start_s,
        recovered_after_start_s,
        after_lost: after.len() as u64 - after_ok,
        after_ok,
        predicted: Predicted {
            back_after_start_s: [lo, hi],
            recovery_after_stop_s: [rlo, rhi],
            in_flight_lost: in_flight.total,
        },
        in_flight,
        executions_left: None,
        processes: Vec::new(),
        stop,
        verdict: String::new(),
        seconds,
    }
}

/// How far a measured return may fall outside the predicted interval and still agree: one
/// arrival's gap (the return is seen at the first request sent after it) and a second for
/// Postgres' own start and n8n's reconnection.
fn slack_s(rate_per_s: f64) -> f64 {
    1.0 / rate_per_s.max(0.01) + 1.0
}

/// The verdict, in the order an operator asks: was Postgres down, what did callers get, when did
/// n8n come back against its prediction, what was lost.
pub fn verdict(r: &PostgresRestart) -> String {
    let Some(down) = r.stop.down_s else {
        return format!(
            "Postgres ({}) was never stopped ({}): no restart was measured, only the load against a running n8n.",
            r.stop.what,
            r.stop.detail.as_deref().unwrap_or("no reason given")
        );
    };
    let mut v = match r.stop.started_s {
        Some(st) => format!(
            "Postgres ({}) was stopped at {:.1} s (down at {down:.1} s) and started again at {st:.1} s.",
            r.stop.what, r.stop.stopped_s
        ),
        None => format!(
            "Postgres ({}) was stopped at {:.1} s and could not be started again ({}): start it by hand.",
            r.stop.what,
            r.stop.stopped_s,
            r.stop.detail.as_deref().unwrap_or("no reason given")
        ),
    };
    v.push_str(&match r.first_not_ready_after_stop_s {
        Some(first) => format!(
            " n8n answered {} call(s) HTTP 503 \"Database is not ready!\", the first {first:.1} s after the stop.",
            r.not_ready
        ),
        None => " n8n answered no call HTTP 503: it did not mark its database lost (no idle pooled connection was ended?).".into(),
    });
    v.push_str(&back_words(r));
    let f = &r.in_flight;
    v.push_str(&format!(
        " Of the {} request(s) in flight at the stop, {} finished, {} failed, {} never answered (n8n 2.41.1 never answered them: predicted {} lost).",
        f.total,
        f.finished,
        f.failed(),
        f.unanswered,
        r.predicted.in_flight_lost
    ));
    if let Some(l) = &r.executions_left {
        v.push_str(&match &l.not_counted {
            Some(why) => format!(" The executions left were not counted: {why}."),
            None => format!(
                " Postgres holds {} execution(s) of this run `running` and {} `new` (n8n marks them `crashed` only when main is next restarted).",
                l.running, l.new
            ),
        });
    }
    let exited: Vec<&DbProcess> = r.processes.iter().filter(|p| p.exited).collect();
    if !r.processes.is_empty() {
        v.push_str(&match exited.as_slice() {
            [] => " No n8n process exited (as n8n 2.41.1 did not).".to_string(),
            e => format!(
                " {} n8n process(es) exited ({}): n8n 2.41.1 did not — look at their logs.",
                e.len(),
                e.iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    v
}

/// When n8n answered OK again, against the recovery's prediction.
fn back_words(r: &PostgresRestart) -> String {
    let [lo, hi] = r.predicted.back_after_start_s;
    let said = format!(
        "its recovery ({}) predicts {lo:.1}–{hi:.1} s: the first try past Postgres' return, not the outage's length",
        r.recovery.source.words()
    );
    let mut v = match (r.stop.started_s, r.back_after_start_s) {
        (None, _) => return String::new(),
        (Some(_), Some(b)) if r.back_agrees == Some(false) && b < lo => format!(
            " n8n answered OK again {b:.1} s after Postgres was back, sooner than {said}: the ping and backoff settings read are not the ones in force."
        ),
        (Some(_), Some(b)) if r.back_agrees == Some(false) => format!(
            " n8n answered OK again {b:.1} s after Postgres was back, later than {said}: Postgres accepted connections later than its start returned (Docker's start returns when the container runs), or the settings read are not the ones in force."
        ),
        (Some(_), Some(b)) => format!(
            " n8n answered OK again {b:.1} s after Postgres was back, as {said}."
        ),
        (Some(_), None) if r.sent_after_start == 0 => {
            " No request was sent after Postgres was started again (the load ended first): n8n's return was not measured.".into()
        }
        (Some(_), None) => format!(
            " No request sent after Postgres was back was answered OK within the run ({said}): make the run longer than the predicted return."
        ),
    };
    if let Some(rec) = r.recovered_after_start_s {
        v.push_str(&format!(
            " Answers held the offered {:.1}/s {rec:.1} s after Postgres was back.",
            r.rate_per_s
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::provenance::Provenance;
    use crate::record::drain::Outcome;
    use crate::record::drill::Via;

    fn known() -> Known {
        Known {
            target: "http://x/webhook/load".into(),
            rate_per_s: 4.0,
            duration_s: 60.0,
            down_for_s: 15.0,
            recovery: Sourced::new(Recovery::N8N, Provenance::Default("n8n's".into())),
        }
    }

    fn stop() -> StopStart {
        StopStart {
            how: Via::Command,
            what: "pg_ctl stop … pg_ctl start".into(),
            stopped_s: 10.0,
            down_s: Some(10.3),
            started_s: Some(25.0),
            detail: None,
            cut_short: false,
        }
    }

    /// The third lab's shape: four in flight at the stop never answered, 503s at once during
    /// the outage, OK again 4.5 s after Postgres returned — inside the predicted 3–5 s.
    #[test]
    fn the_lab_s_restart_is_judged_as_n8n_did_it() {
        let mut sent = vec![Sent::new(5.0, Some(5.4), Outcome::Answered(200))];
        for k in 0..4 {
            sent.push(Sent::new(
                9.8 + 0.05 * f64::from(k),
                None,
                Outcome::Unanswered,
            ));
        }
        let mut t = 10.5;
        while t < 29.5 {
            sent.push(Sent::new(t, Some(t + 0.002), Outcome::Answered(NOT_READY)));
            t += 0.25;
        }
        while t < 59.0 {
            sent.push(Sent::new(t, Some(t + 0.4), Outcome::Answered(200)));
            t += 0.25;
        }
        let mut r = judge_restart(known(), (&sent, 0), stop());
        r.verdict = verdict(&r);
        assert_eq!(r.back_agrees, Some(true));
        assert_eq!(r.in_flight.total, 4);
        assert_eq!(r.in_flight.unanswered, 4);
        assert_eq!(r.predicted.in_flight_lost, 4);
        assert_eq!(r.not_ready, 76);
        let first = r.first_not_ready_after_stop_s.unwrap();
        assert!((first - 0.502).abs() < 1e-9, "{first}");
        let back = r.back_after_start_s.unwrap();
        assert!((back - 4.5).abs() < 1e-9, "{back}");
        let [lo, hi] = r.predicted.back_after_start_s;
        assert!(lo <= back && back <= hi, "{lo}..{hi}");
        assert!(r.recovered_after_start_s.is_some());
    }

    /// A return far past the prediction is said to disagree, and never stopping judges nothing.
    #[test]
    fn a_late_return_and_a_stop_that_failed() {
        let sent: Vec<Sent> = (0..200)
            .map(|k| {
                let t = 0.25 * f64::from(k);
                match t {
                    t if (10.0..40.0).contains(&t) => {
                        Sent::new(t, Some(t + 0.01), Outcome::Answered(NOT_READY))
                    }
                    t => Sent::new(t, Some(t + 0.3), Outcome::Answered(200)),
                }
            })
            .collect();
        let mut r = judge_restart(known(), (&sent, 0), stop());
        r.verdict = verdict(&r);
        assert_eq!(r.back_after_start_s, Some(15.0));
        assert!(r.back_after_start_s.unwrap() > r.predicted.back_after_start_s[1] + 1.25);
        assert_eq!(r.back_agrees, Some(false));
        let never = StopStart {
            down_s: None,
            started_s: Some(10.1),
            detail: Some("stopping Postgres failed: exit 1".into()),
            ..stop()
        };
        let mut r = judge_restart(known(), (&sent, 0), never);
        r.verdict = verdict(&r);
        assert_eq!(r.back_agrees, None, "no restart, no return judged");
        assert_eq!(PostgresRestartDrill::status(&r), error::EXIT_FAILED);
    }
}
