//! What a scale-down loses, said before it happens. A worker stopped at a steady load holds
//! `X_w × J` jobs (Little's law at its slots: its share of the rate times the job time). Each
//! is as far into its job as chance has it: at a steady load a held job's age is uniform on
//! `[0, J)`, so with a job time near constant the share whose rest outlasts the time it is given
//! `B` is `max(0, 1 − B ÷ J)`. n8n ≥ 2.0 fails those for good (no stalled retry).
//!
//! What `B` is, as n8n 2.41.1 was measured to stop (docs/sim.md, "A worker's stop"; the logs in `fixtures/n8n-real/`): on
//! SIGTERM a Code task gets the *task budget*, 0.8 × `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` (then the
//! broker aborts it and main answers HTTP 500 at once); a kill — SIGKILL, an OOM kill, an
//! orchestrator's grace that ends before the budget — gives none: every held execution is lost,
//! and n8n answers it HTTP 500 only when Bull's stalled check finds it, about
//! `QUEUE_WORKER_LOCK_DURATION` + `QUEUE_WORKER_STALLED_INTERVAL` after the kill (94.5–95.8 s
//! measured with 60 s and 30 s).

use super::n8n_defaults::SHUTDOWN_TASK_SHARE;

/// How the worker is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum StopSignal {
    /// A scale-down's SIGTERM, then SIGKILL after the stop's grace.
    Term,
    /// SIGKILL at once: an OOM kill, a grace of 0, a node lost.
    Kill,
}

/// The time a held Code task has from the signal: the task budget (0.8 × the shutdown window
/// `graceful_s`), cut by a kill at the stop's grace `grace_s`; none for a kill.
pub fn budget_s(signal: StopSignal, graceful_s: f64, grace_s: Option<f64>) -> f64 {
    match signal {
        StopSignal::Kill => 0.0,
        StopSignal::Term => {
            let b = SHUTDOWN_TASK_SHARE * graceful_s.max(0.0);
            grace_s.map_or(b, |g| b.min(g.max(0.0)))
        }
    }
}

/// Whether the held jobs that fail are answered by the task budget (at once) or only by Bull's
/// stalled check: the latter when the process is killed before its budget runs out.
pub fn killed_before_budget(signal: StopSignal, graceful_s: f64, grace_s: Option<f64>) -> bool {
    signal == StopSignal::Kill
        || grace_s.is_some_and(|g| g < SHUTDOWN_TASK_SHARE * graceful_s.max(0.0))
}

/// Seconds from a kill until n8n answers the executions the killed worker held: its lease lapses
/// (`lock_ms`), then the stalled check that runs every `stalled_ms` fails them.
pub fn stalled_answer_s(lock_ms: f64, stalled_ms: f64) -> f64 {
    (lock_ms.max(0.0) + stalled_ms.max(0.0)) / 1000.0
}

/// The latest that answer can come: the lease, and up to two check intervals (a job is failed
/// by the check after the one that first saw it without its lease).
pub fn stalled_answer_latest_s(lock_ms: f64, stalled_ms: f64) -> f64 {
    (lock_ms.max(0.0) + 2.0 * stalled_ms.max(0.0)) / 1000.0
}

/// A stop's expected loss.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DrainPrediction {
    /// Jobs the worker holds at the signal.
    pub held: f64,
    /// Of those, the ones whose rest outlasts the window.
    pub lost: f64,
}

/// The share of held jobs a budget of `budget_s` cuts when each job takes `job_s`.
pub fn lost_share(job_s: f64, budget_s: f64) -> f64 {
    if job_s.is_nan() || job_s <= 0.0 || budget_s.is_nan() {
        return 0.0;
    }
    if budget_s == f64::INFINITY {
        return 0.0;
    }
    (1.0 - budget_s.max(0.0) / job_s).clamp(0.0, 1.0)
}

