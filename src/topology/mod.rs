//! Topology: who is main, worker, webhook, runner, redis or postgres, and the settings that
//! decide capacity, each with where it came from. Built from "facts" about a container or a
//! compose service (image, command, environment, labels, memory limit), so the Docker API and
//! compose files feed the same classification.
//!
//! Only the variables the analysis needs keep their values ([`KEPT_VARIABLES`]); every other
//! variable is kept as a name. Secrets therefore never enter this data.

pub mod alert_rules;
mod autoscaler;
mod autoscaler_target;
mod classify;
pub mod compose;
pub mod docker;
mod facts;
mod formula;
pub mod k8s;
mod manifest;
pub mod n8n_env;
mod settings;

use crate::model::n8n_defaults;
use crate::model::settings::Provenance;
use crate::model::settings::{ExecutionsMode, Settings, Sourced};
pub use crate::record::Role;
pub use autoscaler_target::*;
pub use classify::*;
pub use facts::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A classified node with the settings that decide capacity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub facts: Facts,
    pub role: Role,
    /// The signal the role was read from ("N8N_RUNNERS_TASK_BROKER_URI is set", "command:
    /// worker", "image n8nio/runners").
    #[serde(default)]
    pub role_by: String,
    /// Workers: effective worker concurrency.
    pub worker_concurrency: Option<Sourced<u32>>,
    /// Runners: their limit; workers in internal mode: their internal runner's.
    pub runner_limit: Option<Sourced<u32>>,
    pub runners_mode: Option<Sourced<RunnersMode>>,
    /// Runners: the worker (or main) whose broker they attach to.
    pub attached_to: Option<String>,
    /// Workers and main: Σ limits of runners attached (or of the internal runners), over all
    /// the node's replicas; a replica's share is this ÷ replicas.
    pub runner_capacity: Option<u32>,
    /// Workers and main: runner replicas attached to the node's broker (external mode); fewer
    /// than the node's replicas leaves some replicas with none.
    #[serde(default)]
    pub runners_attached: u32,
    /// n8n processes: `EXECUTIONS_MODE` (n8n's default is regular).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_mode: Option<Sourced<ExecutionsMode>>,
    /// n8n processes: `N8N_CONCURRENCY_PRODUCTION_LIMIT` when it is a limit (None: -1, n8n's
    /// default, no limit). Main in regular mode: its slots; a worker: its slots, over
    /// `--concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub production_limit: Option<Sourced<u32>>,
    /// A worker: the `--concurrency` its production limit overrides (both were set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overridden_concurrency: Option<u32>,
    /// Postgres: `max_connections` (its command's `-c max_connections=N`; Postgres' default
    /// 100) and `superuser_reserved_connections` (default 3), which n8n's pools cannot use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<Sourced<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_connections: Option<Sourced<u32>>,
    /// n8n processes and runners: the timeouts that end executions and tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<settings::TimeSettings>,
    /// n8n processes: where binary data goes (`N8N_DEFAULT_BINARY_DATA_MODE`; n8n 2.x defaults
    /// to `database` in queue mode, `filesystem` in regular mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_data_mode: Option<Sourced<crate::model::settings::BinaryDataMode>>,
    /// n8n processes: the Postgres connections each keeps (`DB_POSTGRESDB_POOL_SIZE`, n8n's
    /// default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_pool_size: Option<Sourced<u32>>,
    /// A PgBouncer (its image): the clients it accepts, the server connections it opens, its
    /// pool mode, from its variables (`PGBOUNCER_*` as bitnami's and PgBouncer's own images
    /// read them, or unprefixed as edoburu's) or PgBouncer's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgbouncer: Option<Sourced<crate::model::budget::PgBouncer>>,
    pub notes: Vec<String>,
}

