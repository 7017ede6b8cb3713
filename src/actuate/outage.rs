//! `outage`'s actuator: the queue's Redis stopped and started again, through the Docker API
//! (`docker_outage.rs`) or the operator's `--stop-cmd` and `--start-cmd`.

use super::docker_outage::DockerOutage;
use super::{shell, Actuator, Via};
use crate::util::Interrupt;

/// How Redis is stopped and started: the Docker API or the operator's commands.
pub enum Outager {
    Docker(Box<DockerOutage>),
    Commands { stop: String, start: String },
}

impl Actuator for Outager {
    fn how(&self) -> Via {
        match self {
            Outager::Docker(_) => Via::Docker,
            Outager::Commands { .. } => Via::Command,
        }
    }

    fn what(&self) -> String {
        match self {
            Outager::Docker(d) => d.container.clone(),
            Outager::Commands { stop, start } => format!(
                "{} … {}",
                crate::wire::url::redact_command(stop),
                crate::wire::url::redact_command(start)
            ),
        }
    }
}

impl Outager {
    /// Stops Redis; the operator's command is ended (its process group) by an interrupt.
    pub async fn stop(&self, interrupt: &Interrupt) -> anyhow::Result<()> {
        match self {
            Outager::Docker(d) => d.stop().await,
            Outager::Commands { stop, .. } => shell(stop, Some(interrupt)).await,
        }
    }

    /// Starts Redis again; never cut short, so what was stopped is always started.
    pub async fn start(&self) -> anyhow::Result<()> {
        match self {
            Outager::Docker(d) => d.start().await,
            Outager::Commands { start, .. } => shell(start, None).await,
        }
    }
}
