//! When n8n answers again after its Postgres was away, said before it happens. As n8n 2.41's
//! `DbConnectionMonitor` does it (`@n8n/db` db-connection-monitor.ts, backoff.ts; measured in the
//! project's third lab, docs/sim.md "A Postgres restart"): a pooled connection Postgres ends marks
//! the database not connected at once, and every webhook call is answered HTTP 503 "Database is
//! not ready!" from then on; main pings every `DB_PING_INTERVAL_SECONDS` (2 s), and a ping that
//! succeeds marks it connected again; after `DB_PING_MAX_FAILURES_BEFORE_RECOVERY` (3) failures in
//! a row it tears the pool down and tries again at once, then after `DB_RECOVERY_BACKOFF_MIN_MS`
//! × 2^(attempt − 1), capped at `DB_RECOVERY_BACKOFF_MAX_MS` (1 s, 30 s), pinging no more while
//! it tries. So the time back is the first try past Postgres' return, not the outage's length:
//! 15 s away came back 3.9 and 5.0 s after Postgres, 45 s away 22 s after it.
//!
//! The pings' phase against the stop is chance: the prediction is an interval over it.

use serde::{Deserialize, Serialize};

/// n8n's recovery settings (its defaults in [`Recovery::N8N`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// `DB_PING_INTERVAL_SECONDS`.
    pub ping_s: f64,
    /// `DB_PING_MAX_FAILURES_BEFORE_RECOVERY`.
    pub max_failures: u32,
    /// `DB_RECOVERY_BACKOFF_MIN_MS`, in seconds.
    pub backoff_min_s: f64,
    /// `DB_RECOVERY_BACKOFF_MAX_MS`, in seconds.
    pub backoff_max_s: f64,
}

impl Recovery {
    /// n8n 2.41's defaults (`@n8n/config` database.config).
    pub const N8N: Recovery = Recovery {
        ping_s: 2.0,
        max_failures: 3,
        backoff_min_s: 1.0,
        backoff_max_s: 30.0,
    };

    /// The wait after the failed try `attempt` (1-based): n8n's `computeBackoff`, the ceiling
    /// never below the floor.
    pub fn backoff_s(&self, attempt: u32) -> f64 {
        let ceiling = self.backoff_max_s.max(self.backoff_min_s);
        let doubled = self.backoff_min_s * 2f64.powi(attempt.saturating_sub(1).min(60) as i32);
        doubled.min(ceiling)
    }

    /// Settings n8n can run with: finite, a ping interval and a backoff above 0, one failure
    /// or more.
    pub fn possible(&self) -> bool {
        self.ping_s.is_finite()
            && self.ping_s > 0.0
            && self.max_failures >= 1
            && self.backoff_min_s.is_finite()
            && self.backoff_min_s > 0.0
            && self.backoff_max_s.is_finite()
            && self.backoff_max_s >= 0.0
    }

    /// Seconds from the stop until n8n answers again, with the first ping `phase_s` after the
    /// stop (0 < phase ≤ ping interval) and Postgres accepting connections again `up_s` after
    /// the stop.
    pub fn back_after_stop(&self, phase_s: f64, up_s: f64) -> f64 {
        let mut failures = 0;
        let mut t = phase_s;
        // Pings until one succeeds or the failures start a recovery.
        loop {
            if t >= up_s {
                return t;
            }
            failures += 1;
            if failures >= self.max_failures {
                break;
            }
            t += self.ping_s;
        }
        // The recovery's tries: at once, then after each backoff.
        let mut attempt = 1;
        loop {
            if t >= up_s {
                return t;
            }
            t += self.backoff_s(attempt);
            attempt += 1;
        }
    }

    /// The interval of [`Recovery::back_after_stop`] over the pings' phase, as seconds after
    /// Postgres is back (`up_s` after the stop): (earliest, latest).
    pub fn back_after_up(&self, up_s: f64) -> (f64, f64) {
        const STEPS: u32 = 400;
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for i in 1..=STEPS {
            let phase = self.ping_s * f64::from(i) / f64::from(STEPS);
            let back = self.back_after_stop(phase, up_s) - up_s;
            lo = lo.min(back);
            hi = hi.max(back);
        }
        (lo.max(0.0), hi.max(0.0))
    }

    /// Seconds from the stop to the recovery's first try, over the pings' phase: (earliest,
    /// latest) — the failures a recovery waits for, a ping interval apart.
    pub fn recovery_starts(&self) -> (f64, f64) {
        let pings = f64::from(self.max_failures.saturating_sub(1));
        (pings * self.ping_s, (pings + 1.0) * self.ping_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_the_floor_to_the_ceiling() {
        let r = Recovery::N8N;
        let waits: Vec<f64> = (1..=7).map(|a| r.backoff_s(a)).collect();
        assert_eq!(waits, vec![1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        let odd = Recovery {
            backoff_max_s: 0.5,
            ..r
        };
        assert_eq!(
            odd.backoff_s(4),
            1.0,
            "a ceiling below the floor: the floor"
        );
    }

    /// The third lab's two outages under the defaults, from the stop: 15 s away came back at
    /// about +19–20 s, 45 s away at +67.2 s ("recovered after 7 attempt(s) in 61088ms"); the
    /// reference says both fit the backoff "to about a second" (the pings drift by their own
    /// time).
    #[test]
    fn the_third_lab_s_outages_fall_in_the_predicted_intervals() {
        let r = Recovery::N8N;
        let over = |up: f64| {
            let (lo, hi) = r.back_after_up(up);
            (up + lo, up + hi)
        };
        let (lo, hi) = over(15.0);
        assert!(
            (lo - 19.0).abs() < 0.01 && (hi - 21.0).abs() < 0.01,
            "15 s: {lo}..{hi}"
        );
        let (lo, hi) = over(45.0);
        assert!(lo - 1.0 <= 67.2 && 67.2 <= hi + 1.0, "45 s: {lo}..{hi}");
        assert!((lo - 65.0).abs() < 0.01, "the 7th try, t0 + 61 s: {lo}");
        assert_eq!(r.recovery_starts(), (4.0, 6.0));
    }

    /// An outage shorter than the failures a recovery waits for: the next ping brings it back.
    #[test]
    fn a_short_outage_is_back_at_the_next_ping() {
        let r = Recovery::N8N;
        let (lo, hi) = r.back_after_up(1.0);
        assert!(lo >= 0.0 && hi <= 2.0 + 1e-9, "{lo}..{hi}");
        assert!(!Recovery {
            ping_s: f64::NAN,
            ..r
        }
        .possible());
        assert!(r.possible());
    }
}
