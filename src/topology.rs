//! Topology: who is main, worker, webhook, runner, redis or postgres, and the settings that
//! decide capacity, each with where it came from. Built from "facts" about a container or a
//! compose service (image, command, environment, labels, memory limit), so the Docker API and
//! compose files feed the same classification.
//!
//! Only the variables the analysis needs keep their values ([`KEPT_VARIABLES`]); every other
//! variable is kept as a name. Secrets therefore never enter this data.

use crate::model::n8n_defaults;
use crate::model::settings::{ExecutionsMode, Settings, Sourced};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Variables whose values n8ncap reads. Nothing secret is on this list.
pub const KEPT_VARIABLES: &[&str] = &[
    "EXECUTIONS_MODE",
    "N8N_CONCURRENCY_PRODUCTION_LIMIT",
    "N8N_RUNNERS_MODE",
    "N8N_RUNNERS_ENABLED",
    "N8N_RUNNERS_MAX_CONCURRENCY",
    "N8N_RUNNERS_TASK_BROKER_URI",
    "N8N_RUNNERS_BROKER_PORT",
    "N8N_RUNNERS_BROKER_LISTEN_ADDRESS",
    "N8N_RUNNERS_TASK_REQUEST_TIMEOUT",
    "N8N_RUNNERS_TASK_TIMEOUT",
    "N8N_DEFAULT_BINARY_DATA_MODE",
    "N8N_RUNNERS_MAX_OLD_SPACE_SIZE",
    "N8N_METRICS",
    "N8N_METRICS_PREFIX",
    "N8N_METRICS_INCLUDE_QUEUE_METRICS",
    "N8N_METRICS_QUEUE_METRICS_INTERVAL",
    "N8N_METRICS_INCLUDE_MESSAGE_EVENT_BUS_METRICS",
    "N8N_PORT",
    "QUEUE_HEALTH_CHECK_ACTIVE",
    "QUEUE_HEALTH_CHECK_PORT",
    "QUEUE_BULL_PREFIX",
    "QUEUE_BULL_REDIS_HOST",
    "QUEUE_BULL_REDIS_PORT",
    "QUEUE_WORKER_CONCURRENCY",
    "DB_TYPE",
    "DB_POSTGRESDB_HOST",
    "DB_POSTGRESDB_POOL_SIZE",
    "OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS",
    "GENERIC_TIMEZONE",
    "NODE_OPTIONS",
    "N8N_GRACEFUL_SHUTDOWN_TIMEOUT",
    "N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT",
    "QUEUE_BULL_REDIS_DB",
    "N8N_DEFAULT_BINARY_DATA_MODE",
];

pub use crate::record::Role;

/// `N8N_RUNNERS_MODE`: n8n starts its own runner (`internal`, the default) or waits for runner
/// containers (`external`). Any other value is refused by n8n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnersMode {
    Internal,
    External,
    Invalid,
}

impl RunnersMode {
    pub fn parse(v: &str) -> RunnersMode {
        match v.trim() {
            "internal" => RunnersMode::Internal,
            "external" => RunnersMode::External,
            _ => RunnersMode::Invalid,
        }
    }

    pub fn word(&self) -> &'static str {
        match self {
            RunnersMode::Internal => "internal",
            RunnersMode::External => "external",
            RunnersMode::Invalid => "invalid",
        }
    }
}

