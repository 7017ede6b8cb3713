//! Audit: the configuration mistakes behind most n8n queue-mode capacity incidents, found in
//! compose files or running containers before the load finds them. Both inputs become
//! [`Facts`] and a [`Topology`]; the same rules run on either.

mod alert_rules;
mod autoscaler;
mod database;
mod kubernetes;
mod outage;
mod time_budget;
mod upgrade;

pub use crate::model::Upgrade;

/// What an audit checks beyond the rules: an upgrade's, and the time budget against a run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub upgrade: Option<Upgrade>,
    pub measured: Option<crate::model::OperatingPoint>,
    /// The live Postgres (`--postgres-env`/`--postgres-file`): the budget against it.
    pub postgres: Option<crate::topology::PostgresFacts>,
    /// Existing alerting rules (`--rules FILE`): their thresholds against the measured run.
    pub alerts: Vec<crate::topology::alert_rules::ExistingAlert>,
}

use crate::findings::{Finding, FindingId, Severity};
use crate::model::settings::ExecutionsMode;
use crate::topology::{Facts, Node, Role, Topology};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(crate) fn finding(id: FindingId, subject: &str, title: String) -> Finding {
    Finding::new(id, title).subject(subject)
}

/// A finding with where it is written (compose file and line), when known.
#[derive(Debug, Clone, Serialize)]
pub struct Located {
    #[serde(flatten)]
    pub finding: Finding,
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "compose: a.yml, b.yml" or "live: Docker".
    pub input: String,
    pub services: usize,
    pub findings: Vec<Located>,
    /// What could not be checked, and what would tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<String>,
}

impl Report {
    pub fn has_errors(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.finding.severity == Severity::Error)
    }
}

fn env<'a>(n: &'a Node, k: &str) -> Option<&'a str> {
    n.facts
        .env
        .get(k)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
}

/// n8n's boolean rule (`topology::n8n_env::boolean`): set and true.
fn is_true(v: Option<&str>) -> bool {
    v.and_then(crate::topology::n8n_env::boolean) == Some(true)
}

fn external(n: &Node) -> bool {
    n.runners_mode
        .as_ref()
        .is_some_and(|m| m.value == crate::topology::RunnersMode::External)
}

use crate::topology::{image_tag, image_version};

/// What every rule looks at: the topology, its n8n processes and its runners.
struct Ctx<'a> {
    t: &'a Topology,
    /// The live Postgres read for the audit, when it was.
    postgres: Option<&'a crate::topology::PostgresFacts>,
    n8n: Vec<&'a Node>,
    runners: Vec<&'a Node>,
    has_workers: bool,
}

impl<'a> Ctx<'a> {
    fn new(t: &'a Topology) -> Ctx<'a> {
        let n8n: Vec<&Node> = t
            .nodes
            .iter()
            .filter(|n| matches!(n.role, Role::Main | Role::Worker | Role::Webhook))
            .collect();
        Ctx {
            postgres: None,
            has_workers: n8n.iter().any(|n| n.role == Role::Worker),
            runners: t.nodes.iter().filter(|n| n.role == Role::Runner).collect(),
            n8n,
            t,
        }
    }

    fn by_name(&self, name: &str) -> Option<&'a Node> {
        self.t.nodes.iter().find(|n| n.facts.name == name)
    }
}

/// Runner replicas and Σ runner limits attached to each n8n process, by name.
type Attached<'a> = BTreeMap<&'a str, (u32, u32)>;

/// Runs every rule on a set of facts. `locations` maps service name → (file, line).
pub fn audit(
    facts: Vec<Facts>,
    locations: &BTreeMap<String, (PathBuf, usize)>,
    input: String,
) -> Report {
    audit_for(facts, locations, input, &Options::default())
}

