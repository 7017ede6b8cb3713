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
