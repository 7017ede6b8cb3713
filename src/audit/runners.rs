//! The Code-node runners of a deployment: that one exists where Code runs, each paired with
//! the worker or main whose broker it reaches, its memory limited, how many reach one process,
//! and an internal runner (a child of the worker) said as such.

use super::*;

/// Every runner rule, in the order their findings are written.
pub(super) fn all(c: &Ctx, out: &mut Vec<Finding>) {
    runner_exists(c, out);
    let attached = runner_pairing(c, out);
    runner_memory(c, out);
    runners_per_process(c, &attached, out);
    internal_runner(c, out);
}

fn runner_exists(c: &Ctx, out: &mut Vec<Finding>) {
    let (n8n, runners) = (&c.n8n, &c.runners);
    let any_external = n8n.iter().any(|n| external(n));
    if any_external && runners.is_empty() {
        let names: Vec<&str> = n8n
            .iter()
            .filter(|n| external(n))
            .map(|n| n.name())
            .collect();
        out.push(
            finding(FindingId::ExternalModeWithoutRunner, names[0], format!(
                "N8N_RUNNERS_MODE=external on {} but no runner service (n8nio/runners) exists",
                names.join(", ")
            ))
            .why("Every Code node then waits N8N_RUNNERS_TASK_REQUEST_TIMEOUT (60 s) and fails: silently, a minute late.")
            .fix("add an n8nio/runners service per n8n process, with N8N_RUNNERS_TASK_BROKER_URI=http://<that service>:5679"),
        );
    }
}

/// Pairs each runner with the process its broker URI names; checks mode, address, token and
/// image on the way.
fn runner_pairing<'a>(c: &Ctx<'a>, out: &mut Vec<Finding>) -> Attached<'a> {
    let mut attached: Attached<'a> = BTreeMap::new();
    for r in &c.runners {
        let Some(target) = &r.attached_to else {
            let uri =
                env(r, "N8N_RUNNERS_TASK_BROKER_URI").unwrap_or("http://127.0.0.1:5679 (default)");
            out.push(
            finding(FindingId::RunnerBrokerUnresolved, r.name(), format!(
                "{}: N8N_RUNNERS_TASK_BROKER_URI={uri} names no n8n main or worker here",
                r.name()
            ))
            .why("The runner never connects; the process it was meant for has no runner.")
            .fix("point N8N_RUNNERS_TASK_BROKER_URI at the n8n service it pairs with, e.g. http://n8n-worker:5679"),
        );
            continue;
        };
        let e = attached.entry(target.as_str()).or_insert((0, 0));
        e.0 = e.0.saturating_add(r.facts.replicas);
        e.1 = e.1.saturating_add(
            r.runner_limit
                .as_ref()
                .map(|l| l.value)
                .unwrap_or(crate::model::n8n_defaults::RUNNER_LIMIT)
                .saturating_mul(r.facts.replicas),
        );
        if let Some(tn) = c.by_name(target) {
            paired_runner(r, tn, target, out);
        }
    }
    attached
}

fn paired_runner(r: &Node, tn: &Node, target: &str, out: &mut Vec<Finding>) {
    if !external(tn) {
        out.push(
            finding(FindingId::RunnerWithoutExternalMode, r.name(), format!(
                "{} points at {target}, which is not in external mode (N8N_RUNNERS_MODE is {})",
                r.name(),
                env(tn, "N8N_RUNNERS_MODE").unwrap_or("internal, the default")
            ))
            .why("In internal mode n8n starts its own runner and its broker is not meant for this one: the runner container does nothing.")
            .fix(format!("set N8N_RUNNERS_MODE=external (and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0) on {target}")),
        );
    } else {
        let listen = env(tn, "N8N_RUNNERS_BROKER_LISTEN_ADDRESS").unwrap_or("127.0.0.1");
        // A sidecar shares its pod's localhost: 127.0.0.1 reaches it.
        let same_pod = crate::topology::same_pod(&r.facts, &tn.facts);
        if listen != "0.0.0.0" && listen != "::" && !same_pod {
            out.push(
                finding(FindingId::BrokerNotListeningForRunners, target, format!(
                    "{target}: N8N_RUNNERS_BROKER_LISTEN_ADDRESS is {listen}, so runner {} cannot connect",
                    r.name()
                ))
                .why("The broker only accepts connections from inside its own container; every Code task times out.")
                .fix(format!("set N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on {target}")),
            );
        }
    }
    let (a, b) = (
        r.facts.secret_fingerprints.get("N8N_RUNNERS_AUTH_TOKEN"),
        tn.facts.secret_fingerprints.get("N8N_RUNNERS_AUTH_TOKEN"),
    );
    let named = |n: &Node| {
        n.facts
            .env_names
            .iter()
            .any(|x| x == "N8N_RUNNERS_AUTH_TOKEN")
    };
    if (a.is_some() && b.is_some() && a != b) || (named(r) != named(tn)) {
        out.push(
            finding(
                FindingId::RunnerTokenMismatch,
                r.name(),
                format!(
                    "{} and {target} do not share one N8N_RUNNERS_AUTH_TOKEN",
                    r.name()
                ),
            )
            .why("The broker refuses the runner; Code tasks time out.")
            .fix("set the same N8N_RUNNERS_AUTH_TOKEN (one variable reference) on both"),
        );
    }
    let (ti, ri) = (image_tag(&tn.facts.image), image_tag(&r.facts.image));
    if r.facts.image.contains("n8nio/runners") && ti != ri {
        out.push(
            finding(FindingId::RunnerImageMismatch, r.name(), format!(
                "{}: runner image tag {ri} differs from {target}'s n8n tag {ti}",
                r.name()
            ))
            .why("The runner protocol changes between n8n versions; a mismatched runner may be refused or misbehave.")
            .fix("use the same version variable for n8nio/n8n and n8nio/runners"),
        );
    }
}

