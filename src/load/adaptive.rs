//! The adaptive sweep's decisions, kept pure so they are tested without a server: which level
//! to run next (baseline, geometric growth until saturated, refinement of the knee, on to the
//! failure point), how long a level warms up, and when a level is steady enough to stop.
//!
//! Saturation is the diagnosis' rule (`model::saturated`: R̄ > 1.3 S, or jobs waited in Redis).
//! The knee is the smallest level at the ceiling: throughput within 5 % of the best saturated
//! level's. Little's law gives its first estimate — X_max × S executions in progress — and the
//! search brackets it until the bracket is within ±10 %.

use crate::model;

/// What a finished level showed, as the search needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    pub in_flight: u32,
    pub throughput: f64,
    pub mean_response_s: f64,
    /// Jobs waited in Redis (queue gauges or LLEN): every slot was taken.
    pub waited_in_redis: bool,
    /// The gauges read jobs waiting where none can have waited (no slot taken while
    /// completions ran, or 1 in flight): a stale reading, or a scale step's job left behind.
    pub stale_wait: bool,
    /// Invalid, or a threshold failed.
    pub failed: bool,
}

/// What the search wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// `count_slots`: a short level past every slot, run only for the queue gauges to count
    /// the workers' slots (its throughput is not the point).
    Run {
        in_flight: u32,
        why: String,
        count_slots: bool,
    },
    Stop {
        why: String,
    },
}

pub use crate::record::stage::{SearchStep, StageEnd};

/// Throughput within this share of the best saturated level's counts as at the ceiling.
pub const AT_CEILING: f64 = 0.95;
/// The knee is located when the bracket around it is this narrow (±10 %).
pub const KNEE_PRECISION: f64 = 0.10;

/// Batches before a level's interval is trusted: Student's t with 3 degrees of freedom (3.18)
/// already widens the interval of so few; a noisy level needs many more to be narrow anyway.
pub const MIN_BATCHES: usize = 4;

/// Load growth until the first saturated level, and past the knee towards the failure point.
const GROWTH: f64 = 2.0;
const GROWTH_PAST_KNEE: f64 = 1.5;

#[derive(Debug, Clone)]
pub struct Search {
    pub max_vus: u32,
    pub to_failure: bool,
    /// Jobs waiting in Redis are observed at a fine grain (queue gauges refreshed often, or
    /// `--redis`): a level past every slot then counts the workers' slots.
    pub counts_slots: bool,
    /// Tried once after the baseline while no level is saturated, instead of doubling up to
    /// it: a scale sweep's knee at the previous count × this count's workers ÷ that count's.
    pub head_start: Option<u32>,
    pub seen: Vec<Seen>,
}

impl Search {
    pub fn new(max_vus: u32, to_failure: bool) -> Search {
        Search {
            max_vus: max_vus.max(1),
            to_failure,
            counts_slots: false,
            head_start: None,
            seen: Vec::new(),
        }
    }

    /// The service time: the mean response at 1 in flight.
    pub fn service_time(&self) -> Option<f64> {
        self.seen
            .iter()
            .find(|l| l.in_flight == 1 && !l.failed)
            .map(|l| l.mean_response_s)
    }

    /// A level at 1 in flight saturates nothing (X × S is 1 by definition: its one job waits
    /// for no other); a gauge that read a job waiting there is stale or another's.
    fn saturated(&self, l: &Seen, s: f64) -> bool {
        !l.failed
            && l.in_flight > 1
            && (l.waited_in_redis || model::saturated(l.mean_response_s, s))
    }

    /// The best throughput of a saturated level: the capacity.
    pub fn ceiling_found(&self) -> Option<f64> {
        let s = self.service_time()?;
        self.seen
            .iter()
            .filter(|l| self.saturated(l, s))
            .map(|l| l.throughput)
            .max_by(f64::total_cmp)
    }

    fn at_ceiling(&self, l: &Seen, s: f64, x_max: f64) -> bool {
        !l.failed && (self.saturated(l, s) || l.throughput >= AT_CEILING * x_max)
    }

