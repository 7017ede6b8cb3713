//! An outage judged: the requests in flight when Redis went away by how they ended, the n8n
//! processes that exited, whether and when answers came back, and the loss n8n's threshold
//! predicts beside the loss measured. n8n 2.x retries a lost Redis every second and exits once
//! it was gone past `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`; below it the requests wait and are
//! answered, above it everything in flight is lost and nothing answers until a supervisor
//! starts the processes again.

use crate::drill::fates::{in_flight_at, recovery, timeline};
use crate::model::settings::Sourced;
use crate::record::drain::Sent;
use crate::record::outage::{Outage, ProcessAfter, RedisStop};

/// What the outage knew before the load.
#[derive(Debug, Clone)]
pub struct Known {
    pub target: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    pub outage_s: f64,
    pub threshold_s: Sourced<f64>,
}

pub fn judge_outage(
    i: Known,
    sent: &[Sent],
    dropped: u64,
    stop: RedisStop,
    processes: Vec<ProcessAfter>,
) -> Outage {
    let seconds = timeline(sent, i.duration_s);
    let down = stop.down_s.unwrap_or(stop.stopped_s);
    let in_flight = in_flight_at(sent, down);
    let after: Vec<&Sent> = sent.iter().filter(|s| s.sent_s >= down).collect();
    let after_ok = after.iter().filter(|s| s.ok()).count() as u64;
    let first_ok_after_start_s = stop.started_s.and_then(|start| {
        sent.iter()
            .filter(|s| s.sent_s >= start && s.ok())
            .filter_map(|s| s.ended_s)
            .map(|e| e - start)
            .min_by(f64::total_cmp)
    });
    let sent_after_start = stop.started_s.map_or(0, |start| {
        sent.iter().filter(|s| s.sent_s >= start).count() as u64
    });
    let recovered_after_start_s = stop
        .started_s
        .and_then(|start| recovery(&seconds, i.rate_per_s, start, i.duration_s - 1.0));
    // n8n counts its attempts from the first one, a second after the loss, and exits once they
    // passed the threshold.
    // An interrupt cut the outage short: what Redis was really down for is what is judged.
    let outage_s = match (stop.down_s, stop.started_s) {
        (Some(d), Some(s)) if stop.cut_short => (s - d).max(0.0),
        _ => i.outage_s,
    };
    let predicted_exit = outage_s > i.threshold_s.value;
    let mut o = Outage {
        target: i.target,
        rate_per_s: i.rate_per_s,
        duration_s: i.duration_s,
        outage_s,
        threshold_s: i.threshold_s,
        dropped,
        after_lost: after.len() as u64 - after_ok,
        after_ok,
        predicted_lost: if predicted_exit { in_flight.total } else { 0 },
        predicted_exit,
        in_flight,
        sent_after_start,
        first_ok_after_start_s,
        recovered_after_start_s,
        processes,
        stop,
        verdict: String::new(),
        seconds,
    };
    o.verdict = verdict(&o);
    o
}

fn process_words(p: &ProcessAfter) -> String {
    let code = p
        .exit_code
        .map_or(String::new(), |c| format!(" with code {c}"));
    match (p.exited, p.running, &p.restart_policy) {
        (true, true, Some(r)) => {
            format!(
            "{} ({}) exited{code} and was started again by its restart policy ({r}, {} restart(s))",
            p.name, p.role.word(), p.restarts
        )
        }
        (true, false, None) => format!(
            "{} ({}) exited{code} and stays down: it has no restart policy",
            p.name,
            p.role.word()
        ),
        (true, _, _) => format!("{} ({}) exited{code}", p.name, p.role.word()),
        (false, _, _) => format!("{} ({}) kept running", p.name, p.role.word()),
    }
}