fn runner_memory(c: &Ctx, out: &mut Vec<Finding>) {
    for r in &c.runners {
        if r.facts.memory_limit_bytes.is_none() {
            let worker_limited = r
                .attached_to
                .as_deref()
                .and_then(|n| c.by_name(n))
                .filter(|w| w.facts.memory_limit_bytes.is_some());
            match worker_limited {
                Some(w) => out.push(
                    finding(FindingId::MemoryLimitOnWorkerNotRunner, r.name(), format!(
                        "{} has a memory limit, its runner {} has none",
                        w.name(),
                        r.name()
                    ))
                    .why("Code-node memory (Buffers) lands in the runner's RSS, not the worker's: the limit bounds the wrong process.")
                    .fix(format!("set mem_limit (or deploy.resources.limits.memory) on {}: runner limit × per-task peak + base", r.name())),
                ),
                None => out.push(
                    finding(FindingId::RunnerWithoutMemoryLimit, r.name(), format!("{}: no memory limit on this runner", r.name()))
                        .why("Code-node memory (Buffers) lands in the runner; without a limit a heavy workflow takes the host's memory.")
                        .fix(format!("set mem_limit (or deploy.resources.limits.memory) on {}: runner limit × per-task peak + base", r.name())),
                ),
            }
        }
    }
}

fn runners_per_process(c: &Ctx, attached: &Attached, out: &mut Vec<Finding>) {
    let (n8n, runners) = (&c.n8n, &c.runners);
    for n in n8n.iter() {
        if !external(n) {
            continue;
        }
        let (runner_replicas, capacity) = attached.get(n.name()).copied().unwrap_or((0, 0));
        let replicas = n.facts.replicas;
        if replicas == 0 {
            continue;
        }
        if n.role == Role::Worker && !runners.is_empty() && runner_replicas < replicas {
            out.push(
                finding(FindingId::WorkerWithoutRunner, n.name(), if runner_replicas == 0 {
                    format!("{}: no runner attached ({replicas} replica(s))", n.name())
                } else {
                    format!(
                        "{}: {replicas} worker replicas but {runner_replicas} runner(s) attached — {} replica(s) have none",
                        n.name(),
                        replicas - runner_replicas
                    )
                })
                .why("A worker without a runner fails every Code task after N8N_RUNNERS_TASK_REQUEST_TIMEOUT (60 s); scaling workers does not scale the runner pointing at the service name.")
                .fix("give each worker replica its own runner (a sidecar per worker, or one runner service per worker service)"),
            );
        } else if n.role == Role::Main
            && runner_replicas == 0
            && !runners.is_empty()
            && !is_true(env(n, "OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS"))
        {
            out.push(
                finding(FindingId::MainWithoutRunner, n.name(), format!("{}: main is in external mode with no runner attached", n.name()))
                    .why("Manual executions run on main and their Code nodes time out.")
                    .fix("add a runner pointing at main, or set OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS=true"),
            );
        }
        if let Some(v) = env(n, "N8N_RUNNERS_MAX_CONCURRENCY") {
            out.push(
                finding(FindingId::RunnerLimitOnWrongContainer, n.name(), format!(
                    "{}: N8N_RUNNERS_MAX_CONCURRENCY={v} has no effect here (external mode): only runner containers read it",
                    n.name()
                ))
                .why("The runner keeps its own limit (10 by default); the value set here is silently ignored.")
                .fix("set N8N_RUNNERS_MAX_CONCURRENCY on the runner containers"),
            );
        }
        // Judged where a worker has runners: each paired replica's share (the replicas left
        // without one are worker-without-runner's).
        if n.role == Role::Worker && runner_replicas > 0 {
            let per_worker = capacity / runner_replicas.min(replicas);
            if let Some(c) = n
                .worker_concurrency
                .as_ref()
                .filter(|c| per_worker < c.value)
            {
                out.push(
                    finding(FindingId::RunnerLimitBelowWorkerConcurrency, n.name(), format!(
                        "{}: runner capacity {per_worker} < worker concurrency {} — Code-heavy throughput is capped at {per_worker} ÷ job time ({:.0} % of what the slots allow)",
                        n.name(),
                        c.value,
                        per_worker as f64 / c.value as f64 * 100.0
                    ))
                    .evidence(format!("worker concurrency {} ({}); runners attached: {runner_replicas}, Σ N8N_RUNNERS_MAX_CONCURRENCY = {capacity}", c.value, c.source))
                    .why("Slots beyond the runner capacity hold jobs that wait for a runner; the queue gauges show them busy.")
                    .fix(format!("raise N8N_RUNNERS_MAX_CONCURRENCY on the runner(s) of {} to ≥ {} in total, or add runners", n.name(), c.value)),
                );
            }
        }
    }
}

fn internal_runner(c: &Ctx, out: &mut Vec<Finding>) {
    let n8n = &c.n8n;
    for n in n8n
        .iter()
        .filter(|n| n.role == Role::Worker && !external(n))
    {
        if let (Some(c), Some(r)) = (&n.worker_concurrency, &n.runner_limit) {
            if r.value < c.value {
                out.push(
                    finding(FindingId::RunnerLimitBelowWorkerConcurrency, n.name(), format!(
                        "{}: internal runner limit {} < worker concurrency {} — Code-heavy throughput is capped at {} ÷ job time",
                        n.name(), r.value, c.value, r.value
                    ))
                    .evidence(format!("{} ({}); {} ({})", r.value, r.source, c.value, c.source))
                    .fix(format!("raise N8N_RUNNERS_MAX_CONCURRENCY on {} to ≥ {}", n.name(), c.value)),
                );
            }
        }
    }
}