    /// (largest level below the ceiling, smallest level at it), once a level is saturated.
    pub fn bracket(&self) -> Option<(u32, u32)> {
        let s = self.service_time()?;
        let x_max = self.ceiling_found()?;
        let hi = self
            .seen
            .iter()
            .filter(|l| self.at_ceiling(l, s, x_max))
            .map(|l| l.in_flight)
            .min()?;
        let lo = self
            .seen
            .iter()
            .filter(|l| !l.failed && l.in_flight < hi && !self.at_ceiling(l, s, x_max))
            .map(|l| l.in_flight)
            .max()
            .unwrap_or(1);
        Some((lo, hi))
    }

    /// The knee when the bracket is narrow enough: the smallest level measured at the ceiling.
    pub fn knee(&self) -> Option<u32> {
        let (lo, hi) = self.bracket()?;
        (hi - lo <= ((KNEE_PRECISION * hi as f64).floor() as u32).max(1)).then_some(hi)
    }

    fn tried(&self, n: u32) -> bool {
        self.seen.iter().any(|l| l.in_flight == n)
    }

    pub fn next(&self) -> Decision {
        let d = self.decide();
        match (self.seen.last(), d) {
            (Some(l), Decision::Run { in_flight, why, count_slots }) if l.stale_wait => Decision::Run {
                in_flight,
                why: format!(
                    "the queue read jobs waiting at {} in flight with no slot taken (a stale reading, or a scale step's job): not saturation; {why}",
                    l.in_flight
                ),
                count_slots,
            },
            (_, d) => d,
        }
    }

    fn decide(&self) -> Decision {
        let Some(last) = self.seen.last() else {
            return run(1, "baseline: the service time S at 1 in flight");
        };
        let Some(s) = self.service_time() else {
            return stop("the baseline at 1 in flight failed: fix the failures first");
        };
        if last.failed {
            return stop(&format!(
                "thresholds failed at {} in flight: the failure break point",
                last.in_flight
            ));
        }
        let top = self.seen.iter().map(|l| l.in_flight).max().unwrap_or(1);
        let Some(x_max) = self.ceiling_found() else {
            if let Some(h) = self.head_start.map(|h| h.min(self.max_vus)) {
                if h > top && !self.tried(h) {
                    return run(
                        h,
                        "head start: the previous worker count's knee, scaled to this count",
                    );
                }
            }
            return self.grow(top, "no level saturated yet");
        };
        if let Some(k) = self.knee() {
            let waited = self.seen.iter().any(|l| l.waited_in_redis && !l.failed);
            if !self.to_failure && self.counts_slots && !waited && top < 2 * k && top < self.max_vus
            {
                let n = (2 * top).min(self.max_vus);
                return Decision::Run {
                    in_flight: n,
                    why: format!(
                        "knee at {k}; no job has waited in Redis, so the workers' slots are only \
                         known to be at least the jobs in flight: {n} in flight to count them"
                    ),
                    count_slots: true,
                };
            }
            if !self.to_failure {
                return stop(&format!(
                    "knee located: {k} in flight (±{:.0} %), {x_max:.2} req/s at the ceiling",
                    KNEE_PRECISION * 100.0
                ));
            }
            return self.grow(top, &format!("knee at {k}; on to the failure point"));
        }
        self.refine(s, x_max)
    }

    /// Geometric growth from the top level, bounded by `max_vus`.
    fn grow(&self, top: u32, why: &str) -> Decision {
        if top >= self.max_vus {
            return stop(&format!(
                "{why} up to --max-vus {}: {}",
                self.max_vus,
                if self.to_failure && self.ceiling_found().is_some() {
                    "no threshold failed"
                } else {
                    "the ceiling was not reached"
                }
            ));
        }
        let growth = if self.ceiling_found().is_some() {
            GROWTH_PAST_KNEE
        } else {
            GROWTH
        };
        let n = ((top as f64 * growth).ceil() as u32).max(top + 1);
        run(n.min(self.max_vus), &format!("{why}: grow ×{growth}"))
    }

