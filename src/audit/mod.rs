//! Audit: the configuration mistakes behind most n8n queue-mode capacity incidents, found in
//! compose files or running containers before the load finds them. Both inputs become
//! [`Facts`] and a [`Topology`]; the same rules run on either.

mod alert_rules;
mod autoscaler;
mod database;
mod kubernetes;
mod outage;
mod runners;
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
    runners::all(&c, &mut out);
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
