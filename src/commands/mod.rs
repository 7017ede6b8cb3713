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
mod inspect;
mod recommend;
mod replay;
mod report;
mod scale;
mod shell;
mod sim;
mod sweep;
mod sweep_scale;

pub use demo::{
    demo_profile, demo_settings, intro, run_demo, DemoOutcome, DEMO_JOB_MS, DEMO_RUNNER_LIMIT,
    DEMO_STAGES, DEMO_WORKER_CONCURRENCY,
};

use crate::cli::Command;
use crate::diagnose::{self as judge, Inputs};
use crate::error;
use crate::model::settings::Settings;
use crate::observe::watch::WatchedContainer;
use crate::record::{Diagnosis, Recommendation, Summary};
use crate::topology::Topology;

/// Runs one command; the exit code follows README.md "Exit codes" (0, 1, 2, 99, 130).
pub async fn run(cmd: Command) -> anyhow::Result<i32> {
    match cmd {
        Command::Demo { output } => demo::run(&output).await,
        // A list of worker counts, or a command that scales: a scale sweep.
        Command::Sweep(args) if args.scale_cmd.is_some() || args.settings.workers.len() > 1 => {
            sweep_scale::run(*args).await
        }
        Command::Sweep(args) => sweep::run(*args).await,
        Command::Diagnose(a) => diagnose::run(*a).await,
        Command::Audit(a) => audit::run(a).await,
        Command::Exporter {
            listen,
            project,
            refresh,
            job_time,
        } => exporter::run(listen, project, &refresh, job_time.as_deref()).await,
        Command::Grafana { datasource } => grafana::run(datasource.as_deref()),
        Command::Report { dir } => report::run(dir),
        Command::Inspect {
            project,
            files,
            output,
        } => inspect::run(project.as_deref(), &files, &output).await,
        Command::Recommend(a) => recommend::run(a).await,
        Command::Compare(a) => compare::run(a),
        Command::Scale(a) => scale::run(a).await,
        Command::Drain(a) => drain::run(*a).await,
        Command::Replay(a) => replay::run(*a).await,
        Command::Sim(s) => {
            sim::run(s).await?;
            Ok(error::EXIT_OK)
        }
        Command::Completions { shell } => shell::completions(shell),
        Command::Man { command } => shell::man(command.as_deref()),
    }
}

/// Diagnoses a summary with the given settings (flags first, then the settings the run read
/// before the load, then the request body), proposes settings, and stores both in the summary.
pub fn analyze(
    summary: &mut Summary,
    flags: Settings,
    task_request_timeout_s: Option<f64>,
) -> (Diagnosis, Result<Recommendation, crate::error::NoPlan>) {
    let mix = judge::mix::kinds(&summary.scenarios, &summary.stages).unwrap_or_default();
    let settings = flags
        .or(summary.settings.clone().unwrap_or_default())
        .or(Settings::from_mix(&mix))
        .or(Settings::from_body(summary.body.as_ref()));
    let inputs = Inputs {
        settings,
        task_request_timeout_s,
        host: summary.host.clone().unwrap_or_default(),
        mix,
    };
    let d = judge::diagnose(&summary.stages, &inputs);
    let rec = crate::recommend::recommend(&d, None);
    summary.diagnosis = Some(d.clone());
    summary.recommendation = rec.as_ref().ok().cloned();
    summary.memory_plan = crate::recommend::memory::plan(&d);
    (d, rec)
}

/// The Docker side of a sweep: the client, the containers to sample, the topology.
pub(crate) struct DockerWatch {
    docker: bollard::Docker,
    containers: Vec<WatchedContainer>,
    topology: Topology,
}

