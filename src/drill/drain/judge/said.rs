//! What a drain's verdict says: how the held executions ended, when the failures came, the
//! loss predicted beside the loss measured, and advice that follows the evidence (never a value
//! the deployment already exceeds).

use super::*;

/// The verdict, said to be partial when the load was interrupted before its end.
pub(super) fn verdict(d: &Drain) -> String {
    let v = outcome(d);
    if d.interrupted {
        return format!(
            "Interrupted before its end: what follows is what was measured until then. {v}"
        );
    }
    v
}

fn outcome(d: &Drain) -> String {
    let f = &d.in_flight;
    if let Some(why) = &d.unjudged {
        return format!("Not judged: {why}.");
    }
    if let Some(why) = &d.stop_failed {
        return format!(
            "The stop did not happen as asked ({why}): of the {} requests in flight at {:.1} s, {} finished, {} failed, {} never answered — not what a scale-down costs. Fix the stop and run the drain again.",
            f.total,
            d.stop.signal_s,
            f.finished,
            f.failed(),
            f.unanswered
        );
    }
    let held = match (d.stop.held_logged, d.stop.aborted_logged) {
        (Some(h), Some(a)) if a > 0 => format!(
            "it said it held {h} executions and aborted {a} Code task(s) when its task budget ran out; "
        ),
        (Some(h), _) => format!("it said it held {h} executions; "),
        _ => String::new(),
    };
    let statuses: Vec<String> = f
        .failed_by_status
        .iter()
        .map(|(c, n)| format!("{n} × HTTP {c}"))
        .chain((f.broken > 0).then(|| format!("{} broken", f.broken)))
        .collect();
    let how = match d.stop.signal {
        StopSignal::Kill => "Killed",
        StopSignal::Term => "Stopped",
    };
    let mut v = format!(
        "{how} {} at {:.1} s: {held}of the {} requests in flight, {} finished, {} failed{}, {} never answered.",
        d.stop.what,
        d.stop.signal_s,
        f.total,
        f.finished,
        f.failed(),
        if statuses.is_empty() { String::new() } else { format!(" ({})", statuses.join(", ")) },
        f.unanswered
    );
    v.push_str(&when_failed(d));
    v.push_str(&predicted_and_advice(d));
    match d.recovered_after_s {
        Some(r) => v.push_str(&format!(
            " Answers were back at the offered {:.1}/s {r:.1} s after the signal.",
            d.rate_per_s.value
        )),
        None if recovery_span(d) < RECOVERY_WINDOW_S as f64 => v.push_str(&format!(
            " The run left too little time after the signal to tell whether answers came back to the offered rate (under {RECOVERY_WINDOW_S} s of load after it)."
        )),
        None => v.push_str(" Answers did not come back to the offered rate within the run."),
    }
    v
}

/// Seconds of load after the signal that a recovery could be seen in.
fn recovery_span(d: &Drain) -> f64 {
    let settle = d.job_p99_s.as_ref().map(|j| j.value).unwrap_or(1.0);
    d.duration_s - settle - d.stop.signal_s.floor()
}

/// When the failures were answered, and what set that time; whether answers may still come.
fn when_failed(d: &Drain) -> String {
    let f = &d.in_flight;
    let killed = killed(d);
    let mut v = String::new();
    if let Some(t) = f.last_failure_after_s {
        v.push_str(&format!(
            " The last failure was answered {t:.1} s after the signal"
        ));
        match (&d.stalled_answer_s, &d.budget_s) {
            (Some((s, _)), _) if killed => v.push_str(&format!(
                ": a killed worker's executions are failed by Bull's stalled check, about {:.0} s after the kill ({}).",
                s.value,
                s.source.words()
            )),
            (_, Some(b)) => v.push_str(&format!(
                ": n8n aborts a stopping worker's Code tasks when its task budget runs out, {:.1} s after the signal ({}).",
                b.value,
                b.source.words()
            )),
            _ => v.push('.'),
        }
    }
    if let (Some((_, latest)), Some(timeout)) = (&d.stalled_answer_s, d.timeout_s) {
        if f.unanswered > 0 && timeout < *latest {
            v.push_str(&format!(
                " Answers may still come after the {timeout:.0} s each request waited: n8n answers the executions a killed (or window-outlasting) worker held up to {latest:.0} s later, after Bull's stalled check (give --timeout above it)."
            ));
        }
    }
    v
}

/// The stop kills before the task budget ran out: by `--signal KILL` or a grace shorter than it.
fn killed(d: &Drain) -> bool {
    d.killed_before_budget
}