    /// Narrow the bracket: Little's estimate of the knee (X_max × S) when it lies inside; else
    /// the lowest level that would locate the knee if it is below the ceiling (10 % under the
    /// bracket's top); else the middle.
    fn refine(&self, s: f64, x_max: f64) -> Decision {
        let Some((lo, hi)) = self.bracket() else {
            return stop("no bracket around the knee");
        };
        let estimate = (x_max * s).round() as u32;
        let just_under = hi - ((KNEE_PRECISION * hi as f64).floor() as u32).max(1);
        let inside = |n: u32| n > lo && n < hi && !self.tried(n);
        let mut n = if inside(estimate) {
            estimate
        } else if inside(just_under) {
            just_under
        } else {
            lo + (hi - lo) / 2
        };
        if self.tried(n) || n <= lo || n >= hi {
            n = (lo + 1..hi).find(|c| !self.tried(*c)).unwrap_or(hi);
        }
        if self.tried(n) {
            return stop(&format!("knee between {lo} and {hi} in flight"));
        }
        run(
            n,
            &format!(
                "refine the knee between {lo} and {hi} (Little's law puts it near X_max × S = {:.1})",
                x_max * s
            ),
        )
    }
}

fn run(in_flight: u32, why: &str) -> Decision {
    Decision::Run {
        in_flight,
        why: why.to_string(),
        count_slots: false,
    }
}

fn stop(why: &str) -> Decision {
    Decision::Stop {
        why: why.to_string(),
    }
}

impl Search {
    /// While the knee is being refined, the throughput that decides a level's side: 95 % of the
    /// ceiling. A level may end as soon as its interval lies wholly on one side of it.
    pub fn settle_threshold(&self) -> Option<f64> {
        let x_max = self.ceiling_found()?;
        self.knee().is_none().then_some(AT_CEILING * x_max)
    }

    /// Warm-up of level `n`: every virtual user has had one answer at the new load — 1.5 × the
    /// response the level should have, at least 0.5 s. Past the ceiling that is N ÷ X_max;
    /// below it the response stays near S, so the last level's response (contention included).
    pub fn warmup_s(&self, n: u32) -> f64 {
        let s = self.service_time().unwrap_or(0.0);
        let r = match self.ceiling_found() {
            Some(x_max) if x_max > 0.0 => (n as f64 / x_max).max(s),
            _ => self
                .seen
                .last()
                .map(|l| l.mean_response_s)
                .unwrap_or(s)
                .max(s),
        };
        (1.5 * r).max(0.5)
    }
}

/// Batch means of closed-model throughput (Little's law per batch: N ÷ mean latency × good
/// share): a batch closes once it holds `min_requests` completions.
#[derive(Debug, Clone, Default)]
pub struct Batches {
    pub means: Vec<f64>,
    open: (u64, u64, f64),
    min_requests: u64,
}

impl Batches {
    pub fn new(min_requests: u64) -> Batches {
        Batches {
            min_requests: min_requests.max(1),
            ..Default::default()
        }
    }

    /// Adds completions since the last call: requests, good ones, their latency sum (s).
    pub fn add(&mut self, n: u32, requests: u64, good: u64, latency_sum_s: f64) {
        self.open.0 += requests;
        self.open.1 += good;
        self.open.2 += latency_sum_s;
        let (r, g, l) = self.open;
        if r >= self.min_requests && l > 0.0 {
            self.means
                .push(n as f64 / (l / r as f64) * g as f64 / r as f64);
            self.open = (0, 0, 0.0);
        }
    }

    /// Relative half-width of the 95 % interval of the mean (Student's t), from
    /// [`MIN_BATCHES`] batches on.
    pub fn relative_half_width(&self) -> Option<f64> {
        let e = self.interval()?;
        (e.mean > 0.0).then(|| (e.high - e.mean) / e.mean)
    }

