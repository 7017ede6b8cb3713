//! A drain judged: which requests were in flight when the worker got its signal and how they
//! ended, the time until answers came back to the offered rate, and the loss the time budget
//! predicted (`model::drain`) beside the loss measured.

use crate::model::drain::{loss_agrees, predict};
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::drain::{Drain, InFlight, Outcome, Second, Sent, StopRecord};

/// OK answers per second that count as back at the offered rate.
const RECOVERED_SHARE: f64 = 0.9;
/// Seconds every window of which must hold that share.
const RECOVERY_WINDOW_S: usize = 3;

/// What the drain knew before the load.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub target: String,
    pub rate_per_s: Sourced<f64>,
    pub duration_s: f64,
    /// Seconds at the start left out of the "before" figures.
    pub warmup_s: f64,
    /// Workers sharing the load (Little's law's share when the worker's log says nothing).
    pub workers: Option<Sourced<u32>>,
    /// Job times from a saved run, when one was given.
    pub job_p50_s: Option<Sourced<f64>>,
    pub job_p99_s: Option<Sourced<f64>>,
    /// The stopped worker's `N8N_GRACEFUL_SHUTDOWN_TIMEOUT`.
    pub graceful_s: Option<Sourced<f64>>,
    /// main's failed-jobs counter over the run.
    pub n8n_failed: Option<f64>,
}

fn ok(s: &Sent) -> bool {
    matches!(s.outcome, Outcome::Answered(c) if (200..300).contains(&c))
}

pub fn judge(i: Inputs, sent: &[Sent], dropped: u64, stop: StopRecord) -> Drain {
    let signal = stop.signal_s;
    let span = (signal - i.warmup_s).max(0.0);
    let before: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.sent_s >= i.warmup_s && s.ended_s.is_some_and(|e| e < signal) && ok(s))
        .collect();
    let before_per_s = (span >= 1.0).then(|| {
        sent.iter()
            .filter(|s| ok(s) && s.ended_s.is_some_and(|e| e >= i.warmup_s && e < signal))
            .count() as f64
            / span
    });
    let (job_p50_s, job_p99_s) = job_times(&i, &before);
    let in_flight = in_flight_at(sent, signal);
    let failed_after = sent.iter().filter(|s| s.sent_s >= signal && !ok(s)).count() as u64;
    let seconds = timeline(sent, i.duration_s);
    let settle = job_p99_s.as_ref().map(|j| j.value).unwrap_or(1.0);
    let recovered_after_s = recovery(&seconds, i.rate_per_s.value, signal, i.duration_s - settle);
    let window_s = window(&i, &stop);
    let predicted = match (&job_p50_s, &window_s) {
        (Some(j), Some(w)) => {
            let per_worker = i.rate_per_s.value
                / f64::from(i.workers.as_ref().map(|w| w.value).unwrap_or(1).max(1));
            Some(predict(
                stop.held_logged.map(|h| h as f64),
                per_worker,
                j.value,
                w.value,
            ))
        }
        _ => None,
    };
    let agrees = predicted.map(|p| loss_agrees(in_flight.lost(), &p));
    let mut d = Drain {
        target: i.target,
        rate_per_s: i.rate_per_s,
        duration_s: i.duration_s,
        dropped,
        stop,
        before_per_s,
        in_flight,
        failed_after,
        n8n_failed: i.n8n_failed,
        recovered_after_s,
        job_p50_s,
        job_p99_s,
        window_s,
        predicted,
        agrees,
        verdict: String::new(),
        seconds,
    };
    d.verdict = verdict(&d);
    d
}

/// The saved run's job times, else the OK answers before the signal (at the operating point
/// their wait is small; said as measured that way).
fn job_times(i: &Inputs, before: &[&Sent]) -> (Option<Sourced<f64>>, Option<Sourced<f64>>) {
    if i.job_p50_s.is_some() {
        return (
            i.job_p50_s.clone(),
            i.job_p99_s.clone().or(i.job_p50_s.clone()),
        );
    }
    let mut r: Vec<f64> = before
        .iter()
        .filter_map(|s| s.ended_s.map(|e| e - s.sent_s))
        .filter(|r| r.is_finite() && *r >= 0.0)
        .collect();
    if r.is_empty() {
        return (None, None);
    }
    r.sort_by(f64::total_cmp);
    let q = |p: f64| r[((r.len() - 1) as f64 * p).round() as usize];
    let how = |p: &str| {
        Provenance::Measured(format!(
            "{p} response time of the {} OK answers before the signal",
            r.len()
        ))
    };
    (
        Some(Sourced::new(q(0.5), how("p50"))),
        Some(Sourced::new(q(0.99), how("p99"))),
    )
}

