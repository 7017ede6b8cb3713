//! The simulator's queue on a real Redis, laid out as n8n's Bull queue is: a Bull (v3) queue
//! named `jobs` under `QUEUE_BULL_PREFIX` (default `bull`) — `bull:jobs:wait`, `bull:jobs:active`,
//! a hash per job at `bull:jobs:<id>`. Written here apart from the observer's copy on purpose:
//! the observer is tested against this simulator, so the two must not share a wrong name.

/// Bull's key `<prefix>:jobs:<suffix>`.
pub fn key(prefix: &str, suffix: &str) -> String {
    format!("{prefix}:jobs:{suffix}")
}

/// The channel workers publish outcomes on (the simulator's own; Bull uses job events).
pub fn outcome_channel(prefix: &str) -> String {
    key(prefix, "n8ncap-outcomes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_are_n8ns() {
        assert_eq!(super::key("bull", "wait"), "bull:jobs:wait");
        assert_eq!(super::key("bull", "active"), "bull:jobs:active");
        assert_eq!(super::key("bull", "42"), "bull:jobs:42");
    }
}
