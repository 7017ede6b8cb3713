//! The commands: what each subcommand does with its validated arguments, one file each.
//! `main.rs` only parses and calls [`run`], which dispatches to them; a command builds a typed result and hands it to
//! [`crate::report::emit`] in the format asked for.

mod audit;
mod compare;
mod demo;
mod diagnose;
mod drain;
mod exporter;
mod grafana;
mod history;
mod input;
mod inspect;
mod outage;
mod postgres_restart;
mod recommend;
mod replay;
mod report;
mod scale;
mod shell;
mod sim;
mod sweep;

pub use demo::{
    demo_profile, demo_settings, intro, run_demo, DemoOutcome, DEMO_JOB_MS, DEMO_RUNNER_LIMIT,
    DEMO_STAGES, DEMO_WORKER_CONCURRENCY,
};

use crate::cli::Command;
use crate::error;
pub(crate) use crate::observe::watch::discover::{watch as docker_watch, DockerWatch};
pub(crate) use crate::recommend::analyze::analyze;

/// Runs one command; the exit code follows README.md "Exit codes" (0, 1, 2, 99, 130).
pub async fn run(cmd: Command) -> anyhow::Result<i32> {
    match cmd {
        Command::Demo { output } => demo::run(&output).await,
        // A list of worker counts, or a command that scales: a scale sweep.
        Command::Sweep(args) if args.scale_cmd.is_some() || args.settings.workers.len() > 1 => {
            sweep::scale::run(*args).await
        }
        Command::Sweep(args) => sweep::run(*args).await,
        // A Prometheus range: production history, judged without a load test.
        Command::Diagnose(a) if a.history.prometheus.is_some() => history::run(*a).await,
        Command::Diagnose(a) => diagnose::run(*a).await,
        Command::Audit(a) => audit::run(a).await,
        Command::Exporter {
            listen,
            project,
            refresh,
            job_time,
        } => exporter::run(listen, project, &refresh, job_time.as_deref()).await,
        Command::Grafana { datasource, run } => {
            grafana::run(datasource.as_deref(), run.as_deref()).await
        }
        Command::Report { dir } => report::run(dir).await,
        Command::Inspect {
            project,
            files,
            output,
        } => inspect::run(project.as_deref(), &files, &output).await,
        Command::Recommend(a) => recommend::run(a).await,
        Command::Compare(a) => compare::run(a).await,
        Command::Scale(a) => scale::run(a).await,
        Command::Drain(a) => drain::run(*a).await,
        Command::Outage(a) => outage::run(*a).await,
        Command::PostgresRestart(a) => postgres_restart::run(*a).await,
        Command::Replay(a) => replay::run(*a).await,
        Command::Sim(s) => {
            sim::run(s).await?;
            Ok(error::EXIT_OK)
        }
        Command::Completions { shell } => shell::completions(shell),
        Command::Man { command } => shell::man(command.as_deref()),
    }
}
