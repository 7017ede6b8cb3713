//! Per-stage aggregation: what every request adds, kept in a few shards so virtual users rarely
//! contend, and turned into a [`StageResult`](crate::record::StageResult) when the stage ends.

use super::client::{Exchange, Failure};
use crate::record::stage::{ErrorCounts, Latency, PhaseStat, Phases};
use hdrhistogram::Histogram;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SHARDS: usize = 8;
/// Histograms in microseconds, 1 µs to 1 h. Latency keeps 3 significant figures; the phases,
/// reported as mean and p95 only, keep 2 (a tenth of the memory).
const HIST_MAX_US: u64 = 3_600_000_000;

type Hist = Histogram<u32>;

fn hist_with(sigfig: u8) -> Hist {
    Histogram::new_with_bounds(1, HIST_MAX_US, sigfig).expect("static histogram bounds are valid")
}

fn hist() -> Hist {
    hist_with(3)
}

fn phase_hist() -> Hist {
    hist_with(2)
}

fn record(h: &mut Hist, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, HIST_MAX_US);
    let _ = h.record(us);
}

/// Everything one stage's steady window accumulates.
pub struct Agg {
    pub latency: Hist,
    pub blocked: Hist,
    pub connecting: Hist,
    pub tls: Hist,
    pub sending: Hist,
    pub waiting: Hist,
    pub receiving: Hist,
    pub requests: u64,
    pub ok: u64,
    pub errors: ErrorCounts,
    pub check_passes: Vec<u64>,
    pub check_fails: Vec<u64>,
    pub new_connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub warmup_requests: u64,
    /// Warm-up requests with no answer or a status ≥ 400: the error share of a stage that
    /// ended (interrupted) before its steady window had a request.
    pub warmup_failed: u64,
    /// Σ latency of the steady window's requests (s): batch means for the adaptive sweep.
    pub latency_sum_s: f64,
    /// Answers longer than the body n8ncap keeps, and those of them whose checks failed.
    pub bodies_cut: u64,
    pub checks_failed_on_cut_body: u64,
}

impl Agg {
    pub fn new(checks: usize) -> Agg {
        Agg {
            latency: hist(),
            blocked: phase_hist(),
            connecting: phase_hist(),
            tls: phase_hist(),
            sending: phase_hist(),
            waiting: phase_hist(),
            receiving: phase_hist(),
            requests: 0,
            ok: 0,
            errors: ErrorCounts::default(),
            check_passes: vec![0; checks],
            check_fails: vec![0; checks],
            new_connections: 0,
            bytes_sent: 0,
            bytes_received: 0,
            warmup_requests: 0,
            warmup_failed: 0,
            latency_sum_s: 0.0,
            bodies_cut: 0,
            checks_failed_on_cut_body: 0,
        }
    }

    pub fn merge(&mut self, o: &Agg) {
        self.latency_sum_s += o.latency_sum_s;
        for (a, b) in [
            (&mut self.latency, &o.latency),
            (&mut self.blocked, &o.blocked),
            (&mut self.connecting, &o.connecting),
            (&mut self.tls, &o.tls),
            (&mut self.sending, &o.sending),
            (&mut self.waiting, &o.waiting),
            (&mut self.receiving, &o.receiving),
        ] {
            let _ = a.add(b);
        }
        self.requests += o.requests;
        self.ok += o.ok;
        self.errors.merge(&o.errors);
        for (a, b) in self.check_passes.iter_mut().zip(&o.check_passes) {
            *a += b;
        }
        for (a, b) in self.check_fails.iter_mut().zip(&o.check_fails) {
            *a += b;
        }
        self.new_connections += o.new_connections;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.warmup_requests += o.warmup_requests;
        self.warmup_failed += o.warmup_failed;
        self.bodies_cut += o.bodies_cut;
        self.checks_failed_on_cut_body += o.checks_failed_on_cut_body;
    }

