//! Fetching `/metrics` and reading n8n's queue gauges from it.

use crate::error::Implausible;
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
/// main's count of jobs the queue failed (n8n's `n8n_scaling_mode_queue_jobs_failed`) from its
/// `/metrics` at `url`, when it reads and is a count; None when no URL was given.
pub async fn jobs_failed(url: Option<&str>) -> Option<f64> {
    let e = scrape(url?, Duration::from_secs(5)).await.ok()?;
    e.value("n8n_scaling_mode_queue_jobs_failed")
        .filter(|v| v.is_finite() && *v >= 0.0)
}

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
pub fn queue_gauges_checked(
    e: &Exposition,
    prefix: &str,
) -> Result<Option<QueueGauges>, Implausible> {
    let Some(q) = queue_gauges(e, prefix) else {
        return Ok(None);
    };
    for (name, v) in [("active", q.active), ("waiting", q.waiting)] {
        if let Some(why) = implausible_jobs(&format!("{prefix}scaling_mode_queue_jobs_{name}"), v) {
            return Err(why.into());
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

/// Most connections a pool gauge can show and be believed (n8n's pools hold tens).
pub const MAX_POOL: f64 = 10_000.0;

/// One reading of n8n's database pool metrics (`N8N_METRICS_INCLUDE_DB_POOL_METRICS=true`).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReading {
    /// `db_pool_connections_max`: the pool's size (`DB_POSTGRESDB_POOL_SIZE`).
    pub max: f64,
    /// `db_pool_connections_active`: connections in use.
    pub active: f64,
    /// `db_pool_requests_pending`: requests waiting for a connection.
    pub pending: f64,
    /// `db_pool_acquire_seconds` `_sum` and `_count` (Postgres only), cumulative.
    pub acquire: Option<(f64, f64)>,
    /// Its cumulative buckets: (upper bound `le`, count), ascending.
    pub buckets: Vec<(f64, f64)>,
}

/// The pool metrics of one process, each checked: Err with the reason when one cannot be true
/// (a gap, never a figure), Ok(None) when the process does not expose them.
pub fn db_pool_checked(e: &Exposition, prefix: &str) -> Result<Option<PoolReading>, Implausible> {
    let g = |n: &str| e.value(&format!("{prefix}db_pool_{n}"));
    let Some(max) = g("connections_max") else {
        return Ok(None);
    };
    let active = g("connections_active").unwrap_or(0.0);
    let pending = g("requests_pending").unwrap_or(0.0);
    for (name, v) in [
        ("connections_max", max),
        ("connections_active", active),
        ("requests_pending", pending),
    ] {
        if !v.is_finite() || v < 0.0 || v > MAX_POOL.max(MAX_JOBS) {
            return Err(format!(
                "{prefix}db_pool_{name} is {v}: a count of connections or requests is a finite number from 0 to {:e}",
                MAX_POOL.max(MAX_JOBS)
            ).into());
        }
    }
    if max > MAX_POOL || active > max {
        return Err(format!(
            "{prefix}db_pool_connections_active {active} of a pool of {max}: more connections in use than the pool holds"
        ).into());
    }
    let acquire = match (g("acquire_seconds_sum"), g("acquire_seconds_count")) {
        (Some(s), Some(c)) if s.is_finite() && c.is_finite() && s >= 0.0 && c >= 0.0 => {
            Some((s, c))
        }
        (Some(s), Some(c)) => {
            return Err(format!(
                "{prefix}db_pool_acquire_seconds sum {s}, count {c}: a histogram's sum and count are finite and not negative"
            ).into())
        }
        _ => None,
    };
    let mut buckets: Vec<(f64, f64)> = e
        .series(&format!("{prefix}db_pool_acquire_seconds_bucket"))
        .filter_map(|s| {
            let le = s.label("le")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, s.value))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    if buckets.iter().any(|b| !b.1.is_finite() || b.1 < 0.0)
        || buckets.windows(2).any(|w| w[1].1 < w[0].1)
    {
        return Err(format!(
            "{prefix}db_pool_acquire_seconds buckets are not cumulative counts: a histogram's buckets never fall as their bound grows"
        ).into());
    }
    Ok(Some(PoolReading {
        max,
        active,
        pending,
        acquire,
        buckets,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n8n's pool metrics as `PrometheusDbPoolMetricsService` writes them.
    fn pool_page(active: &str, max: &str, pending: &str, buckets: [&str; 3]) -> Exposition {
        prometheus::parse(&format!(
            "# TYPE n8n_db_pool_connections_active gauge\nn8n_db_pool_connections_active {active}\n\
             # TYPE n8n_db_pool_connections_max gauge\nn8n_db_pool_connections_max {max}\n\
             # TYPE n8n_db_pool_requests_pending gauge\nn8n_db_pool_requests_pending {pending}\n\
             # TYPE n8n_db_pool_acquire_seconds histogram\n\
             n8n_db_pool_acquire_seconds_bucket{{le=\"0.001\"}} {}\n\
             n8n_db_pool_acquire_seconds_bucket{{le=\"0.5\"}} {}\n\
             n8n_db_pool_acquire_seconds_bucket{{le=\"+Inf\"}} {}\n\
             n8n_db_pool_acquire_seconds_sum 1.5\nn8n_db_pool_acquire_seconds_count {}\n",
            buckets[0], buckets[1], buckets[2], buckets[2]
        ))
        .unwrap()
    }

    #[test]
    fn impossible_pool_readings_are_gaps_not_figures() {
        let r = db_pool_checked(&pool_page("2", "2", "3", ["5", "9", "10"]), "n8n_")
            .unwrap()
            .unwrap();
        assert_eq!((r.max, r.active, r.pending), (2.0, 2.0, 3.0));
        assert_eq!(r.acquire, Some((1.5, 10.0)));
        assert_eq!(
            r.buckets,
            vec![(0.001, 5.0), (0.5, 9.0), (f64::INFINITY, 10.0)]
        );
        // More connections in use than the pool holds, negative or NaN counts, a pool beyond
        // belief, buckets that fall: gaps with their reason.
        for page in [
            pool_page("3", "2", "0", ["1", "1", "1"]),
            pool_page("-1", "2", "0", ["1", "1", "1"]),
            pool_page("1", "2", "NaN", ["1", "1", "1"]),
            pool_page("1", "1e9", "0", ["1", "1", "1"]),
            pool_page("1", "2", "0", ["5", "4", "6"]),
            pool_page("1", "2", "0", ["1", "1", "-2"]),
        ] {
            assert!(db_pool_checked(&page, "n8n_").is_err());
        }
        // A process without the flag: nothing to read, no gap.
        assert_eq!(db_pool_checked(&page("1", "0"), "n8n_"), Ok(None));
    }

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
