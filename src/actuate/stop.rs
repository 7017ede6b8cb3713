//! `drain`'s actuator: one worker stopped (SIGTERM, or SIGKILL at once) while the load runs,
//! through the Docker API (`docker_stop.rs`, the worker started again after) or the operator's
//! `--stop-cmd`, whose output is read for the jobs the worker said it held.

use super::docker_stop::{held_in_log, DockerStop};
use super::{Actuator, Via, COMMAND_DEADLINE};
use crate::model::drain::StopSignal;
use crate::record::drain::StopRecord;
use crate::util::{run_shell, Interrupt};
use std::time::Instant;

/// The stop, as chosen: the Docker API or the operator's command.
pub enum Stopper {
    Docker(Box<DockerStop>),
    Command(String),
}

impl Actuator for Stopper {
    fn how(&self) -> Via {
        match self {
            Stopper::Docker(_) => Via::Docker,
            Stopper::Command(_) => Via::Command,
        }
    }

    fn what(&self) -> String {
        match self {
            Stopper::Docker(d) => d.container.clone(),
            Stopper::Command(c) => crate::wire::url::redact_command(c),
        }
    }
}

impl Stopper {
    /// Stops the worker and records it, dated from `load_start`; `signal` is what the operator's
    /// command was said to send (the Docker stop sends its own).
    pub async fn stop(
        &self,
        signal: StopSignal,
        load_start: Instant,
        interrupt: &Interrupt,
    ) -> StopRecord {
        match self {
            Stopper::Docker(d) => d.run(load_start).await,
            Stopper::Command(c) => command_stop(c, signal, load_start, interrupt).await,
        }
    }
}

async fn command_stop(
    command: &str,
    signal: StopSignal,
    load_start: Instant,
    interrupt: &Interrupt,
) -> StopRecord {
    let signal_s = load_start.elapsed().as_secs_f64();
    let ran = run_shell(command, COMMAND_DEADLINE, Some(interrupt)).await;
    StopRecord {
        how: Via::Command,
        signal,
        what: crate::wire::url::redact_command(command),
        signal_s,
        exited_after_s: Some(ran.seconds),
        exit_code: ran.exit_code.map(i64::from),
        grace_s: None,
        held_logged: held_in_log(&ran.output),
        aborted_logged: None,
        detail: Some(match ran.failure {
            Some(f) => format!("{f}: {}", ran.output),
            None => ran.output,
        }),
        restarted_s: None,
    }
}