    /// Adds one request; its check outcomes go from `check_offset` on. A warm-up request is
    /// only counted.
    pub fn add(&mut self, s: &Sample<'_>, check_offset: usize, warm: bool) {
        if warm {
            self.warmup_requests += 1;
            if !matches!(&s.exchange.result, Ok((status, _)) if *status < 400) {
                self.warmup_failed += 1;
            }
            return;
        }
        self.add_outcome(s, check_offset);
        let ex = s.exchange;
        if ex.new_connection {
            self.new_connections += 1;
            record(&mut self.connecting, ex.connecting);
            if !ex.tls_handshaking.is_zero() {
                record(&mut self.tls, ex.tls_handshaking);
            }
        }
        record(&mut self.blocked, s.blocked);
        if ex.result.is_ok() {
            record(&mut self.sending, ex.sending);
            record(&mut self.waiting, ex.waiting);
            record(&mut self.receiving, ex.receiving);
        }
    }

    /// What a scenario's figures need of a request — outcome, latency, checks, bytes — without
    /// the phase histograms only the stage reports.
    pub fn add_outcome(&mut self, s: &Sample<'_>, check_offset: usize) {
        let a = self;
        let ex = s.exchange;
        a.requests += 1;
        a.bytes_sent = a.bytes_sent.saturating_add(ex.bytes_sent);
        a.bytes_received = a.bytes_received.saturating_add(ex.bytes_received);
        record(&mut a.latency, s.latency);
        a.latency_sum_s += s.latency.as_secs_f64();
        match &ex.result {
            Ok((status, body)) if *status >= 400 => {
                *a.errors.http_status.entry(*status).or_insert(0) += 1;
                if crate::record::stage::names_db_refusal(body) {
                    a.errors.db_refused += 1;
                }
            }
            Ok((_, body)) => {
                a.ok += 1;
                if crate::record::stage::names_no_data(body) {
                    a.errors.no_data += 1;
                }
            }
            Err(Failure::ConnectRefused) => a.errors.connect_refused += 1,
            Err(Failure::ConnectOther) => a.errors.connect_other += 1,
            Err(Failure::Tls) => a.errors.tls += 1,
            Err(Failure::Timeout) => a.errors.timeout += 1,
            Err(Failure::Io) => a.errors.io += 1,
        }
        let http_ok = matches!(&ex.result, Ok((st, _)) if *st < 400);
        let mut all_passed = true;
        for (i, passed) in s.checks.iter().enumerate() {
            let counts = if *passed {
                &mut a.check_passes
            } else {
                all_passed = false;
                &mut a.check_fails
            };
            if let Some(c) = counts.get_mut(check_offset + i) {
                *c += 1;
            }
        }
        if http_ok && !all_passed {
            a.errors.check_failed += 1;
        }
        if ex.body_cut {
            a.bodies_cut += 1;
            if !all_passed {
                a.checks_failed_on_cut_body += 1;
            }
        }
    }

    /// A copy (histograms included).
    pub fn clone_counts(&self) -> Agg {
        let mut c = Agg::new(self.check_passes.len());
        c.merge(self);
        c
    }

    pub fn latency_summary(&self) -> Option<Latency> {
        summarize(&self.latency)
    }

    pub fn phases(&self) -> Phases {
        let p = |h: &Hist| PhaseStat {
            mean_ms: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            p95_ms: if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(0.95) as f64 / 1000.0
            },
        };
        Phases {
            blocked: p(&self.blocked),
            connecting: p(&self.connecting),
            tls_handshaking: p(&self.tls),
            sending: p(&self.sending),
            waiting: p(&self.waiting),
            receiving: p(&self.receiving),
        }
    }
}

pub fn summarize(h: &Hist) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    let ms = |v: u64| v as f64 / 1000.0;
    Some(Latency {
        mean_ms: h.mean() / 1000.0,
        min_ms: ms(h.min()),
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p95_ms: ms(h.value_at_quantile(0.95)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
    })
}

/// One request as the virtual user saw it, with its check outcomes.
pub struct Sample<'a> {
    pub exchange: &'a Exchange,
    pub blocked: Duration,
    pub latency: Duration,
    /// Per check: passed?
    pub checks: &'a [bool],
}

