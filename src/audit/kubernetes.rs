//! Rules only Kubernetes manifests can break: replicas and autoscalers, probes, grace periods,
//! memory limits against the Node heap, the database budget at the maximum replicas. They run
//! on the same topology as every other rule and look at [`K8sFacts`] where the manifest said
//! more than a compose file can. Fixes name the charts' values where one chart is known to cause
//! the case (8gears' worker autoscaling, n8n's keda.worker).

use super::{env, finding, is_true, Ctx};
use crate::findings::Finding;
use crate::findings::FindingId;
use crate::topology::{K8sFacts, Node, ProbeKind, Role};

/// n8n's own graceful shutdown (`N8N_GRACEFUL_SHUTDOWN_TIMEOUT`) and the runners'
/// (`N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT`), both 30 s by default; Kubernetes' default grace
/// period is 30 s too.
const N8N_SHUTDOWN_S: u64 = 30;
const RUNNER_SHUTDOWN_S: u64 = crate::model::n8n_defaults::RUNNER_GRACEFUL_SHUTDOWN_S as u64;
const K8S_DEFAULT_GRACE_S: u64 = 30;

pub(super) fn rules(c: &Ctx, out: &mut Vec<Finding>) {
    let k8s = |n: &Node| n.facts.k8s.clone();
    for n in c.n8n.iter().copied() {
        let Some(k) = k8s(n) else { continue };
        if n.role == Role::Worker {
            worker_replicas(n, &k, out);
            worker_probes(n, &k, out);
            if n.facts.memory_limit_bytes.is_none() {
                out.push(
                    finding(FindingId::WorkerWithoutMemoryLimit, n.name(), format!(
                        "{}: no memory limit on the worker container", n.name()
                    ))
                    .why("A worker holds every execution's data while it runs: without a limit one heavy workflow can take the node's memory, and the scheduler cannot place pods by it.")
                    .fix("set resources.limits.memory on the worker container (and a request), sized from a memory sweep"),
                );
            }
        }
        readiness(n, &k, out);
        grace_period(c, n, &k, out);
    }
    for n in &c.t.nodes {
        if n.facts.k8s.is_some()
            && matches!(
                n.role,
                Role::Main | Role::Worker | Role::Webhook | Role::Runner
            )
        {
            heap_above_limit(n, out);
        }
        if n.facts.k8s.is_some() && n.role == Role::Runner {
            runner_memory_per_task(n, out);
        }
    }
    db_budget(c, out);
}

fn slots(n: &Node) -> u32 {
    n.worker_concurrency.as_ref().map(|c| c.value).unwrap_or(10)
}