impl Node {
    pub fn name(&self) -> &str {
        &self.facts.name
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Topology {
    pub nodes: Vec<Node>,
}

impl Topology {
    pub fn build(facts: Vec<Facts>) -> Topology {
        let mut nodes: Vec<Node> = facts
            .into_iter()
            .map(|f| {
                let (role, why) = classify_why(&f);
                Node {
                    facts: f,
                    role,
                    role_by: why.to_string(),
                    worker_concurrency: None,
                    runner_limit: None,
                    runners_mode: None,
                    attached_to: None,
                    runner_capacity: None,
                    runners_attached: 0,
                    executions_mode: None,
                    production_limit: None,
                    overridden_concurrency: None,
                    max_connections: None,
                    reserved_connections: None,
                    times: None,
                    binary_data_mode: None,
                    db_pool_size: None,
                    pgbouncer: None,
                    notes: Vec::new(),
                }
            })
            .collect();
        for n in &mut nodes {
            settings::settle(n);
        }
        let (capacity, attached_count) = attach_runners(&mut nodes);
        for n in &mut nodes {
            if matches!(n.role, Role::Main | Role::Worker) {
                let external = n
                    .runners_mode
                    .as_ref()
                    .is_some_and(|m| m.value == RunnersMode::External);
                let attached = capacity.get(&n.facts.name).copied().unwrap_or(0);
                n.runners_attached = attached_count.get(&n.facts.name).copied().unwrap_or(0);
                // Σ over the node's replicas, like the runners attached: each replica of an
                // internal-mode process has its own internal runner.
                n.runner_capacity = Some(if external {
                    attached
                } else {
                    n.runner_limit
                        .as_ref()
                        .map(|l| l.value)
                        .unwrap_or(10)
                        .saturating_mul(n.facts.replicas.max(1))
                });
            }
        }
        Topology { nodes }
    }

    /// A deployment without workers whose main runs in regular mode: main is the one process
    /// that runs executions, its production limit the slots, its runners the runner capacity.
    pub fn regular_settings(&self) -> Option<Settings> {
        let main = self.nodes.iter().find(|n| n.role == Role::Main)?;
        let mode = main.executions_mode.as_ref()?;
        if mode.value != ExecutionsMode::Regular {
            return None;
        }
        let mut s = Settings::regular(
            main.production_limit.as_ref().map(|l| l.value),
            Provenance::Deployment(format!("Docker: {}", mode.source)),
        );
        if let Some(l) = &main.production_limit {
            s.worker_concurrency = Some(Sourced::new(
                l.value,
                l.source.with_note(" (regular mode: main's slots)"),
            ));
        }
        if let Some(cap) = main.runner_capacity.filter(|c| *c > 0) {
            s.runner_limit = Some(Sourced::new(
                cap,
                Provenance::Deployment(format!("Docker: runner capacity of {}", main.facts.name)),
            ));
        } else if let Some(r) = &main.runner_limit {
            s.runner_limit = Some(r.clone());
        }
        Some(s)
    }

    pub fn workers(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.role == Role::Worker)
    }

    /// The model's settings, when workers agree (the model takes one value per setting).
    pub fn model_settings(&self) -> Settings {
        let binary_data_mode = self
            .nodes
            .iter()
            .find(|n| n.role == Role::Main)
            .and_then(|m| m.binary_data_mode.clone());
        Settings {
            binary_data_mode,
            ..self.capacity_settings()
        }
    }

    fn capacity_settings(&self) -> Settings {
        let workers: Vec<&Node> = self.workers().collect();
        if workers.is_empty() {
            return self.regular_settings().unwrap_or_default();
        }
        let count: u32 = workers
            .iter()
            .map(|w| w.facts.replicas)
            .fold(0u32, u32::saturating_add);
        let mut s = Settings {
            workers: Some(Sourced::new(
                count,
                Provenance::Deployment("Docker: worker containers".into()),
            )),
            ..Settings::default()
        };
        let concs: Vec<u32> = workers
            .iter()
            .filter_map(|w| w.worker_concurrency.as_ref().map(|c| c.value))
            .collect();
        if concs.len() == workers.len() && concs.windows(2).all(|w| w[0] == w[1]) {
            s.worker_concurrency = workers[0].worker_concurrency.clone();
        }
        // Per worker process: a node's capacity is counted over its replicas.
        let caps: Vec<u32> = workers
            .iter()
            .filter_map(|w| w.runner_capacity.map(|c| c / w.facts.replicas.max(1)))
            .collect();
        if caps.len() == workers.len() && caps.windows(2).all(|w| w[0] == w[1]) && caps[0] > 0 {
            s.runner_limit = Some(Sourced::new(
                caps[0],
                Provenance::Deployment(format!(
                    "Docker: Σ N8N_RUNNERS_MAX_CONCURRENCY of the runners attached to {}",
                    workers[0].facts.name
                )),
            ));
            s.runners_per_worker = Some(Sourced::new(
                1,
                Provenance::Deployment("runner capacity counted per worker".into()),
            ));
        }
        s
    }
}

/// Reads `-f` inputs: compose files (merged in order, as Compose does) or Kubernetes
/// manifests (`-` is standard input), recognised by their content. Returns the services and
/// the input's label ("compose: a.yml", "kubernetes: rendered.yaml").
pub fn load_files(
    files: &[std::path::PathBuf],
) -> Result<(Vec<compose::Service>, String), crate::error::BadInput> {
    if files.is_empty() {
        return Err(crate::error::BadInput(
            "give compose files or Kubernetes manifests with -f FILE (repeatable; - reads \
             standard input)"
                .into(),
        ));
    }
    let mut manifests = Vec::new();
    let mut compose_files = Vec::new();
    for f in files {
        let (text, shown) = k8s::read_input(f)?;
        if k8s::looks_like_kubernetes(&text) {
            manifests.push((text, shown));
        } else if f.as_os_str() == "-" {
            return Err(crate::error::BadInput(
                "standard input holds no Kubernetes objects (apiVersion and kind): give a \
                 compose file by its path, so its .env and env_file can be found"
                    .into(),
            ));
        } else {
            compose_files.push(f.clone());
        }
    }
    let label = |kind: &str, names: Vec<String>| format!("{kind}: {}", names.join(", "));
    match (manifests.is_empty(), compose_files.is_empty()) {
        (false, false) => Err(crate::error::BadInput(
            "-f mixes compose files and Kubernetes manifests: audit them separately".into(),
        )),
        (true, _) => {
            let project = compose::load(&compose_files)?;
            Ok((
                project.services,
                label(
                    "compose",
                    compose_files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect(),
                ),
            ))
        }
        (false, true) => {
            let names = manifests
                .iter()
                .map(|(_, shown)| shown.display().to_string())
                .collect();
            let services = k8s::load_all(&manifests)?.services;
            Ok((services, label("kubernetes", names)))
        }
    }
}

/// Attaches each runner to the broker its URI names; per n8n process, the Σ of its runners'
/// limits over their replicas, and the runner replicas attached.
fn attach_runners(nodes: &mut [Node]) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let mut capacity: BTreeMap<String, u32> = BTreeMap::new();
    let mut attached_count: BTreeMap<String, u32> = BTreeMap::new();
    for i in 0..nodes.len() {
        if nodes[i].role != Role::Runner {
            continue;
        }
        let uri = nodes[i]
            .facts
            .env
            .get("N8N_RUNNERS_TASK_BROKER_URI")
            .cloned()
            .unwrap_or_else(|| "http://127.0.0.1:5679".into());
        let host = broker_host(&uri).unwrap_or_default();
        let n8n = |o: &Node| matches!(o.role, Role::Main | Role::Worker | Role::Webhook);
        let loopback = matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1");
        let target = if loopback && nodes[i].facts.k8s.is_some() {
            // A sidecar reaches the n8n container of its own pod on localhost.
            nodes
                .iter()
                .position(|o| n8n(o) && same_pod(&o.facts, &nodes[i].facts))
        } else {
            nodes.iter().position(|o| {
                n8n(o)
                    && (o.facts.name == host
                        || o.facts.service.as_deref() == Some(host.as_str())
                        || o.facts.hostnames.contains(&host))
            })
        };
        match target {
            Some(t) => {
                let tname = nodes[t].facts.name.clone();
                let limit = nodes[i]
                    .runner_limit
                    .as_ref()
                    .map(|l| l.value)
                    .unwrap_or(10);
                *capacity.entry(tname.clone()).or_insert(0) +=
                    limit.saturating_mul(nodes[i].facts.replicas);
                *attached_count.entry(tname.clone()).or_insert(0) += nodes[i].facts.replicas;
                nodes[i].attached_to = Some(tname);
            }
            None => nodes[i].notes.push(format!(
                "N8N_RUNNERS_TASK_BROKER_URI={uri} names no n8n main or worker here ({host:?})"
            )),
        }
    }
    (capacity, attached_count)
}

