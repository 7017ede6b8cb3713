//! The simulator's queue on a real Redis, laid out as n8n's Bull queue is: a Bull (v3) queue
//! named `jobs` under `QUEUE_BULL_PREFIX` (default `bull`) — `bull:jobs:wait`, `bull:jobs:active`,
//! a hash per job at `bull:jobs:<id>`. Written here apart from the observer's copy on purpose:
//! the observer is tested against this simulator, so the two must not share a wrong name.

/// Bull's key `<prefix>:jobs:<suffix>`.
pub fn key(prefix: &str, suffix: &str) -> String {
    format!("{prefix}:jobs:{suffix}")
}

/// The name a Bull worker gives its Redis client (Bull's `Queue#setWorkerName`: the prefix,
/// `:`, the queue's name in base64), computed here apart from the observer's.
pub fn worker_name(prefix: &str) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b"jobs".chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("{prefix}:{out}")
}

/// The channel workers publish outcomes on (the simulator's own; Bull uses job events).
pub fn outcome_channel(prefix: &str) -> String {
    key(prefix, "n8ncap-outcomes")
}

/// How long a finished job's hash is kept for a main that was away (Bull's `removeOnComplete`
/// with an age): main never has to delete it on its per-execution path.
pub const OUTCOME_KEPT_S: &str = "300";

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_are_n8ns() {
        assert_eq!(super::key("bull", "wait"), "bull:jobs:wait");
        assert_eq!(super::key("bull", "active"), "bull:jobs:active");
        assert_eq!(super::key("bull", "42"), "bull:jobs:42");
    }
}