/// `held` given, or Little's law's `per_worker_rate × job_s`; the loss from [`lost_share`] with
/// the time the held tasks have ([`budget_s`]).
pub fn predict(
    held: Option<f64>,
    per_worker_rate: f64,
    job_s: f64,
    budget_s: f64,
) -> DrainPrediction {
    let held = held.unwrap_or(per_worker_rate.max(0.0) * job_s.max(0.0));
    DrainPrediction {
        held,
        lost: held * lost_share(job_s, budget_s),
    }
}

/// Whether a measured loss is the predicted one, counting chance: each held job is lost or not,
/// so the count spreads as a binomial's, √(held × share × (1 − share)); two of those, and one
/// job either way, are allowed.
pub fn loss_agrees(measured: u64, p: &DrainPrediction) -> bool {
    let share = if p.held > 0.0 {
        (p.lost / p.held).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let spread = (p.held.max(0.0) * share * (1.0 - share)).sqrt();
    (measured as f64 - p.lost).abs() <= 2.0 * spread + 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_longer_than_the_job_loses_nothing() {
        assert_eq!(lost_share(0.4, 30.0), 0.0);
        assert_eq!(predict(None, 5.0, 0.4, 30.0).lost, 0.0);
        // 5/s per worker × 0.4 s = 2 held.
        assert!((predict(None, 5.0, 0.4, 30.0).held - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_window_shorter_than_the_job_loses_the_jobs_whose_rest_outlasts_it() {
        // 3 s jobs, 1 s window: two thirds of the held jobs are lost.
        assert!((lost_share(3.0, 1.0) - 2.0 / 3.0).abs() < 1e-12);
        let p = predict(Some(6.0), 0.0, 3.0, 1.0);
        assert!((p.lost - 4.0).abs() < 1e-12);
        // A zero window (SIGKILL): all of them.
        assert_eq!(lost_share(3.0, 0.0), 1.0);
        assert_eq!(lost_share(f64::NAN, 1.0), 0.0);
    }

    /// n8n 2.41.1, measured with a 3 s window: a 2.9 s job was failed (its Code task got 2.4 s),
    /// a 2.0 s job finished; a kill loses every held job, answered after the stalled check.
    #[test]
    fn code_tasks_get_four_fifths_of_the_window_and_a_kill_none() {
        let b = budget_s(StopSignal::Term, 3.0, None);
        assert!((b - 2.4).abs() < 1e-12);
        assert!(lost_share(2.9, b) > 0.0);
        assert_eq!(lost_share(2.0, b), 0.0);
        // A grace shorter than the budget kills first.
        assert_eq!(budget_s(StopSignal::Term, 30.0, Some(10.0)), 10.0);
        assert!(killed_before_budget(StopSignal::Term, 30.0, Some(10.0)));
        assert!(!killed_before_budget(StopSignal::Term, 3.0, Some(10.0)));
        // A kill: every held execution, whatever the window.
        assert_eq!(budget_s(StopSignal::Kill, 300.0, None), 0.0);
        let p = predict(Some(3.0), 0.0, 6.0, budget_s(StopSignal::Kill, 3.0, None));
        assert_eq!(p.lost, 3.0);
        assert!(killed_before_budget(StopSignal::Kill, 3.0, None));
        // n8n's defaults: lease 60 s, check every 30 s → answered 90–120 s after the kill.
        assert_eq!(stalled_answer_s(60_000.0, 30_000.0), 90.0);
        assert_eq!(stalled_answer_latest_s(60_000.0, 30_000.0), 120.0);
    }

    #[test]
    fn agreement_allows_a_count_s_chance() {
        let none = DrainPrediction {
            held: 3.0,
            lost: 0.0,
        };
        assert!(loss_agrees(0, &none) && loss_agrees(1, &none));
        assert!(!loss_agrees(3, &none));
        // 6 held, two thirds lost: 4 ± 2 × 1.15 + 1.
        let some = DrainPrediction {
            held: 6.0,
            lost: 4.0,
        };
        assert!(loss_agrees(6, &some) && loss_agrees(1, &some));
        assert!(!loss_agrees(0, &some));
    }
}
