//! Bull's queue as n8n lays it out in Redis, for the observer: n8n's queue is a Bull (v3) queue
//! named `jobs` (packages/cli/src/scaling/constants.ts, `QUEUE_NAME = 'jobs'`) under the prefix
//! `QUEUE_BULL_PREFIX` (default `bull`), so its lists are `bull:jobs:wait` and `bull:jobs:active`
//! — the same name n8n's Helm chart gives its KEDA trigger (`listName: bull:jobs:wait`).

use crate::wire::resp::{Conn, RedisUrl};
use std::time::{Duration, Instant};

/// n8n's queue name (`QUEUE_NAME` in n8n's scaling constants).
pub const QUEUE_NAME: &str = "jobs";

/// Bull's key for list `list` of n8n's queue under `prefix`.
pub fn list_key(prefix: &str, list: &str) -> String {
    format!("{prefix}:{QUEUE_NAME}:{list}")
}

/// Lengths of Bull's wait and active lists: jobs waiting for a worker, and slots taken.
pub async fn queue_lengths(c: &mut Conn, prefix: &str) -> anyhow::Result<(f64, f64)> {
    let wait = c.cmd(&["LLEN", &list_key(prefix, "wait")]).await?;
    let active = c.cmd(&["LLEN", &list_key(prefix, "active")]).await?;
    Ok((
        wait.as_int().unwrap_or(0) as f64,
        active.as_int().unwrap_or(0) as f64,
    ))
}

/// The name Bull gives the Redis client of a queue's processor (`Queue#setWorkerName`, called
/// by `Queue#process`: `<prefix>:<the queue's name in base64>`, `am9icw==` for `jobs`). Each
/// n8n worker process holds one; main and webhook processors never process the queue.
pub fn worker_client_name(prefix: &str) -> String {
    format!("{prefix}:am9icw==")
}

/// Worker processes connected to n8n's queue: the clients Redis lists (`CLIENT LIST`) under
/// Bull's worker name.
pub async fn workers_connected(c: &mut Conn, prefix: &str) -> anyhow::Result<u32> {
    let list = c.cmd(&["CLIENT", "LIST"]).await?;
    let text = list
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("CLIENT LIST gave no text"))?;
    Ok(count_named(&text, &worker_client_name(prefix)))
}

/// Lines of a `CLIENT LIST` answer whose `name` field is `name`.
fn count_named(list: &str, name: &str) -> u32 {
    list.lines()
        .filter(|l| l.split(' ').any(|f| f.strip_prefix("name=") == Some(name)))
        .count() as u32
}

/// How long no worker client at all (or no answer) means the workers are not on this Redis
/// and prefix, or the Redis is out of reach.
const NONE_SEEN: Duration = Duration::from_secs(30);

/// What waiting for the workers to join the queue saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    /// Worker processes connected when the wait ended (None: not observable).
    pub connected: Option<u32>,
    /// Seconds waited until `n` were, when they were.
    pub after_s: Option<f64>,
    /// In words, for the step's record.
    pub words: String,
}

/// Waits until at least `n` worker processes are connected to the queue in `url` (Bull's
/// worker clients), at most `limit`: a scale command that returns before its pods run (`kubectl
/// scale`) is measured only once they take jobs. A Redis that refuses `CLIENT LIST` makes the
/// join not observable; fewer than `n` at the limit is said, and the count measured anyway.
pub async fn wait_for_workers(url: &RedisUrl, prefix: &str, n: u32, limit: Duration) -> Joined {
    waited(url, prefix, (n, false), (limit, NONE_SEEN)).await
}

/// Waits until exactly `n` worker processes are connected (a scale-down waits for the workers
/// leaving to finish their shutdown): the return of a scale sweep read back from the queue.
pub async fn wait_for_exactly(url: &RedisUrl, prefix: &str, n: u32, limit: Duration) -> Joined {
    waited(url, prefix, (n, true), (limit, NONE_SEEN)).await
}

