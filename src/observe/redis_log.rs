//! n8n's own words about its Redis connection in a container's log: its exit once Redis is
//! gone past `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`, its attempts, its recovery. Read by the
//! lifecycle watch (a container that exited for Redis) and by `outage`'s read-back.

use bollard::query_parameters::LogsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

/// Whether a container's last log lines are n8n giving Redis up.
pub async fn exited_for_redis(docker: &Docker, id: &str) -> bool {
    let opts = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .tail("20")
        .build();
    let read = async {
        let mut logs = docker.logs(id, Some(opts));
        let mut text = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            if text.len() > 1 << 16 {
                break;
            }
        }
        text
    };
    let text = tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .unwrap_or_default();
    redis_line_in(&text).is_some_and(|l| l.contains(EXITING))
}

/// n8n's words when it gives Redis up (`RedisClientService`).
pub const EXITING: &str = "Exiting process due to Redis connection error";

/// The last line of a log about n8n's Redis connection: its exit, its attempts, its recovery.
pub fn redis_line_in(text: &str) -> Option<String> {
    let words = [
        EXITING,
        "Unable to connect to Redis",
        "Lost Redis connection",
        "Recovered Redis connection",
    ];
    text.lines()
        .rev()
        .find(|l| words.iter().any(|w| l.contains(w)))
        .map(|l| crate::util::escape_control(&crate::util::truncate(l.trim(), 300)).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn n8n_s_last_word_on_redis_is_found() {
        let log = "Lost Redis connection. Trying to reconnect in 1s... (9s/10s)\nUnable to connect to Redis after trying to connect for 10s\nExiting process due to Redis connection error\n";
        assert_eq!(
            super::redis_line_in(log).as_deref(),
            Some("Exiting process due to Redis connection error")
        );
        assert_eq!(super::redis_line_in("Editor is now accessible"), None);
    }
}
