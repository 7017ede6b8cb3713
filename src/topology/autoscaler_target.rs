//! The worker Deployment an autoscaler targets and the queue its workers read, from the
//! deployment as read (`recommend -f … --format keda`): names, Redis' address, database and
//! prefix, secrets by reference only.

use super::{same_pod, Node, Role, Topology};
use crate::error::BadInput;
use crate::model::n8n_defaults;
use crate::model::settings::{Provenance, Sourced};
use crate::record::autoscaler::{AutoscalerTarget, QueueAddress};

/// Kubernetes' `terminationGracePeriodSeconds` when a pod does not set it.
pub const K8S_TERMINATION_GRACE_S: f64 = 30.0;

/// The worker to autoscale: the first worker of the deployment, its runner sidecar, its queue.
pub fn autoscaler_target(t: &Topology) -> Result<AutoscalerTarget, BadInput> {
    let w = t
        .nodes
        .iter()
        .find(|n| n.role == Role::Worker)
        .ok_or_else(|| {
            BadInput(
                "the deployment read has no worker (`n8n worker`): an autoscaler scales workers \
                 — give the files or project that run them (-f, --project)"
                    .into(),
            )
        })?;
    let k = w.facts.k8s.as_ref();
    let container = k.map_or_else(|| w.name().to_string(), |k| k.container.clone());
    let workload = k.map_or_else(
        || {
            w.facts
                .service
                .clone()
                .unwrap_or_else(|| w.name().to_string())
        },
        |k| k.workload.clone(),
    );
    let runner = t
        .nodes
        .iter()
        .filter(|r| r.role == Role::Runner)
        .find(|r| r.attached_to.as_deref() == Some(w.name()) || same_pod(&r.facts, &w.facts));
    let sidecar = runner
        .filter(|r| same_pod(&r.facts, &w.facts))
        .and_then(|r| r.facts.k8s.as_ref().map(|k| k.container.clone()));
    let others: u32 = t
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Main | Role::Webhook))
        .map(|n| pool(n).value * most(n))
        .sum();
    let (shutdown, runner_shutdown, grace) = stop_times(w, runner, &workload);
    let target = AutoscalerTarget {
        namespace: k.and_then(|k| k.namespace.clone()),
        container,
        runner_sidecar: sidecar,
        image: w.facts.image.clone(),
        runner_limit: runner.and_then(|r| r.runner_limit.as_ref().map(|l| l.value)),
        auth_token_secret: w.facts.secret_refs.get("N8N_RUNNERS_AUTH_TOKEN").cloned(),
        queue: queue(w),
        graceful_shutdown_s: shutdown,
        runner_shutdown_s: runner_shutdown,
        termination_grace_s: grace,
        worker_pool: pool(w),
        other_connections: others,
        existing: k.and_then(|k| k.autoscaler.as_ref()).map(|a| {
            std::iter::once(a.by.as_str())
                .chain(a.also.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" and ")
        }),
        workload,
    };
    checked_names(&target)?;
    Ok(target)
}

/// The times a scale-down gives the worker: n8n's shutdown window, its sidecar runner's, and the
/// pod's termination grace — each the deployment's, else the default.
fn stop_times(
    w: &Node,
    runner: Option<&Node>,
    workload: &str,
) -> (Sourced<f64>, Sourced<f64>, Sourced<f64>) {
    let k = w.facts.k8s.as_ref();
    let shutdown = w
        .times
        .as_ref()
        .and_then(|t| t.graceful_shutdown_s.clone())
        .unwrap_or_else(|| {
            Sourced::new(
                n8n_defaults::GRACEFUL_SHUTDOWN_S,
                Provenance::Default("n8n default".into()),
            )
        });
    let runner_shutdown = runner
        .filter(|r| same_pod(&r.facts, &w.facts))
        .and_then(|r| {
            let v = r.facts.env.get("N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT")?;
            let s = super::n8n_env::number(v)?;
            Some(Sourced::new(
                s.max(0.0),
                Provenance::Deployment(format!(
                    "N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT of {}",
                    r.name()
                )),
            ))
        })
        .unwrap_or_else(|| {
            Sourced::new(
                n8n_defaults::RUNNER_GRACEFUL_SHUTDOWN_S,
                Provenance::Default("n8n default".into()),
            )
        });
    let grace = match k.and_then(|k| k.termination_grace_period_s) {
        Some(g) => Sourced::new(
            g as f64,
            Provenance::Deployment(format!("terminationGracePeriodSeconds of {workload}")),
        ),
        None => Sourced::new(
            K8S_TERMINATION_GRACE_S,
            Provenance::Default("Kubernetes default".into()),
        ),
    };
    (shutdown, runner_shutdown, grace)
}

