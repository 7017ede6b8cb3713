//! Facts: what is known about one container or compose service (image, command, environment,
//! labels, limits, a Kubernetes pod's extras), secrets already dropped. The three readers
//! (`docker.rs`, `compose.rs`, `k8s.rs`) produce them; the classification and the settings
//! read them.

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
    "DB_PING_TIMEOUT_MS",
    "DB_PING_INTERVAL_SECONDS",
    "DB_POSTGRESDB_SSL_ENABLED",
    "DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED",
    "DB_PING_MAX_FAILURES_BEFORE_RECOVERY",
    "DB_RECOVERY_BACKOFF_MIN_MS",
    "DB_RECOVERY_BACKOFF_MAX_MS",
    "N8N_METRICS_INCLUDE_DB_POOL_METRICS",
    "OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS",
    "GENERIC_TIMEZONE",
    "NODE_OPTIONS",
    "N8N_GRACEFUL_SHUTDOWN_TIMEOUT",
    "N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT",
    "QUEUE_BULL_REDIS_DB",
    "QUEUE_BULL_REDIS_TLS",
    // host:port pairs, no credentials.
    "QUEUE_BULL_REDIS_CLUSTER_NODES",
    "QUEUE_WORKER_LOCK_DURATION",
    "QUEUE_WORKER_LOCK_RENEW_TIME",
    "QUEUE_WORKER_STALLED_INTERVAL",
    "QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD",
    // PgBouncer's knobs, as bitnami's and PgBouncer's images read them and as edoburu's does.
    "PGBOUNCER_MAX_CLIENT_CONN",
    "PGBOUNCER_DEFAULT_POOL_SIZE",
    "PGBOUNCER_RESERVE_POOL_SIZE",
    "PGBOUNCER_POOL_MODE",
    "MAX_CLIENT_CONN",
    "DEFAULT_POOL_SIZE",
    "RESERVE_POOL_SIZE",
    "POOL_MODE",
];

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
    /// Variables set from a Kubernetes Secret, by reference: "secret-name/key" (a name, never
    /// the value), so what is generated for the deployment can refer to the same secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_refs: BTreeMap<String, String>,
    /// What only Kubernetes manifests say: pod, replicas and autoscaling, probes, grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<K8sFacts>,
    /// Live containers: their state as Docker inspects it (OOM kill, exit code, restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::record::lifecycle::ContainerState>,
    /// What starts the process again when it exits, when the input says (None: nothing
    /// written — Compose's and Docker's default is not to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartPolicy>,
}

/// A container's restart policy as its input writes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The value as written (`always`, `unless-stopped`, `on-failure:3`, `no`; Swarm's `any`,
    /// `on-failure`, `none`; Kubernetes' `Always`).
    pub written: String,
    /// Where it is written (`restart`, `deploy.restart_policy.condition`,
    /// `HostConfig.RestartPolicy`, the pod's `restartPolicy`).
    pub at: String,
    /// Whether an exited process is started again (a crash, at least: `on-failure` counts).
    pub restarts: bool,
}

impl RestartPolicy {
    /// Compose's and Docker's `restart` (`no`, `always`, `unless-stopped`, `on-failure[:N]`),
    /// Swarm's `condition` (`none`, `on-failure`, `any`) and Kubernetes' `restartPolicy`.
    pub fn new(written: &str, at: &str) -> RestartPolicy {
        let w = written.trim();
        let base = w
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        RestartPolicy {
            written: crate::util::escape_control(w).into_owned(),
            at: at.to_string(),
            restarts: matches!(
                base.as_str(),
                "always" | "unless-stopped" | "on-failure" | "any" | "onfailure"
            ),
        }
    }
}

