//! What a run watches in Docker: the containers of a compose project (or every container),
//! each with its role, limits and runner pairing, and the topology they make.

use super::WatchedContainer;
use crate::observe::docker;
use crate::topology::Topology;

/// The Docker side of a sweep: the client, the containers to sample, the topology.
pub struct DockerWatch {
    pub docker: bollard::Docker,
    pub containers: Vec<WatchedContainer>,
    pub topology: Topology,
}

/// Discovers the containers to watch and their topology.
pub async fn watch(project: Option<&str>) -> anyhow::Result<DockerWatch> {
    let docker = docker::connect().await?;
    let found = docker::discover(&docker, project).await?;
    if found.is_empty() {
        if let Some(p) = project {
            let all = docker::discover_containers(&docker, Some(p), true).await?;
            if all.is_empty() {
                return Err(docker::no_such_project(&docker, p).await.into());
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
