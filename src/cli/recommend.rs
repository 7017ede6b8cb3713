//! `n8ncap recommend`'s arguments.

use super::SettingsArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct RecommendArgs {
    /// A results directory or its summary.json (optional when --break-point is given).
    pub input: Option<PathBuf>,
    /// The load (in flight) where the system broke; overrides the sweep's.
    #[arg(long)]
    pub break_point: Option<u32>,
    /// Executions per second to plan for, from a scale sweep's directory (`sweep --workers
    /// 1,2,4`): the workers, their settings, webhook processors and Postgres connections.
    #[arg(long, value_name = "PER_SECOND", conflicts_with = "break_point")]
    pub target_rate: Option<f64>,
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Print the recommendation as JSON.
    #[arg(long)]
    pub json: bool,
    /// The deployment the settings are for — compose file(s) or Kubernetes manifests — so the
    /// snippet names its services and containers, and leaves replicas an autoscaler owns.
    #[arg(short = 'f', long = "file")]
    pub files: Vec<PathBuf>,
    /// The same from a running compose project (Docker API).
    #[arg(long, conflicts_with = "files")]
    pub project: Option<String>,
    /// How to print the settings: a compose snippet, the values of n8n's Helm chart
    /// (n8n-io/n8n-hosting), of the community chart (community-charts/helm-charts), a
    /// strategic merge patch for the worker Deployment, an autoscaler for the workers
    /// (keda, hpa), or alerts before the measured capacity (prometheus-rules,
    /// prometheus-operator).
    #[arg(long, value_enum, default_value = "compose")]
    pub format: RecommendFormat,
    /// With prometheus-rules or prometheus-operator: a label matcher every rule's series
    /// carries, repeatable ('namespace="n8n-prod"'), as `diagnose --prometheus --match`.
    #[arg(long = "match")]
    pub matchers: Vec<String>,
    /// With prometheus-rules or prometheus-operator: how long the webhook's caller waits for
    /// its answer, e.g. 30s (the queue-wait alert's budget is this less the p99 job; 30 s
    /// assumed when not given).
    #[arg(long)]
    pub caller_timeout: Option<String>,
    /// With prometheus-rules: also write a `promtool test rules` file here, whose cases say
    /// where each alert must fire and where it must not (it names the rules file as
    /// RULES_FILE.yml beside it: save the rules there, or edit its rule_files).
    #[arg(long, value_name = "FILE")]
    pub tests: Option<PathBuf>,
    /// With keda or hpa: arrivals to tune the object on (a results directory with
    /// history.json, a k6 output, or a CSV of `seconds,rate`, as `replay --arrivals`): its
    /// minimum, target and maximum are chosen by replaying candidates over them.
    #[arg(long)]
    pub arrivals: Option<PathBuf>,
    /// With --arrivals: the longest queue wait the object may let a job have (default 5s).
    #[arg(long)]
    pub max_wait: Option<String>,
    /// With --arrivals: seconds from a pod's creation to its first job (default 30s).
    #[arg(long)]
    pub pod_start: Option<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecommendFormat {
    Compose,
    HelmOfficial,
    HelmCommunity,
    K8s,
    /// A KEDA ScaledObject for the workers from the run's measured capacity (with its
    /// TriggerAuthentication and the worker Deployment's patch): give the deployment with -f
    /// or --project.
    Keda,
    /// The same as a plain HorizontalPodAutoscaler on an external metric, for clusters
    /// without KEDA.
    Hpa,
    /// Prometheus recording and alerting rules from the run's measured capacity (a rules
    /// file for `rule_files`).
    PrometheusRules,
    /// The same rules as a prometheus-operator PrometheusRule.
    PrometheusOperator,
    /// The recommendation as JSON (as --json).
    Json,
}

impl RecommendFormat {
    /// The dialect of the settings; `None` for JSON.
    pub fn dialect(self) -> Option<crate::report::Dialect> {
        use crate::report::Dialect;
        match self {
            RecommendFormat::Compose => Some(Dialect::Compose),
            RecommendFormat::HelmOfficial => Some(Dialect::HelmOfficial),
            RecommendFormat::HelmCommunity => Some(Dialect::HelmCommunity),
            RecommendFormat::K8s => Some(Dialect::K8s),
            RecommendFormat::Json
            | RecommendFormat::Keda
            | RecommendFormat::Hpa
            | RecommendFormat::PrometheusRules
            | RecommendFormat::PrometheusOperator => None,
        }
    }
}
