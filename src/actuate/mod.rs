//! Actuate: the one room that changes a deployment. Each change is an actuator with a file of
//! its own, made either by n8ncap through the Docker API (a compose project) or by the
//! operator's command (`sh -c`, in a process group of its own, with a deadline):
//! - `stop.rs` — `drain`'s stop of one worker ([`stop::Stopper`]; through the Docker API in
//!   `docker_stop.rs`, started again after);
//! - `scale.rs` — a scale sweep's worker count ([`scale::Scaler`]; the operator's command with
//!   `{workers}` in `command.rs`, n8ncap's own worker/runner pairs in `docker_scale.rs`);
//! - `outage.rs` — `outage`'s stop of Redis, always started again ([`outage::Outager`]; through
//!   the Docker API in `docker_outage.rs`).
//!
//! Every actuator answers [`Actuator`]: how it acts and on what, as its records say it. What
//! the commands decide (which worker, when, for how long) stays in the command; what the
//! change did is recorded (`record`), never judged here.

pub mod command;
pub mod docker_outage;
pub mod docker_scale;
pub mod docker_stop;
pub mod outage;
pub mod scale;
pub mod stop;

use crate::util::{run_shell, Interrupt};

pub use command::COMMAND_DEADLINE;

pub use crate::record::drill::Via;

/// A change to a deployment, through the Docker API or the operator's command.
pub trait Actuator {
    /// How it acts: n8ncap through the Docker API, or the operator's command.
    fn how(&self) -> Via;

    /// What it acts on, for people and records: the container, or the command as given.
    fn what(&self) -> String;
}

/// The operator's command run to its end (or [`COMMAND_DEADLINE`], or `interrupt`): Ok when it
/// exited 0, else what failed with the end of its output.
pub async fn shell(command: &str, interrupt: Option<&Interrupt>) -> anyhow::Result<()> {
    let ran = run_shell(command, COMMAND_DEADLINE, interrupt).await;
    match ran.failure {
        None => Ok(()),
        Some(f) => anyhow::bail!(
            "the command {f}: {}",
            crate::util::truncate(&ran.output, 300)
        ),
    }
}
