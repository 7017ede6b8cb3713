//! A scale sweep's actuator: the worker count changed between counts, by the operator's command
//! with `{workers}` replaced (`command.rs`) or, for a compose project, by n8ncap in worker/runner
//! pairs through the Docker API (`docker_scale.rs`).

use super::command::ScaleCommand;
use super::docker_scale::DockerPairs;
use super::{Actuator, Via};
use crate::record::scaling::ScaleStep;
use crate::util::Interrupt;

/// What changes the worker count between counts.
pub enum Scaler {
    /// The operator's command.
    Command(ScaleCommand),
    /// n8ncap itself, in the compose project's worker/runner pairs.
    Docker(Box<DockerPairs>),
}

impl Actuator for Scaler {
    fn how(&self) -> Via {
        match self {
            Scaler::Command(_) => Via::Command,
            Scaler::Docker(_) => Via::Docker,
        }
    }

    fn what(&self) -> String {
        match self {
            Scaler::Command(c) => crate::wire::url::redact_command(c.template()),
            Scaler::Docker(_) => "the project's worker/runner pairs".into(),
        }
    }
}

impl Scaler {
    /// What scaling to `n` runs, for people.
    pub fn describe(&self, n: u32) -> String {
        match self {
            Scaler::Command(c) => c.for_count(n),
            Scaler::Docker(_) => format!("worker/runner pairs through the Docker API to {n}"),
        }
    }

    /// Scales to `n` workers (`restore`: the return to the original count); the operator's
    /// command is ended by `interrupt` (the Docker API's pairs are made or stopped to the end).
    pub async fn scale_to(
        &mut self,
        n: u32,
        restore: bool,
        interrupt: Option<&Interrupt>,
    ) -> ScaleStep {
        match self {
            Scaler::Command(c) => c.scale_to(n, restore, interrupt).await,
            Scaler::Docker(d) => d.scale_to(n, restore).await,
        }
    }
}