/// [`wait_for_workers`] (or, `exact`, [`wait_for_exactly`]), giving up after `none_seen`
/// without an answer or a worker.
async fn waited(
    url: &RedisUrl,
    prefix: &str,
    (n, exact): (u32, bool),
    (limit, none_seen): (Duration, Duration),
) -> Joined {
    let t0 = Instant::now();
    let mut last: Option<u32> = None;
    while t0.elapsed() < limit {
        let seen = match Conn::open(url).await {
            Ok(mut c) => workers_connected(&mut c, prefix).await,
            Err(e) => Err(e),
        };
        match seen {
            Ok(k) if k == n || (k > n && !exact) => {
                return Joined {
                    connected: Some(k),
                    after_s: Some(t0.elapsed().as_secs_f64()),
                    words: format!(
                        "{k} worker(s) connected to the queue after {:.1} s (Bull's worker clients in Redis' CLIENT LIST)",
                        t0.elapsed().as_secs_f64()
                    ),
                }
            }
            // No worker at all (the count before this one had some) for long: the workers
            // are on another Redis or prefix — not observable, not worth the whole limit.
            Ok(0) if n > 0 && t0.elapsed() > none_seen => {
                return Joined {
                    connected: None,
                    after_s: None,
                    words: format!(
                        "joining not observable: no client named {} in Redis' CLIENT LIST after {} s (is --redis the queue's Redis and --bull-prefix its QUEUE_BULL_PREFIX?); the settle time only",
                        worker_client_name(prefix),
                        none_seen.as_secs()
                    ),
                }
            }
            Ok(k) => last = Some(k),
            // A Redis that answers but refuses the command (ACLs, a renamed CLIENT) will not
            // change its mind: not observable.
            Err(e) if e.to_string().contains("ERR") || e.to_string().contains("NOPERM") => {
                return Joined {
                    connected: None,
                    after_s: None,
                    words: format!(
                        "joining not observable: Redis refused CLIENT LIST ({}); the settle time only",
                        crate::wire::url::truncate(&e.to_string(), 120)
                    ),
                }
            }
            // A Redis n8ncap cannot reach (a cluster's, without a port-forward) will not
            // answer later either.
            Err(e) if t0.elapsed() > none_seen => {
                return Joined {
                    connected: None,
                    after_s: None,
                    words: format!(
                        "joining not observable: Redis did not answer for {} s ({}); the settle time only",
                        none_seen.as_secs(),
                        crate::wire::url::truncate(&e.to_string(), 120)
                    ),
                }
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Joined {
        connected: last,
        after_s: None,
        words: match last {
            Some(k) if exact => format!(
                "{k} worker(s), not {n}, connected to the queue after {} s",
                limit.as_secs()
            ),
            Some(k) => format!(
                "only {k} of {n} worker(s) connected to the queue within {} s: measured anyway",
                limit.as_secs()
            ),
            None => format!(
                "joining not read: Redis did not answer within {} s; measured anyway",
                limit.as_secs()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    /// A Redis that never answers (nothing listens) ends the wait as not observable once
    /// `none_seen` passed, long before the limit.
    #[tokio::test]
    async fn an_unreachable_redis_is_not_observable_not_a_long_wait() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = super::RedisUrl::new("127.0.0.1", port, None, 0);
        let limits = (
            std::time::Duration::from_secs(600),
            std::time::Duration::from_millis(300),
        );
        let j = super::waited(&url, "bull", (2, false), limits).await;
        assert_eq!((j.connected, j.after_s), (None, None));
    }

    #[test]
    fn bull_names_a_worker_s_client_by_the_queue_s_name_in_base64() {
        assert_eq!(super::worker_client_name("bull"), "bull:am9icw==");
        let list = "id=3 addr=127.0.0.1:5 name=bull:am9icw== db=0 cmd=brpoplpush\n\
                    id=4 addr=127.0.0.1:6 name= db=0 cmd=client\n\
                    id=5 addr=127.0.0.1:7 name=bull:am9icw== db=0 cmd=brpoplpush\n\
                    id=6 addr=127.0.0.1:8 name=other:am9icw== db=0 cmd=get\n";
        assert_eq!(super::count_named(list, "bull:am9icw=="), 2);
        assert_eq!(super::count_named(list, "other:am9icw=="), 1);
    }

    #[test]
    fn the_names_are_n8ns() {
        // As n8n's KEDA example and its scaling constants spell them.
        assert_eq!(super::list_key("bull", "wait"), "bull:jobs:wait");
        assert_eq!(super::list_key("bull", "active"), "bull:jobs:active");
    }
}