fn worker_replicas(n: &Node, k: &K8sFacts, out: &mut Vec<Finding>) {
    let per_pod = slots(n);
    let runner_per_pod = n.runner_capacity.map(|r| r / n.facts.replicas.max(1));
    match &k.autoscaler {
        None if !k.replicas_declared => out.push(
            finding(FindingId::WorkerReplicasUnset, n.name(), format!(
                "{}: {} {} has no replicas and no autoscaler targets it: Kubernetes runs 1 pod ({per_pod} slots)",
                n.name(), k.workload_kind, k.workload
            ))
            .why("A chart that drops `replicas:` when autoscaling is switched on (8gears' worker.autoscaling.enabled) but renders no HorizontalPodAutoscaler leaves the workers at one pod, whatever was planned.")
            .fix(format!(
                "set spec.replicas on {} {} (8gears: worker.replicaCount with worker.autoscaling.enabled=false), or add a KEDA ScaledObject on the Redis list bull:jobs:wait targeting it",
                k.workload_kind, k.workload
            )),
        ),
        None => {}
        Some(a) => {
            let mut f = finding(FindingId::WorkerScaling, n.name(), format!(
                "{}: {}–{} pods ({}) × {per_pod} slots = {}–{} worker slots{}",
                n.name(), a.min, a.max, a.by,
                a.min.saturating_mul(per_pod), a.max.saturating_mul(per_pod),
                runner_per_pod.map(|r| format!("; runner capacity {r} per pod, {}–{} in all", a.min.saturating_mul(r), a.max.saturating_mul(r))).unwrap_or_default()
            ))
            .figure("min_pods", a.min as f64)
            .figure("max_pods", a.max as f64)
            .figure("slots_per_pod", per_pod as f64);
            if a.min == 0 {
                f = f.evidence("minimum 0 pods: the first job waits for a pod to start (KEDA scales from zero on the queue)".to_string());
            }
            out.push(f);
            let queue_trigger = a.triggers.iter().any(|t| t.kind.starts_with("redis"));
            let resource: Vec<&str> = a
                .triggers
                .iter()
                .filter(|t| matches!(t.kind.as_str(), "cpu" | "memory"))
                .map(|t| t.kind.as_str())
                .collect();
            if !resource.is_empty() && !queue_trigger {
                out.push(
                    finding(FindingId::WorkerAutoscaledOnCpu, n.name(), format!(
                        "{}: {} scales the workers on {} — their load is the jobs waiting in Redis",
                        n.name(), a.by, resource.join(" and ")
                    ))
                    .why("A worker waiting on runners, HTTP calls or the database uses little CPU while jobs pile up in bull:jobs:wait: the autoscaler stays at its minimum exactly when more workers are needed, and scales up on CPU-heavy bursts that slots would have absorbed.")
                    .fix("scale workers on the queue: a KEDA ScaledObject with a redis trigger on listName bull:jobs:wait (n8n's chart: keda.worker), with runners scaling in the same pods"),
                );
            }
            let prefix = env(n, "QUEUE_BULL_PREFIX").unwrap_or("bull");
            queue_trigger_rules(n, a, prefix, out);
            let want_list = format!("{prefix}:jobs:wait");
            let want_db = env(n, "QUEUE_BULL_REDIS_DB").unwrap_or("0");
            for t in a.triggers.iter().filter(|t| t.kind == "redis") {
                let list = t.list_name.as_deref().unwrap_or("");
                let db = t.database.as_deref().unwrap_or("0");
                // The active list is the deployment's queue too (waiting + active jobs).
                let active = format!("{prefix}:jobs:active");
                if (list != want_list && list != active) || db.trim() != want_db.trim() {
                    out.push(
                        finding(FindingId::AutoscalerWrongQueue, n.name(), format!(
                            "{}: {} watches list {list:?} in database {db}, but n8n queues jobs on {want_list:?} in database {want_db}",
                            n.name(), a.by
                        ))
                        .why("The list KEDA reads stays empty: the trigger never fires and the workers never scale past the minimum.")
                        .fix(format!("set the trigger's listName to {want_list} (QUEUE_BULL_PREFIX + \":jobs:wait\") and databaseIndex to {want_db} (QUEUE_BULL_REDIS_DB)")),
                    );
                }
            }
        }
    }
}

