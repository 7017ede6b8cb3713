//! The Docker Engine API (bollard): discover the deployment's containers, read their settings
//! into [`Facts`] (secrets dropped at once), and sample memory and CPU as `docker stats` does.
//! Honours `DOCKER_HOST`.

use crate::record::lifecycle::{ContainerState, LifecycleAction};
use crate::topology::Facts;
use bollard::query_parameters::{
    EventsOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    StatsOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;

/// Connects and pings, so an absent socket or a permission problem is one clear line.
pub async fn connect() -> anyhow::Result<Docker> {
    // DOCKER_HOST unset or empty means the default socket, as the docker CLI reads it.
    let host = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty());
    let where_ = crate::wire::url::redact(host.as_deref().unwrap_or("unix:///var/run/docker.sock"));
    let docker = match host {
        Some(_) => Docker::connect_with_defaults(),
        None => Docker::connect_with_socket_defaults(),
    }
    .map_err(|e| {
        anyhow::anyhow!(crate::wire::url::redact(&format!(
            "cannot use the Docker API at {where_}: {e}"
        )))
    })?;
    match tokio::time::timeout(Duration::from_secs(3), docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => {
            let text = e.to_string();
            let hint = if text.contains("ermission") {
                " (permission denied: run as a user in the docker group, or set DOCKER_HOST)"
            } else if text.contains("No such file") || text.contains("onnect") {
                " (no Docker daemon there: start it, or set DOCKER_HOST)"
            } else {
                ""
            };
            Err(anyhow::anyhow!(crate::wire::url::redact(&format!(
                "the Docker API at {where_} does not answer: {text}{hint}"
            ))))
        }
        Err(_) => Err(anyhow::anyhow!(
            "the Docker API at {where_} did not answer within 3 s"
        )),
    }
}

/// The refusal for a `--project` that names no compose project here: the projects the engine
/// has (from their containers' labels, stopped ones too), and the nearest to what was typed.
pub async fn no_such_project(docker: &Docker, project: &str) -> crate::error::BadInput {
    let mut filters: HashMap<String, Vec<String>> = HashMap::new();
    filters.insert("label".into(), vec!["com.docker.compose.project".into()]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let mut projects: Vec<String> =
        match tokio::time::timeout(CALL_LIMIT, docker.list_containers(Some(opts))).await {
            Ok(Ok(list)) => list
                .iter()
                .filter_map(|c| {
                    c.labels
                        .as_ref()?
                        .get("com.docker.compose.project")
                        .cloned()
                })
                .map(|p| crate::util::escape_control(&p).into_owned())
                .collect(),
            _ => Vec::new(),
        };
    projects.sort();
    projects.dedup();
    let typed = crate::util::escape_control(project);
    let near = projects
        .iter()
        .min_by_key(|p| crate::util::edit_distance(&typed, p))
        .filter(|p| crate::util::edit_distance(&typed, p) <= 3)
        .map(|p| format!(" — did you mean `{p}`?"))
        .unwrap_or_default();
    let here = if projects.is_empty() {
        "the engine has no compose project".to_string()
    } else {
        format!(
            "projects here: {}",
            crate::util::truncate(&projects.join(", "), 300)
        )
    };
    crate::error::BadInput(format!(
        "--project {typed}: no container of that compose project (label \
         com.docker.compose.project){near} ({here})"
    ))
}

/// Running containers, of one compose project when given, as [`Facts`].
pub async fn discover(
    docker: &Docker,
    project: Option<&str>,
) -> anyhow::Result<Vec<(String, Facts)>> {
    discover_containers(docker, project, false).await
}

/// Containers of one compose project (or all), stopped ones too when `all`: each with its
/// state (OOM kill, exit code, restarts) in [`Facts::state`].
pub async fn discover_containers(
    docker: &Docker,
    project: Option<&str>,
    all: bool,
) -> anyhow::Result<Vec<(String, Facts)>> {
    let mut filters: HashMap<String, Vec<String>> = HashMap::new();
    if let Some(p) = project {
        filters.insert(
            "label".into(),
            vec![format!("com.docker.compose.project={p}")],
        );
    }
    let opts = ListContainersOptionsBuilder::default()
        .all(all)
        .filters(&filters)
        .build();
    let list = tokio::time::timeout(CALL_LIMIT, docker.list_containers(Some(opts)))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "listing containers: the Docker API did not answer within {} s",
                CALL_LIMIT.as_secs()
            )
        })?
        .map_err(|e| anyhow::anyhow!("listing containers: {e}"))?;
    // Every inspect at once, each bounded: one container whose inspect never answers costs
    // [`CALL_LIMIT`] once, not per container, and is a gap, named.
    let inspected = futures_util::future::join_all(list.iter().filter_map(|c| {
        let id = c.id.clone()?;
        let name = c
            .names
            .as_ref()
            .and_then(|n| n.first().cloned())
            .unwrap_or_else(|| id.chars().take(12).collect());
        Some(async move {
            let got = tokio::time::timeout(
                CALL_LIMIT,
                docker.inspect_container(&id, None::<InspectContainerOptions>),
            )
            .await;
            (id, name, got)
        })
    }))
    .await;
    let mut out = Vec::new();
    for (id, name, got) in inspected {
        match got {
            Ok(Ok(info)) => out.push((id, crate::topology::docker::facts(&info))),
            // A container may vanish between list and inspect: skip it.
            Ok(Err(_)) => {}
            Err(_) => eprintln!(
                "n8ncap: container {} did not answer inspect within {} s: left out (a gap)",
                crate::util::escape_control(name.trim_start_matches('/')),
                CALL_LIMIT.as_secs()
            ),
        }
    }
    Ok(out)
}

