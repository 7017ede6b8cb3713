//! Bull's queue as n8n lays it out in Redis, for the observer: n8n's queue is a Bull (v3) queue
//! named `jobs` (packages/cli/src/scaling/constants.ts, `QUEUE_NAME = 'jobs'`) under the prefix
//! `QUEUE_BULL_PREFIX` (default `bull`), so its lists are `bull:jobs:wait` and `bull:jobs:active`
//! — the same name n8n's Helm chart gives its KEDA trigger (`listName: bull:jobs:wait`).

use crate::wire::resp::Conn;

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

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_are_n8ns() {
        // As n8n's KEDA example and its scaling constants spell them.
        assert_eq!(super::list_key("bull", "wait"), "bull:jobs:wait");
        assert_eq!(super::list_key("bull", "active"), "bull:jobs:active");
    }
}