/// What is known about one container or compose service, secrets already dropped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Facts {
    pub name: String,
    pub service: Option<String>,
    pub project: Option<String>,
    pub image: String,
    /// Entrypoint and command, as one argument list.
    pub command: Vec<String>,
    /// Values of [`KEPT_VARIABLES`] only.
    pub env: BTreeMap<String, String>,
    /// Every variable name set, values not kept.
    pub env_names: Vec<String>,
    /// Names by which other containers reach this one (hostname, service, aliases).
    pub hostnames: Vec<String>,
    pub memory_limit_bytes: Option<u64>,
    /// CPU limit in cores (`--cpus`, `deploy.resources.limits.cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit_cores: Option<f64>,
    pub replicas: u32,
    /// Where these facts came from ("container n8n-worker-1", "compose service n8n-worker").
    pub origin: String,
    /// In-memory fingerprints of the secrets whose equality the audit compares (encryption
    /// key, runner auth token). Never serialized; the values themselves are never kept.
    #[serde(skip)]
    pub secret_fingerprints: BTreeMap<String, u64>,
    /// Where each variable is set, when the input says more than `origin` ("ConfigMap n8n key
    /// EXECUTIONS_MODE via envFrom", "Secret n8n-secret (value not read)").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_sources: BTreeMap<String, String>,
    /// What only Kubernetes manifests say: pod, replicas and autoscaling, probes, grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<K8sFacts>,
    /// Live containers: their state as Docker inspects it (OOM kill, exit code, restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::record::lifecycle::ContainerState>,
}

/// A container of a Kubernetes workload, as the rendered manifests describe it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct K8sFacts {
    /// `Deployment` or `StatefulSet`, and its name: containers of one workload share a pod
    /// (and `localhost`).
    pub workload_kind: String,
    pub workload: String,
    pub container: String,
    /// A sidecar: a second container of the pod, or an init container with
    /// `restartPolicy: Always` (a native sidecar).
    pub sidecar: bool,
    /// `spec.replicas` was written (else Kubernetes runs 1 unless an autoscaler sets it).
    pub replicas_declared: bool,
    /// The autoscaler targeting the workload, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<Autoscaler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Probe>,
    /// requests / limits as written ("cpu: 500m, memory: 1Gi").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<String>,
}

/// An HPA or a KEDA ScaledObject and what it scales on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Autoscaler {
    /// "HorizontalPodAutoscaler n8n-worker" or "ScaledObject n8n-worker".
    pub by: String,
    pub min: u32,
    pub max: u32,
    pub triggers: Vec<Trigger>,
    /// File and line of the autoscaler, for findings about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// One scaling signal: a resource (`cpu`, `memory`) or a KEDA trigger (`redis` with its list).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Trigger {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

/// A liveness, readiness or startup probe: its HTTP path, when it is an HTTP probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_path: Option<String>,
}

/// Secrets the audit compares across services, by fingerprint only.
pub const COMPARED_SECRETS: &[&str] = &["N8N_ENCRYPTION_KEY", "N8N_RUNNERS_AUTH_TOKEN"];

fn fingerprint(v: &str) -> u64 {
    use std::hash::BuildHasher;
    // A per-process random key: equal values compare equal within this run, and the number
    // means nothing outside it.
    static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    STATE.get_or_init(Default::default).hash_one(v)
}

impl Facts {
    /// A secret known by reference only (Kubernetes `secretKeyRef`): its name is recorded and,
    /// for the secrets the audit compares, a fingerprint of the reference — equal references
    /// mean one shared secret; the value is never read.
    pub fn set_secret_reference(&mut self, name: &str, reference: &str) {
        if !self.env_names.iter().any(|n| n == name) {
            self.env_names.push(name.to_string());
            self.env_names.sort();
        }
        self.env.remove(name);
        if COMPARED_SECRETS.contains(&name) {
            self.secret_fingerprints
                .insert(name.to_string(), fingerprint(&format!("ref:{reference}")));
        }
    }

    /// Splits a full environment into kept values and names. Call it on raw `KEY=VALUE` items.
    pub fn set_env<'a>(&mut self, items: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) {
        for (k, v) in items {
            let k = k.trim();
            if k.is_empty() {
                continue;
            }
            if !self.env_names.iter().any(|n| n == k) {
                self.env_names.push(k.to_string());
            }
            if let Some(v) = v {
                if KEPT_VARIABLES.contains(&k) {
                    // A kept URL keeps its host, never its `user:password@`.
                    self.env.insert(k.to_string(), crate::wire::url::redact(v));
                }
                if COMPARED_SECRETS.contains(&k) && !v.is_empty() {
                    self.secret_fingerprints
                        .insert(k.to_string(), fingerprint(v));
                }
            }
        }
        self.env_names.sort();
    }
}

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
    /// n8n processes: `EXECUTIONS_MODE` (n8n's default is regular).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_mode: Option<Sourced<ExecutionsMode>>,
    /// Main in regular mode: `N8N_CONCURRENCY_PRODUCTION_LIMIT` (None: -1, no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub production_limit: Option<Sourced<u32>>,
    /// n8n processes: where binary data goes (`N8N_DEFAULT_BINARY_DATA_MODE`; n8n 2.x defaults
    /// to `database` in queue mode, `filesystem` in regular mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_data_mode: Option<Sourced<String>>,
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