pub fn in_flight_at(sent: &[Sent], signal: f64) -> InFlight {
    let mut f = InFlight::default();
    for s in sent
        .iter()
        .filter(|s| s.sent_s < signal && s.ended_s.is_none_or(|e| e >= signal))
    {
        f.total += 1;
        match s.outcome {
            Outcome::Answered(c) if (200..300).contains(&c) => f.finished += 1,
            Outcome::Answered(c) => *f.failed_by_status.entry(c).or_default() += 1,
            Outcome::Broken => f.broken += 1,
            Outcome::Unanswered => f.unanswered += 1,
        }
    }
    f
}

fn timeline(sent: &[Sent], duration_s: f64) -> Vec<Second> {
    let last = sent
        .iter()
        .filter_map(|s| s.ended_s)
        .fold(duration_s, f64::max)
        .ceil() as usize;
    let mut out: Vec<Second> = (0..=last)
        .map(|t| Second {
            t: t as u32,
            sent: 0,
            finished: 0,
            failed: 0,
        })
        .collect();
    for s in sent {
        if let Some(b) = out.get_mut(s.sent_s.max(0.0) as usize) {
            b.sent += 1;
        }
        if let Some(b) = s.ended_s.and_then(|e| out.get_mut(e.max(0.0) as usize)) {
            if ok(s) {
                b.finished += 1;
            } else {
                b.failed += 1;
            }
        }
    }
    out
}

/// The first whole second after the signal from which every window of
/// [`RECOVERY_WINDOW_S`] seconds up to `until` answered OK at [`RECOVERED_SHARE`] of the
/// offered rate; seconds from the signal.
pub fn recovery(seconds: &[Second], rate: f64, signal: f64, until: f64) -> Option<f64> {
    let w = RECOVERY_WINDOW_S;
    let end = until.floor().max(0.0) as usize;
    let holds = |t: usize| -> bool {
        let got: u32 = seconds.iter().skip(t).take(w).map(|s| s.finished).sum();
        f64::from(got) >= RECOVERED_SHARE * rate * w as f64
    };
    let first = signal.floor().max(0.0) as usize;
    if first + w > end {
        return None;
    }
    let mut candidate = None;
    for t in first..=end - w {
        match (holds(t), candidate) {
            (true, None) => candidate = Some(t),
            (false, _) => candidate = None,
            _ => {}
        }
    }
    candidate.map(|t| (t as f64 - signal).max(0.0))
}

/// The time the held jobs had: the worker's graceful shutdown, cut by Docker's grace.
fn window(i: &Inputs, stop: &StopRecord) -> Option<Sourced<f64>> {
    let graceful = i.graceful_s.clone()?;
    match stop.grace_s {
        Some(g) if g < graceful.value => Some(Sourced::new(
            g,
            Provenance::Deployment(format!(
                "Docker's stop grace ({g:.0} s, then SIGKILL), shorter than N8N_GRACEFUL_SHUTDOWN_TIMEOUT ({:.0} s)",
                graceful.value
            )),
        )),
        _ => Some(graceful),
    }
}