/// An open-model window's books (see [`StageRecorder::flow`]).
#[derive(Debug, Clone, Default)]
pub struct FlowBooks {
    pub arrivals: u64,
    /// Arrivals the client could not send (every VU busy), in the window.
    pub dropped: u64,
    pub completions: u64,
    pub good_completions: u64,
    pub backlog_start: u64,
    pub backlog_end: u64,
    /// Window arrivals answered after it, or never.
    pub late: u64,
    /// Arrivals never answered (the drain bound ran out).
    pub unanswered: u64,
    /// When each completion happened, s after the window's start.
    pub completion_offsets: Vec<f64>,
}

/// The collector of one stage. Requests that complete before `warmup_until` are only counted.
pub struct StageRecorder {
    pub started: Instant,
    pub warmup_until: Instant,
    shards: Vec<Mutex<Agg>>,
    /// One per scenario when the profile mixes several (each with its own checks).
    scenarios: Vec<Mutex<Agg>>,
    dropped: std::sync::atomic::AtomicU64,
    /// Open model: each arrival's intended start (s after `started`), and each answered one's
    /// (intended start, answer, good) — the books of arrivals, completions and backlog.
    arrivals: Mutex<Vec<f32>>,
    answered: Mutex<Vec<(f32, f32, bool)>>,
    /// Closed once the stage is read: a request is recorded in its shard and its scenario
    /// together or not at all, so the scenarios add up to the stage.
    closed: std::sync::RwLock<bool>,
}

impl StageRecorder {
    /// `scenario_checks`: the checks of each scenario of a mix (empty for one request).
    pub fn new(
        started: Instant,
        warmup: Duration,
        checks: usize,
        scenario_checks: &[usize],
    ) -> StageRecorder {
        StageRecorder {
            started,
            warmup_until: started + warmup,
            shards: (0..SHARDS).map(|_| Mutex::new(Agg::new(checks))).collect(),
            scenarios: scenario_checks
                .iter()
                .map(|n| Mutex::new(Agg::new(*n)))
                .collect(),
            dropped: std::sync::atomic::AtomicU64::new(0),
            arrivals: Mutex::new(Vec::new()),
            answered: Mutex::new(Vec::new()),
            closed: std::sync::RwLock::new(false),
        }
    }

    /// Takes no more requests (those being recorded finish first).
    pub fn close(&self) {
        match self.closed.write() {
            Ok(mut c) => *c = true,
            Err(p) => *p.into_inner() = true,
        }
    }

    fn offset(&self, t: Instant) -> f32 {
        t.saturating_duration_since(self.started).as_secs_f32()
    }

    /// Open model: an arrival sent, intended at `intended`.
    pub fn arrived(&self, intended: Instant) {
        let t = self.offset(intended);
        if let Ok(mut a) = self.arrivals.lock() {
            a.push(t);
        }
    }

    /// Open model: an arrival answered now (`good`: not failed and its checks passed).
    pub fn answered(&self, intended: Instant, good: bool) {
        self.answered_at(intended, Instant::now(), good)
    }

    fn answered_at(&self, intended: Instant, at: Instant, good: bool) {
        let open = self.closed.read().map(|c| !*c).unwrap_or(false);
        if !open {
            return;
        }
        let (i, c) = (self.offset(intended), self.offset(at));
        if let Ok(mut a) = self.answered.lock() {
            a.push((i, c, good));
        }
    }