fn command_has(cmd: &[String], word: &str) -> bool {
    cmd.iter().any(|a| a == word)
}

pub fn classify(f: &Facts) -> Role {
    classify_why(f).0
}

/// The role and the signal that decided it: the simulator's command, the runner's own variable
/// or launcher, the command (`worker`, `webhook`), the image name (a hint only: custom images
/// are named anything).
pub fn classify_why(f: &Facts) -> (Role, &'static str) {
    let image = f.image.to_ascii_lowercase();
    let cmd = &f.command;
    let sim_role = cmd
        .iter()
        .position(|a| a == "sim")
        .and_then(|i| cmd.get(i + 1))
        .map(String::as_str);
    match sim_role {
        Some("runner") => return (Role::Runner, "command: sim runner"),
        Some("worker") => return (Role::Worker, "command: sim worker"),
        Some("main") | Some("all") => return (Role::Main, "command: sim main"),
        _ => {}
    }
    // Only the runner launcher reads N8N_RUNNERS_TASK_BROKER_URI: whatever the image is
    // called, a container with it is a runner.
    if f.env_names
        .iter()
        .any(|n| n == "N8N_RUNNERS_TASK_BROKER_URI")
    {
        return (Role::Runner, "N8N_RUNNERS_TASK_BROKER_URI is set");
    }
    if cmd.iter().any(|a| a.contains("task-runner-launcher")) {
        return (Role::Runner, "command: task-runner-launcher");
    }
    if image.contains("n8nio/runners") {
        return (Role::Runner, "image n8nio/runners");
    }
    // The image's own name before the repository's: `n8ncap-sim/redis` is a Redis.
    let base = image.rsplit('/').next().unwrap_or(&image);
    if base.starts_with("redis") || base.starts_with("valkey") {
        return (Role::Redis, "image redis/valkey");
    }
    if base.starts_with("postgres") {
        return (Role::Postgres, "image postgres");
    }
    let n8n_cmd = cmd.iter().any(|a| a == "n8n" || a.ends_with("/n8n"));
    let n8n =
        n8n_cmd || image.contains("n8n") || f.env_names.iter().any(|n| n == "EXECUTIONS_MODE");
    if n8n {
        if command_has(cmd, "worker") {
            return (Role::Worker, "command: worker");
        }
        if command_has(cmd, "webhook") {
            return (Role::Webhook, "command: webhook");
        }
        return (
            Role::Main,
            if n8n_cmd {
                "command: n8n"
            } else if image.contains("n8n") {
                "image n8n, no worker/webhook command"
            } else {
                "EXECUTIONS_MODE is set, no worker/webhook command"
            },
        );
    }
    (Role::Other, "no n8n signal")
}

/// `--concurrency=N` or `--concurrency N` in a command line.
pub fn concurrency_flag(cmd: &[String]) -> Option<Result<u32, String>> {
    for (i, a) in cmd.iter().enumerate() {
        // A compose command given as one string ("worker --concurrency=5") arrives split.
        let positive = |v: &str| match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(v.to_string()),
        };
        if let Some(v) = a.strip_prefix("--concurrency=") {
            return Some(positive(v));
        }
        if a == "--concurrency" {
            return Some(positive(cmd.get(i + 1).map(String::as_str).unwrap_or("")));
        }
    }
    None
}

/// Two containers of one Kubernetes pod (they share `localhost`).
pub fn same_pod(a: &Facts, b: &Facts) -> bool {
    match (&a.k8s, &b.k8s) {
        (Some(x), Some(y)) => x.workload_kind == y.workload_kind && x.workload == y.workload,
        _ => false,
    }
}

