//! An autoscaler plan as Kubernetes objects (`recommend RUN --format keda|hpa`): typed objects
//! (`record::kube`, Kubernetes' own types for the HPA and the pod template) serialized by serde
//! into YAML and nothing else on stdout, each value's source in the object's header comments by
//! its field path. Secrets appear only as references to the Secret the workers already read.

use crate::record::autoscaler::AutoscalerPlan;
use crate::record::kube::{
    self, DeploymentPatch, DeploymentPatchSpec, HorizontalPodAutoscaler, ScaledObject,
    SecretTargetRef, TriggerAuthentication, TriggerAuthenticationSpec, HPA_METRIC,
};
use k8s_openapi::api::autoscaling::v2 as hpa_v2;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec, SecretKeySelector,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::fmt::Write as _;

use super::dialect::{comment as c, quoted as q};

/// Where each value came from: `(field path, words)`, written as the object's header.
type Sources = Vec<(String, String)>;

/// One YAML document: its header comments (each line made safe), then the object as serde
/// writes it. A value never passes through `format!`: the serializer quotes and escapes it.
fn document<T: serde::Serialize>(head: &[String], sources: &Sources, object: &T) -> String {
    let mut s = String::new();
    for h in head {
        let _ = writeln!(s, "# {}", c(h));
    }
    if !sources.is_empty() {
        s.push_str("# Where each value comes from:\n");
        for (path, words) in sources {
            let _ = writeln!(s, "#   {path}: {}", c(words));
        }
    }
    s.push_str(&serde_saphyr::to_string(object).expect("a Kubernetes object serializes to YAML"));
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn header(p: &AutoscalerPlan, what: &str, apply: &str) -> Vec<String> {
    let mut h = vec![
        format!(
            "n8ncap: {what} for the workers of {}, from the capacity measured in {}.",
            p.target.workload,
            p.job_p99_s.source.words()
        ),
        apply.to_string(),
    ];
    if let Some(e) = &p.target.existing {
        h.push(format!("It replaces {e}: delete that one first."));
    }
    h.extend(p.notes.iter().map(|n| format!("Note: {n}")));
    h
}

/// The triggers' sources, said once for both.
fn trigger_sources(p: &AutoscalerPlan) -> Sources {
    let qa = &p.target.queue;
    let mut s = Vec::new();
    if qa.cluster_nodes.is_empty() {
        s.push((
            "spec.triggers[*].metadata.address".into(),
            format!(
                "QUEUE_BULL_REDIS_HOST ({}) : QUEUE_BULL_REDIS_PORT ({})",
                qa.host.source.words(),
                qa.port.source.words()
            ),
        ));
        s.push((
            "spec.triggers[*].metadata.databaseIndex".into(),
            format!("QUEUE_BULL_REDIS_DB ({})", qa.database.source.words()),
        ));
    } else {
        s.push((
            "spec.triggers[*].metadata.addresses".into(),
            "QUEUE_BULL_REDIS_CLUSTER_NODES".into(),
        ));
    }
    s.push((
        "spec.triggers[*].metadata.listName".into(),
        format!(
            "QUEUE_BULL_PREFIX {} ({}) + \":jobs:wait\" / \":jobs:active\"",
            q(&qa.prefix.value),
            qa.prefix.source.words()
        ),
    ));
    s.push((
        "spec.triggers[*].metadata.listLength".into(),
        "used only without the formula".into(),
    ));
    if qa.tls.value {
        s.push((
            "spec.triggers[*].metadata.enableTLS".into(),
            format!("QUEUE_BULL_REDIS_TLS ({})", qa.tls.source.words()),
        ));
    }
    s
}

/// The TriggerAuthentication that gives KEDA the password (and username) from the Secret the
/// workers read, with what each reference is; None when no credential is set.
pub fn trigger_auth(p: &AutoscalerPlan) -> Option<(TriggerAuthentication, Sources)> {
    let qa = &p.target.queue;
    let (mut refs, mut said) = (Vec::new(), Vec::new());
    for (param, secret, inline, var) in [
        (
            "password",
            &qa.password_secret,
            qa.password_inline,
            "QUEUE_BULL_REDIS_PASSWORD",
        ),
        (
            "username",
            &qa.username_secret,
            qa.username_inline,
            "QUEUE_BULL_REDIS_USERNAME",
        ),
    ] {
        let (name, key, words) = match (secret, inline) {
            (Some(r), _) => {
                let (n, k) = r.split_once('/').unwrap_or((r.as_str(), param));
                (n.to_string(), k.to_string(), format!("the Secret the workers read {var} from"))
            }
            (None, true) => (
                kube::auth_name(p),
                param.to_string(),
                format!("{var} is written inline in the deployment: put it in this Secret (kubectl create secret generic {} --from-literal={param}=…) and read it from there", kube::auth_name(p)),
            ),
            (None, false) => continue,
        };
        said.push((
            format!("spec.secretTargetRef[{}] ({param})", refs.len()),
            words,
        ));
        refs.push(SecretTargetRef {
            parameter: param.into(),
            name,
            key,
        });
    }
    (!refs.is_empty()).then(|| {
        (
            TriggerAuthentication {
                api_version: kube::KEDA_API.into(),
                kind: "TriggerAuthentication".into(),
                metadata: kube::meta(&kube::auth_name(p), p.target.namespace.as_deref()),
                spec: TriggerAuthenticationSpec {
                    secret_target_ref: refs,
                },
            },
            said,
        )
    })
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// The worker Deployment's strategic merge patch: n8n's shutdown window and the pod's grace
/// period above it, and a runner sidecar when the pod has none.
pub fn deployment_patch(p: &AutoscalerPlan) -> (DeploymentPatch, Sources) {
    let t = &p.target;
    let mut sources: Sources = vec![
        (
            "spec.template.spec.terminationGracePeriodSeconds".into(),
            p.termination_grace_s.source.words(),
        ),
        (
            "spec.template.spec.containers[0].env N8N_GRACEFUL_SHUTDOWN_TIMEOUT".into(),
            p.graceful_shutdown_s.source.words(),
        ),
    ];
    let mut containers = vec![Container {
        name: t.container.clone(),
        env: Some(vec![env(
            "N8N_GRACEFUL_SHUTDOWN_TIMEOUT",
            &p.graceful_shutdown_s.value.to_string(),
        )]),
        ..Default::default()
    }];
    if t.runner_sidecar.is_none() {
        let tag = crate::topology::image_tag(&t.image);
        let (name, key) = match &t.auth_token_secret {
            Some(r) => {
                let (n, k) = r.split_once('/').unwrap_or((r.as_str(), "token"));
                (n.to_string(), k.to_string())
            }
            None => {
                sources.push((
                    "spec.template.spec.containers[1].env N8N_RUNNERS_AUTH_TOKEN".into(),
                    "the worker's N8N_RUNNERS_AUTH_TOKEN is not read from a Secret: put it in this one".into(),
                ));
                ("n8n-runners-auth".into(), "token".into())
            }
        };
        sources.push((
            "spec.template.spec.containers[1]".into(),
            "a runner in every worker pod: it scales with its worker".into(),
        ));
        let limit = t
            .runner_limit
            .unwrap_or(crate::model::n8n_defaults::RUNNER_LIMIT);
        containers.push(Container {
            name: "n8n-runner".into(),
            image: Some(format!("n8nio/runners:{tag}")),
            env: Some(vec![
                env("N8N_RUNNERS_TASK_BROKER_URI", "http://127.0.0.1:5679"),
                env("N8N_RUNNERS_MAX_CONCURRENCY", &limit.to_string()),
                EnvVar {
                    name: "N8N_RUNNERS_AUTH_TOKEN".into(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name,
                            key,
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                },
            ]),
            ..Default::default()
        });
    }
    let patch = DeploymentPatch {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        metadata: kube::meta(&t.workload, t.namespace.as_deref()),
        spec: DeploymentPatchSpec {
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(i64::from(p.termination_grace_s.value)),
                    containers,
                    ..Default::default()
                }),
            },
        },
    };
    (patch, sources)
}