/// What to change, from the prediction and what the stop itself showed.
pub(super) fn advice(d: &Drain) -> Option<DrainAdvice> {
    let f = &d.in_flight;
    let (Some(_), Some(j), Some(b)) = (d.predicted, &d.job_p50_s, &d.budget_s) else {
        return None;
    };
    let p99 = d.job_p99_s.as_ref().map(|j| j.value).unwrap_or(j.value);
    let window_s = d.window_s.as_ref().map(|w| w.value).unwrap_or(0.0);
    let graceful_s = d.graceful_s.unwrap_or(window_s);
    Some(if d.stop.signal == StopSignal::Kill {
        DrainAdvice::AvoidKill {
            window_s: graceful_s,
        }
    } else if d.agrees == Some(false) {
        match d.stop.exited_after_s {
            Some(e) if f.lost() > 0 && p99 <= b.value => {
                DrainAdvice::LookAtExit { exited_after_s: e }
            }
            _ => DrainAdvice::Unexplained,
        }
    } else if d.killed_before_budget {
        DrainAdvice::RaiseGrace {
            grace_s: b.value,
            window_s: graceful_s,
        }
    } else if p99 > b.value {
        DrainAdvice::RaiseWindow {
            from_s: graceful_s,
            to_s: (p99 / SHUTDOWN_TASK_SHARE).ceil().max(graceful_s + 1.0),
        }
    } else {
        DrainAdvice::None
    })
}

/// The prediction beside the measurement, and the advice in words.
fn predicted_and_advice(d: &Drain) -> String {
    let f = &d.in_flight;
    let (Some(p), Some(j), Some(b), Some(a)) = (d.predicted, &d.job_p50_s, &d.budget_s, d.advice)
    else {
        return String::new();
    };
    let p99 = d.job_p99_s.as_ref().map(|j| j.value).unwrap_or(j.value);
    let mut v = if d.stop.signal == StopSignal::Kill {
        format!(
            " Predicted {:.1} lost of {:.1} held: a kill loses every execution the worker holds.",
            p.lost, p.held
        )
    } else {
        format!(
            " Predicted {:.1} lost of {:.1} held: jobs of {:.2} s (p99 {p99:.2} s) against {:.1} s for their Code tasks ({}).",
            p.lost,
            p.held,
            j.value,
            b.value,
            b.source.words()
        )
    };
    if d.agrees == Some(false) {
        v.push_str(&format!(
            " The measured loss ({}) is not the predicted one",
            f.lost()
        ));
    }
    v.push_str(&match a {
        DrainAdvice::None => " The task budget covers the p99 job: a scale-down loses nothing here.".into(),
        DrainAdvice::RaiseWindow { from_s, to_s } => format!(
            " Raise N8N_GRACEFUL_SHUTDOWN_TIMEOUT from {from_s:.0} s to {to_s:.0} s or more (n8n gives a Code task 0.8 of it: {:.1} s ≥ the p99 job) and the stop's grace (terminationGracePeriodSeconds, compose stop_grace_period) above it.",
            SHUTDOWN_TASK_SHARE * to_s
        ),
        DrainAdvice::RaiseGrace { grace_s, window_s } => format!(
            " The stop's grace ({grace_s:.0} s) killed the worker before n8n's task budget ran out: raise it (terminationGracePeriodSeconds, compose stop_grace_period) above N8N_GRACEFUL_SHUTDOWN_TIMEOUT ({window_s:.0} s)."
        ),
        DrainAdvice::AvoidKill { window_s } => format!(
            " Keep scale-downs to SIGTERM: the orchestrator's grace (terminationGracePeriodSeconds, compose stop_grace_period) above N8N_GRACEFUL_SHUTDOWN_TIMEOUT ({window_s:.0} s), and memory limits an execution cannot reach (an OOM kill is a kill)."
        ),
        DrainAdvice::LookAtExit { exited_after_s } => format!(
            ": the task budget covers the p99 job, yet the worker exited {exited_after_s:.1} s after the signal{} — look at what ended it before its window (a supervisor or grace shorter than the one read, an OOM kill, a process that does not wait for its jobs); N8N_GRACEFUL_SHUTDOWN_TIMEOUT is not the fix here.",
            d.stop.exit_code.map_or(String::new(), |c| format!(" with exit code {c}"))
        ),
        DrainAdvice::Unexplained => ": the stop did not go as the time budget says (a grace other than the one read, jobs longer than measured, or requests lost elsewhere).".into(),
    });
    v
}
