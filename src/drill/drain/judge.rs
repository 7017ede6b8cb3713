//! A drain judged: which requests were in flight when the worker got its signal and how they
//! ended, the time until answers came back to the offered rate, and the loss the time budget
//! predicted (`model::drain`) beside the loss measured.

use crate::model::drain::{
    budget_s, killed_before_budget, loss_agrees, predict, stalled_answer_latest_s,
    stalled_answer_s, StopSignal,
};
use crate::model::n8n_defaults::SHUTDOWN_TASK_SHARE;
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::drain::{Drain, DrainAdvice, Sent, StopRecord};
use crate::record::drill::Via;

use crate::drill::fates::{in_flight_at, recovery, timeline, RECOVERY_WINDOW_S};

/// What the drain knew before the load.
#[derive(Debug, Clone)]
pub struct Known {
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
    /// The stopped worker's `QUEUE_WORKER_LOCK_DURATION` and `QUEUE_WORKER_STALLED_INTERVAL`,
    /// ms (n8n's defaults when not read).
    pub lock_ms: Sourced<f64>,
    pub stalled_ms: Sourced<f64>,
    /// How long each request waited for its answer, s.
    pub timeout_s: f64,
    /// The load was interrupted before its end: the verdict says what was measured until then.
    pub interrupted: bool,
}

pub fn judge_drain(i: Known, sent: &[Sent], dropped: u64, stop: StopRecord) -> Drain {
    let signal = stop.signal_s;
    let span = (signal - i.warmup_s).max(0.0);
    let before: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.sent_s >= i.warmup_s && s.ended_s.is_some_and(|e| e < signal) && s.ok())
        .collect();
    let before_per_s = (span >= 1.0).then(|| {
        sent.iter()
            .filter(|s| s.ok() && s.ended_s.is_some_and(|e| e >= i.warmup_s && e < signal))
            .count() as f64
            / span
    });
    let (job_p50_s, job_p99_s) = job_times(&i, &before);
    let in_flight = in_flight_at(sent, signal);
    let stalled_answer = Some(stalled_answer(&i));
    let failed_after = sent
        .iter()
        .filter(|s| s.sent_s >= signal && !s.ok())
        .count() as u64;
    let seconds = timeline(sent, i.duration_s);
    let settle = job_p99_s.as_ref().map(|j| j.value).unwrap_or(1.0);
    let recovered_after_s = recovery(&seconds, i.rate_per_s.value, signal, i.duration_s - settle);
    let window_s = window(&i, &stop);
    let budget = budget(&i, &stop);
    let failed = stop_failed(&stop);
    let killed = stop.signal == StopSignal::Kill
        || i.graceful_s
            .as_ref()
            .is_some_and(|g| killed_before_budget(StopSignal::Term, g.value, stop.grace_s));
    let predicted = predicted(&i, &stop, job_p50_s.as_ref(), budget.as_ref());
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
        budget_s: budget,
        killed_before_budget: killed,
        stalled_answer_s: stalled_answer,
        timeout_s: Some(i.timeout_s),
        predicted,
        agrees,
        advice: None,
        stop_failed: failed,
        unjudged: None,
        interrupted: i.interrupted,
        graceful_s: i.graceful_s.as_ref().map(|g| g.value),
        verdict: String::new(),
        seconds,
    };
    d.unjudged = unjudged(&d.target, sent, signal);
    if d.stop_failed.is_none() && d.unjudged.is_none() {
        d.advice = advice(&d);
    } else {
        d.predicted = None;
        d.agrees = None;
    }
    d.verdict = verdict(&d);
    d
}

/// When n8n answers what a killed worker held: Bull's lease plus its stalled check, at the
/// soonest and at the latest.
fn stalled_answer(i: &Known) -> (Sourced<f64>, f64) {
    let (lock_ms, stalled_ms) = (i.lock_ms.value, i.stalled_ms.value);
    (
        Sourced::new(
            stalled_answer_s(lock_ms, stalled_ms),
            Provenance::Inferred(format!(
                "QUEUE_WORKER_LOCK_DURATION {:.0} ms ({}) + QUEUE_WORKER_STALLED_INTERVAL {:.0} ms ({})",
                lock_ms,
                i.lock_ms.source.words(),
                stalled_ms,
                i.stalled_ms.source.words()
            )),
        ),
        stalled_answer_latest_s(lock_ms, stalled_ms),
    )
}

/// The loss the model predicts for the stop: the executions a worker holds at its share of the
/// rate, past what the budget lets finish (None without the job time or the budget).
fn predicted(
    i: &Known,
    stop: &StopRecord,
    job_p50_s: Option<&Sourced<f64>>,
    budget: Option<&Sourced<f64>>,
) -> Option<crate::model::drain::DrainPrediction> {
    match (job_p50_s, budget) {
        (Some(j), Some(b)) => {
            let per_worker = i.rate_per_s.value
                / f64::from(i.workers.as_ref().map(|w| w.value).unwrap_or(1).max(1));
            Some(predict(
                stop.held_logged.map(|h| h as f64),
                per_worker,
                j.value,
                b.value,
            ))
        }
        _ => None,
    }
}