/// A container of a Kubernetes workload, as the rendered manifests describe it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct K8sFacts {
    /// `Deployment` or `StatefulSet`, and its name: containers of one workload share a pod
    /// (and `localhost`).
    pub workload_kind: String,
    pub workload: String,
    /// The workload's `metadata.namespace`, when the manifest says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
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
    /// The soonest it removes a pod after the load drops, s, and what sets it: the HPA's
    /// `behavior.scaleDown.stabilizationWindowSeconds` (Kubernetes' default 300; for a KEDA
    /// ScaledObject under `advanced.horizontalPodAutoscalerConfig`), or KEDA's `cooldownPeriod`
    /// (default 300) when it scales to zero, whichever comes first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<(u32, String)>,
    /// File and line of the autoscaler, for findings about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Its control loop as `replay` runs it, or why it cannot be replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<crate::model::autoscaler::Control>,
    /// Other autoscalers on the same workload ("ScaledObject b"): read, not used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

/// One scaling signal: a resource (`cpu`, `memory`) or a KEDA trigger (`redis` with its list).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Trigger {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// A password (or a URL holding one) is written in the trigger itself: the value is never
    /// kept, only that it is there.
    #[serde(default)]
    pub inline_password: bool,
    /// The trigger's `authenticationRef`: the TriggerAuthentication it names and whether the
    /// input holds one of that name giving a `password` parameter (false when it holds none,
    /// or one without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<(String, bool)>,
}

/// Which of a container's probes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    #[default]
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Liveness,
        ProbeKind::Readiness,
        ProbeKind::Startup,
    ];

    pub fn word(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Startup => "startup",
        }
    }

    /// The field of a Kubernetes container that holds it (`livenessProbe`).
    pub fn field(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "livenessProbe",
            ProbeKind::Readiness => "readinessProbe",
            ProbeKind::Startup => "startupProbe",
        }
    }
}

/// A liveness, readiness or startup probe: its HTTP path, when it is an HTTP probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub kind: ProbeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_path: Option<String>,
    /// Seconds after which failing probes act: `failureThreshold` (3) × `periodSeconds` (10),
    /// Kubernetes' defaults where not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acts_after_s: Option<f64>,
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
        self.secret_refs
            .insert(name.to_string(), reference.to_string());
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

/// What a live Postgres said about its connections (read by `observe::postgres`, credentials
/// never kept).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PostgresFacts {
    /// Where, without credentials: "host:port/database".
    pub at: String,
    pub max_connections: u32,
    pub reserved: u32,
    /// Connections open now, by application name and state.
    pub by_application: Vec<(String, String, u32)>,
    /// Connections waiting now, by wait event type.
    pub waiting: Vec<(String, u32)>,
    /// Postgres refused n8ncap's own connection for want of slots (SQLSTATE 53300): its
    /// message; the figures above are then unknown (0).
    pub refused: Option<String>,
    /// The server's major version (`server_version_num` ÷ 10 000), when read.
    pub major: Option<u32>,
}

impl PostgresFacts {
    pub fn open(&self) -> u32 {
        self.by_application.iter().map(|(_, _, n)| n).sum()
    }
}

/// An image's tag ("2.41.1" of `n8nio/n8n:2.41.1`, a digest after `@` dropped; "latest" when
/// none is written).
pub fn image_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, t)) => t.split('@').next().unwrap_or(t).to_string(),
        None => "latest".into(),
    }
}

/// The n8n version an image's tag names ("2.41.1" of `n8nio/n8n:2.41.1` or `n8nio/runners:
/// 2.41.1-debian`), when it names one: "latest", "next" or a bare digest name none.
pub fn image_version(image: &str) -> Option<String> {
    let tag = image_tag(image);
    let v = tag.trim_start_matches('v');
    let core = v.split(['-', '+']).next().unwrap_or(v);
    let parts: Vec<&str> = core.split('.').collect();
    (parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| core.to_string())
}

/// The major version an image's tag names.
pub fn image_major(image: &str) -> Option<u32> {
    image_version(image)?.split('.').next()?.parse().ok()
}