/// Discovers the containers to watch and their topology.
pub(crate) async fn docker_watch(project: Option<&str>) -> anyhow::Result<DockerWatch> {
    let docker = crate::observe::docker::connect().await?;
    let found = crate::observe::docker::discover(&docker, project).await?;
    if found.is_empty() {
        if let Some(p) = project {
            let all = crate::observe::docker::discover_containers(&docker, Some(p), true).await?;
            if all.is_empty() {
                return Err(crate::observe::docker::no_such_project(&docker, p)
                    .await
                    .into());
            }
        }
        anyhow::bail!(
            "no running containers{} found",
            project
                .map(|p| format!(" in compose project {}", crate::util::escape_control(p)))
                .unwrap_or_default()
        );
    }
    let ids: Vec<String> = found.iter().map(|(id, _)| id.clone()).collect();
    let topology = Topology::build(found.into_iter().map(|(_, f)| f).collect());
    let watched = topology
        .nodes
        .iter()
        .zip(ids)
        .map(|(n, id)| WatchedContainer {
            id,
            name: n.facts.name.clone(),
            role: n.role,
            cpu_limit_cores: n.facts.cpu_limit_cores,
            memory_limit_bytes: n.facts.memory_limit_bytes,
            attached_to: n.attached_to.clone(),
            runner_limit: n.runner_limit.as_ref().map(|l| l.value),
        })
        .collect();
    Ok(DockerWatch {
        docker,
        containers: watched,
        topology,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::settings::{Provenance, Sourced};
    use crate::record::summary::Host;

    #[test]
    fn a_saved_run_is_diagnosed_with_the_settings_it_recorded() {
        use crate::diagnose::tests::{closed, settings};
        let mut saved = Summary::new(
            "t",
            crate::record::LoadModel::Closed,
            "http://127.0.0.1/x",
            None,
            std::time::SystemTime::now(),
        );
        saved.stages = vec![closed(0, 20, 4.7)];
        saved.settings = Some(settings(1.0, Some(10), Some(5)));
        saved.host = Some(Host {
            cores: Some(Sourced::new(2.0, Provenance::Recorded("recorded".into()))),
            shares_client_cpu: true,
            client_cores: Some(2.0),
        });
        // Written and read back as summary.json is.
        let text = serde_json::to_string(&saved).unwrap();
        let mut back: Summary = serde_json::from_str(&text).unwrap();
        let (d, rec) = analyze(&mut back, Settings::default(), None);
        assert_eq!(d.capping_limit, Some(crate::model::Limit::RunnerLimit));
        assert_eq!(
            d.settings.runner_limit.as_ref().unwrap().source.words(),
            "test"
        );
        assert!(rec.is_ok());
        // A flag overrides what the run recorded.
        let flags = Settings {
            runner_limit: Some(Sourced::new(20, Provenance::Flag("--runner-limit".into()))),
            ..Settings::default()
        };
        let (d2, _) = analyze(&mut back, flags, None);
        assert_eq!(d2.settings.runner_limit.as_ref().unwrap().value, 20);
        // The diagnosis is stored typed and survives the round trip.
        let again: Summary = serde_json::from_str(&serde_json::to_string(&back).unwrap()).unwrap();
        assert_eq!(again.diagnosis.as_ref(), Some(&d2));
    }

    #[test]
    fn a_summary_with_an_older_diagnosis_is_read_and_diagnosed_again() {
        use crate::diagnose::tests::closed;
        let mut old = serde_json::to_value(Summary::new(
            "t",
            crate::record::LoadModel::Closed,
            "",
            Some(serde_json::json!({"sleep_ms": 1000})),
            std::time::SystemTime::now(),
        ))
        .unwrap();
        old["schema"] = "n8ncap.summary/1".into();
        old["stages"] = serde_json::to_value(vec![closed(0, 20, 4.7)]).unwrap();
        // Schema 1 wrote the diagnosis as free JSON with `load` per level.
        old["diagnosis"] =
            serde_json::json!({"capping_limit": "runner_limit", "levels": [{"load": 20.0}]});
        old["recommendation"] = serde_json::json!({"operating_concurrency": 13});
        let dir = std::env::temp_dir().join(format!("n8ncap-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("summary.json"), old.to_string()).unwrap();
        let mut s = crate::record::dir::load_summary(&dir).unwrap();
        assert!(s.diagnosis.is_none() && s.recommendation.is_none());
        let (d, _) = analyze(&mut s, settings_10(), None);
        assert_eq!(d.capping_limit, Some(crate::model::Limit::RunnerLimit));
        // A schema from the future is refused, naming it.
        old["schema"] = "n8ncap.summary/99".into();
        std::fs::write(dir.join("summary.json"), old.to_string()).unwrap();
        let err = crate::record::dir::load_summary(&dir)
            .unwrap_err()
            .to_string();
        assert!(err.contains("n8ncap.summary/99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn settings_10() -> Settings {
        Settings {
            worker_concurrency: Some(Sourced::new(10, Provenance::Assumed("t".into()))),
            ..Settings::default()
        }
    }
}