    /// Open model: the window's books, or None when nothing arrived. `w0`, `w1`: the window;
    /// an arrival not answered by the time the stage was read counts as still in the backlog.
    pub fn flow(&self, w0: Instant, w1: Instant, dropped: u64) -> Option<FlowBooks> {
        let (w0, w1) = (self.offset(w0), self.offset(w1));
        let arrivals = self.arrivals.lock().ok()?.clone();
        let answered = self.answered.lock().ok()?.clone();
        if arrivals.is_empty() {
            return None;
        }
        let sent_before = |t: f32| arrivals.iter().filter(|a| **a < t).count() as u64;
        let done_before = |t: f32| answered.iter().filter(|a| a.1 < t).count() as u64;
        let completed: Vec<&(f32, f32, bool)> =
            answered.iter().filter(|a| a.1 >= w0 && a.1 < w1).collect();
        Some(FlowBooks {
            arrivals: arrivals.iter().filter(|a| **a >= w0 && **a < w1).count() as u64,
            dropped,
            completions: completed.len() as u64,
            good_completions: completed.iter().filter(|a| a.2).count() as u64,
            backlog_start: sent_before(w0) - done_before(w0),
            backlog_end: sent_before(w1) - done_before(w1),
            late: answered
                .iter()
                .filter(|a| a.0 >= w0 && a.0 < w1 && a.1 >= w1)
                .count() as u64
                + (arrivals.len() - answered.len()) as u64,
            unanswered: (arrivals.len() - answered.len()) as u64,
            completion_offsets: completed.iter().map(|a| (a.1 - w0) as f64).collect(),
        })
    }

    pub fn add_dropped(&self, n: u64) {
        self.dropped
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records one request of scenario `scenario`, whose checks start at `check_offset` in the
    /// stage's list.
    pub fn record(
        &self,
        shard: usize,
        (scenario, check_offset): (usize, usize),
        s: &Sample<'_>,
        now: Instant,
    ) {
        let Ok(closed) = self.closed.read() else {
            return;
        };
        if *closed {
            return;
        }
        let warm = now < self.warmup_until;
        if let Ok(mut a) = self.shards[shard % SHARDS].lock() {
            a.add(s, check_offset, warm);
        }
        if let (false, Some(Ok(mut a))) = (warm, self.scenarios.get(scenario).map(|m| m.lock())) {
            a.add_outcome(s, 0);
        }
    }

    /// Each scenario's aggregate (empty for a one-request profile).
    pub fn scenario_totals(&self) -> Vec<Agg> {
        self.scenarios
            .iter()
            .map(|m| match m.lock() {
                Ok(a) => a.clone_counts(),
                Err(p) => p.into_inner().clone_counts(),
            })
            .collect()
    }

    /// Steady-window requests so far, the good ones, and their latency sum (s) — cheap enough
    /// to read a few times a second.
    pub fn progress(&self) -> (u64, u64, f64) {
        let mut out = (0, 0, 0.0);
        for s in &self.shards {
            if let Ok(a) = s.lock() {
                out.0 += a.requests;
                out.1 += a.ok.saturating_sub(a.errors.check_failed);
                out.2 += a.latency_sum_s;
            }
        }
        out
    }

    /// Merges the shards.
    pub fn total(&self, checks: usize) -> Agg {
        let mut total = Agg::new(checks);
        for s in &self.shards {
            if let Ok(a) = s.lock() {
                total.merge(&a);
            }
        }
        total
    }
}

impl ErrorCounts {
    pub fn merge(&mut self, o: &ErrorCounts) {
        self.connect_refused += o.connect_refused;
        self.connect_other += o.connect_other;
        self.tls += o.tls;
        self.timeout += o.timeout;
        self.io += o.io;
        self.check_failed += o.check_failed;
        self.db_refused += o.db_refused;
        self.no_data += o.no_data;
        for (k, v) in &o.http_status {
            *self.http_status.entry(*k).or_insert(0) += v;
        }
    }