fn verdict(o: &Outage) -> String {
    let f = &o.in_flight;
    if o.stop.down_s.is_none() {
        return format!(
            "Redis ({}) was never stopped ({}): no outage was measured, only the load against a \
             running n8n.",
            o.stop.what,
            o.stop.detail.as_deref().unwrap_or("no reason given")
        );
    }
    let mut v = format!(
        "Redis ({}) was down at {:.1} s for {:.1} s; n8n gives a lost Redis {:.0} s ({}). Of the {} requests in flight, {} finished, {} failed, {} never answered; of those sent after, {} were answered OK and {} were not.",
        o.stop.what,
        o.stop.down_s.unwrap_or(o.stop.stopped_s),
        o.outage_s,
        o.threshold_s.value,
        o.threshold_s.source.words(),
        f.total,
        f.finished,
        f.failed(),
        f.unanswered,
        o.after_ok,
        o.after_lost
    );
    if o.stop.cut_short {
        v.push_str(" The outage was cut short by an interrupt.");
    }
    if o.stop.started_s.is_none() {
        v.push_str(&format!(
            " Redis could not be started again ({}): start it by hand.",
            o.stop.detail.as_deref().unwrap_or("no reason given")
        ));
    }
    let exited: Vec<&ProcessAfter> = o.processes.iter().filter(|p| p.exited).collect();
    if !o.processes.is_empty() {
        let words: Vec<String> = o.processes.iter().map(process_words).collect();
        v.push_str(&format!(" {}.", words.join("; ")));
    }
    v.push_str(&match (o.first_ok_after_start_s, o.recovered_after_start_s) {
        (_, Some(r)) => format!(
            " Answers were back at the offered {:.1}/s {r:.1} s after Redis was started again.",
            o.rate_per_s
        ),
        (Some(first), None) => format!(
            " The first OK answer came {first:.1} s after Redis was started again, but not at the offered rate within the run."
        ),
        (None, None) if o.stop.started_s.is_some() && o.sent_after_start == 0 => {
            " No request was sent after Redis was started again (the load ended first): its recovery was not measured.".into()
        }
        (None, None) if o.stop.started_s.is_some() => {
            " No request was answered OK after Redis was started again: nothing brought n8n back.".into()
        }
        (None, None) => String::new(),
    });
    let measured_exit = !exited.is_empty();
    v.push_str(&match (o.predicted_exit, measured_exit) {
        (true, true) => format!(
            " As the threshold predicts for an outage of {:.1} s: n8n's processes exit and what they held is lost ({} predicted, {} lost).",
            o.outage_s,
            o.predicted_lost,
            f.lost()
        ),
        (false, false) if !o.processes.is_empty() => format!(
            " As the threshold predicts for an outage of {:.1} s: n8n outlives it and loses nothing to it ({} lost).",
            o.outage_s,
            f.lost()
        ),
        (true, false) if !o.processes.is_empty() => " The threshold predicted the processes to exit and none did: the threshold read is not the one in force, or Redis did not really go away.".into(),
        (false, true) => " A process exited although the outage was shorter than the threshold: look at its log (another cause, or the threshold read is not the one in force).".into(),
        _ => String::new(),
    });
    if exited
        .iter()
        .any(|p| !p.running && p.restart_policy.is_none())
    {
        v.push_str(" Set restart: always (or unless-stopped) on every n8n service: n8n exits when Redis is gone past the threshold and only a supervisor starts it again.");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::provenance::Provenance;
    use crate::record::drain::Outcome;

    fn sent(sent_s: f64, ended_s: Option<f64>, outcome: Outcome) -> Sent {
        Sent::new(sent_s, ended_s, outcome)
    }

    fn process(exited: bool, running: bool, policy: Option<&str>) -> ProcessAfter {
        ProcessAfter {
            name: "n8n".into(),
            role: crate::record::Role::Main,
            exited,
            exit_code: exited.then_some(1),
            running,
            restarts: u64::from(exited && running),
            restart_policy: policy.map(str::to_string),
            redis_line: None,
        }
    }

    fn inputs(outage_s: f64) -> Known {
        Known {
            target: "t".into(),
            rate_per_s: 2.0,
            duration_s: 30.0,
            outage_s,
            threshold_s: Sourced::new(10.0, Provenance::Default("n8n default".into())),
        }
    }

    fn stop(started_s: Option<f64>) -> RedisStop {
        RedisStop {
            how: crate::record::drill::Via::Docker,
            what: "redis".into(),
            stopped_s: 5.0,
            down_s: Some(5.0),
            started_s,
            detail: None,
            cut_short: false,
        }
    }

    /// 15 s of outage against n8n's 10 s: every request in flight lost, and without a restart
    /// policy nothing is answered again.
    #[test]
    fn an_outage_past_the_threshold_loses_what_was_in_flight() {
        let s = [
            sent(4.0, Some(4.5), Outcome::Answered(200)),
            sent(4.6, Some(15.2), Outcome::Broken),
            sent(4.8, Some(15.2), Outcome::Broken),
            sent(16.0, Some(16.0), Outcome::Broken),
        ];
        let o = judge_outage(
            inputs(15.0),
            &s,
            0,
            stop(Some(20.0)),
            vec![process(true, false, None)],
        );
        assert!(o.predicted_exit);
        assert_eq!((o.in_flight.total, o.in_flight.lost()), (2, 2));
        assert_eq!(o.predicted_lost, 2);
        assert_eq!((o.after_ok, o.after_lost), (0, 1));
        assert_eq!(o.first_ok_after_start_s, None);
    }

    /// 3 s of outage: n8n outlives it, the requests wait and are answered.
    #[test]
    fn an_outage_within_the_threshold_loses_nothing() {
        let s = [
            sent(4.6, Some(8.4), Outcome::Answered(200)),
            sent(6.0, Some(8.5), Outcome::Answered(200)),
            sent(8.5, Some(9.0), Outcome::Answered(200)),
        ];
        let o = judge_outage(
            inputs(3.0),
            &s,
            0,
            stop(Some(8.0)),
            vec![process(false, true, None)],
        );
        assert!(!o.predicted_exit);
        assert_eq!(o.predicted_lost, 0);
        assert_eq!((o.in_flight.total, o.in_flight.lost()), (1, 0));
        assert_eq!(o.first_ok_after_start_s, Some(1.0));
    }

    /// A stop command that failed: no outage is judged (and the command exits 1); an interrupt
    /// 2 s into a 6 s outage is judged as the 2 s it was; a load that ended before Redis came
    /// back says its recovery was not measured, not that nothing brought n8n back.
    #[test]
    fn a_failed_stop_a_cut_outage_and_no_load_after_are_said_as_they_were() {
        let s = [sent(4.0, Some(4.5), Outcome::Answered(200))];
        let failed = RedisStop {
            down_s: None,
            detail: Some("stopping Redis failed: the command exited 1".into()),
            ..stop(Some(5.1))
        };
        let o = judge_outage(inputs(6.0), &s, 0, failed, Vec::new());
        assert!(o.verdict.contains("never stopped"), "{}", o.verdict);
        assert!(!o.verdict.contains("was down"), "{}", o.verdict);
        let cut = RedisStop {
            cut_short: true,
            ..stop(Some(7.0))
        };
        let o = judge_outage(inputs(6.0), &s, 0, cut, Vec::new());
        assert!((o.outage_s - 2.0).abs() < 1e-9, "{}", o.outage_s);
        assert!(!o.predicted_exit);
        let o = judge_outage(inputs(6.0), &s, 0, stop(Some(11.0)), Vec::new());
        assert_eq!(o.sent_after_start, 0);
        assert!(!o.verdict.contains("nothing brought"), "{}", o.verdict);
    }
}
