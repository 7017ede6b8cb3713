//! A simulated n8n process's hold on Redis, as n8n 2.x's `RedisClientService`: when the
//! connection is lost it tries again every second, logging "Lost Redis connection. Trying to
//! reconnect in 1s... (Ns/10s)", and once it has tried for longer than
//! `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD` (10 000 ms) it logs "Unable to connect to Redis after
//! trying to connect for 10s" and "Exiting process due to Redis connection error" and the
//! process exits (code 1): the webhooks it held get no answer, and nothing answers again until
//! a supervisor restarts it. Measured on n8n 2.41.1: main and a worker exited 10 s after Redis
//! stopped, and stayed down after it came back. Only a process of its own runs this watch (the
//! `sim` entry points), never a stack inside a test's process.

use crate::wire::resp::{Conn, RedisUrl};
use std::time::{Duration, Instant};

/// n8n's `retryInterval`: one reconnection attempt a second.
const RETRY: Duration = Duration::from_secs(1);
/// n8n's `resetLength`: attempts more than 30 s apart start the count again.
const RESET: Duration = Duration::from_secs(30);
/// How long one look at Redis may take before it counts as lost.
const LOOK: Duration = Duration::from_millis(900);

async fn answers(url: &RedisUrl, conn: &mut Option<Conn>) -> bool {
    let look = async {
        if conn.is_none() {
            *conn = Some(Conn::open(url).await.ok()?);
        }
        conn.as_mut()?.cmd(&["PING"]).await.ok()
    };
    let ok = tokio::time::timeout(LOOK, look)
        .await
        .ok()
        .flatten()
        .is_some();
    if !ok {
        *conn = None;
    }
    ok
}

/// Watches Redis every second; returns once it was unreachable for longer than `threshold`,
/// having logged n8n's lines (the caller exits the process).
pub async fn until_lost(url: RedisUrl, threshold: Duration, role: &str) {
    let mut conn = None;
    let mut last_attempt: Option<Instant> = None;
    let mut cumulative = Duration::ZERO;
    let whole = |d: Duration| format!("{}s", d.as_secs_f64().round());
    loop {
        tokio::time::sleep(RETRY).await;
        if answers(&url, &mut conn).await {
            if last_attempt.take().is_some() {
                eprintln!("n8ncap sim {role}: Recovered Redis connection");
            }
            cumulative = Duration::ZERO;
            continue;
        }
        let now = Instant::now();
        match last_attempt {
            Some(t) if now - t <= RESET => cumulative += now - t,
            _ => cumulative = Duration::ZERO,
        }
        last_attempt = Some(now);
        if cumulative > threshold {
            eprintln!(
                "Unable to connect to Redis after trying to connect for {}",
                whole(threshold)
            );
            eprintln!("Exiting process due to Redis connection error");
            return;
        }
        eprintln!(
            "Lost Redis connection. Trying to reconnect in 1s... ({}/{})",
            whole(cumulative),
            whole(threshold)
        );
    }
}
