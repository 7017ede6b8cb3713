//! `n8ncap inspect`: the deployment as n8ncap reads it — live containers through the Docker API
//! (with one reading of their stats), or compose files and Kubernetes manifests with `-f` — each
//! capacity setting with where it comes from.

use crate::cli::OutputArgs;
use crate::error;
use crate::record::stage::ContainerStats;
use crate::report::views::Inspect;
use std::path::PathBuf;
use std::time::Duration;

pub(super) async fn run(
    project: Option<&str>,
    files: &[PathBuf],
    output: &OutputArgs,
) -> anyhow::Result<i32> {
    let format = output.format::<Inspect>("inspect")?;
    if !files.is_empty() {
        let (services, input) = crate::topology::load_files(files)?;
        let topology =
            crate::topology::Topology::build(services.into_iter().map(|s| s.facts).collect());
        let view = Inspect {
            input: Some(&input),
            model_settings: topology.model_settings(),
            topology: &topology,
            stats: None,
        };
        crate::report::emit(&view, format)?;
        return Ok(error::EXIT_OK);
    }
    let super::DockerWatch {
        docker: d,
        containers: watched,
        topology,
    } = super::docker_watch(project).await?;
    let stats = stats_twice(&d, &watched).await;
    let view = Inspect {
        input: None,
        model_settings: topology.model_settings(),
        topology: &topology,
        stats: Some(&stats),
    };
    crate::report::emit(&view, format)?;
    Ok(error::EXIT_OK)
}

/// Each container's memory, and its CPU over one second (two readings).
async fn stats_twice(
    d: &bollard::Docker,
    watched: &[crate::observe::watch::WatchedContainer],
) -> Vec<Option<ContainerStats>> {
    use crate::observe::docker;
    let first =
        futures_util::future::join_all(watched.iter().map(|c| docker::stats_once(d, &c.id))).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second =
        futures_util::future::join_all(watched.iter().map(|c| docker::stats_once(d, &c.id))).await;
    first
        .iter()
        .zip(second.iter())
        .map(|(a, b)| match (a, b) {
            (Ok(a), Ok(b)) => Some(ContainerStats {
                memory_bytes: b.memory_bytes,
                cpu_percent: docker::cpu_percent(a, b),
            }),
            (_, Ok(b)) => Some(ContainerStats {
                memory_bytes: b.memory_bytes,
                cpu_percent: None,
            }),
            _ => None,
        })
        .collect()
}