/// The host part of `N8N_RUNNERS_TASK_BROKER_URI`.
pub fn broker_host(uri: &str) -> Option<String> {
    let rest = uri.split("://").nth(1).unwrap_or(uri);
    let authority = rest.split(['/', '?', '#']).next()?;
    // Credentials before the host are not part of it.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority);
    (!host.is_empty()).then(|| host.trim_matches(['[', ']']).to_string())
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
                    executions_mode: None,
                    production_limit: None,
                    binary_data_mode: None,
                    notes: Vec::new(),
                }
            })
            .collect();
        for n in &mut nodes {
            settle(n);
        }
        // Attach runners to the broker their URI names.
        let mut capacity: BTreeMap<String, u32> = BTreeMap::new();
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
                    nodes[i].attached_to = Some(tname);
                }
                None => nodes[i].notes.push(format!(
                    "N8N_RUNNERS_TASK_BROKER_URI={uri} names no n8n main or worker here ({host:?})"
                )),
            }
        }
        for n in &mut nodes {
            if matches!(n.role, Role::Main | Role::Worker) {
                let external = n
                    .runners_mode
                    .as_ref()
                    .is_some_and(|m| m.value == RunnersMode::External);
                let attached = capacity.get(&n.facts.name).copied().unwrap_or(0);
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
            &format!("Docker: {}", mode.source),
        );
        if let Some(l) = &main.production_limit {
            s.worker_concurrency = Some(Sourced::new(
                l.value,
                format!("{} (regular mode: main's slots)", l.source),
            ));
        }
        if let Some(cap) = main.runner_capacity.filter(|c| *c > 0) {
            s.runner_limit = Some(Sourced::new(
                cap,
                format!("Docker: runner capacity of {}", main.facts.name),
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
            workers: Some(Sourced::new(count, "Docker: worker containers")),
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
                format!(
                    "Docker: Σ N8N_RUNNERS_MAX_CONCURRENCY of the runners attached to {}",
                    workers[0].facts.name
                ),
            ));
            s.runners_per_worker = Some(Sourced::new(1, "runner capacity counted per worker"));
        }
        s
    }
}

/// An n8n process's executions mode, binary data mode and (main in regular mode) production
/// limit, each with where it came from.
fn settle_modes(n: &mut Node, get: &dyn Fn(&str) -> Option<String>, src: &dyn Fn(&str) -> String) {
    if matches!(n.role, Role::Worker | Role::Main | Role::Webhook) {
        let exec = match get("EXECUTIONS_MODE").as_deref() {
            Some("queue") => Sourced::new(ExecutionsMode::Queue, src("EXECUTIONS_MODE")),
            Some(_) => Sourced::new(ExecutionsMode::Regular, src("EXECUTIONS_MODE")),
            // n8ncap's simulator is a queue-mode stand-in unless told otherwise.
            None if n.facts.command.iter().any(|a| a == "sim") => Sourced::new(
                ExecutionsMode::Queue,
                "simulator default (EXECUTIONS_MODE unset)",
            ),
            None => Sourced::new(
                ExecutionsMode::Regular,
                "n8n default (EXECUTIONS_MODE unset)",
            ),
        };
        n.binary_data_mode = Some(match get("N8N_DEFAULT_BINARY_DATA_MODE") {
            Some(m) => Sourced::new(m, src("N8N_DEFAULT_BINARY_DATA_MODE")),
            None if exec.value == ExecutionsMode::Queue => {
                Sourced::new("database".to_string(), "n8n 2.x default in queue mode")
            }
            None => Sourced::new("filesystem".to_string(), "n8n 2.x default in regular mode"),
        });
        if n.role == Role::Main && exec.value == ExecutionsMode::Regular {
            n.production_limit = get("N8N_CONCURRENCY_PRODUCTION_LIMIT")
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|l| *l > 0)
                .map(|l| Sourced::new(l, src("N8N_CONCURRENCY_PRODUCTION_LIMIT")));
        }
        n.executions_mode = Some(exec);
    }
}

