//! Counters into rates between two rounds (CPU seconds, runner tasks requested), held to what
//! the cores allow.

use super::*;
use crate::error::Implausible;

/// The per-second rate of a counter since the previous reading.
pub(super) fn counter_rate(
    prev: &mut Option<(f64, Instant)>,
    cur: Option<f64>,
    now: Instant,
) -> Option<f64> {
    let cur = cur?;
    let r = prev.and_then(|(p, pt)| {
        let dt = now.duration_since(pt).as_secs_f64();
        (dt > 0.0 && cur >= p).then(|| (cur - p) / dt)
    });
    *prev = Some((cur, now));
    r
}

/// The most cores a process at `url` can use and be believed: this machine's (a quarter more
/// for the sampling's jitter) when the endpoint is on loopback, else 256 (no host is bigger
/// here, and a counter that jumps between two processes implies thousands).
pub(super) fn most_cores(url: &str) -> f64 {
    if crate::wire::url::is_loopback_url(url) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        cores * 1.25 + 0.25
    } else {
        256.0
    }
}

/// Cores a process used since its last reading, from `process_cpu_seconds_total`: Err when
/// the reading cannot be true — the counter fell (the process restarted, or two processes
/// answer at one URL behind a load balancer) or it implies more than `max_cores`.
pub(super) fn cpu_rate(
    prev: &mut Option<(f64, Instant)>,
    cur: Option<f64>,
    now: Instant,
    max_cores: f64,
) -> Result<Option<f64>, Implausible> {
    let Some(cur) = cur else { return Ok(None) };
    if !(cur.is_finite() && cur >= 0.0) {
        return Err(format!(
            "process_cpu_seconds_total is {cur}: a CPU counter is a finite number of seconds"
        )
        .into());
    }
    let last = prev.replace((cur, now));
    let Some((p, pt)) = last else { return Ok(None) };
    let dt = now.duration_since(pt).as_secs_f64();
    if dt <= 0.0 {
        return Ok(None);
    }
    if cur < p {
        return Err(format!(
            "process_cpu_seconds_total fell from {p:.2} to {cur:.2}: the process restarted, or \
             two processes answer at this URL (a load balancer): no CPU figure for this interval"
        )
        .into());
    }
    let cores = (cur - p) / dt;
    if cores > max_cores {
        return Err(format!(
            "process_cpu_seconds_total rose {:.2} s in {dt:.2} s: {cores:.1} cores, more than \
             the {max_cores:.1} a process there can use",
            cur - p
        )
        .into());
    }
    Ok(Some(cores))
}
