//! `n8ncap drain`: a steady load at the operating point while one worker is stopped the way a
//! scale-down stops it, and what that cost — the requests in flight at the signal, by outcome,
//! the time until completions came back to the offered rate, and the loss the time budget
//! predicted beside the loss measured.

use crate::model::drain::{DrainPrediction, StopSignal};
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

impl Sent {
    pub fn new(sent_s: f64, ended_s: Option<f64>, outcome: Outcome) -> Sent {
        Sent {
            sent_s,
            ended_s,
            outcome,
        }
    }

    /// Answered 2xx.
    pub fn ok(&self) -> bool {
        matches!(self.outcome, Outcome::Answered(c) if (200..300).contains(&c))
    }
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
    /// Through the Docker API (SIGTERM, SIGKILL after the grace; or SIGKILL at once) or the
    /// operator's command.
    pub how: super::drill::Via,
    /// The signal the stop sends first (with `--stop-cmd`: the one the operator says it sends).
    #[serde(default = "term")]
    pub signal: StopSignal,
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
    /// Code tasks the worker said its broker aborted when the task budget ran out (n8n's "Task
    /// aborted because the n8n instance was shutting down", one line each; None when its logs
    /// were not read).
    #[serde(default)]
    pub aborted_logged: Option<u64>,
    /// The command's output, cut, or what failed.
    pub detail: Option<String>,
    /// Seconds from the load's start to the worker running again (Docker: started again after
    /// it exited unless `--no-restart`).
    pub restarted_s: Option<f64>,
}

fn term() -> StopSignal {
    StopSignal::Term
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
    /// Seconds from the signal to the last failed answer (a non-2xx status, or a broken
    /// connection) among them: when n8n answered what the stop cost.
    #[serde(default)]
    pub last_failure_after_s: Option<f64>,
}

impl InFlight {
    pub fn failed(&self) -> u64 {
        self.failed_by_status.values().sum::<u64>() + self.broken
    }
    pub fn lost(&self) -> u64 {
        self.failed() + self.unanswered
    }
}

/// What a drain advises, from what it measured (never a value the deployment already has).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DrainAdvice {
    /// Nothing to change: the task budget covers the p99 job.
    None,
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` to at least this many seconds (its 0.8 covers the p99
    /// job), and the stop's grace above it.
    RaiseWindow { from_s: f64, to_s: f64 },
    /// The stop's grace killed the worker before its task budget: raise it above the window.
    RaiseGrace { grace_s: f64, window_s: f64 },
    /// A kill loses every held execution: keep scale-downs to SIGTERM with a grace above the
    /// window.
    AvoidKill { window_s: f64 },
    /// The loss is not the window's: the worker exited this soon after the signal although the
    /// budget covers the p99 job — look at what ended it.
    LookAtExit { exited_after_s: f64 },
    /// Measured and predicted disagree and the stop shows no reason.
    Unexplained,
}

impl InFlight {
    /// "N: F finished, L failed, U never answered", as the tables show it.
    pub fn words(&self) -> String {
        format!(
            "{}: {} finished, {} failed, {} never answered",
            self.total,
            self.finished,
            self.failed(),
            self.unanswered
        )
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
    /// The stopped worker's `N8N_GRACEFUL_SHUTDOWN_TIMEOUT`, s, as read (or assumed).
    #[serde(default)]
    pub graceful_s: Option<f64>,
    /// The window the jobs had: min(`N8N_GRACEFUL_SHUTDOWN_TIMEOUT`, Docker's grace), s.
    pub window_s: Option<Sourced<f64>>,
    /// The time the held Code tasks had: 0.8 × `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` (n8n's task
    /// budget), cut by a kill at the stop's grace; 0 for a kill.
    #[serde(default)]
    pub budget_s: Option<Sourced<f64>>,
    /// The worker was killed before its task budget ran out (`--signal KILL`, or a stop grace
    /// shorter than the budget): what it held is answered only by Bull's stalled check.
    #[serde(default)]
    pub killed_before_budget: bool,
    /// When n8n answers the executions a killed worker held: Bull's lease
    /// (`QUEUE_WORKER_LOCK_DURATION`) and its stalled check (`QUEUE_WORKER_STALLED_INTERVAL`),
    /// s from the kill, earliest and latest.
    #[serde(default)]
    pub stalled_answer_s: Option<(Sourced<f64>, f64)>,
    /// How long each request waited for its answer, s.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    pub predicted: Option<DrainPrediction>,
    /// The measured loss is the predicted one within a count's chance.
    pub agrees: Option<bool>,
    /// What to change, when the prediction could be made.
    #[serde(default)]
    pub advice: Option<DrainAdvice>,
    /// The stop did not happen as asked (the command's status, Docker's error): what follows
    /// is not a scale-down's cost, and nothing is predicted or advised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_failed: Option<String>,
    /// No request before the stop was answered OK (the webhook failed already): what the stop
    /// cost cannot be told from what failed anyway, and nothing is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<String>,
    /// Ended by a signal before its end: what it holds is what was measured until then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub verdict: String,
    pub seconds: Vec<Second>,
}
