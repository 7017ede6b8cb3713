//! What happened to a watched container during a run: the Docker Engine's lifecycle events
//! (`die`, `oom`, `start`, `restart`, `kill`, `destroy`) and its state as `inspect` reads it.
//! A container that dies between two stats readings is still seen: the observer follows the
//! events stream, so this is the record of a death, not a guess from missing samples.

use serde::{Deserialize, Serialize};

/// A lifecycle action of the Docker Engine, as its events stream names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleAction {
    /// The kernel's OOM killer hit a process of the container (its memory limit was reached).
    Oom,
    /// The container's main process ended (exit code in the event).
    Die,
    /// A signal was sent to it (`docker kill`, `docker stop`, a restart).
    Kill,
    Stop,
    Start,
    Restart,
    /// Removed (`docker rm`).
    Destroy,
}

impl LifecycleAction {
    /// The action of an events-stream message, None for those that say nothing about the
    /// container's life (exec, attach, health status …).
    pub fn from_docker(action: &str) -> Option<LifecycleAction> {
        Some(match action {
            "oom" => LifecycleAction::Oom,
            "die" => LifecycleAction::Die,
            "kill" => LifecycleAction::Kill,
            "stop" => LifecycleAction::Stop,
            "start" => LifecycleAction::Start,
            "restart" => LifecycleAction::Restart,
            "destroy" => LifecycleAction::Destroy,
            _ => return None,
        })
    }

    pub fn word(&self) -> &'static str {
        match self {
            LifecycleAction::Oom => "oom",
            LifecycleAction::Die => "die",
            LifecycleAction::Kill => "kill",
            LifecycleAction::Stop => "stop",
            LifecycleAction::Start => "start",
            LifecycleAction::Restart => "restart",
            LifecycleAction::Destroy => "destroy",
        }
    }
}

/// One lifecycle event of a container in a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleEvent {
    /// Seconds since the stage began (its warm-up included).
    pub at_s: f64,
    /// Wall time (Unix seconds).
    pub unix: f64,
    pub action: LifecycleAction,
    /// `die`: the exit code (137 = SIGKILL, as the OOM killer and `docker kill` send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// `die`: Docker's `State.OOMKilled` read right after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
    /// `die`: the process's log ends with n8n's "Exiting process due to Redis connection
    /// error" — it lost Redis for longer than `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redis_lost: bool,
}

/// A container's state as `docker inspect` gives it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerState {
    pub running: bool,
    pub oom_killed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub restart_count: i64,
    /// RFC 3339, as Docker writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}
