//! `n8ncap drain`: a steady load at the operating point while one worker is stopped the way a
//! scale-down stops it, and what that cost — the requests in flight at the signal, by outcome,
//! the time until completions came back to the offered rate, and the loss the time budget
//! predicted beside the loss measured.

use crate::model::drain::DrainPrediction;
use crate::model::settings::Sourced;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One request of the load, seconds from the load's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    pub sent_s: f64,
    /// When the answer (or the failure) came; None: none by the end of the run.
    pub ended_s: Option<f64>,
    pub outcome: Outcome,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "status")]
pub enum Outcome {
    /// An HTTP answer (2xx counts as finished, any other as failed).
    Answered(u16),
    /// The connection failed or broke before an answer.
    Broken,
    /// No answer within the request timeout, or by the end of the run.
    Unanswered,
}

/// How the worker was stopped and what the stop reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// "docker" (SIGTERM through the Docker API, SIGKILL after the grace) or "command".
    pub how: String,
    /// The container stopped, or the command run (`--stop-cmd`).
    pub what: String,
    /// Seconds from the load's start to the signal.
    pub signal_s: f64,
    /// Seconds from the signal until the container had exited (Docker) or the command ended.
    pub exited_after_s: Option<f64>,
    /// The container's exit code, or the command's status.
    pub exit_code: Option<i64>,
    /// Docker's grace before SIGKILL, s (the stop's `t`).
    pub grace_s: Option<f64>,
    /// Jobs the worker said it held at the signal (n8n's log "Waiting for N active executions
    /// to finish"; 0 when it exited without that line, None when its logs were not read).
    pub held_logged: Option<u64>,
    /// The command's output, cut, or what failed.
    pub detail: Option<String>,
    /// Seconds from the load's start to the worker running again (Docker: started again after
    /// it exited unless `--no-restart`).
    pub restarted_s: Option<f64>,
}

/// The requests in flight at the signal, by how they ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    pub total: u64,
    /// Answered 2xx.
    pub finished: u64,
    /// Answered with another status, by status.
    pub failed_by_status: BTreeMap<u16, u64>,
    /// Connection broken before an answer.
    pub broken: u64,
    /// Never answered.
    pub unanswered: u64,
}

impl InFlight {
    pub fn failed(&self) -> u64 {
        self.failed_by_status.values().sum::<u64>() + self.broken
    }
    pub fn lost(&self) -> u64 {
        self.failed() + self.unanswered
    }
}

/// Completions in one second of the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Second {
    pub t: u32,
    pub sent: u32,
    pub finished: u32,
    pub failed: u32,
}

/// A drain's record and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    /// The webhook, credentials removed.
    pub target: String,
    /// Arrivals per second offered, with where the rate came from.
    pub rate_per_s: Sourced<f64>,
    pub duration_s: f64,
    /// Arrivals the load could not send (every connection busy).
    pub dropped: u64,
    pub stop: StopRecord,
    /// OK answers per second before the signal (after the warm-up).
    pub before_per_s: Option<f64>,
    pub in_flight: InFlight,
    /// Requests sent after the signal that failed or were never answered.
    pub failed_after: u64,
    /// n8n's failed executions counter over the run (main's
    /// `n8n_scaling_mode_queue_jobs_failed`), when its metrics were given.
    pub n8n_failed: Option<f64>,
    /// Seconds from the signal until OK answers came back to the offered rate and stayed for
    /// three seconds; None: not within the run.
    pub recovered_after_s: Option<f64>,
    /// The job time the prediction used (p50, p99), s, with their source.
    pub job_p50_s: Option<Sourced<f64>>,
    pub job_p99_s: Option<Sourced<f64>>,
    /// The window the jobs had: min(`N8N_GRACEFUL_SHUTDOWN_TIMEOUT`, Docker's grace), s.
    pub window_s: Option<Sourced<f64>>,
    pub predicted: Option<DrainPrediction>,
    /// The measured loss is the predicted one within a count's chance.
    pub agrees: Option<bool>,
    pub verdict: String,
    pub seconds: Vec<Second>,
}