fn patch_document(p: &AutoscalerPlan) -> String {
    let (patch, sources) = deployment_patch(p);
    document(
        &[format!(
            "The worker Deployment's patch: kubectl patch deployment {} --patch-file THIS_PART.yaml",
            p.target.workload
        )],
        &sources,
        &patch,
    )
}

/// The KEDA ScaledObject on the queue's waiting and active lists (KEDA >= 2.12 adds the two by
/// `scalingModifiers`), with its sources.
pub fn scaled_object(p: &AutoscalerPlan) -> (ScaledObject, Sources) {
    let so = ScaledObject::of(p);
    let mut sources: Sources = vec![
        ("spec.pollingInterval".into(), p.polling_s.source.words()),
        ("spec.minReplicaCount".into(), p.min_replicas.source.words()),
        ("spec.maxReplicaCount".into(), p.max_replicas.source.words()),
        (
            "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds".into(),
            p.scale_down_s.source.words(),
        ),
        (
            "spec.advanced.scalingModifiers".into(),
            "KEDA >= 2.12: waiting and active jobs added, not the larger of the two".into(),
        ),
        (
            "spec.advanced.scalingModifiers.target".into(),
            p.per_replica.source.words(),
        ),
    ];
    sources.extend(trigger_sources(p));
    (so, sources)
}