/// Why the stop is not judged: no request sent before it was answered OK (the webhook was
/// failing already, so what failed after it cannot be charged to it).
fn unjudged(target: &str, sent: &[Sent], signal: f64) -> Option<String> {
    if sent.iter().any(|s| s.sent_s < signal && s.ok()) {
        return None;
    }
    Some(format!(
        "no request sent before the stop was answered OK ({} sent, {} of them failed): {} was \
         failing already, so what the stop cost cannot be told from it — make the webhook \
         answer first (sweep's pre-flight and a short sweep show why it fails)",
        sent.iter().filter(|s| s.sent_s < signal).count(),
        sent.iter().filter(|s| s.sent_s < signal && !s.ok()).count(),
        crate::util::escape_control(target)
    ))
}

/// The saved run's job times, else the OK answers before the signal (at the operating point
/// their wait is small; said as measured that way).
fn job_times(i: &Known, before: &[&Sent]) -> (Option<Sourced<f64>>, Option<Sourced<f64>>) {
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

/// The time the held jobs had: the worker's graceful shutdown, cut by Docker's grace.
fn window(i: &Known, stop: &StopRecord) -> Option<Sourced<f64>> {
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

/// Why the stop did not happen as asked: a stop command that did not succeed, or Docker's error
/// stopping the container.
fn stop_failed(stop: &StopRecord) -> Option<String> {
    match stop.how {
        Via::Command if stop.exit_code != Some(0) => Some(match stop.exit_code {
            Some(c) => format!("the stop command exited with status {c}"),
            None => "the stop command did not finish (ended by a signal, or its deadline)".into(),
        }),
        Via::Docker => stop
            .detail
            .as_deref()
            .filter(|d| d.starts_with("stopping") || d.starts_with("killing"))
            .map(str::to_string),
        _ => None,
    }
}

/// The time the held Code tasks had ([`budget_s`]), with where it came from.
fn budget(i: &Known, stop: &StopRecord) -> Option<Sourced<f64>> {
    if stop.signal == StopSignal::Kill {
        return Some(Sourced::new(
            0.0,
            Provenance::Flag("--signal KILL: the worker has no time to finish".into()),
        ));
    }
    let graceful = i.graceful_s.clone()?;
    let b = budget_s(StopSignal::Term, graceful.value, stop.grace_s);
    Some(
        if killed_before_budget(StopSignal::Term, graceful.value, stop.grace_s) {
            Sourced::new(
            b,
            Provenance::Deployment(format!(
                "the stop's grace ({b:.0} s, then SIGKILL), before n8n's task budget of {:.1} s (0.8 × N8N_GRACEFUL_SHUTDOWN_TIMEOUT {:.0} s)",
                SHUTDOWN_TASK_SHARE * graceful.value,
                graceful.value
            )),
        )
        } else {
            Sourced::new(
                b,
                Provenance::Inferred(format!(
                    "n8n's task budget: 0.8 × N8N_GRACEFUL_SHUTDOWN_TIMEOUT {:.0} s ({})",
                    graceful.value,
                    graceful.source.words()
                )),
            )
        },
    )
}

mod said;
use said::{advice, verdict};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::drain::{Outcome, Second};

    fn sent(sent_s: f64, ended_s: Option<f64>, outcome: Outcome) -> Sent {
        Sent::new(sent_s, ended_s, outcome)
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

    fn inputs(graceful_s: f64, job_s: f64) -> Known {
        Known {
            target: "t".into(),
            rate_per_s: Sourced::new(4.0, Provenance::Flag("--rate".into())),
            duration_s: 20.0,
            warmup_s: 2.0,
            workers: Some(Sourced::new(2, Provenance::Flag("--workers".into()))),
            job_p50_s: Some(Sourced::new(job_s, Provenance::Flag("--job-time".into()))),
            job_p99_s: None,
            graceful_s: Some(Sourced::new(
                graceful_s,
                Provenance::Default("n8n default".into()),
            )),
            n8n_failed: None,
            lock_ms: Sourced::new(60_000.0, Provenance::Default("n8n default".into())),
            stalled_ms: Sourced::new(30_000.0, Provenance::Default("n8n default".into())),
            timeout_s: 60.0,
            interrupted: false,
        }
    }

    /// One request answered OK before the stop at 8 s: the stop is judged (with none, it is
    /// not: see `nothing_answered_before_the_stop_is_not_judged`).
    fn answered_before() -> Vec<Sent> {
        vec![sent(2.0, Some(2.5), Outcome::Answered(200))]
    }

    fn stop(signal: StopSignal, grace_s: Option<f64>, held: Option<u64>) -> StopRecord {
        StopRecord {
            how: Via::Docker,
            signal,
            what: "w".into(),
            signal_s: 8.0,
            exited_after_s: Some(1.0),
            exit_code: Some(137),
            grace_s,
            held_logged: held,
            aborted_logged: None,
            detail: None,
            restarted_s: None,
        }
    }

    #[test]
    fn docker_s_grace_cuts_the_window_when_it_is_shorter() {
        let d = judge_drain(
            inputs(30.0, 3.0),
            &answered_before(),
            0,
            stop(StopSignal::Term, Some(1.0), None),
        );
        assert_eq!(d.window_s.as_ref().unwrap().value, 1.0);
        assert_eq!(d.budget_s.as_ref().unwrap().value, 1.0);
        assert!(d.killed_before_budget);
        // 2/s per worker × 3 s = 6 held; 2/3 of them outlast a 1 s grace.
        let p = d.predicted.unwrap();
        assert!(
            (p.held - 6.0).abs() < 1e-9 && (p.lost - 4.0).abs() < 1e-9,
            "{p:?}"
        );
        assert_eq!(d.agrees, Some(false));
    }

    /// n8n 2.41.1 with a 3 s window: a Code task gets 2.4 s, so 2.9 s jobs lose a share and
    /// the advice is a window whose 0.8 covers them (4 s), above the 3 s set.
    #[test]
    fn the_task_budget_is_four_fifths_of_the_window_and_the_advice_covers_the_p99_with_it() {
        let d = judge_drain(
            inputs(3.0, 2.9),
            &answered_before(),
            0,
            stop(StopSignal::Term, Some(10.0), Some(3)),
        );
        assert!((d.budget_s.as_ref().unwrap().value - 2.4).abs() < 1e-9);
        assert!(!d.killed_before_budget);
        let p = d.predicted.unwrap();
        assert!((p.lost - 3.0 * (1.0 - 2.4 / 2.9)).abs() < 1e-9, "{p:?}");
        assert_eq!(
            d.advice,
            Some(DrainAdvice::RaiseWindow {
                from_s: 3.0,
                to_s: 4.0
            })
        );
        // 2.0 s jobs fit the budget: nothing lost, nothing to change.
        let d = judge_drain(
            inputs(3.0, 2.0),
            &answered_before(),
            0,
            stop(StopSignal::Term, Some(10.0), Some(3)),
        );
        assert_eq!(d.predicted.unwrap().lost, 0.0);
        assert_eq!(d.advice, Some(DrainAdvice::None));
    }

    /// A kill: every held execution lost, answered by the stalled check about 95 s later (n8n
    /// 2.41.1); with a 60 s timeout those answers are not seen, and the drain says they may come.
    #[test]
    fn a_kill_loses_every_held_execution_and_says_when_n8n_answers_them() {
        let sent = [
            sent(7.0, Some(8.5), Outcome::Answered(200)),
            sent(7.5, Some(102.0), Outcome::Answered(500)),
            sent(7.6, Some(103.3), Outcome::Answered(500)),
            sent(7.8, None, Outcome::Unanswered),
        ];
        let mut i = inputs(3.0, 6.0);
        i.rate_per_s.value = 1.0;
        let d = judge_drain(i, &sent, 0, stop(StopSignal::Kill, None, None));
        assert_eq!(d.budget_s.as_ref().unwrap().value, 0.0);
        // 0.5/s per worker × 6 s = 3 held, all lost: as measured.
        let p = d.predicted.unwrap();
        assert_eq!((p.held, p.lost), (3.0, 3.0));
        assert_eq!(d.in_flight.lost(), 3);
        assert_eq!(d.agrees, Some(true));
        assert_eq!(d.in_flight.last_failure_after_s, Some(103.3 - 8.0));
        let (s, latest) = d.stalled_answer_s.clone().unwrap();
        assert_eq!((s.value, latest), (90.0, 120.0));
        assert_eq!(d.advice, Some(DrainAdvice::AvoidKill { window_s: 3.0 }));
        assert_eq!(d.timeout_s, Some(60.0));
    }

    #[test]
    fn nothing_answered_before_the_stop_is_not_judged() {
        let failing: Vec<Sent> = (0..6)
            .map(|k| sent(1.0 + k as f64, Some(1.5 + k as f64), Outcome::Answered(500)))
            .collect();
        let d = judge_drain(
            inputs(30.0, 3.0),
            &failing,
            0,
            stop(StopSignal::Term, Some(1.0), None),
        );
        assert!(d
            .unjudged
            .as_deref()
            .is_some_and(|u| u.contains("6 sent, 6 of them failed")));
        assert_eq!((d.predicted, d.advice, d.agrees), (None, None, None));
    }

    /// A worker that exits at once though its window covers the jobs: the advice follows the
    /// exit, never a window below the one already set.
    #[test]
    fn a_loss_the_window_does_not_explain_points_at_the_exit_not_the_window() {
        let sent: Vec<Sent> = (0..4)
            .map(|k| sent(7.0 + 0.2 * k as f64, None, Outcome::Unanswered))
            .chain(answered_before())
            .collect();
        let mut st = stop(StopSignal::Term, Some(10.0), Some(4));
        st.exited_after_s = Some(0.1);
        st.exit_code = Some(0);
        let d = judge_drain(inputs(3.0, 1.0), &sent, 0, st);
        assert_eq!(d.predicted.unwrap().lost, 0.0);
        assert_eq!(d.agrees, Some(false));
        assert_eq!(
            d.advice,
            Some(DrainAdvice::LookAtExit {
                exited_after_s: 0.1
            })
        );
    }
}
