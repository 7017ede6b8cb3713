//! What a scale-down loses, said before it happens. A worker stopped at a steady load holds
//! `X_w × J` jobs (Little's law at its slots: its share of the rate times the job time). Each
//! is as far into its job as chance has it: at a steady load a held job's age is uniform on
//! `[0, J)`, so with a job time near constant the share whose rest outlasts a shutdown window
//! `W` is `max(0, 1 − W ÷ J)`. n8n ≥ 2.0 fails those for good (no stalled retry).

/// A stop's expected loss.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DrainPrediction {
    /// Jobs the worker holds at the signal.
    pub held: f64,
    /// Of those, the ones whose rest outlasts the window.
    pub lost: f64,
}

/// The share of held jobs a window of `window_s` cuts when each job takes `job_s`.
pub fn lost_share(job_s: f64, window_s: f64) -> f64 {
    if job_s.is_nan() || job_s <= 0.0 || !window_s.is_finite() {
        return 0.0;
    }
    (1.0 - window_s.max(0.0) / job_s).clamp(0.0, 1.0)
}

/// `held` given, or Little's law's `per_worker_rate × job_s`; the loss from [`lost_share`].
pub fn predict(
    held: Option<f64>,
    per_worker_rate: f64,
    job_s: f64,
    window_s: f64,
) -> DrainPrediction {
    let held = held.unwrap_or(per_worker_rate.max(0.0) * job_s.max(0.0));
    DrainPrediction {
        held,
        lost: held * lost_share(job_s, window_s),
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
