//! Where `sim n8n` finds its queue, as n8n does: the Redis `QUEUE_BULL_REDIS_HOST` names,
//! waited for up to `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`.

use crate::wire::resp::RedisUrl;
use std::time::Duration;

/// `sim n8n` plays the n8n command line in a compose stack: when QUEUE_BULL_REDIS_HOST names a
/// real Redis (it answers PING), the queue lives there under Bull's keys, as in n8n; when it
/// names the simulator's main (the stacks without a Redis service), main serves the queue. The
/// Redis may start after this container: an unreachable host is retried every half second, and
/// once it was for `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` (10 s) the process exits with n8n's
/// words, as n8n does (a restart policy starts it again; main's own host serves the queue at
/// once). Each decision is logged with the address.
pub async fn find(
    env: &dyn Fn(&str) -> Option<String>,
    role: &str,
) -> anyhow::Result<Option<RedisUrl>> {
    use crate::wire::resp::{probe, Probe};
    let Some(host) = env("QUEUE_BULL_REDIS_HOST").filter(|h| !h.trim().is_empty()) else {
        return Ok(None);
    };
    let port: u16 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_PORT", 6379, "a port number")?;
    let db: u32 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_DB", 0, "a database number")?;
    let threshold = super::config::redis_timeout_threshold(env)?;
    let deadline = std::time::Instant::now() + threshold;
    let mut said = false;
    loop {
        match probe(&host, port).await {
            Probe::Redis => {
                eprintln!(
                    "n8ncap sim n8n {role}: the queue is on Redis at {host}:{port} (db {db}, Bull's keys)"
                );
                return Ok(Some(RedisUrl::new(
                    &host,
                    port,
                    env("QUEUE_BULL_REDIS_PASSWORD"),
                    db,
                )));
            }
            Probe::NotRedis => {
                eprintln!(
                    "n8ncap sim n8n {role}: {host}:{port} is not a Redis (no PONG): the queue is \
                     the simulator's own, served by main"
                );
                return Ok(None);
            }
            Probe::Unreachable if role == "main" && crate::wire::resp::is_own_host(&host).await => {
                eprintln!(
                    "n8ncap sim n8n main: QUEUE_BULL_REDIS_HOST {host} is this container: main \
                     serves the simulator's queue on port {port}"
                );
                return Ok(None);
            }
            Probe::Unreachable | Probe::Silent if std::time::Instant::now() >= deadline => {
                let s = format!("{}s", threshold.as_secs_f64().round());
                eprintln!("Unable to connect to Redis after trying to connect for {s}");
                eprintln!("Exiting process due to Redis connection error");
                anyhow::bail!(
                    "sim n8n {role}: nothing answered at QUEUE_BULL_REDIS_HOST {host}:{port} for \
                     QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD ({s})"
                );
            }
            Probe::Unreachable | Probe::Silent => {
                if !said {
                    eprintln!(
                        "n8ncap sim n8n {role}: waiting for QUEUE_BULL_REDIS_HOST {host}:{port} \
                         to answer"
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