/// A KEDA ScaledObject on the queue's waiting and active lists, its TriggerAuthentication, and
/// the worker Deployment's patch.
pub fn keda(p: &AutoscalerPlan) -> String {
    let (so, sources) = scaled_object(p);
    let mut s = document(
        &header(
            p,
            "a KEDA ScaledObject (KEDA >= 2.12 for scalingModifiers)",
            "kubectl apply the ScaledObject and TriggerAuthentication; patch the Deployment with the last part.",
        ),
        &sources,
        &so,
    );
    if let Some((a, said)) = trigger_auth(p) {
        s.push_str("---\n");
        s.push_str(&document(&[], &said, &a));
    }
    s.push_str("---\n");
    s.push_str(&patch_document(p));
    s
}

/// The HorizontalPodAutoscaler (Kubernetes' autoscaling/v2 type) on the external metric.
pub fn hpa_object(p: &AutoscalerPlan) -> (HorizontalPodAutoscaler, Sources) {
    let per_milli = (p.per_replica.value * 1000.0).round() as u64;
    let o = HorizontalPodAutoscaler {
        metadata: kube::meta(&p.target.workload, p.target.namespace.as_deref()),
        spec: Some(hpa_v2::HorizontalPodAutoscalerSpec {
            scale_target_ref: hpa_v2::CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: p.target.workload.clone(),
            },
            min_replicas: Some(kube::int32(p.min_replicas.value)),
            max_replicas: kube::int32(p.max_replicas.value),
            metrics: Some(vec![hpa_v2::MetricSpec {
                type_: "External".into(),
                external: Some(hpa_v2::ExternalMetricSource {
                    metric: hpa_v2::MetricIdentifier {
                        name: HPA_METRIC.into(),
                        selector: None,
                    },
                    target: hpa_v2::MetricTarget {
                        type_: "AverageValue".into(),
                        average_value: Some(Quantity(format!("{per_milli}m"))),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            behavior: Some(kube::behavior(p)),
        }),
        status: None,
    };
    let sources = vec![
        ("spec.minReplicas".into(), p.min_replicas.source.words()),
        ("spec.maxReplicas".into(), p.max_replicas.source.words()),
        (
            "spec.metrics[0].external.target.averageValue".into(),
            p.per_replica.source.words(),
        ),
        (
            "spec.behavior.scaleDown.stabilizationWindowSeconds".into(),
            p.scale_down_s.source.words(),
        ),
    ];
    (o, sources)
}

/// A plain HorizontalPodAutoscaler on an external metric (waiting + active jobs, served by a
/// Prometheus adapter from main's queue gauges), and the worker Deployment's patch.
pub fn hpa(p: &AutoscalerPlan) -> String {
    let mut head = header(
        p,
        "a HorizontalPodAutoscaler (autoscaling/v2) on an external metric",
        "kubectl apply the HPA; patch the Deployment with the last part.",
    );
    head.extend(
        [
            "The metric: a Prometheus adapter (prometheus-adapter) external rule over main's queue".to_string(),
            "gauges (N8N_METRICS_INCLUDE_QUEUE_METRICS=true; they move every".into(),
            "N8N_METRICS_QUEUE_METRICS_INTERVAL, 20 s by default):".into(),
            "  externalRules:".into(),
            "    - seriesQuery: 'n8n_scaling_mode_queue_jobs_waiting'".into(),
            format!("      name: {{as: \"{HPA_METRIC}\"}}"),
            "      metricsQuery: 'sum(n8n_scaling_mode_queue_jobs_waiting{<<.LabelMatchers>>}) + sum(n8n_scaling_mode_queue_jobs_active{<<.LabelMatchers>>})'".into(),
            "CPU is not the workers' load: a worker waiting on runners or HTTP calls is idle on CPU.".into(),
        ],
    );
    let (o, sources) = hpa_object(p);
    let mut s = document(&head, &sources, &o);
    s.push_str("---\n");
    s.push_str(&patch_document(p));
    s
}

#[cfg(test)]
pub(crate) mod tests;