/// A queue trigger that counts only the waiting jobs, and a Redis password written in a
/// trigger.
fn queue_trigger_rules(
    n: &Node,
    a: &crate::topology::Autoscaler,
    prefix: &str,
    out: &mut Vec<Finding>,
) {
    let redis: Vec<&crate::topology::Trigger> = a
        .triggers
        .iter()
        .filter(|t| t.kind.starts_with("redis"))
        .collect();
    let active = format!("{prefix}:jobs:active");
    if !redis.is_empty()
        && !redis
            .iter()
            .any(|t| t.list_name.as_deref() == Some(active.as_str()))
    {
        out.push(
            finding(FindingId::AutoscalerWaitingOnly, n.name(), format!(
                "{}: {} counts the jobs waiting in Redis, not those the workers are running",
                n.name(), a.by
            ))
            .why("Once the backlog is taken the waiting list is empty while every worker is still busy: the desired count falls and the HPA removes pods without knowing which are running jobs (kedacore/keda #6719, #2900). Since n8n 2.0 a job killed that way fails for good (no stalled retries).")
            .fix(format!("Kubernetes — a second redis trigger on listName {active} and spec.advanced.scalingModifiers {{formula: \"waiting + active\", target: what one worker holds at 2/3}} (KEDA >= 2.12; n8ncap recommend RUN --format keda writes it); n8n's chart — keda.worker renders the waiting list only: replace its ScaledObject with the generated one; the community chart — its worker HPA scales on CPU: disable it and apply the generated ScaledObject")),
        );
    }
    let needs_password = n
        .facts
        .env_names
        .iter()
        .any(|v| v == "QUEUE_BULL_REDIS_PASSWORD");
    let unauthenticated: Vec<&&crate::topology::Trigger> = redis
        .iter()
        .filter(|t| !t.inline_password && !t.auth_ref.as_ref().is_some_and(|(_, ok)| *ok))
        .collect();
    if needs_password && !unauthenticated.is_empty() {
        let named = unauthenticated
            .iter()
            .filter_map(|t| t.auth_ref.as_ref().map(|(n, _)| n.as_str()))
            .collect::<Vec<_>>();
        out.push(
            finding(FindingId::AutoscalerWithoutRedisAuth, n.name(), format!(
                "{}: the workers read Redis with QUEUE_BULL_REDIS_PASSWORD, but {} of {}'s redis triggers give KEDA no password{}",
                n.name(),
                unauthenticated.len(),
                a.by,
                if named.is_empty() {
                    String::new()
                } else {
                    format!(" (authenticationRef {} names no TriggerAuthentication with a password parameter here)", named.join(", "))
                }
            ))
            .why("KEDA's scaler connects to Redis with what the trigger and its TriggerAuthentication give: refused with NOAUTH, the trigger errors and the workers stay at their minimum whatever the backlog.")
            .fix("Kubernetes — a TriggerAuthentication with secretTargetRef {parameter: password, name: the Secret the workers read QUEUE_BULL_REDIS_PASSWORD from, key: its key}, named by each trigger's authenticationRef (n8ncap recommend RUN --format keda writes both); n8n's chart and the community chart render none: apply it beside them"),
        );
    }
    if a.triggers.iter().any(|t| t.inline_password) {
        out.push(
            finding(FindingId::AutoscalerInlinePassword, n.name(), format!(
                "{}: {} has a password written in a trigger or a metric source (value not shown)",
                n.name(), a.by
            ))
            .why("Whoever can read the autoscaler reads the password: it is stored in etcd in clear, shown by kubectl get -o yaml and kept in Git with the manifests.")
            .fix("Kubernetes — an HPA's metric source: remove the user:password@ (the metrics adapter reads its backend with its own Secret); a KEDA trigger: remove metadata.password (and any user:password@ in the address) and set authenticationRef to a TriggerAuthentication with secretTargetRef {parameter: password, name: the Secret the workers read QUEUE_BULL_REDIS_PASSWORD from, key: its key}; n8n's chart and the community chart — the same beside the chart's objects (neither chart renders a TriggerAuthentication)"),
        );
    }
}

fn worker_probes(n: &Node, k: &K8sFacts, out: &mut Vec<Finding>) {
    let http: Vec<&str> = k
        .probes
        .iter()
        .filter(|p| p.http_path.is_some())
        .map(|p| p.kind.word())
        .collect();
    if !http.is_empty() && !is_true(env(n, "QUEUE_HEALTH_CHECK_ACTIVE")) {
        out.push(
            finding(FindingId::WorkerProbeWithoutHealthCheck, n.name(), format!(
                "{}: HTTP {} probe(s) on a worker without QUEUE_HEALTH_CHECK_ACTIVE=true",
                n.name(), http.join(" and ")
            ))
            .why("A worker serves /healthz only when QUEUE_HEALTH_CHECK_ACTIVE=true (on QUEUE_HEALTH_CHECK_PORT, 5678): the probes fail, the pod is never ready or is restarted in a loop, and its running executions are cut.")
            .fix("set QUEUE_HEALTH_CHECK_ACTIVE=true on the worker (and QUEUE_HEALTH_CHECK_PORT to the probed port), or remove the HTTP probes"),
        );
    }
}