/// [`audit`], with the rules of what an n8n version changes (`upgrade`) and the time budget
/// against a run's measurements.
pub fn audit_for(
    facts: Vec<Facts>,
    locations: &BTreeMap<String, (PathBuf, usize)>,
    input: String,
    opts: &Options,
) -> Report {
    // A live container that is not running takes no part in the deployment's pairing; its
    // last exit is still reported.
    let everything = Topology::build(facts.clone());
    let running: Vec<Facts> = facts
        .into_iter()
        .filter(|f| f.state.as_ref().is_none_or(|s| s.running))
        .collect();
    let t = Topology::build(running);
    let mut c = Ctx::new(&t);
    c.postgres = opts.postgres.as_ref();
    let mut out = Vec::new();
    queue_mode(&c, &mut out);
    regular_mode(&c, &mut out);
    binary_data(&c, &mut out);
    runner_exists(&c, &mut out);
    let attached = runner_pairing(&c, &mut out);
    runner_memory(&c, &mut out);
    runners_per_process(&c, &attached, &mut out);
    internal_runner(&c, &mut out);
    concurrency_settings(&c, &mut out);
    metrics(&c, &mut out);
    encryption_key(&c, &mut out);
    version_skew(&c, &mut out);
    database::rules(&c, &mut out);
    kubernetes::rules(&c, &mut out);
    outage::rules(&c, &mut out);
    if let Some(u) = opts.upgrade {
        upgrade::rules(&c, u, &mut out);
    }
    let mut unchecked = Vec::new();
    match &opts.measured {
        Some(m) => {
            time_budget::rules(&c, m, opts.upgrade, &mut out);
            autoscaler::rules(&c, m, &mut out);
            alert_rules::rules(&opts.alerts, m, &mut out);
        }
        None if !c.n8n.is_empty() => unchecked.push(time_budget::unchecked()),
        None => {}
    }
    lifecycle(&everything, &mut out);
    let findings = out
        .into_iter()
        .map(|f| {
            let loc = f.subject.as_ref().and_then(|s| locations.get(s)).cloned();
            Located {
                file: loc.as_ref().map(|l| l.0.clone()),
                line: loc.map(|l| l.1),
                finding: f,
            }
        })
        .collect();
    Report {
        input,
        services: t.nodes.len(),
        findings,
        unchecked,
    }
}

/// A node's executions mode as topology read it, and the words for where it came from.
fn mode_of(n: &Node) -> (Option<ExecutionsMode>, String) {
    match &n.executions_mode {
        Some(m) => (Some(m.value), m.source.words()),
        None => (None, "not read".into()),
    }
}

fn queue_mode(c: &Ctx, out: &mut Vec<Finding>) {
    let (n8n, has_workers) = (&c.n8n, c.has_workers);
    if has_workers {
        for n in n8n.iter() {
            let (mode, source) = mode_of(n);
            if mode != Some(ExecutionsMode::Queue) {
                out.push(
                    finding(FindingId::NotQueueMode, n.name(), format!(
                        "{}: executions mode is regular ({source}) — workers only take jobs from a queue-mode main",
                        n.name(),
                    ))
                    .why("Without queue mode on every n8n process, executions run in main and the workers sit idle, or workers fail to start.")
                    .fix(format!("set EXECUTIONS_MODE=queue on {}", n.name())),
                );
            }
        }
    }
}

/// No workers and main not in queue mode: a regular-mode deployment (n8n's default).
fn regular_mode(c: &Ctx, out: &mut Vec<Finding>) {
    if c.has_workers {
        return;
    }
    for n in c.n8n.iter().filter(|n| n.role == Role::Main) {
        let (mode, source) = mode_of(n);
        if mode == Some(ExecutionsMode::Queue) {
            continue;
        }
        let limit = match &n.production_limit {
            Some(l) => format!(
                "N8N_CONCURRENCY_PRODUCTION_LIMIT={} executions at once",
                l.value
            ),
            None => "no production limit (-1): as many executions as arrive".to_string(),
        };
        out.push(
            finding(FindingId::RegularMode, n.name(), format!(
                "{}: regular mode ({source}): main runs every execution — {limit}, all of their JavaScript on one core",
                n.name(),
            ))
            .why("One Node process runs every execution: past one core, no setting raises throughput; queue mode spreads executions over workers.")
            .fix("to scale past one process: EXECUTIONS_MODE=queue with Redis on main and workers, workers each with a runner (n8ncap recommend --format compose)"),
        );
    }
}