    /// Requests that failed at the HTTP level (k6's `http_req_failed`): no response or status ≥ 400.
    pub fn http_failed(&self) -> u64 {
        self.connect_refused
            + self.connect_other
            + self.tls
            + self.timeout
            + self.io
            + self.http_status.values().sum::<u64>()
    }
}

/// Batches a window is cut into for the throughput's interval.
const BATCHES: usize = 6;

/// The throughput's 95 % interval over a window: batch means of the good starts (k6's series
/// and n8ncap's own sweeps alike), widened by the one response per user an edge can cut; with
/// batches shorter than two ticks of the clock (`resolution`, s), the counting interval.
pub fn interval(
    starts: &[f64],
    (w0, w1): (f64, f64),
    x: f64,
    good_share: f64,
    n_users: f64,
    resolution: f64,
) -> [f64; 2] {
    let len = w1 - w0;
    let n = starts.len() as f64;
    if n < 2.0 || len <= 0.0 {
        return [x, x];
    }
    let half_edge = x * n_users / n / 2.0;
    // Batches shorter than two ticks of the file's clock measure the clock: then the counting
    // (Poisson) interval.
    let k = ((len / (2.0 * resolution).max(0.5)) as usize).min(BATCHES);
    if k < 3 {
        let half = (1.96 * x / n.sqrt()).hypot(half_edge);
        return [(x - half).max(0.0), x + half];
    }
    let mut counts = vec![0f64; k];
    for t in starts {
        let i = (((t - w0) / len * k as f64) as usize).min(k - 1);
        counts[i] += 1.0;
    }
    let rates: Vec<f64> = counts
        .iter()
        .map(|c| c / (len / k as f64) * good_share)
        .collect();
    let e = crate::record::Estimate::of(&rates);
    let half_batch = (e.high - e.low) / 2.0;
    let half = (half_batch.powi(2) + half_edge.powi(2)).sqrt();
    [(x - half).max(0.0), x + half]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    /// 10 arrivals a second for 10 s (1 s warm-up) into a server that answers one per 0.17 s, in
    /// order: completions are its 5.9/s, the rest is the backlog, and the books balance.
    #[test]
    fn requests_that_finish_after_the_window_are_its_backlog() {
        let t0 = Instant::now();
        let rec = StageRecorder::new(t0, Duration::from_secs(1), 0, &[]);
        let mut free = 0.0f64;
        let (mut late, mut never) = (0, 0);
        for k in 0..100 {
            // Off the window's edges, so f32 offsets cannot round across them.
            let arrive = 0.05 + k as f64 * 0.1;
            free = free.max(arrive) + 0.17;
            rec.arrived(at(t0, arrive));
            // Only what was answered before the stage was read (at 14 s) is on the books.
            if free < 14.0 {
                rec.answered_at(at(t0, arrive), at(t0, free), true);
            } else {
                never += 1;
            }
            if arrive >= 1.0 && free >= 10.0 {
                late += 1;
            }
        }
        let b = rec.flow(at(t0, 1.0), at(t0, 10.0), 0).unwrap();
        assert_eq!(b.arrivals, 90);
        assert!(
            (b.completions as f64 / 9.0 - 1.0 / 0.17).abs() < 0.2,
            "{b:?}"
        );
        assert_eq!(
            b.arrivals as i64 - b.completions as i64,
            b.backlog_end as i64 - b.backlog_start as i64
        );
        // Window arrivals answered after it or never (the stage was read at 14 s) are late.
        assert_eq!(b.late, late);
        assert!(never >= 10);
        assert_eq!(b.unanswered, never);
        assert_eq!(b.completion_offsets.len() as u64, b.completions);
    }

    /// A stage that starts with the last one's backlog still running: its books start with it.
    #[test]
    fn a_stage_inheriting_a_backlog_starts_its_books_with_it() {
        let t0 = Instant::now();
        let rec = StageRecorder::new(t0, Duration::from_secs(2), 0, &[]);
        // 20 arrivals in the warm-up, answered only after the window opened.
        for k in 0..20 {
            let arrive = k as f64 * 0.1;
            rec.arrived(at(t0, arrive));
            rec.answered_at(at(t0, arrive), at(t0, 2.5 + k as f64 * 0.05), k % 4 != 0);
        }
        let b = rec.flow(at(t0, 2.0), at(t0, 6.0), 0).unwrap();
        assert_eq!((b.arrivals, b.backlog_start, b.backlog_end), (0, 20, 0));
        assert_eq!((b.completions, b.good_completions), (20, 15));
        assert_eq!(b.late, 0);
    }
}