/// Where a plan for this deployment is pasted: its first worker's service (or Deployment and
/// container), the runner paired with it, and what owns its replicas.
pub fn plan_target(t: &Topology) -> crate::record::recommendation::PlanTarget {
    let Some(w) = t.nodes.iter().find(|n| n.role == Role::Worker) else {
        return Default::default();
    };
    let container = |n: &Node| {
        n.facts
            .name
            .rsplit_once('/')
            .map_or(n.facts.name.clone(), |(_, c)| c.to_string())
    };
    let runner = t
        .nodes
        .iter()
        .filter(|r| r.role == Role::Runner)
        .find(|r| r.attached_to.as_deref() == Some(w.name()) || same_pod(&r.facts, &w.facts));
    let in_k8s = w.facts.k8s.is_some();
    crate::record::recommendation::PlanTarget {
        worker: Some(
            w.facts
                .service
                .clone()
                .unwrap_or_else(|| w.facts.name.clone()),
        ),
        worker_container: in_k8s.then(|| container(w)),
        runner: runner.map(|r| {
            if in_k8s {
                container(r)
            } else {
                r.facts
                    .service
                    .clone()
                    .unwrap_or_else(|| r.facts.name.clone())
            }
        }),
        autoscaler: w
            .facts
            .k8s
            .as_ref()
            .and_then(|k| k.autoscaler.as_ref())
            .map(|a| a.by.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str, image: &str, cmd: &[&str], env: &[(&str, &str)]) -> Facts {
        let mut f = Facts {
            name: name.into(),
            service: Some(name.into()),
            image: image.into(),
            command: cmd.iter().map(|s| s.to_string()).collect(),
            replicas: 1,
            origin: format!("container {name}"),
            ..Facts::default()
        };
        f.set_env(env.iter().map(|(k, v)| (*k, Some(*v))));
        f
    }

    #[test]
    fn a_main_without_workers_and_queue_mode_is_regular_unless_it_is_the_simulator() {
        let t = Topology::build(vec![facts(
            "n8n",
            "n8nio/n8n:2.41.1",
            &[],
            &[("N8N_CONCURRENCY_PRODUCTION_LIMIT", "4")],
        )]);
        let s = t.model_settings();
        assert!(s.is_regular());
        assert_eq!(s.worker_concurrency.map(|c| c.value), Some(4));
        assert_eq!(s.runner_limit.map(|r| r.value), Some(10));
        assert_eq!(
            s.binary_data_mode.map(|b| b.value.word()),
            Some("filesystem")
        );
        let sim = Topology::build(vec![facts(
            "sim",
            "n8ncap",
            &["/n8ncap", "sim", "all"],
            &[],
        )]);
        assert!(!sim.model_settings().is_regular());
        let queue = Topology::build(vec![facts(
            "n8n",
            "n8nio/n8n:2.41.1",
            &[],
            &[("EXECUTIONS_MODE", "queue")],
        )]);
        assert!(!queue.model_settings().is_regular());
        assert_eq!(
            queue.nodes[0]
                .binary_data_mode
                .as_ref()
                .map(|b| b.value.word()),
            Some("database")
        );
    }

    #[test]
    fn classifies_and_pairs_like_the_official_compose() {
        let t = Topology::build(vec![
            facts(
                "n8n",
                "n8nio/n8n:2.41.1",
                &[],
                &[("N8N_RUNNERS_MODE", "external")],
            ),
            facts(
                "n8n-worker",
                "n8nio/n8n:2.41.1",
                &["worker", "--concurrency=15"],
                &[
                    ("N8N_RUNNERS_MODE", "external"),
                    ("N8N_RUNNERS_MAX_CONCURRENCY", "2"),
                    ("N8N_ENCRYPTION_KEY", "s3cret"),
                ],
            ),
            facts(
                "n8n-worker-runner",
                "n8nio/runners:2.41.1",
                &[],
                &[
                    ("N8N_RUNNERS_TASK_BROKER_URI", "http://n8n-worker:5679"),
                    ("N8N_RUNNERS_MAX_CONCURRENCY", "5"),
                ],
            ),
            facts("redis", "redis:7-alpine", &[], &[]),
            facts(
                "postgres",
                "postgres:16",
                &[],
                &[("POSTGRES_PASSWORD", "hunter2")],
            ),
        ]);
        let roles: Vec<Role> = t.nodes.iter().map(|n| n.role).collect();
        assert_eq!(
            roles,
            vec![
                Role::Main,
                Role::Worker,
                Role::Runner,
                Role::Redis,
                Role::Postgres
            ]
        );
        let w = &t.nodes[1];
        assert_eq!(w.worker_concurrency.as_ref().unwrap().value, 15);
        assert_eq!(w.runner_capacity, Some(5));
        assert!(w
            .notes
            .iter()
            .any(|n| n.contains("no effect in external mode")));
        assert_eq!(t.nodes[2].attached_to.as_deref(), Some("n8n-worker"));
        assert_eq!(t.nodes[0].runner_capacity, Some(0));
        let s = t.model_settings();
        assert_eq!(s.worker_concurrency.unwrap().value, 15);
        assert_eq!(s.runner_limit.unwrap().value, 5);
        // Secrets are names only.
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("s3cret") && !json.contains("hunter2"));
        assert!(json.contains("N8N_ENCRYPTION_KEY"));
    }

    #[test]
    fn production_limit_overrides_the_flag() {
        let t = Topology::build(vec![facts(
            "w",
            "n8nio/n8n",
            &["n8n", "worker", "--concurrency", "20"],
            &[("N8N_CONCURRENCY_PRODUCTION_LIMIT", "8")],
        )]);
        let w = &t.nodes[0];
        assert_eq!(w.worker_concurrency.as_ref().unwrap().value, 8);
        assert!(w
            .worker_concurrency
            .as_ref()
            .unwrap()
            .source
            .words()
            .contains("PRODUCTION_LIMIT"));
        assert_eq!(
            w.runner_capacity,
            Some(10),
            "internal runner, default limit"
        );
    }
}