/// The longest one Docker API call may take before it is a gap.
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// Why a stats reading failed: the container is gone (the API answered 404), or anything else.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("the container is gone (Docker answered 404)")]
    Gone,
    /// Docker answers a stopped container's stats with empty figures: not a reading of 0 bytes.
    #[error("the container is not running (exited or restarting): no stats")]
    NotRunning,
    #[error("{0}")]
    Other(String),
}

/// The cores of the machine the Docker Engine runs on (`docker info` NCPU).
pub async fn engine_cores(docker: &Docker) -> Option<f64> {
    let info = tokio::time::timeout(Duration::from_secs(3), docker.info())
        .await
        .ok()?
        .ok()?;
    info.ncpu.filter(|n| *n > 0).map(|n| n as f64)
}

/// One stats reading of a container.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawStats {
    /// Memory as `docker stats` shows it: usage minus inactive file cache.
    pub memory_bytes: u64,
    pub memory_limit: u64,
    pub cpu_total_ns: u64,
    pub system_ns: u64,
    pub online_cpus: u32,
}

pub async fn stats_once(docker: &Docker, id: &str) -> Result<RawStats, StatsError> {
    let opts = StatsOptionsBuilder::default()
        .stream(false)
        .one_shot(true)
        .build();
    let mut s = docker.stats(id, Some(opts));
    let r = tokio::time::timeout(Duration::from_secs(3), s.next())
        .await
        .map_err(|_| StatsError::Other(format!("stats of {id} took over 3 s")))?
        .ok_or_else(|| StatsError::Other(format!("no stats for {id}")))?
        .map_err(|e| match e {
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            } => StatsError::Gone,
            e => StatsError::Other(format!("stats of {id}: {e}")),
        })?;
    let mem = r.memory_stats.unwrap_or_default();
    if mem.usage.is_none() {
        return Err(StatsError::NotRunning);
    }
    let inactive = mem
        .stats
        .as_ref()
        .and_then(|s| {
            s.get("inactive_file")
                .or_else(|| s.get("total_inactive_file"))
                .copied()
        })
        .unwrap_or(0);
    let cpu = r.cpu_stats.unwrap_or_default();
    Ok(RawStats {
        memory_bytes: mem.usage.unwrap_or(0).saturating_sub(inactive),
        memory_limit: mem.limit.unwrap_or(0),
        cpu_total_ns: cpu.cpu_usage.and_then(|u| u.total_usage).unwrap_or(0),
        system_ns: cpu.system_cpu_usage.unwrap_or(0),
        online_cpus: cpu.online_cpus.unwrap_or(1).max(1),
    })
}

/// CPU between two readings, in % of one core (docker stats' convention: 200 % = two cores).
pub fn cpu_percent(prev: &RawStats, now: &RawStats) -> Option<f64> {
    let d_cpu = now.cpu_total_ns.checked_sub(prev.cpu_total_ns)? as f64;
    let d_sys = now.system_ns.checked_sub(prev.system_ns)? as f64;
    if d_sys <= 0.0 {
        return None;
    }
    Some(d_cpu / d_sys * now.online_cpus as f64 * 100.0)
}

/// A container's state from `inspect`: running, `State.OOMKilled`, `ExitCode`, `RestartCount`,
/// `StartedAt`, `FinishedAt`.
pub async fn state(docker: &Docker, id: &str) -> Result<ContainerState, StatsError> {
    let info = tokio::time::timeout(
        Duration::from_secs(3),
        docker.inspect_container(id, None::<InspectContainerOptions>),
    )
    .await
    .map_err(|_| StatsError::Other(format!("inspect of {id} took over 3 s")))?
    .map_err(|e| match e {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        } => StatsError::Gone,
        e => StatsError::Other(format!("inspect of {id}: {e}")),
    })?;
    Ok(crate::topology::docker::state(&info))
}

/// One lifecycle event of a watched container, from the Docker events stream.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub id: String,
    pub action: LifecycleAction,
    pub exit_code: Option<i64>,
    /// Unix seconds, as the engine stamped it.
    pub unix: f64,
}

/// Follows the engine's events for these containers (`die`, `oom`, `start`, `restart`,
/// `kill`, `stop`, `destroy`), so a death between two stats readings is still seen. The
/// stream ends when the engine closes it; the caller's task ends with the run.
pub fn lifecycle_events(
    docker: &Docker,
    ids: &[String],
) -> impl futures_util::Stream<Item = Lifecycle> + use<> {
    let mut filters: HashMap<String, Vec<String>> = HashMap::new();
    filters.insert("type".into(), vec!["container".into()]);
    filters.insert("container".into(), ids.to_vec());
    filters.insert(
        "event".into(),
        ["die", "oom", "start", "restart", "kill", "stop", "destroy"]
            .map(String::from)
            .to_vec(),
    );
    let opts = EventsOptionsBuilder::default().filters(&filters).build();
    docker.events(Some(opts)).filter_map(|m| async move {
        let m = m.ok()?;
        let action = LifecycleAction::from_docker(m.action.as_deref()?)?;
        let actor = m.actor?;
        let exit_code = actor
            .attributes
            .as_ref()
            .and_then(|a| a.get("exitCode"))
            .and_then(|c| c.parse::<i64>().ok());
        let unix = m
            .time_nano
            .map(|n| n as f64 / 1e9)
            .or(m.time.map(|t| t as f64))
            .unwrap_or(0.0);
        Some(Lifecycle {
            id: actor.id?,
            action,
            exit_code,
            unix,
        })
    })
}

pub use crate::record::stage::ContainerStats;