/// n8n does not support filesystem binary data in queue mode: a worker cannot read a file
/// another process wrote (n8n docs, "Handle binary data").
fn binary_data(c: &Ctx, out: &mut Vec<Finding>) {
    let queue = c.has_workers
        || c.n8n
            .iter()
            .any(|n| mode_of(n).0 == Some(ExecutionsMode::Queue));
    if !queue {
        return;
    }
    for n in c.n8n.iter() {
        // Set on the process (n8n's own default in queue mode is database).
        let set = env(n, "N8N_DEFAULT_BINARY_DATA_MODE").is_some();
        let mode = n.binary_data_mode.as_ref().map(|m| m.value);
        if set && mode == Some(crate::model::settings::BinaryDataMode::Filesystem) {
            out.push(
                finding(FindingId::BinaryDataFilesystemInQueueMode, n.name(), format!(
                    "{}: N8N_DEFAULT_BINARY_DATA_MODE=filesystem in queue mode: n8n does not support it",
                    n.name()
                ))
                .why("Main writes an upload to its own disk; the worker that runs the execution cannot read it.")
                .fix(format!(
                    "remove N8N_DEFAULT_BINARY_DATA_MODE on {} (n8n 2.x defaults to database in queue mode) or set database or s3",
                    n.name()
                )),
            );
        }
    }
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

fn concurrency_settings(c: &Ctx, out: &mut Vec<Finding>) {
    let n8n = &c.n8n;
    for n in n8n.iter().filter(|n| n.role == Role::Worker) {
        if let (Some(flag), Some(limit)) = (n.overridden_concurrency, &n.production_limit) {
            out.push(
                finding(FindingId::ProductionLimitOverridesConcurrency, n.name(), format!(
                    "{}: N8N_CONCURRENCY_PRODUCTION_LIMIT={} overrides --concurrency",
                    n.name(),
                    limit.value
                ))
                .evidence(format!("--concurrency={flag} in the command; N8N_CONCURRENCY_PRODUCTION_LIMIT={} ({})", limit.value, limit.source))
                .why("The worker runs with the production limit, not the flag: the capacity you planned is not the one running.")
                .fix("keep one of the two (N8N_CONCURRENCY_PRODUCTION_LIMIT=-1 to use --concurrency)"),
            );
        }
    }
    for n in n8n.iter() {
        if let Some(v) = env(n, "QUEUE_WORKER_CONCURRENCY") {
            out.push(
                finding(
                    FindingId::QueueWorkerConcurrencyNoop,
                    n.name(),
                    format!(
                        "{}: QUEUE_WORKER_CONCURRENCY={v} is not an n8n setting",
                        n.name()
                    ),
                )
                .why("It changes nothing; the worker runs with --concurrency (default 10).")
                .fix("use `worker --concurrency=N` (or N8N_CONCURRENCY_PRODUCTION_LIMIT)"),
            );
        }
    }
}

fn metrics(c: &Ctx, out: &mut Vec<Finding>) {
    let (n8n, has_workers) = (&c.n8n, c.has_workers);
    for n in n8n
        .iter()
        .filter(|n| matches!(n.role, Role::Main | Role::Worker))
    {
        if !is_true(env(n, "N8N_METRICS")) {
            out.push(
                finding(FindingId::MetricsOff, n.name(), format!("{}: N8N_METRICS is not true: no /metrics", n.name()))
                    .why("Without metrics nobody sees slots taken, queue backlog, RSS or event-loop lag.")
                    .fix(format!("set N8N_METRICS=true on {}", n.name())),
            );
        } else if n.role == Role::Main
            && has_workers
            && !is_true(env(n, "N8N_METRICS_INCLUDE_QUEUE_METRICS"))
        {
            out.push(
                finding(
                    FindingId::QueueMetricsOff,
                    n.name(),
                    format!(
                        "{}: N8N_METRICS_INCLUDE_QUEUE_METRICS is not true: no queue gauges",
                        n.name()
                    ),
                )
                .why("Jobs waiting in Redis and slots taken stay invisible: n8n exposes the queue gauges only on main (workers never do), so main is the one place to turn them on.")
                .fix(format!(
                    "set N8N_METRICS_INCLUDE_QUEUE_METRICS=true on {}",
                    n.name()
                )),
            );
        }
    }
}

fn encryption_key(c: &Ctx, out: &mut Vec<Finding>) {
    let (n8n, has_workers) = (&c.n8n, c.has_workers);
    let mains: Vec<&&Node> = n8n.iter().filter(|n| n.role == Role::Main).collect();
    if has_workers {
        if let Some(m) = mains.first() {
            let key = |n: &Node| {
                n.facts
                    .secret_fingerprints
                    .get("N8N_ENCRYPTION_KEY")
                    .copied()
            };
            let named = |n: &Node| n.facts.env_names.iter().any(|x| x == "N8N_ENCRYPTION_KEY");
            for w in n8n.iter().filter(|n| n.role != Role::Main) {
                let differs = match (key(m), key(w)) {
                    (Some(a), Some(b)) => a != b,
                    _ => named(m) != named(w),
                };
                if differs {
                    out.push(
                        finding(FindingId::EncryptionKeyMismatch, w.name(), format!(
                            "{}: N8N_ENCRYPTION_KEY is not the one {} uses",
                            w.name(),
                            m.name()
                        ))
                        .why("The worker cannot decrypt credentials saved by main: every execution using a credential fails.")
                        .fix("set the same N8N_ENCRYPTION_KEY (one variable reference) on main and every worker"),
                    );
                }
            }
        }
    }
}

/// Main, workers and webhook processors on different n8n versions: queue jobs, the database
/// schema and the runner protocol are one version's. Each process whose version differs from
/// main's is named (from its image tag; the runners' pairing rule checks each runner against
/// its own n8n).
fn version_skew(c: &Ctx, out: &mut Vec<Finding>) {
    let Some(main) = c.n8n.iter().find(|n| n.role == Role::Main) else {
        return;
    };
    let Some(mv) = image_version(&main.facts.image) else {
        return;
    };
    for n in c.n8n.iter().filter(|n| n.role != Role::Main) {
        let Some(v) = image_version(&n.facts.image) else {
            continue;
        };
        if v != mv {
            out.push(
                finding(FindingId::VersionSkew, n.name(), format!(
                    "{}: n8n {v} while {} runs n8n {mv}",
                    n.name(),
                    main.name()
                ))
                .evidence(format!("{} image {}; {} image {}", n.name(), crate::util::escape_control(&n.facts.image), main.name(), crate::util::escape_control(&main.facts.image)))
                .why("Main enqueues what its version builds and migrates the database to its schema: a worker of another version may misread jobs, fail on the schema, or speak another runner protocol — failures that show only under load.")
                .fix(format!("run n8n {mv} on {} too (one image tag variable for every n8n process and n8nio/runners)", n.name())),
            );
        }
    }
}

/// Live containers only: a last exit by the OOM killer, or restarts, with when they happened.
fn lifecycle(all: &Topology, out: &mut Vec<Finding>) {
    for n in &all.nodes {
        let Some(st) = &n.facts.state else { continue };
        let role = n.role.word();
        if st.oom_killed {
            let mut f = finding(
                FindingId::ContainerLastOomKilled,
                n.name(),
                format!(
                    "{} ({role}) was OOM-killed{}{}",
                    n.name(),
                    st.finished_at
                        .as_deref()
                        .map(|t| format!(" at {t}"))
                        .unwrap_or_default(),
                    if st.running {
                        "; it is running again"
                    } else {
                        "; it is down"
                    }
                ),
            )
            .evidence(format!(
                "State.OOMKilled true, exit code {}, restart count {}{}",
                st.exit_code.map_or("?".into(), |c| c.to_string()),
                st.restart_count,
                n.facts
                    .memory_limit_bytes
                    .map(|m| format!(", memory limit {} MiB", m >> 20))
                    .unwrap_or_default()
            ))
            .figure("restart_count", st.restart_count as f64);
            if let Some(m) = n.facts.memory_limit_bytes {
                f = f.figure("memory_limit_mib", (m >> 20) as f64);
            }
            out.push(
                f.why("Code-node memory lands in the runner: a runner's limit must hold its tasks × their peak plus its base, or the kernel kills it and the worker's Code tasks wait for a runner that is gone.")
                    .fix("size the memory limit from what the tasks use (n8ncap sweep --profile memory --project …), or lower N8N_RUNNERS_MAX_CONCURRENCY"),
            );
        } else if st.restart_count > 0 {
            out.push(
                finding(
                    FindingId::ContainerRestartCount,
                    n.name(),
                    format!(
                        "{} ({role}) has restarted {} time(s){}",
                        n.name(),
                        st.restart_count,
                        st.started_at
                            .as_deref()
                            .map(|t| format!(", last started at {t}"))
                            .unwrap_or_default()
                    ),
                )
                .evidence(format!(
                    "last exit code {}",
                    st.exit_code.map_or("?".into(), |c| c.to_string())
                ))
                .figure("restart_count", st.restart_count as f64)
                .why("What a container held when it restarted is lost (executions in flight, runner tasks).")
                .fix("read its logs (docker logs --since) and State for why it restarted"),
            );
        }
    }
}
