//! `n8ncap exporter`: the runner metrics n8n does not expose, served for Prometheus.

use crate::error::{self, BadInput};
use std::time::Duration;

pub(super) async fn run(
    listen: std::net::SocketAddr,
    project: Option<String>,
    refresh: &str,
    job_time: Option<&str>,
) -> anyhow::Result<i32> {
    let refresh =
        crate::util::parse_duration(refresh).map_err(|e| BadInput(format!("--refresh: {e}")))?;
    let job_time = job_time
        .map(|j| crate::util::parse_duration(j).map(|d| d.as_secs_f64()))
        .transpose()
        .map_err(|e| BadInput(format!("--job-time: {e}")))?;
    crate::exporter::run(crate::exporter::ExporterConfig {
        listen,
        project,
        refresh: refresh.max(Duration::from_secs(1)),
        job_time,
    })
    .await?;
    Ok(error::EXIT_OK)
}