/// Reads a node's own settings from its facts.
fn settle(n: &mut Node) {
    let origin = n.facts.origin.clone();
    let env = n.facts.env.clone();
    let sources = n.facts.env_sources.clone();
    // Where a variable is set: its recorded source (a ConfigMap key, a Secret), else the node.
    let src = |k: &str| {
        sources
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("{k} on {origin}"))
    };
    let get = |k: &str| {
        env.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    settle_modes(n, &get, &src);
    match n.role {
        Role::Worker | Role::Main | Role::Webhook => {
            let mode = get("N8N_RUNNERS_MODE");
            let parsed = mode.as_deref().map(RunnersMode::parse);
            n.runners_mode = Some(match parsed {
                Some(m) => Sourced::new(m, src("N8N_RUNNERS_MODE")),
                None => Sourced::new(RunnersMode::Internal, "n8n default"),
            });
            let external = parsed == Some(RunnersMode::External);
            if let Some(v) = get("N8N_RUNNERS_MAX_CONCURRENCY") {
                if external {
                    n.notes.push(format!(
                        "N8N_RUNNERS_MAX_CONCURRENCY={v} on this {} has no effect in external mode: \
                         only the runner containers read it",
                        n.role.word()
                    ));
                } else if let Ok(l) = v.parse() {
                    n.runner_limit = Some(Sourced::new(
                        l,
                        format!("N8N_RUNNERS_MAX_CONCURRENCY on {origin} (internal runner)"),
                    ));
                }
            } else if !external {
                n.runner_limit = Some(Sourced::new(
                    n8n_defaults::RUNNER_LIMIT,
                    "n8n 2.x default for the internal runner",
                ));
            }
            if n.role == Role::Worker {
                let flag = concurrency_flag(&n.facts.command);
                let limit =
                    get("N8N_CONCURRENCY_PRODUCTION_LIMIT").and_then(|v| v.parse::<i64>().ok());
                n.worker_concurrency = match (limit, flag) {
                    (Some(l), flag) if l != -1 && l > 0 => {
                        if let Some(Ok(f)) = flag {
                            n.notes.push(format!(
                                "N8N_CONCURRENCY_PRODUCTION_LIMIT={l} overrides --concurrency={f}"
                            ));
                        }
                        Some(Sourced::new(
                            l as u32,
                            format!(
                                "{} (N8N_CONCURRENCY_PRODUCTION_LIMIT overrides --concurrency)",
                                src("N8N_CONCURRENCY_PRODUCTION_LIMIT")
                            ),
                        ))
                    }
                    (_, Some(Ok(f))) => Some(Sourced::new(
                        f,
                        format!("--concurrency in the command of {origin}"),
                    )),
                    (_, Some(Err(bad))) => {
                        n.notes
                            .push(format!("--concurrency {bad:?} is not a number"));
                        None
                    }
                    _ => Some(Sourced::new(
                        n8n_defaults::WORKER_CONCURRENCY,
                        "n8n default (--concurrency not set)",
                    )),
                };
                if let Some(v) = get("QUEUE_WORKER_CONCURRENCY") {
                    n.notes.push(format!(
                        "QUEUE_WORKER_CONCURRENCY={v} is not an n8n setting: it has no effect"
                    ));
                }
            }
        }
        Role::Runner => {
            n.runner_limit = Some(
                match get("N8N_RUNNERS_MAX_CONCURRENCY").and_then(|v| v.parse().ok()) {
                    Some(l) => Sourced::new(l, src("N8N_RUNNERS_MAX_CONCURRENCY")),
                    None => Sourced::new(
                        n8n_defaults::RUNNER_LIMIT,
                        "n8n 2.x default (the docs say 5)",
                    ),
                },
            );
        }
        _ => {}
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
            s.binary_data_mode.map(|b| b.value).as_deref(),
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
                .map(|b| b.value.as_str()),
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
            .contains("PRODUCTION_LIMIT"));
        assert_eq!(
            w.runner_capacity,
            Some(10),
            "internal runner, default limit"
        );
    }
}
