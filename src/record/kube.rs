//! The Kubernetes objects n8ncap writes for an autoscaler plan, as types serialized by serde:
//! KEDA's ScaledObject and TriggerAuthentication (keda.sh/v1alpha1, the fields of KEDA's CRD
//! that n8ncap sets, checked against the CRD in fixtures/keda), the HPA (Kubernetes'
//! own `autoscaling/v2` type) and the worker Deployment's strategic merge patch (Kubernetes'
//! pod template under a Deployment's apiVersion, kind and metadata: a patch carries no
//! selector). Fields a reader does not know are kept in `rest`, never an error. The ScaledObject
//! is built from the plan here (`ScaledObject::of`), so that what is written and what `replay`
//! reads back as the generated autoscaler are one object.

use super::autoscaler::AutoscalerPlan;
use k8s_openapi::api::autoscaling::v2 as hpa_v2;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

/// Fields of an object n8ncap does not set, kept as read.
pub type Rest = BTreeMap<String, serde_json::Value>;

pub const KEDA_API: &str = "keda.sh/v1alpha1";

/// The external metric n8ncap's HPA scales on (a Prometheus adapter serves it: waiting +
/// active jobs from main's queue gauges); the HPA reader knows it by this name.
pub const HPA_METRIC: &str = "n8n_queue_jobs_held";

/// KEDA's ScaledObject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObject {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ScaledObjectSpec,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    pub scale_target_ref: ScaleTargetRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_interval: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replica_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replica_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced: Option<Advanced>,
    pub triggers: Vec<ScaleTrigger>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetRef {
    pub name: String,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Advanced {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_pod_autoscaler_config: Option<HpaConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_modifiers: Option<ScalingModifiers>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
    #[serde(flatten)]
    pub rest: Rest,
}

/// KEDA >= 2.12: the triggers' metrics combined by a formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingModifiers {
    pub formula: String,
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTrigger {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// KEDA's trigger metadata: strings only.
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<AuthenticationRef>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthenticationRef {
    pub name: String,
}

/// KEDA's TriggerAuthentication: parameters read from Secrets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerAuthentication {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: TriggerAuthenticationSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerAuthenticationSpec {
    pub secret_target_ref: Vec<SecretTargetRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretTargetRef {
    pub parameter: String,
    pub name: String,
    pub key: String,
}

/// A Deployment's strategic merge patch of its pod template (`kubectl patch deployment NAME
/// --patch-file`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPatch {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: DeploymentPatchSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentPatchSpec {
    pub template: PodTemplateSpec,
}

/// Metadata of a name in a namespace.
pub fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

/// The KEDA ScaledObject on the queue's waiting and active lists (KEDA >= 2.12 adds the two by
/// `scalingModifiers`), built from the plan: what `recommend --format keda` writes and what
/// `replay` reads back as the generated policy.
impl ScaledObject {
    pub fn of(p: &AutoscalerPlan) -> ScaledObject {
        let auth = has_credentials(p);
        ScaledObject {
            api_version: KEDA_API.into(),
            kind: "ScaledObject".into(),
            metadata: meta(&p.target.workload, p.target.namespace.as_deref()),
            spec: ScaledObjectSpec {
                scale_target_ref: ScaleTargetRef {
                    name: p.target.workload.clone(),
                    rest: Default::default(),
                },
                polling_interval: Some(int32(p.polling_s.value)),
                min_replica_count: Some(int32(p.min_replicas.value)),
                max_replica_count: Some(int32(p.max_replicas.value)),
                advanced: Some(Advanced {
                    horizontal_pod_autoscaler_config: Some(HpaConfig {
                        behavior: Some(behavior(p)),
                        rest: Default::default(),
                    }),
                    scaling_modifiers: Some(ScalingModifiers {
                        formula: "waiting + active".into(),
                        target: format!("{:.1}", p.per_replica.value),
                        metric_type: Some("AverageValue".into()),
                        rest: Default::default(),
                    }),
                    rest: Default::default(),
                }),
                triggers: vec![
                    trigger(p, "waiting", "wait", auth),
                    trigger(p, "active", "active", auth),
                ],
                rest: Default::default(),
            },
            rest: Default::default(),
        }
    }
}

/// Whether the plan's queue needs a credential (a Secret the workers read, or one written
/// inline): then the triggers name a TriggerAuthentication.
pub fn has_credentials(p: &AutoscalerPlan) -> bool {
    let q = &p.target.queue;
    q.password_secret.is_some()
        || q.password_inline
        || q.username_secret.is_some()
        || q.username_inline
}

/// The HPA's behaviour: scale-down held for the p99 job, one worker at a time (its jobs finish
/// within the shutdown window).
pub fn behavior(p: &AutoscalerPlan) -> hpa_v2::HorizontalPodAutoscalerBehavior {
    hpa_v2::HorizontalPodAutoscalerBehavior {
        scale_down: Some(hpa_v2::HPAScalingRules {
            stabilization_window_seconds: Some(int32(p.scale_down_s.value)),
            policies: Some(vec![hpa_v2::HPAScalingPolicy {
                type_: "Pods".into(),
                value: 1,
                period_seconds: 60,
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A count as the API's int32 (the plan's counts are far below its range).
pub fn int32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// The lists a trigger reads, with the address as KEDA's Redis scalers take it.
fn trigger(p: &AutoscalerPlan, name: &str, list: &str, auth: bool) -> ScaleTrigger {
    let qa = &p.target.queue;
    let per = (p.per_replica.value.floor() as u64).max(1);
    let mut m = BTreeMap::new();
    let kind = if qa.cluster_nodes.is_empty() {
        m.insert(
            "address".into(),
            format!("{}:{}", qa.host.value, qa.port.value),
        );
        m.insert("databaseIndex".into(), qa.database.value.to_string());
        "redis"
    } else {
        m.insert("addresses".into(), qa.cluster_nodes.join(", "));
        "redis-cluster"
    };
    m.insert("listName".into(), qa.list(list));
    m.insert("listLength".into(), per.to_string());
    if qa.tls.value {
        m.insert("enableTLS".into(), "true".into());
    }
    ScaleTrigger {
        kind: kind.into(),
        name: Some(name.into()),
        metadata: m,
        authentication_ref: auth.then(|| AuthenticationRef { name: auth_name(p) }),
        rest: Default::default(),
    }
}

/// The TriggerAuthentication's name: the workload's, with `-redis`.
pub fn auth_name(p: &AutoscalerPlan) -> String {
    format!("{}-redis", p.target.workload)
}