fn verdict(d: &Drain) -> String {
    let f = &d.in_flight;
    let held = match d.stop.held_logged {
        Some(h) => format!("it said it held {h} executions; "),
        None => String::new(),
    };
    let statuses: Vec<String> = f
        .failed_by_status
        .iter()
        .map(|(c, n)| format!("{n} × HTTP {c}"))
        .chain((f.broken > 0).then(|| format!("{} broken", f.broken)))
        .collect();
    let mut v = format!(
        "Stopped {} at {:.1} s: {held}of the {} requests in flight, {} finished, {} failed{}, {} never answered.",
        d.stop.what,
        d.stop.signal_s,
        f.total,
        f.finished,
        f.failed(),
        if statuses.is_empty() { String::new() } else { format!(" ({})", statuses.join(", ")) },
        f.unanswered
    );
    if let (Some(p), Some(j), Some(w)) = (d.predicted, &d.job_p50_s, &d.window_s) {
        let p99 = d.job_p99_s.as_ref().map(|j| j.value).unwrap_or(j.value);
        v.push_str(&format!(
            " Predicted {:.1} lost of {:.1} held: jobs of {:.2} s (p99 {p99:.2} s) against a {:.1} s window.",
            p.lost, p.held, j.value, w.value
        ));
        match d.agrees {
            Some(false) => v.push_str(&format!(
                " The measured loss ({}) is not the predicted one: the stop did not go as the time budget says (a grace other than the one read, jobs longer than measured, or requests lost elsewhere).",
                f.lost()
            )),
            _ if f.lost() == 0 && p99 <= w.value => {
                v.push_str(" The window covers the p99 job: a scale-down loses nothing here.")
            }
            _ => {}
        }
        if f.lost() > 0 || p99 > w.value {
            v.push_str(&format!(
                " Raise N8N_GRACEFUL_SHUTDOWN_TIMEOUT above the p99 job ({:.0} s or more) and the stop's grace (terminationGracePeriodSeconds, compose stop_grace_period) above it.",
                (p99 * 1.25).ceil()
            ));
        }
    }
    match d.recovered_after_s {
        Some(r) => v.push_str(&format!(
            " Answers were back at the offered {:.1}/s {r:.1} s after the signal.",
            d.rate_per_s.value
        )),
        None => v.push_str(" Answers did not come back to the offered rate within the run."),
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(sent_s: f64, ended_s: Option<f64>, outcome: Outcome) -> Sent {
        Sent {
            sent_s,
            ended_s,
            outcome,
        }
    }

    #[test]
    fn requests_across_the_signal_are_counted_by_how_they_ended() {
        let s = [
            sent(1.0, Some(1.5), Outcome::Answered(200)),
            sent(4.0, Some(6.0), Outcome::Answered(200)),
            sent(4.5, Some(9.0), Outcome::Answered(500)),
            sent(4.8, None, Outcome::Unanswered),
            sent(4.9, Some(5.1), Outcome::Broken),
            sent(6.0, Some(6.5), Outcome::Answered(200)),
        ];
        let f = in_flight_at(&s, 5.0);
        assert_eq!(
            (f.total, f.finished, f.failed(), f.unanswered),
            (4, 1, 2, 1)
        );
        assert_eq!(f.failed_by_status.get(&500), Some(&1));
        assert_eq!(f.lost(), 3);
    }

    fn steady(rate: u32, gap: std::ops::Range<usize>, n: usize) -> Vec<Second> {
        (0..n)
            .map(|t| Second {
                t: t as u32,
                sent: rate,
                finished: if gap.contains(&t) { 0 } else { rate },
                failed: 0,
            })
            .collect()
    }

    #[test]
    fn recovery_is_the_first_second_from_which_answers_hold_the_rate() {
        // 10/s, nothing answered in seconds 10–13, the signal at 10.0: back from second 14.
        let s = steady(10, 10..14, 30);
        assert_eq!(recovery(&s, 10.0, 10.0, 29.0), Some(4.0));
        // Never dipped: at once.
        let s = steady(10, 0..0, 30);
        assert_eq!(recovery(&s, 10.0, 10.5, 29.0), Some(0.0));
        // Still down at the end: not recovered.
        let s = steady(10, 10..30, 30);
        assert_eq!(recovery(&s, 10.0, 10.0, 29.0), None);
    }

    #[test]
    fn docker_s_grace_cuts_the_window_when_it_is_shorter() {
        let i = Inputs {
            target: "t".into(),
            rate_per_s: Sourced::new(4.0, Provenance::Flag("--rate".into())),
            duration_s: 20.0,
            warmup_s: 2.0,
            workers: Some(Sourced::new(2, Provenance::Flag("--workers".into()))),
            job_p50_s: Some(Sourced::new(3.0, Provenance::Flag("--job-time".into()))),
            job_p99_s: None,
            graceful_s: Some(Sourced::new(
                30.0,
                Provenance::Default("n8n default".into()),
            )),
            n8n_failed: None,
        };
        let stop = StopRecord {
            how: "docker".into(),
            what: "w".into(),
            signal_s: 8.0,
            exited_after_s: Some(1.0),
            exit_code: Some(137),
            grace_s: Some(1.0),
            held_logged: None,
            detail: None,
            restarted_s: None,
        };
        let d = judge(i, &[], 0, stop);
        assert_eq!(d.window_s.as_ref().unwrap().value, 1.0);
        // 2/s per worker × 3 s = 6 held; 2/3 of them outlast a 1 s window.
        let p = d.predicted.unwrap();
        assert!(
            (p.held - 6.0).abs() < 1e-9 && (p.lost - 4.0).abs() < 1e-9,
            "{p:?}"
        );
        assert_eq!(d.agrees, Some(false));
    }
}
