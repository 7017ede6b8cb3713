//! An autoscaler plan as Kubernetes objects (`recommend RUN --format keda|hpa`): YAML and
//! nothing else on stdout, each value's source in a comment beside it. Secrets appear only as
//! references to the Secret the workers already read.

use crate::record::autoscaling::AutoscalerPlan;
use std::fmt::Write as _;

use super::dialect::quoted as q;

fn metadata(p: &AutoscalerPlan, name: &str) -> String {
    let mut s = format!("metadata:\n  name: {}\n", q(name));
    if let Some(ns) = &p.target.namespace {
        let _ = writeln!(s, "  namespace: {}", q(ns));
    }
    s
}

fn header(p: &AutoscalerPlan, what: &str, apply: &str) -> String {
    let mut s = format!(
        "# n8ncap: {what} for the workers of {}, from the capacity measured in {}.\n# {apply}\n",
        p.target.workload,
        p.job_p99_s.source.words()
    );
    if let Some(e) = &p.target.existing {
        let _ = writeln!(s, "# It replaces {e}: delete that one first.");
    }
    for n in &p.notes {
        let _ = writeln!(s, "# Note: {n}");
    }
    s
}

/// The HPA's behaviour: scale-down held for the p99 job, one worker at a time.
fn behavior(p: &AutoscalerPlan, indent: &str) -> String {
    format!(
        "{indent}behavior:\n{indent}  scaleDown:\n{indent}    stabilizationWindowSeconds: {}  # {}\n{indent}    policies:\n{indent}      - type: Pods  # one worker at a time: its jobs finish within the shutdown window\n{indent}        value: 1\n{indent}        periodSeconds: 60\n",
        p.scale_down_s.value,
        p.scale_down_s.source.words()
    )
}

/// The lists a trigger reads, with the address as KEDA's Redis scalers take it.
fn trigger(p: &AutoscalerPlan, name: &str, list: &str, auth: bool) -> String {
    let qa = &p.target.queue;
    let per = (p.per_replica.value.floor() as u64).max(1);
    let mut s = String::new();
    if qa.cluster_nodes.is_empty() {
        let _ = writeln!(s, "    - type: redis\n      name: {name}\n      metadata:");
        let _ = writeln!(
            s,
            "        address: {}  # QUEUE_BULL_REDIS_HOST {} : QUEUE_BULL_REDIS_PORT {}",
            q(&format!("{}:{}", qa.host.value, qa.port.value)),
            qa.host.source.words(),
            qa.port.source.words()
        );
        let _ = writeln!(
            s,
            "        databaseIndex: {}  # QUEUE_BULL_REDIS_DB: {}",
            q(&qa.database.value.to_string()),
            qa.database.source.words()
        );
    } else {
        let _ = writeln!(
            s,
            "    - type: redis-cluster\n      name: {name}\n      metadata:\n        addresses: {}  # QUEUE_BULL_REDIS_CLUSTER_NODES",
            q(&qa.cluster_nodes.join(", "))
        );
    }
    let _ = writeln!(
        s,
        "        listName: {}  # QUEUE_BULL_PREFIX {:?} ({}) + \":jobs:{list}\"",
        q(&qa.list(list)),
        qa.prefix.value,
        qa.prefix.source.words()
    );
    let _ = writeln!(
        s,
        "        listLength: {}  # used only without the formula below",
        q(&per.to_string())
    );
    if qa.tls.value {
        let _ = writeln!(
            s,
            "        enableTLS: \"true\"  # QUEUE_BULL_REDIS_TLS: {}",
            qa.tls.source.words()
        );
    }
    if auth {
        let _ = writeln!(
            s,
            "      authenticationRef:\n        name: {}",
            q(&auth_name(p))
        );
    }
    s
}

fn auth_name(p: &AutoscalerPlan) -> String {
    format!("{}-redis", p.target.workload)
}

/// The TriggerAuthentication that gives KEDA the password (and username) from the Secret the
/// workers read; None when no credential is set.
fn trigger_auth(p: &AutoscalerPlan) -> Option<String> {
    let qa = &p.target.queue;
    let mut refs = Vec::new();
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
        let (name, key, said) = match (secret, inline) {
            (Some(r), _) => {
                let (n, k) = r.split_once('/').unwrap_or((r.as_str(), param));
                (n.to_string(), k.to_string(), format!("the Secret the workers read {var} from"))
            }
            (None, true) => (
                format!("{}-redis", p.target.workload),
                param.to_string(),
                format!("{var} is written inline in the deployment: put it in this Secret (kubectl create secret generic {}-redis --from-literal={param}=…) and read it from there", p.target.workload),
            ),
            (None, false) => continue,
        };
        refs.push(format!(
            "    - parameter: {param}  # {said}\n      name: {}\n      key: {}\n",
            q(&name),
            q(&key)
        ));
    }
    if refs.is_empty() {
        return None;
    }
    Some(format!(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\n{}spec:\n  secretTargetRef:\n{}",
        metadata(p, &auth_name(p)),
        refs.concat()
    ))
}

