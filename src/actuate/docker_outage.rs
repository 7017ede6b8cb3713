//! `n8ncap outage`'s and `postgres-restart`'s side of the Docker API: the project's Redis or
//! Postgres stopped and started again, and the n8n processes read back afterwards — their
//! state, exit code, restarts, restart policy and n8n's last line about the dependency in their
//! log (`observe::redis_log`, `observe::db_watch`). It always starts again what it stopped.

use super::docker_scale::{inspect, start_running};
use crate::observe::redis_log::EXITING;
use crate::record::outage::ProcessAfter;
use bollard::query_parameters::{LogsOptionsBuilder, StopContainerOptionsBuilder};
use bollard::Docker;
use futures_util::StreamExt;

/// The project's Redis (or Postgres) container and the n8n processes to read back.
pub struct DockerOutage {
    pub docker: Docker,
    pub container: String,
    /// n8n's containers and their roles (main, worker, webhook).
    pub n8n: Vec<(String, crate::record::Role)>,
}

/// Seconds the container is given to stop by itself (Redis saves and exits on SIGTERM; the
/// official Postgres image stops on SIGINT, a fast shutdown).
const REDIS_GRACE_S: i32 = 10;

impl DockerOutage {
    /// Stops it (its image's stop signal, SIGKILL after 10 s).
    pub async fn stop(&self) -> anyhow::Result<()> {
        let opts = StopContainerOptionsBuilder::default()
            .t(REDIS_GRACE_S)
            .build();
        self.docker
            .stop_container(&self.container, Some(opts))
            .await
            .map_err(|e| anyhow::anyhow!("stopping {}: {e}", self.container))
    }

    /// Starts it again and waits until Docker reports it running.
    pub async fn start(&self) -> anyhow::Result<()> {
        start_running(&self.docker, &self.container).await
    }

    /// Each n8n container's restart count now, to count the restarts of the run.
    pub async fn restarts_now(&self) -> Vec<i64> {
        let mut out = Vec::new();
        for (name, _) in &self.n8n {
            let n = inspect(&self.docker, name)
                .await
                .ok()
                .and_then(|i| i.restart_count)
                .unwrap_or(0);
            out.push(n);
        }
        out
    }

    /// The n8n processes after the run, against their restart counts before it.
    /// `line_in` finds n8n's last line about the dependency in a log (`observe::redis_log`'s
    /// for Redis).
    pub async fn after(
        &self,
        (before, since): (&[i64], i64),
        line_in: fn(&str) -> Option<String>,
    ) -> Vec<ProcessAfter> {
        let mut out = Vec::new();
        for (i, (name, role)) in self.n8n.iter().enumerate() {
            let info = inspect(&self.docker, name).await.ok();
            let state = info
                .as_ref()
                .and_then(|i| i.state.clone())
                .unwrap_or_default();
            let restarts = info
                .as_ref()
                .and_then(|i| i.restart_count)
                .unwrap_or(0)
                .saturating_sub(before.get(i).copied().unwrap_or(0))
                .max(0) as u64;
            let policy = info
                .as_ref()
                .and_then(|i| i.host_config.as_ref())
                .and_then(|h| h.restart_policy.as_ref())
                .and_then(|p| p.name.as_ref())
                .map(|n| n.to_string())
                .filter(|n| !n.is_empty() && n != "no");
            let running = state.running == Some(true);
            let redis_line = self.line(name, since, line_in).await;
            let exited_by_redis = redis_line.as_deref().is_some_and(|l| l.contains(EXITING));
            out.push(ProcessAfter {
                name: name.clone(),
                role: *role,
                exited: !running || restarts > 0 || exited_by_redis,
                exit_code: state.exit_code.filter(|_| !running || restarts > 0),
                running,
                restarts,
                restart_policy: policy,
                redis_line,
            });
        }
        out
    }

    /// n8n's last line about the dependency since `since` (Unix seconds).
    async fn line(
        &self,
        name: &str,
        since: i64,
        line_in: fn(&str) -> Option<String>,
    ) -> Option<String> {
        let opts = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .since(i32::try_from(since.saturating_sub(1)).unwrap_or(0))
            .build();
        let mut logs = self.docker.logs(name, Some(opts));
        let mut text = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            if text.len() > 1 << 20 {
                break;
            }
        }
        line_in(&text)
    }
}