    /// The 95 % interval of the mean throughput (Student's t), from [`MIN_BATCHES`] batches on.
    pub fn interval(&self) -> Option<crate::record::Estimate> {
        (self.means.len() >= MIN_BATCHES).then(|| crate::record::Estimate::of(&self.means))
    }

    /// The interval lies wholly above or below `threshold`.
    pub fn settled(&self, threshold: f64) -> bool {
        self.interval()
            .is_some_and(|e| e.low > threshold || e.high < threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stack: knee at `k` in flight, X_max = k ÷ S.
    fn measure(n: u32, k: u32, s: f64) -> Seen {
        let x_max = k as f64 / s;
        let x = (n as f64 / s).min(x_max);
        Seen {
            in_flight: n,
            throughput: x,
            mean_response_s: n as f64 / x,
            waited_in_redis: false,
            stale_wait: false,
            failed: false,
        }
    }

    fn search(k: u32, s: f64, max_vus: u32) -> (Search, Vec<String>) {
        let mut search = Search::new(max_vus, false);
        let mut trace = Vec::new();
        for _ in 0..40 {
            match search.next() {
                Decision::Run { in_flight, why, .. } => {
                    trace.push(format!("{in_flight}: {why}"));
                    search.seen.push(measure(in_flight, k, s));
                }
                Decision::Stop { why } => {
                    trace.push(why);
                    break;
                }
            }
        }
        (search, trace)
    }

    /// A Docker scale sweep at 3 workers: the baseline (1 in flight, 1.94/s) read main's gauge
    /// as 1 job waiting and none active, and the search stopped on "knee located: 1 in flight".
    /// A first level is no knee: the search grows.
    #[test]
    fn a_job_waiting_at_the_baseline_is_no_knee() {
        let mut search = Search::new(64, false);
        search.seen.push(Seen {
            in_flight: 1,
            throughput: 1.94,
            mean_response_s: 0.515,
            waited_in_redis: true,
            stale_wait: true,
            failed: false,
        });
        assert_eq!(search.ceiling_found(), None);
        match search.next() {
            Decision::Run { in_flight, why, .. } => {
                assert_eq!(in_flight, 2);
                assert!(why.contains("stale"), "{why}");
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn finds_the_knee_within_ten_percent_in_few_levels() {
        for (k, s) in [(10u32, 0.5), (15, 0.2), (37, 1.0), (3, 0.3), (120, 0.05)] {
            let (sr, trace) = search(k, s, 1000);
            let knee = sr.knee().unwrap_or_else(|| panic!("k={k}: {trace:?}"));
            assert!(
                (knee as f64 - k as f64).abs() <= 0.1 * k as f64 + 1.0,
                "k={k}: knee {knee}, {trace:?}"
            );
            assert!(
                sr.seen.len() <= 12,
                "k={k}: {} levels: {trace:?}",
                sr.seen.len()
            );
        }
    }

    /// A scale sweep's head start (the previous knee × the workers' ratio × 1.5) finds the same
    /// knee within 10 % in fewer levels than doubling from 1; a head start past a ceiling that
    /// did not grow (main's intake) still brackets it.
    #[test]
    fn a_head_start_finds_the_knee_in_fewer_levels() {
        for (k, s, hint) in [
            (40u32, 1.0, 60u32),
            (20, 1.0, 60),
            (37, 0.5, 45),
            (160, 1.0, 240),
        ] {
            let (plain, _) = search(k, s, 1000);
            let mut sr = Search::new(1000, false);
            sr.head_start = Some(hint);
            while let Decision::Run { in_flight, .. } = sr.next() {
                sr.seen.push(measure(in_flight, k, s));
                assert!(sr.seen.len() < 40);
            }
            let knee = sr.knee().unwrap();
            assert!(
                (knee as f64 - k as f64).abs() <= 0.1 * k as f64 + 1.0,
                "k={k}: knee {knee}"
            );
            assert!(
                sr.seen.len() < plain.seen.len(),
                "k={k}: {} levels with the head start, {} without",
                sr.seen.len(),
                plain.seen.len()
            );
            assert_eq!(sr.seen[1].in_flight, hint);
        }
    }

    #[test]
    fn a_stack_that_never_saturates_says_so_at_max_vus() {
        let (sr, trace) = search(500, 0.2, 40);
        assert!(sr.knee().is_none());
        assert_eq!(sr.seen.last().unwrap().in_flight, 40);
        assert!(trace.last().unwrap().contains("not reached"), "{trace:?}");
    }

    #[test]
    fn to_failure_keeps_raising_and_stops_at_the_first_failure() {
        let mut sr = Search::new(1000, true);
        let mut levels = Vec::new();
        while let Decision::Run { in_flight, .. } = sr.next() {
            let mut seen = measure(in_flight, 10, 0.5);
            seen.failed = in_flight >= 60;
            levels.push(in_flight);
            sr.seen.push(seen);
            assert!(levels.len() < 30);
        }
        assert!(*levels.last().unwrap() >= 60);
        assert_eq!(levels.iter().filter(|n| **n >= 60).count(), 1);
    }

    #[test]
    fn a_closing_level_counts_the_slots_when_no_job_waited() {
        // Runner-capped at 21 in flight; 60 worker slots; the queue is observed.
        let slots = 60;
        let mut sr = Search::new(120, false);
        sr.counts_slots = true;
        let mut counted = Vec::new();
        while let Decision::Run {
            in_flight,
            count_slots,
            ..
        } = sr.next()
        {
            let mut seen = measure(in_flight, 21, 1.0);
            seen.waited_in_redis = in_flight > slots;
            if count_slots {
                counted.push(in_flight);
            }
            sr.seen.push(seen);
            assert!(sr.seen.len() < 20);
        }
        assert_eq!(counted.len(), 1, "{:?}", sr.seen);
        assert!(counted[0] > slots, "{counted:?}");
        assert!(sr.seen.iter().any(|l| l.waited_in_redis));
        // Without queue data no such level runs.
        let (plain, _) = search(21, 1.0, 120);
        assert!(plain.seen.iter().all(|l| l.in_flight < 2 * 21 + 22));
    }

    #[test]
    fn a_refining_level_settles_once_its_interval_is_on_one_side() {
        let mut b = Batches::new(10);
        for x in [20.0, 20.4, 19.6, 20.2, 19.8] {
            b.add(10, 10, 10, 10.0 * 10.0 / x);
        }
        assert!(b.settled(18.0) && b.settled(22.0));
        assert!(!b.settled(20.0));
        let mut sr = Search::new(100, false);
        sr.seen.push(measure(1, 10, 0.5));
        assert_eq!(sr.settle_threshold(), None);
        sr.seen.push(measure(16, 10, 0.5));
        assert!((sr.settle_threshold().unwrap() - 0.95 * 20.0).abs() < 1e-9);
    }

    #[test]
    fn batches_give_an_interval_and_warmup_follows_the_response() {
        let mut b = Batches::new(10);
        for i in 0..8 {
            // 10 in flight, 0.5 s ± a little: 20 req/s.
            let lat = 0.5 + if i % 2 == 0 { 0.005 } else { -0.005 };
            b.add(10, 10, 10, 10.0 * lat);
        }
        assert_eq!(b.means.len(), 8);
        let hw = b.relative_half_width().unwrap();
        assert!(hw < 0.01, "{hw}");
        let mut sr = Search::new(100, false);
        assert_eq!(sr.warmup_s(1), 0.5);
        sr.seen.push(measure(1, 10, 0.5));
        sr.seen.push(measure(8, 10, 0.5));
        // Below the ceiling: the last response (S).
        assert!((sr.warmup_s(16) - 0.75).abs() < 1e-9);
        sr.seen.push(measure(40, 10, 0.5));
        // Past it: 40 ÷ X_max (20/s) = 2 s.
        assert!((sr.warmup_s(40) - 3.0).abs() < 1e-9);
    }
}
