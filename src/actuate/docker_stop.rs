//! `n8ncap drain`'s stop, through the Docker API: one worker stopped as a scale-down stops it
//! (SIGTERM, SIGKILL after the grace) or killed at once (SIGKILL: an OOM kill, a grace of 0),
//! the jobs it said it held read back from its log, and the worker started again once it
//! exited, so the project keeps the workers it had.

use super::docker_scale::{inspect, start_running};
use crate::model::drain::StopSignal;
use crate::record::drain::StopRecord;
use bollard::query_parameters::{
    KillContainerOptionsBuilder, LogsOptionsBuilder, StopContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use std::time::Instant;

/// Docker's grace before SIGKILL when neither the container nor `--grace` sets one.
pub const DOCKER_DEFAULT_GRACE_S: i32 = 10;

/// The stop of one worker container.
pub struct DockerStop {
    pub docker: Docker,
    pub container: String,
    pub grace_s: i32,
    pub restart: bool,
    pub signal: StopSignal,
}

/// How long a killed container may take to be seen exited.
const KILL_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The container's own stop grace (`stop_grace_period` in compose, `--stop-timeout`), if set.
pub async fn container_grace(docker: &Docker, name: &str) -> Option<i32> {
    let info = inspect(docker, name).await.ok()?;
    info.config?
        .stop_timeout
        .and_then(|t| i32::try_from(t).ok())
}

impl DockerStop {
    /// Stops the container (waits for it to exit), reads what it logged since the signal,
    /// starts it again unless told not to. `load_start` dates the record.
    pub async fn run(&self, load_start: Instant) -> StopRecord {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX))
            .unwrap_or(0);
        let signal = Instant::now();
        let stopped = match self.signal {
            StopSignal::Term => {
                let opts = StopContainerOptionsBuilder::default()
                    .t(self.grace_s)
                    .build();
                self.docker
                    .stop_container(&self.container, Some(opts))
                    .await
                    .map_err(|e| format!("stopping {}: {e}", self.container))
            }
            StopSignal::Kill => self.kill().await.map_err(|e| format!("{e:#}")),
        };
        let exited_after_s = signal.elapsed().as_secs_f64();
        let mut detail = stopped.err();
        let exit_code = match inspect(&self.docker, &self.container).await {
            Ok(i) => i.state.and_then(|s| s.exit_code),
            Err(e) => {
                detail.get_or_insert(format!("{e:#}"));
                None
            }
        };
        let (held_logged, aborted_logged) = self.logged(since).await;
        let mut restarted_s = None;
        if self.restart && detail.is_none() {
            match start_running(&self.docker, &self.container).await {
                Ok(()) => restarted_s = Some(load_start.elapsed().as_secs_f64()),
                Err(e) => detail = Some(format!("{e:#}")),
            }
        }
        StopRecord {
            how: super::Via::Docker,
            signal: self.signal,
            what: self.container.clone(),
            signal_s: signal.duration_since(load_start).as_secs_f64(),
            exited_after_s: Some(exited_after_s),
            exit_code,
            grace_s: (self.signal == StopSignal::Term).then_some(f64::from(self.grace_s)),
            held_logged,
            aborted_logged: Some(aborted_logged),
            detail,
            restarted_s,
        }
    }

    /// SIGKILL through the Docker API, then waits until the container is seen exited.
    async fn kill(&self) -> anyhow::Result<()> {
        let opts = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        self.docker
            .kill_container(&self.container, Some(opts))
            .await
            .map_err(|e| anyhow::anyhow!("killing {}: {e}", self.container))?;
        let deadline = Instant::now() + KILL_LIMIT;
        loop {
            let running = inspect(&self.docker, &self.container)
                .await?
                .state
                .and_then(|s| s.running);
            if running != Some(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{} still runs {} s after SIGKILL",
                    self.container,
                    KILL_LIMIT.as_secs()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// What the worker logged after the signal: the jobs it held (n8n's "Waiting for N active
    /// executions to finish..."; None without that line — none held, or a log level that hides
    /// it) and the Code tasks its broker aborted when the task budget ran out.
    async fn logged(&self, since: i32) -> (Option<u64>, u64) {
        let opts = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .since(since.saturating_sub(1))
            .build();
        let mut logs = self.docker.logs(&self.container, Some(opts));
        let mut text = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            if text.len() > 1 << 20 {
                break;
            }
        }
        (held_in_log(&text), aborted_in_log(&text))
    }
}

/// n8n 2.41's line for each Code task a stopping worker's broker aborted
/// (`fixtures/n8n-real/worker-sigterm-6s-jobs-3s-window.log`).
const TASK_ABORTED: &str = "Task aborted because the n8n instance was shutting down";

/// The Code tasks a log says were aborted at shutdown: one line each.
pub fn aborted_in_log(text: &str) -> u64 {
    text.lines().filter(|l| l.contains(TASK_ABORTED)).count() as u64
}

/// The first "Waiting for N active executions to finish" in a log.
pub fn held_in_log(text: &str) -> Option<u64> {
    const WORDS: &str = "Waiting for ";
    text.match_indices(WORDS).find_map(|(i, _)| {
        let rest = &text[i + WORDS.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = &rest[digits.len()..];
        after
            .starts_with(" active executions to finish")
            .then(|| digits.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    /// Pinned to a real n8n 2.41.1 worker's log from SIGTERM to exit (3 s window): 6 s jobs, 3
    /// held and 2 Code tasks aborted; 1 s jobs, 3 held and none aborted.
    #[test]
    fn the_held_and_aborted_counts_are_read_from_a_real_n8n_log() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/n8n-real");
        let long =
            std::fs::read_to_string(root.join("worker-sigterm-6s-jobs-3s-window.log")).unwrap();
        assert_eq!(super::held_in_log(&long), Some(3));
        assert_eq!(super::aborted_in_log(&long), 2);
        let short =
            std::fs::read_to_string(root.join("worker-sigterm-1s-jobs-3s-window.log")).unwrap();
        assert_eq!(super::held_in_log(&short), Some(3));
        assert_eq!(super::aborted_in_log(&short), 0);
    }

    #[test]
    fn the_held_count_is_read_from_n8n_s_log_line() {
        let log = "Stopping n8n...\n2026-12-04T10:00:00.000Z | info | Waiting for 7 active executions to finish... {\"scopes\":[\"scaling\"]}\nWaiting for 3 active executions to finish...\n";
        assert_eq!(super::held_in_log(log), Some(7));
        assert_eq!(super::held_in_log("Waiting for runners to connect"), None);
        assert_eq!(super::held_in_log(""), None);
    }
}