fn readiness(n: &Node, k: &K8sFacts, out: &mut Vec<Finding>) {
    if k.probes
        .iter()
        .any(|p| p.kind == ProbeKind::Readiness && p.http_path.as_deref() == Some("/healthz"))
    {
        out.push(
            finding(FindingId::ReadinessOnHealthz, n.name(), format!(
                "{}: the readiness probe asks /healthz, which answers as soon as the process is up",
                n.name()
            ))
            .why("n8n's /healthz/readiness answers 200 only once the database is connected and migrated and Redis is connected: on /healthz a pod takes traffic (or counts as ready in a rollout) before it can run anything.")
            .fix("point readinessProbe.httpGet.path at /healthz/readiness (keep /healthz for liveness)"),
        );
    }
}

fn grace_period(c: &Ctx, n: &Node, k: &K8sFacts, out: &mut Vec<Finding>) {
    if !matches!(n.role, Role::Main | Role::Worker) {
        return;
    }
    // Seconds as n8n reads them (JavaScript's Number(), topology::n8n_env): NaN keeps the
    // default, 0 or less is no wait, more than 30 days is read as 30 days.
    let whole_s = |v: &str| {
        crate::topology::n8n_env::number(v)
            .map(|x| x.clamp(0.0, crate::util::MAX_DURATION.as_secs_f64()).ceil() as u64)
    };
    let secs = |name: &str, default: u64| env(n, name).and_then(whole_s).unwrap_or(default);
    let sidecar_runner = c
        .runners
        .iter()
        .any(|r| r.facts.k8s.is_some() && crate::topology::same_pod(&r.facts, &n.facts));
    let runner_s = if sidecar_runner {
        c.runners
            .iter()
            .filter(|r| crate::topology::same_pod(&r.facts, &n.facts))
            .filter_map(|r| env(r, "N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT"))
            .filter_map(whole_s)
            .max()
            .unwrap_or(RUNNER_SHUTDOWN_S)
    } else {
        0
    };
    let need = secs("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", N8N_SHUTDOWN_S) + runner_s;
    let grace = k.termination_grace_period_s.unwrap_or(K8S_DEFAULT_GRACE_S);
    if grace < need {
        out.push(
            finding(FindingId::GracePeriodTooShort, n.name(), format!(
                "{}: terminationGracePeriodSeconds {grace}{} < {need} s, n8n's graceful shutdown{}",
                n.name(),
                if k.termination_grace_period_s.is_none() { " (Kubernetes' default)" } else { "" },
                if runner_s > 0 { format!(" ({} s) plus its runner sidecar's ({runner_s} s)", need - runner_s) } else { String::new() }
            ))
            .figure("grace_period_s", grace as f64)
            .figure("needed_s", need as f64)
            .why("At a rollout or a scale-down Kubernetes kills the pod when the grace period ends: executions still running on the worker are cut and re-run or lost.")
            .fix(format!("set terminationGracePeriodSeconds to at least {} on {} {}", need + 5, k.workload_kind, k.workload)),
        );
    }
}

/// `--max-old-space-size=N` (MiB) in NODE_OPTIONS.
fn heap_mb(n: &Node) -> Option<u64> {
    let opts = env(n, "NODE_OPTIONS")?;
    opts.split_whitespace().find_map(|a| {
        a.strip_prefix("--max-old-space-size=")
            .or_else(|| a.strip_prefix("--max_old_space_size="))
            .and_then(|v| v.parse().ok())
    })
}

