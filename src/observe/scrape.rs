//! Fetching `/metrics` and reading n8n's queue gauges from it.

use crate::wire::http::http_get;
use crate::wire::prometheus::{self, Exposition};
use std::time::Duration;

/// Scrapes and parses one endpoint.
pub async fn scrape(url: &str, timeout: Duration) -> anyhow::Result<Exposition> {
    let (status, body) = http_get(url, timeout).await?;
    if status != 200 {
        anyhow::bail!("{url} answered HTTP {status} (is N8N_METRICS=true set?)");
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| anyhow::anyhow!("{url} answered with text that is not UTF-8"))?;
    prometheus::parse(text).map_err(|e| anyhow::anyhow!("{url} is not Prometheus text: {e}"))
}

/// The most jobs a queue gauge or a Redis list can hold and be believed: more executions than
/// any n8n deployment runs or n8ncap can drive (its in-flight cap).
pub const MAX_JOBS: f64 = crate::record::stage::MAX_IN_FLIGHT as f64;

/// Why a count of jobs (a queue gauge, a Redis `LLEN`) cannot be true, or None when it can:
/// finite, not negative, at most [`MAX_JOBS`].
pub fn implausible_jobs(what: &str, v: f64) -> Option<String> {
    if !v.is_finite() {
        Some(format!("{what} is {v}: a count of jobs is a finite number"))
    } else if v < 0.0 {
        Some(format!("{what} is {v}: a count of jobs is not negative"))
    } else if v > MAX_JOBS {
        Some(format!(
            "{what} is {v:e}: more jobs than any deployment holds (at most {MAX_JOBS:e} believed)"
        ))
    } else {
        None
    }
}

/// The queue gauges, each checked: Err with the reason when one cannot be true (a gap, never a
/// figure), Ok(None) when main does not expose them.
pub fn queue_gauges_checked(e: &Exposition, prefix: &str) -> Result<Option<QueueGauges>, String> {
    let Some(q) = queue_gauges(e, prefix) else {
        return Ok(None);
    };
    for (name, v) in [("active", q.active), ("waiting", q.waiting)] {
        if let Some(why) = implausible_jobs(&format!("{prefix}scaling_mode_queue_jobs_{name}"), v) {
            return Err(why);
        }
    }
    Ok(Some(q))
}

/// The queue gauges n8n main exposes (`N8N_METRICS_INCLUDE_QUEUE_METRICS=true`), prefix aware.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGauges {
    /// `scaling_mode_queue_jobs_active`: worker slots taken (not runner tasks running).
    pub active: f64,
    /// `scaling_mode_queue_jobs_waiting`: jobs in Redis no worker has taken.
    pub waiting: f64,
    pub completed: Option<f64>,
    pub failed: Option<f64>,
}

pub fn queue_gauges(e: &Exposition, prefix: &str) -> Option<QueueGauges> {
    let g = |n: &str| e.value(&format!("{prefix}scaling_mode_queue_jobs_{n}"));
    Some(QueueGauges {
        active: g("active")?,
        waiting: g("waiting")?,
        completed: g("completed"),
        failed: g("failed"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(active: &str, waiting: &str) -> Exposition {
        prometheus::parse(&format!(
            "# TYPE n8n_scaling_mode_queue_jobs_active gauge\nn8n_scaling_mode_queue_jobs_active {active}\n\
             # TYPE n8n_scaling_mode_queue_jobs_waiting gauge\nn8n_scaling_mode_queue_jobs_waiting {waiting}\n"
        ))
        .unwrap()
    }

    #[test]
    fn impossible_queue_gauges_are_gaps_not_figures() {
        let q = queue_gauges_checked(&page("15", "3"), "n8n_")
            .unwrap()
            .unwrap();
        assert_eq!((q.active, q.waiting), (15.0, 3.0));
        for (a, w) in [
            ("NaN", "0"),
            ("15", "+Inf"),
            ("-100", "0"),
            ("1e308", "0"),
            ("15", "-Inf"),
        ] {
            let err = queue_gauges_checked(&page(a, w), "n8n_").unwrap_err();
            assert!(err.contains("scaling_mode_queue_jobs_"), "{a} {w}: {err}");
        }
        // Not exposed: no gauges, no gap.
        let none = prometheus::parse("process_cpu_seconds_total 1\n").unwrap();
        assert_eq!(queue_gauges_checked(&none, "n8n_"), Ok(None));
        assert!(implausible_jobs("x", MAX_JOBS).is_none());
        assert!(implausible_jobs("x", MAX_JOBS + 1.0).is_some());
    }
}
