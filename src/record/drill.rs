//! What every drill's record shares: how its actuator acted, and a dependency (Redis,
//! Postgres) stopped for a while and started again.

use serde::{Deserialize, Serialize};

/// How a change was made, as records say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// n8ncap through the Docker API.
    Docker,
    /// The operator's command (`sh -c`).
    Command,
}

impl Via {
    pub fn word(self) -> &'static str {
        match self {
            Via::Docker => "docker",
            Via::Command => "command",
        }
    }
}

/// A dependency stopped, kept down for a while and started again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopStart {
    /// Through the Docker API (the container stopped and started) or the operator's commands.
    pub how: Via,
    /// The container, or the commands run (`--stop-cmd`, `--start-cmd`).
    pub what: String,
    /// Seconds from the load's start to the stop asked for.
    pub stopped_s: f64,
    /// Seconds from the load's start to the dependency gone (the stop returned: Redis saves
    /// its snapshot and Postgres ends its backends first); the requests in flight are counted
    /// from here.
    #[serde(default)]
    pub down_s: Option<f64>,
    /// Seconds from the load's start to it started again; None when it could not be (said in
    /// `detail`).
    pub started_s: Option<f64>,
    /// What failed, when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Interrupted while it was down: it was started again at once.
    #[serde(default)]
    pub cut_short: bool,
}
