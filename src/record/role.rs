//! The part a process or container plays in an n8n queue-mode deployment.

use crate::error::BadInput;
use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Main,
    Worker,
    Webhook,
    Runner,
    Redis,
    Postgres,
    #[default]
    Other,
}

impl Role {
    pub fn word(&self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Worker => "worker",
            Role::Webhook => "webhook",
            Role::Runner => "runner",
            Role::Redis => "redis",
            Role::Postgres => "postgres",
            Role::Other => "other",
        }
    }
}

impl Role {
    /// Every role, in the order they are listed.
    pub const ALL: [Role; 7] = [
        Role::Main,
        Role::Worker,
        Role::Webhook,
        Role::Runner,
        Role::Redis,
        Role::Postgres,
        Role::Other,
    ];
}

impl std::str::FromStr for Role {
    type Err = BadInput;

    fn from_str(s: &str) -> Result<Role, BadInput> {
        Role::ALL
            .into_iter()
            .find(|r| r.word() == s)
            .ok_or_else(|| BadInput(format!("unknown role {s:?}")))
    }
}
