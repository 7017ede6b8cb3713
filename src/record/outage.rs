//! `n8ncap outage`: a steady load while the queue's Redis is stopped for a while and started
//! again, and what that cost — the requests in flight when Redis went away by how they ended,
//! the n8n processes that exited (n8n 2.x exits once Redis was gone past
//! `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`), whether and when answers came back, and the loss the
//! threshold predicted beside the loss measured.

use super::drain::{InFlight, Second};
use crate::model::settings::Sourced;
use serde::{Deserialize, Serialize};

/// How Redis was stopped and started again (the name outage's records have used).
pub use super::drill::StopStart as RedisStop;

/// An n8n process after the outage, as Docker shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessAfter {
    pub name: String,
    /// main, worker or webhook.
    pub role: super::Role,
    /// It exited during the run (its exit, or a restart counted since the outage began).
    pub exited: bool,
    pub exit_code: Option<i64>,
    /// Running again at the end (a restart policy started it), or never stopped.
    pub running: bool,
    /// Restarts Docker counted during the run.
    pub restarts: u64,
    /// Its restart policy as the container has it (None: none).
    pub restart_policy: Option<String>,
    /// n8n's last line about Redis in its log ("Exiting process due to Redis connection
    /// error"), control characters escaped.
    pub redis_line: Option<String>,
}

/// An outage's record and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    /// The webhook, credentials removed.
    pub target: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    /// Seconds Redis was asked to stay down; what it was when an interrupt cut it short.
    pub outage_s: f64,
    /// How long n8n tries a lost Redis before it exits, s, with where it came from.
    pub threshold_s: Sourced<f64>,
    pub stop: RedisStop,
    /// Arrivals the load could not send (every connection busy).
    pub dropped: u64,
    /// The requests in flight when Redis was stopped, by how they ended.
    pub in_flight: InFlight,
    /// Requests sent while Redis was down and after it, until the end: answered OK, and not.
    pub after_ok: u64,
    pub after_lost: u64,
    /// Requests sent after Redis was started again: with none, its recovery was not measured.
    #[serde(default)]
    pub sent_after_start: u64,
    /// Seconds from Redis started again to the first OK answer to a request sent after it.
    pub first_ok_after_start_s: Option<f64>,
    /// Seconds from Redis started again until OK answers held the offered rate; None: not
    /// within the run.
    pub recovered_after_start_s: Option<f64>,
    /// The n8n processes as Docker shows them after the run (with `--project`).
    pub processes: Vec<ProcessAfter>,
    /// What the threshold predicts: the processes exit (the outage outlasts it), and the loss.
    pub predicted_exit: bool,
    /// Requests in flight predicted lost: all of them when the processes exit, none otherwise.
    pub predicted_lost: u64,
    pub verdict: String,
    pub seconds: Vec<Second>,
}