/// The worker Deployment's strategic merge patch: n8n's shutdown window and the pod's grace
/// period above it, and a runner sidecar when the pod has none.
fn deployment_patch(p: &AutoscalerPlan) -> String {
    let t = &p.target;
    let mut s = format!(
        "# The worker Deployment's patch: kubectl patch deployment {} --patch-file THIS_PART.yaml\napiVersion: apps/v1\nkind: Deployment\n{}spec:\n  template:\n    spec:\n      terminationGracePeriodSeconds: {}  # {}\n      containers:\n        - name: {}\n          env:\n            - name: N8N_GRACEFUL_SHUTDOWN_TIMEOUT  # {}\n              value: {}\n",
        t.workload,
        metadata(p, &t.workload),
        p.termination_grace_s.value,
        p.termination_grace_s.source.words(),
        q(&t.container),
        p.graceful_shutdown_s.source.words(),
        q(&p.graceful_shutdown_s.value.to_string()),
    );
    if t.runner_sidecar.is_none() {
        let tag = crate::topology::image_tag(&t.image);
        let token = match &t.auth_token_secret {
            Some(r) => {
                let (n, k) = r.split_once('/').unwrap_or((r.as_str(), "token"));
                format!(
                    "              valueFrom:\n                secretKeyRef:\n                  name: {}\n                  key: {}\n",
                    q(n),
                    q(k)
                )
            }
            None => "              valueFrom:  # the worker's N8N_RUNNERS_AUTH_TOKEN is not read from a Secret: put it in this one\n                secretKeyRef:\n                  name: \"n8n-runners-auth\"\n                  key: \"token\"\n".into(),
        };
        let _ = write!(
            s,
            "        - name: \"n8n-runner\"  # a runner in every worker pod: it scales with its worker\n          image: {}\n          env:\n            - name: N8N_RUNNERS_TASK_BROKER_URI\n              value: \"http://127.0.0.1:5679\"\n            - name: N8N_RUNNERS_MAX_CONCURRENCY\n              value: {}\n            - name: N8N_RUNNERS_AUTH_TOKEN\n{token}",
            q(&format!("n8nio/runners:{tag}")),
            q(&t.runner_limit.unwrap_or(crate::model::n8n_defaults::RUNNER_LIMIT).to_string()),
        );
    }
    s
}

/// A KEDA ScaledObject on the queue's waiting and active lists, its TriggerAuthentication, and
/// the worker Deployment's patch.
pub fn keda(p: &AutoscalerPlan) -> String {
    let auth = trigger_auth(p);
    let mut s = header(
        p,
        "a KEDA ScaledObject (KEDA >= 2.12 for scalingModifiers)",
        "kubectl apply the ScaledObject and TriggerAuthentication; patch the Deployment with the last part.",
    );
    let _ = write!(
        s,
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n{}spec:\n  scaleTargetRef:\n    name: {}\n  pollingInterval: {}  # {}\n  minReplicaCount: {}  # {}\n  maxReplicaCount: {}  # {}\n  advanced:\n    horizontalPodAutoscalerConfig:\n{}    scalingModifiers:  # KEDA >= 2.12: waiting and active jobs added, not the larger of the two\n      formula: \"waiting + active\"\n      target: {}  # {}\n      metricType: AverageValue\n  triggers:\n",
        metadata(p, &p.target.workload),
        q(&p.target.workload),
        p.polling_s.value,
        p.polling_s.source.words(),
        p.min_replicas.value,
        p.min_replicas.source.words(),
        p.max_replicas.value,
        p.max_replicas.source.words(),
        behavior(p, "      "),
        q(&format!("{:.1}", p.per_replica.value)),
        p.per_replica.source.words(),
    );
    s.push_str(&trigger(p, "waiting", "wait", auth.is_some()));
    s.push_str(&trigger(p, "active", "active", auth.is_some()));
    if let Some(a) = auth {
        s.push_str("---\n");
        s.push_str(&a);
    }
    s.push_str("---\n");
    s.push_str(&deployment_patch(p));
    s
}

/// The metric a Prometheus adapter serves for `hpa`: waiting + active jobs from main.
pub const HPA_METRIC: &str = "n8n_queue_jobs_held";

/// A plain HorizontalPodAutoscaler on an external metric (waiting + active jobs, served by a
/// Prometheus adapter from main's queue gauges), and the worker Deployment's patch.
pub fn hpa(p: &AutoscalerPlan) -> String {
    let mut s = header(
        p,
        "a HorizontalPodAutoscaler (autoscaling/v2) on an external metric",
        "kubectl apply the HPA; patch the Deployment with the last part.",
    );
    let _ = write!(
        s,
        "# The metric: a Prometheus adapter (prometheus-adapter) external rule over main's queue\n# gauges (N8N_METRICS_INCLUDE_QUEUE_METRICS=true; they move every\n# N8N_METRICS_QUEUE_METRICS_INTERVAL, 20 s by default):\n#   externalRules:\n#     - seriesQuery: 'n8n_scaling_mode_queue_jobs_waiting'\n#       name: {{as: \"{HPA_METRIC}\"}}\n#       metricsQuery: 'sum(n8n_scaling_mode_queue_jobs_waiting{{<<.LabelMatchers>>}}) + sum(n8n_scaling_mode_queue_jobs_active{{<<.LabelMatchers>>}})'\n# CPU is not the workers' load: a worker waiting on runners or HTTP calls is idle on CPU.\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n{}spec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: {}\n  minReplicas: {}  # {}\n  maxReplicas: {}  # {}\n  metrics:\n    - type: External\n      external:\n        metric:\n          name: {HPA_METRIC}\n        target:\n          type: AverageValue\n          averageValue: {}  # {}\n{}",
        metadata(p, &p.target.workload),
        q(&p.target.workload),
        p.min_replicas.value,
        p.min_replicas.source.words(),
        p.max_replicas.value,
        p.max_replicas.source.words(),
        q(&format!("{}m", (p.per_replica.value * 1000.0).round() as u64)),
        p.per_replica.source.words(),
        behavior(p, "  "),
    );
    s.push_str("---\n");
    s.push_str(&deployment_patch(p));
    s
}
