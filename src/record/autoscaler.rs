//! An autoscaler for the workers made from a run's measured capacity (`recommend RUN --format
//! keda|hpa`): every value with where it came from, and the deployment's queue as the workers
//! reach it. The objects themselves are written by `report::autoscaler`.

use crate::model::settings::Sourced;
use serde::{Deserialize, Serialize};

/// The worker Deployment an autoscaler targets, and its queue, as read from the deployment
/// (`-f` manifests or compose files, or a running compose project).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerTarget {
    /// The worker's Deployment (or compose service, deployed under that name).
    pub workload: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The worker's container in its pod.
    pub container: String,
    /// The runner container in the worker's pod (a sidecar), when it has one: it scales with
    /// the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_sidecar: Option<String>,
    /// The worker's image (the runner sidecar to add takes its tag).
    pub image: String,
    /// `N8N_RUNNERS_MAX_CONCURRENCY` of the runner the worker has now, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_limit: Option<u32>,
    /// The runner's auth token as the worker reads it: "secret/key", when from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_token_secret: Option<String>,
    pub queue: QueueAddress,
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` of the worker, s.
    pub graceful_shutdown_s: Sourced<f64>,
    /// The runner's `N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT`, s (of the sidecar, or n8n's
    /// default for the one the patch adds).
    pub runner_shutdown_s: Sourced<f64>,
    /// The pod's `terminationGracePeriodSeconds` (Kubernetes' default 30).
    pub termination_grace_s: Sourced<f64>,
    /// `DB_POSTGRESDB_POOL_SIZE` of a worker, and the connections the other n8n processes
    /// (main, webhook processors) hold at their most.
    pub worker_pool: Sourced<u32>,
    pub other_connections: u32,
    /// The autoscaler already targeting the workers ("ScaledObject n8n-worker").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<String>,
}

/// Where the workers' Bull queue lives: every value from the worker's environment or n8n's
/// default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueAddress {
    /// `QUEUE_BULL_PREFIX` (n8n's default `bull`): the lists are `<prefix>:jobs:wait` and
    /// `<prefix>:jobs:active`.
    pub prefix: Sourced<String>,
    pub database: Sourced<u32>,
    pub host: Sourced<String>,
    pub port: Sourced<u32>,
    pub tls: Sourced<bool>,
    /// `QUEUE_BULL_REDIS_CLUSTER_NODES` as host:port pairs (then the trigger is KEDA's
    /// `redis-cluster`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_nodes: Vec<String>,
    /// The password and the username as the worker reads them: "secret/key" when from a
    /// Secret. The values are never read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_secret: Option<String>,
    /// A password (or username) is set, but as a plain value (compose, an env `value:`): the
    /// autoscaler must get it from a Secret the operator makes.
    #[serde(default)]
    pub password_inline: bool,
    #[serde(default)]
    pub username_inline: bool,
}

impl QueueAddress {
    pub fn list(&self, which: &str) -> String {
        format!("{}:jobs:{which}", self.prefix.value)
    }
}

/// What the autoscaler is set to, each value with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerPlan {
    pub target: AutoscalerTarget,
    /// Jobs (waiting + active) per replica: what one worker holds at the 2/3 operating point.
    pub per_replica: Sourced<f64>,
    pub min_replicas: Sourced<u32>,
    pub max_replicas: Sourced<u32>,
    /// How long KEDA waits between reads of the lists, s.
    pub polling_s: Sourced<u32>,
    /// The HPA's scale-down stabilisation, s: at least the p99 job time.
    pub scale_down_s: Sourced<u32>,
    /// `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` to set: at least the p99 job time.
    pub graceful_shutdown_s: Sourced<u32>,
    /// The pod's `terminationGracePeriodSeconds`: above the shutdown window and the runner's.
    pub termination_grace_s: Sourced<u32>,
    /// The p99 job time the plan rests on, s, and where it was measured.
    pub job_p99_s: Sourced<f64>,
    /// What the plan could not settle, said once each.
    pub notes: Vec<String>,
}

/// `n8ncap replay`: arrivals replayed through the deployed autoscaler and the generated one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRun {
    /// Where the arrivals came from, their length (s) and what was left out of them.
    pub arrivals_from: String,
    pub seconds: usize,
    pub arrival_gaps: Vec<String>,
    /// Arrivals per second: mean and peak.
    pub arrivals_mean_per_s: f64,
    pub arrivals_peak_per_s: f64,
    pub workload: crate::model::autoscaler::Workload,
    /// Where one worker's ceiling, the job time and the shutdown window came from.
    pub workload_from: Vec<String>,
    /// Each autoscaler replayed (ticks thinned to at most a few thousand).
    pub replays: Vec<crate::model::autoscaler::Replay>,
    /// Autoscalers read and not replayed, with why.
    pub not_replayed: Vec<String>,
    pub verdict: String,
}