fn heap_above_limit(n: &Node, out: &mut Vec<Finding>) {
    let (Some(heap), Some(limit)) = (heap_mb(n), n.facts.memory_limit_bytes) else {
        return;
    };
    let limit_mb = limit >> 20;
    if heap >= limit_mb {
        out.push(
            finding(FindingId::HeapAboveMemoryLimit, n.name(), format!(
                "{}: NODE_OPTIONS --max-old-space-size={heap} (MiB) ≥ the memory limit {limit_mb} MiB",
                n.name()
            ))
            .figure("heap_mb", heap as f64)
            .figure("limit_mb", limit_mb as f64)
            .why("V8 grows the heap up to its own limit before it collects hard; the container's limit comes first, and the kernel kills the process (OOMKilled) instead of the garbage collector freeing memory.")
            .fix(format!("keep --max-old-space-size about 75 % of the limit (≤ {} MiB here), or raise the memory limit", limit_mb * 3 / 4)),
        );
    }
}

/// MiB per task below which a runner's limit is mostly its idle base.
const MIN_MB_PER_TASK: u64 = 16;

fn runner_memory_per_task(n: &Node, out: &mut Vec<Finding>) {
    let (Some(limit), Some(tasks)) = (
        n.facts.memory_limit_bytes,
        n.runner_limit.as_ref().map(|l| l.value),
    ) else {
        return;
    };
    let limit_mb = limit >> 20;
    let base = crate::model::n8n_defaults::RUNNER_IDLE_MIB as u64;
    let per_task = limit_mb.saturating_sub(base) / u64::from(tasks.max(1));
    if per_task < MIN_MB_PER_TASK {
        out.push(
            finding(FindingId::RunnerMemoryPerTask, n.name(), format!(
                "{}: memory limit {limit_mb} MiB for {tasks} tasks leaves {per_task} MiB per task beyond an idle runner's ≈ {base} MiB",
                n.name()
            ))
            .figure("limit_mb", limit_mb as f64)
            .figure("tasks", tasks as f64)
            .figure("mb_per_task", per_task as f64)
            .why("A Code task holds the items it processes in the runner; with every task slot busy the runner reaches its limit and is OOMKilled, failing all its tasks at once.")
            .fix("raise the runner's memory limit to tasks × per-task peak + ≈ 150 MiB (measure the peak with the memory profile), or lower N8N_RUNNERS_MAX_CONCURRENCY"),
        );
    }
}

fn db_budget(c: &Ctx, out: &mut Vec<Finding>) {
    let users: Vec<&&Node> = c
        .n8n
        .iter()
        .filter(|n| n.facts.k8s.is_some() && env(n, "DB_TYPE") == Some("postgresdb"))
        .collect();
    let has_pg = c.t.nodes.iter().any(|n| n.role == Role::Postgres);
    // With Postgres in the input or read live, or a PgBouncer in front, the budget is checked,
    // not only said.
    if users.is_empty()
        || has_pg
        || c.postgres.is_some()
        || super::database::bouncer_in_front(c, &users).is_some()
    {
        return;
    }
    let mut parts = Vec::new();
    let mut total = 0u32;
    for n in &users {
        let pool = n
            .db_pool_size
            .as_ref()
            .map_or(crate::model::n8n_defaults::DB_POOL_SIZE, |p| p.value);
        let pods = n.facts.replicas;
        total = total.saturating_add(pool.saturating_mul(pods));
        parts.push(format!("{} {pods} × {pool}", n.name()));
    }
    out.push(
        finding(FindingId::DbConnectionBudget, users[0].name(), format!(
            "at the maximum replicas n8n opens up to {total} Postgres connections ({}): max_connections must allow that plus every other client",
            parts.join(" + ")
        ))
        .figure("connections", total as f64)
        .why("Each n8n process keeps a pool of DB_POSTGRESDB_POOL_SIZE connections (2 by default); the autoscaler's maximum multiplies it. Postgres is not in this input, so its max_connections cannot be checked here.")
        .fix(format!("check the database's max_connections (SHOW max_connections) is above {total} plus headroom, or lower DB_POSTGRESDB_POOL_SIZE / the autoscalers' maximum")),
    );
}