/// An RFC 1123 label (a namespace's, a container's name): at most 63 lowercase letters, digits
/// and '-', starting and ending with a letter or a digit.
fn is_label(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// An RFC 1123 subdomain (an object's name): labels joined by '.', at most 253 characters.
fn is_subdomain(v: &str) -> bool {
    v.len() <= 253 && v.split('.').all(is_label)
}

/// A Secret's key: letters, digits, '-', '_' and '.', at most 253.
fn is_secret_key(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 253
        && v.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// The names the generated objects carry, refused as the API server would refuse them (exit 2,
/// naming the field and the object), before anything is written: a Deployment, a namespace, a
/// container, a Secret and its key; an image or a Redis address holding a space or a control
/// character.
fn checked_names(t: &AutoscalerTarget) -> Result<(), BadInput> {
    let shown = |v: &str| crate::util::escape_control(&crate::util::truncate(v, 80)).into_owned();
    let refuse = |what: &str, v: &str, rule: &str| {
        Err(BadInput(format!(
            "{what} \"{}\" is not a name Kubernetes takes ({rule}): the KEDA/HPA objects would \
             be refused — rename it in the deployment, or write the objects by hand",
            shown(v)
        )))
    };
    const SUBDOMAIN: &str = "RFC 1123: lowercase letters, digits, '-' and '.', each part \
                             starting and ending with a letter or digit, at most 253";
    const LABEL: &str = "RFC 1123 label: lowercase letters, digits and '-', starting and ending \
                         with a letter or digit, at most 63";
    // The TriggerAuthentication is named after the workload, with "-redis".
    if !is_subdomain(&t.workload) || t.workload.len() + "-redis".len() > 253 {
        return refuse(
            "the worker Deployment's name (metadata.name)",
            &t.workload,
            SUBDOMAIN,
        );
    }
    if let Some(ns) = t.namespace.as_deref().filter(|n| !is_label(n)) {
        return refuse(
            "the worker Deployment's namespace (metadata.namespace)",
            ns,
            LABEL,
        );
    }
    for (what, v) in [
        ("the worker container's name", Some(&t.container)),
        ("the runner sidecar's name", t.runner_sidecar.as_ref()),
    ] {
        if let Some(v) = v.filter(|v| !is_label(v)) {
            return refuse(what, v, LABEL);
        }
    }
    let q = &t.queue;
    for (var, r) in [
        ("N8N_RUNNERS_AUTH_TOKEN", &t.auth_token_secret),
        ("QUEUE_BULL_REDIS_PASSWORD", &q.password_secret),
        ("QUEUE_BULL_REDIS_USERNAME", &q.username_secret),
    ] {
        let Some(r) = r else { continue };
        let (name, key) = r.split_once('/').unwrap_or((r.as_str(), "token"));
        if !is_subdomain(name) {
            return refuse(&format!("the Secret {var} is read from"), name, SUBDOMAIN);
        }
        if !is_secret_key(key) {
            return refuse(
                &format!("the Secret key {var} is read from"),
                key,
                "letters, digits, '-', '_' and '.', at most 253",
            );
        }
    }
    let plain = |v: &str| !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c.is_control());
    let mut addresses = vec![("QUEUE_BULL_REDIS_HOST", q.host.value.as_str())];
    addresses.extend(
        q.cluster_nodes
            .iter()
            .map(|n| ("QUEUE_BULL_REDIS_CLUSTER_NODES", n.as_str())),
    );
    for (what, v) in addresses {
        if !plain(v) {
            return refuse(what, v, "no space or control character");
        }
    }
    if t.image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse(
            "the worker's image",
            &t.image,
            "no space or control character",
        );
    }
    Ok(())
}

/// A process's most replicas: its autoscaler's maximum, else its replicas.
fn most(n: &Node) -> u32 {
    n.facts
        .k8s
        .as_ref()
        .and_then(|k| k.autoscaler.as_ref())
        .map_or(n.facts.replicas.max(1), |a| a.max.max(1))
}

fn pool(n: &Node) -> Sourced<u32> {
    n.db_pool_size.clone().unwrap_or_else(|| {
        Sourced::new(
            n8n_defaults::DB_POOL_SIZE,
            Provenance::Default("n8n default".into()),
        )
    })
}

/// The worker's queue: each value from its environment (where it is set) or n8n's default.
fn queue(w: &Node) -> QueueAddress {
    let f = &w.facts;
    let at = |var: &str| {
        let by = f
            .env_sources
            .get(var)
            .cloned()
            .unwrap_or_else(|| format!("{var} of {}", f.origin));
        Provenance::Deployment(by)
    };
    let text = |var: &str, default: &str| match f.env.get(var).filter(|v| !v.trim().is_empty()) {
        Some(v) => Sourced::new(v.trim().to_string(), at(var)),
        None => Sourced::new(
            default.to_string(),
            Provenance::Default("n8n default".into()),
        ),
    };
    let number = |var: &str, default: u32| match f.env.get(var).and_then(|v| v.trim().parse().ok())
    {
        Some(v) => Sourced::new(v, at(var)),
        None => Sourced::new(default, Provenance::Default("n8n default".into())),
    };
    let tls = match f.env.get("QUEUE_BULL_REDIS_TLS") {
        Some(v) => Sourced::new(v.trim() == "true", at("QUEUE_BULL_REDIS_TLS")),
        None => Sourced::new(false, Provenance::Default("n8n default".into())),
    };
    let set = |var: &str| f.env_names.iter().any(|n| n == var);
    let secret = |var: &str| f.secret_refs.get(var).cloned();
    QueueAddress {
        prefix: text("QUEUE_BULL_PREFIX", "bull"),
        database: number("QUEUE_BULL_REDIS_DB", 0),
        host: text("QUEUE_BULL_REDIS_HOST", "localhost"),
        port: number("QUEUE_BULL_REDIS_PORT", 6379),
        tls,
        cluster_nodes: f
            .env
            .get("QUEUE_BULL_REDIS_CLUSTER_NODES")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        password_secret: secret("QUEUE_BULL_REDIS_PASSWORD"),
        username_secret: secret("QUEUE_BULL_REDIS_USERNAME"),
        password_inline: set("QUEUE_BULL_REDIS_PASSWORD")
            && secret("QUEUE_BULL_REDIS_PASSWORD").is_none(),
        username_inline: set("QUEUE_BULL_REDIS_USERNAME")
            && secret("QUEUE_BULL_REDIS_USERNAME").is_none(),
    }
}
