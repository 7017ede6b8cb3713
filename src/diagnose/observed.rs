//! Findings read off what was observed beside the load: queue backlog, the ceiling reached,
//! memory that grows in the runner, containers that disappeared, connection churn, a saturated
//! load generator, CPU-saturated processes.

use crate::findings::{Finding, FindingId};
use crate::record::diagnosis::{CpuUse, Level};
use crate::record::stage::QueueSource;
use crate::record::{Role, StageResult};

/// A signed change with `digits` decimals that never reads "-0.0" (a change that rounds to
/// nothing has no sign).
fn signed(v: f64, digits: usize) -> String {
    let t = format!("{v:+.digits$}");
    if t.trim_start_matches(['+', '-'])
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        t.trim_start_matches(['+', '-']).to_string()
    } else {
        t
    }
}

/// Growth under which throughput counts as flat between two load levels.
pub const FLAT: f64 = 0.05;

const MIB: f64 = 1024.0 * 1024.0;

/// `binding`: the CPU site the verdict already names (`cpu-limit-caps`), not repeated here;
/// `regular`: main runs the executions itself (`EXECUTIONS_MODE=regular`).
pub fn findings(
    levels: &[Level],
    stages: &[StageResult],
    (cpu, binding, regular): (&[CpuUse], Option<&CpuUse>, bool),
    host: &crate::record::summary::Host,
    out: &mut Vec<Finding>,
) {
    queue_backlog(levels, stages, out);
    ceiling_reached(levels, out);
    memory_in_runner(stages, out);
    containers_gone(stages, out);
    version_skew(stages, out);
    connection_churn(stages, out);
    load_generator(stages, host, out);
    cpu_saturated(cpu, binding, regular, out);
}

fn queue_backlog(levels: &[Level], stages: &[StageResult], out: &mut Vec<Finding>) {
    let Some(l) = levels
        .iter()
        .filter(|l| l.valid && l.waiting.unwrap_or(0.0) >= 1.0)
        .max_by(|a, b| a.in_flight.total_cmp(&b.in_flight))
    else {
        return;
    };
    let source = l
        .stages
        .iter()
        .filter_map(|i| stages.get(*i)?.queue.as_ref())
        .map(|q| q.source)
        .next()
        .unwrap_or_default();
    let (where_, evidence) = match source {
        QueueSource::Redis => (
            "in Redis",
            "LLEN bull:jobs:wait > 0 (read from Redis): every worker slot is taken and new executions queue",
        ),
        QueueSource::Metrics => (
            "in the queue",
            "n8n_scaling_mode_queue_jobs_waiting > 0 (n8n main's gauge): every worker slot is taken and new executions queue",
        ),
    };
    out.push(
        Finding::new(FindingId::QueueBacklog,
            format!(
                "Jobs wait {where_} at {}: {:.1} waiting on average, {:.1} slots taken",
                l.words(),
                l.waiting.unwrap_or(0.0),
                l.slots_taken.unwrap_or(0.0)
            ),
        )
        .evidence(evidence)
        .figure("in_flight", l.in_flight)
        .figure("waiting", l.waiting.unwrap_or(0.0))
        .figure("slots_taken", l.slots_taken.unwrap_or(0.0))
        .why("Queued jobs add their wait to every response; past the ceiling latency grows with the load while throughput does not."),
    );
}

/// Throughput flat between two valid levels while the load grew.
fn ceiling_reached(levels: &[Level], out: &mut Vec<Finding>) {
    let valid: Vec<&Level> = levels.iter().filter(|l| l.valid).collect();
    for w in valid.windows(2) {
        let (a, b) = (w[0], w[1]);
        let grew = b.level.magnitude() > a.level.magnitude() * 1.2;
        if !(grew
            && a.throughput.mean > 0.0
            && b.throughput.mean < a.throughput.mean * (1.0 + FLAT))
        {
            continue;
        }
        let p95 = |l: &Level| l.p95_ms.as_ref().map(|p| p.mean).unwrap_or(0.0);
        let (pa, pb) = (p95(a), p95(b));
        let separable = a.throughput.high < b.throughput.low * (1.0 + FLAT) || a.throughput.n < 2;
        let mut f = Finding::new(FindingId::CeilingReached,
            format!(
                "Throughput flat from {} to {} ({:.2} → {:.2} req/s) while p95 grew {pa:.0} → {pb:.0} ms",
                a.words(),
                b.words(),
                a.throughput.mean,
                b.throughput.mean
            ),
        )
        .evidence(format!(
            "load +{:.0} %, throughput {} %, p95 {} %",
            (b.level.magnitude() / a.level.magnitude() - 1.0) * 100.0,
            signed((b.throughput.mean / a.throughput.mean - 1.0) * 100.0, 1),
            signed(if pa > 0.0 { (pb / pa - 1.0) * 100.0 } else { 0.0 }, 0)
        ))
        .figure("from", a.level.magnitude())
        .figure("to", b.level.magnitude())
        .figure("throughput_from_per_s", a.throughput.mean)
        .figure("throughput_to_per_s", b.throughput.mean)
        .why("Past the ceiling more load only queues: latency grows, throughput does not.");
        if !separable {
            f = f.evidence("the repeats' intervals overlap: the data cannot separate 'flat' from 'slightly growing'");
        }
        out.push(f);
        return;
    }
}

/// Requests at least this large are uploads whose bytes the n8n processes hold.
const UPLOAD_BYTES: f64 = 100_000.0;

/// Uploads: what main and the workers held while files passed through, against the bytes in
/// flight (n8n 2.x in queue mode writes binary data to the database; main receives it, the
/// worker that runs the execution reads it back).
pub fn upload_memory(
    stages: &[StageResult],
    binary_data_mode: Option<
        &crate::model::settings::Sourced<crate::model::settings::BinaryDataMode>,
    >,
    out: &mut Vec<Finding>,
) {
    let per_request = |s: &StageResult| s.bytes_sent as f64 / s.requests.max(1) as f64;
    let Some(s) = stages
        .iter()
        .filter(|s| per_request(s) >= UPLOAD_BYTES && !s.memory_by_role.is_empty())
        .max_by(|a, b| a.vus.unwrap_or(0).cmp(&b.vus.unwrap_or(0)))
    else {
        return;
    };
    let in_flight_bytes = per_request(s) * s.vus.unwrap_or(1) as f64;
    let main = role_growth(s, Role::Main);
    let worker = role_growth(s, Role::Worker);
    let mut f = Finding::new(FindingId::UploadMemory,
        format!(
            "Stage {}: uploads of {:.1} MB each, {:.0} MB in flight; main grew {}, the workers {}",
            s.index + 1,
            per_request(s) / 1e6,
            in_flight_bytes / 1e6,
            main.map(|m| format!("{:.0} MiB", m / MIB)).unwrap_or_else(|| "(not watched)".into()),
            worker.map(|w| format!("{:.0} MiB", w / MIB)).unwrap_or_else(|| "(not watched)".into()),
        ),
    )
    .figure("upload_bytes", per_request(s))
    .figure("bytes_in_flight", in_flight_bytes)
    .why("A file passes through main (the webhook receives it) and the worker that runs the execution (it reads the binary data back): both need memory for the uploads in flight, not only the runner.");
    if let Some(m) = main {
        f = f.figure("main_growth_mib", m / MIB);
    }
    if let Some(w) = worker {
        f = f.figure("worker_growth_mib", w / MIB);
    }
    if let Some(m) = binary_data_mode {
        f = f.evidence(format!("binary data mode: {} ({})", m.value, m.source));
    }
    out.push(f.evidence(format!(
        "{} requests sent {:.0} MB in the window",
        s.requests,
        s.bytes_sent as f64 / 1e6
    )));
}

fn role_growth(s: &StageResult, role: Role) -> Option<f64> {
    s.memory_by_role
        .iter()
        .find(|r| r.role == role)
        .map(|r| (r.max_bytes - r.baseline_bytes).max(0.0))
}

/// Memory grows in the runner, not the worker: from container stats (all containers of a role
/// summed per reading), and the worker's heap gauge when it was scraped.
fn memory_in_runner(stages: &[StageResult], out: &mut Vec<Finding>) {
    let Some(s) = stages
        .iter()
        .filter(|s| role_growth(s, Role::Runner).is_some())
        .max_by(|a, b| {
            role_growth(a, Role::Runner)
                .unwrap_or(0.0)
                .total_cmp(&role_growth(b, Role::Runner).unwrap_or(0.0))
        })
    else {
        return;
    };
    let runner = role_growth(s, Role::Runner).unwrap_or(0.0);
    let worker = role_growth(s, Role::Worker).unwrap_or(0.0);
    if runner < 32.0 * MIB || runner < 4.0 * worker {
        return;
    }
    let mut f = Finding::new(FindingId::MemoryInRunner,
        format!(
            "Stage {}: memory grew {:.0} MiB in the runners and {:.0} MiB in the workers — Code-node memory lives in the runner",
            s.index + 1,
            runner / MIB,
            worker / MIB
        ),
    )
    .figure("runner_growth_mib", runner / MIB)
    .figure("worker_growth_mib", worker / MIB);
    for c in s
        .containers
        .iter()
        .filter(|c| c.role == Role::Runner || c.role == Role::Worker)
    {
        f = f.evidence(format!(
            "{} ({}): {:.0} MiB before load, up to {:.0} MiB{}",
            c.name,
            c.role.word(),
            c.memory_baseline_bytes / MIB,
            c.memory_max_bytes / MIB,
            if c.gone {
                " (container disappeared)"
            } else {
                ""
            }
        ));
    }
    for e in s
        .endpoints
        .iter()
        .filter(|e| e.role == Some(Role::Worker) && e.samples > 0)
    {
        f = f.evidence(format!(
            "worker heap (nodejs_heap_size_used_bytes) {:.0}–{:.0} MiB at {}: heap panels stay flat while the runner grows",
            e.heap_used_mean_bytes / MIB,
            e.heap_used_max_bytes / MIB,
            e.url
        ));
    }
    if let Some(v) = s.vus.filter(|v| *v > 0) {
        f = f
            .evidence(format!(
                "≈ {:.0} MiB per job in flight ({v} in flight)",
                runner / MIB / v as f64
            ))
            .figure("mib_per_job", runner / MIB / v as f64);
    }
    out.push(
        f.why("A memory limit on the worker does not bound Code-node memory; an unbounded runner takes the host's memory instead.")
            .fix("set a memory limit on every runner container: runner limit × per-task peak + idle base"),
    );
}

fn containers_gone(stages: &[StageResult], out: &mut Vec<Finding>) {
    for s in stages {
        for c in s.containers.iter().filter(|c| c.gone) {
            out.push(
                Finding::new(FindingId::ContainerGone,
                    format!("Container {} ({}) disappeared during stage {}", c.name, c.role.word(), s.index + 1),
                )
                .evidence(format!("{} stats readings, then {} gaps", c.samples, c.gaps))
                .subject(c.name.clone())
                .why("A restarted or removed container changes the capacity mid-stage: that stage's figures mix two deployments."),
            );
        }
    }
}

/// The n8n processes scraped reported different versions (`n8n_version_info`): one finding
/// naming each version and the endpoints that reported it.
fn version_skew(stages: &[StageResult], out: &mut Vec<Finding>) {
    let mut seen: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for e in stages.iter().flat_map(|s| &s.endpoints) {
        if let Some(v) = &e.n8n_version {
            seen.entry(v.clone()).or_default().insert(e.url.clone());
        }
    }
    if seen.len() < 2 {
        return;
    }
    let said: Vec<String> = seen
        .iter()
        .map(|(v, urls)| {
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            format!("n8n {v} at {}", urls.join(", "))
        })
        .collect();
    out.push(
        Finding::new(
            FindingId::VersionSkew,
            format!(
                "The n8n processes scraped run {} versions",
                seen.len()
            ),
        )
        .evidence(format!("n8n_version_info: {}", said.join("; ")))
        .figure("versions", seen.len() as f64)
        .why("Main enqueues what its version builds and migrates the database to its schema: a process of another version may misread jobs or speak another runner protocol, and the run measured a mixed deployment."),
    );
}

fn connection_churn(stages: &[StageResult], out: &mut Vec<Finding>) {
    let Some(s) = stages
        .iter()
        .filter(|s| s.valid && s.requests >= 20)
        .find(|s| s.new_conns_per_request > 0.5)
    else {
        return;
    };
    out.push(
        Finding::new(FindingId::ConnectionChurn,
            format!(
                "Stage {}: {:.2} new connections per request — keep-alive is missing",
                s.index + 1,
                s.new_conns_per_request
            ),
        )
        .evidence(format!(
            "{} new connections for {} requests; connect p95 {:.1} ms",
            s.new_connections, s.requests, s.phases.connecting.p95_ms
        ))
        .figure("new_conns_per_request", s.new_conns_per_request)
        .why("Every request pays a TCP handshake and leaves a TIME_WAIT socket; at high rates the client or a proxy runs out of ports.")
        .fix("check the proxy in front of n8n (keep-alive to the client) or the server's Connection: close"),
    );
}

/// The load generator's cores as the run recorded them (a saved run diagnosed elsewhere keeps
/// its finding); this machine's only for a run that recorded none (k6 files, old summaries).
fn load_generator(
    stages: &[StageResult],
    host: &crate::record::summary::Host,
    out: &mut Vec<Finding>,
) {
    let cores = host
        .client_cores
        .filter(|c| c.is_finite() && *c > 0.0)
        .unwrap_or_else(crate::util::cores);
    if let Some(s) = stages.iter().find(|s| s.dropped_iterations > 0) {
        out.push(
            Finding::new(FindingId::LoadGeneratorSaturated,
                format!(
                    "Stage {}: {} arrivals dropped — {} requests were already in flight, or the generator fell behind its schedule",
                    s.index + 1,
                    s.dropped_iterations,
                    s.max_vus.unwrap_or(0)
                ),
            )
            .evidence("open model: an arrival that finds every virtual user busy, or that falls due after the generator ran out of time to start it, is not sent (k6's dropped_iterations)")
            .figure("dropped", s.dropped_iterations as f64)
            .why("The arrival rate asked for was not offered: the figures describe a lower load.")
            .fix("raise max_vus in the profile, or lower the rate"),
        );
    } else if let Some(s) = stages.iter().find(|s| s.client_cpu_percent > 85.0 * cores) {
        out.push(
            Finding::new(FindingId::LoadGeneratorSaturated,
                format!(
                    "Stage {}: n8ncap used {:.0} % CPU ({cores:.0} cores) — the load generator may be the limit",
                    s.index + 1,
                    s.client_cpu_percent
                ),
            )
            .figure("client_cpu_percent", s.client_cpu_percent)
            .fix("run n8ncap on another machine than n8n, or lower the load"),
        );
    }
}

/// Saturated CPU sites, whatever caps: a process near its usable cores is where the next limit
/// is (the verdict's `cpu-limit-caps` says when it already caps).
fn cpu_saturated(cpu: &[CpuUse], binding: Option<&CpuUse>, regular: bool, out: &mut Vec<Finding>) {
    let hot: Vec<&CpuUse> = cpu
        .iter()
        .filter(|u| u.saturated && binding.is_none_or(|b| b.name != u.name))
        .collect();
    if hot.is_empty() {
        return;
    }
    let fix = relief(&hot, regular);
    let mut f = Finding::new(FindingId::CpuBoundProcess,
        "A process (or the host) ran near its usable cores at the ceiling",
    )
    .why("A Node.js process (n8n main, worker or runner) uses one core for JavaScript: at 100 % it caps throughput whatever the concurrency settings, and latency grows with its event-loop lag.")
    .fix(fix);
    for u in hot {
        f = f
            .evidence(format!(
                "{}: {:.2} cores of {:.1} usable, {:.3} CPU s per execution, allows {:.2} executions/s",
                u.name, u.cores_used, u.usable_cores.value, u.cpu_s_per_execution, u.bound_per_s
            ))
            .figure(&format!("{}_cores", u.name), u.cores_used);
    }
    out.push(f);
}

/// What relieves each saturated site, one line per kind of server in the order seen: more
/// workers spread a worker's or a runner's load (and the host's), never that of what every
/// worker shares — main's intake (in regular mode, main runs every execution), the webhook
/// processors, Redis, Postgres' server.
/// A shared server as the relief line names it.
fn server_name(r: Role) -> &'static str {
    match r {
        Role::Redis => "Redis",
        Role::Postgres => "Postgres",
        other => other.word(),
    }
}

fn relief(hot: &[&CpuUse], regular: bool) -> String {
    const SPREAD: &str = "spread the load: more workers (each with its runner), more runners per worker for Code-heavy work, or a faster CPU; move n8ncap off the machine if it is the one saturated";
    let of = |u: &CpuUse| -> (&'static str, &'static str) {
        match u.role {
            Some(Role::Main) if regular => (
                "main",
                "queue mode (EXECUTIONS_MODE=queue) moves the executions off main to workers, or give main a faster core",
            ),
            Some(Role::Webhook) => (
                "webhook processors",
                "more webhook processors (`n8n webhook`) behind the load balancer, or faster cores; more workers will not help",
            ),
            // A server every worker shares (main's intake, Redis, Postgres): its kind's relief.
            Some(r) => match crate::limits::server_relief(r) {
                Some(fix) => (server_name(r), fix),
                None => ("workers, runners and the host", SPREAD),
            },
            None => ("workers, runners and the host", SPREAD),
        }
    };
    let mut lines: Vec<(&str, &str)> = Vec::new();
    for u in hot {
        let l = of(u);
        if !lines.contains(&l) {
            lines.push(l);
        }
    }
    match lines.as_slice() {
        [(_, only)] if *only == SPREAD => SPREAD.to_string(),
        _ => lines
            .iter()
            .map(|(who, what)| format!("{who}: {what}"))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::tests::closed;
    use crate::record::stage::EndpointObserved;

    fn at(url: &str, version: Option<&str>) -> EndpointObserved {
        EndpointObserved {
            url: url.into(),
            n8n_version: version.map(String::from),
            ..Default::default()
        }
    }

    fn hot(role: Role, name: &str) -> CpuUse {
        use crate::model::settings::{Provenance, Sourced};
        CpuUse {
            site: crate::record::diagnosis::CpuSite::Process,
            role: Some(role),
            name: name.into(),
            cores_used: 0.97,
            cpu_s_per_execution: 0.026,
            usable_cores: Sourced::new(1.0, Provenance::Default("one thread".into())),
            bound_per_s: 1.0 / 0.026,
            saturated: true,
            eventloop_lag_s: None,
        }
    }

    /// A saturated main is not relieved by workers: in queue mode its change is webhook
    /// processors (`n8n webhook`), in regular mode queue mode; a worker's is more workers.
    #[test]
    fn a_main_at_its_core_is_told_webhook_processors_not_more_workers() {
        let fix = |cpu: &[CpuUse], regular| {
            let mut out = Vec::new();
            cpu_saturated(cpu, None, regular, &mut out);
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].figures.len(), cpu.len());
            out[0].fix.clone().unwrap()
        };
        let main = hot(Role::Main, "n8n");
        let worker = hot(Role::Worker, "n8n-worker");
        let queue = fix(std::slice::from_ref(&main), false);
        assert!(queue.contains("n8n webhook") && !queue.contains("more workers (each"));
        // Postgres' server is shared too (its kind's relief); a host of many processes is spread.
        let pg = fix(&[hot(Role::Postgres, "postgres")], false);
        assert!(pg.contains("EXECUTIONS_DATA_PRUNE") && !pg.contains("more workers (each"));
        let regular = fix(std::slice::from_ref(&main), true);
        assert!(regular.contains("EXECUTIONS_MODE=queue") && !regular.contains("n8n webhook"));
        let alone = fix(std::slice::from_ref(&worker), false);
        assert!(alone.contains("more workers (each") && !alone.contains("n8n webhook"));
        let both = fix(&[main, worker], false);
        assert!(both.contains("n8n webhook") && both.contains("more workers (each"));
    }

    #[test]
    fn processes_reporting_two_versions_are_one_finding_naming_both() {
        let mut s = closed(0, 4, 10.0);
        s.endpoints = vec![
            at("http://main/metrics", Some("2.41.1")),
            at("http://worker/metrics", Some("2.38.0")),
            at("http://other/metrics", None),
        ];
        let mut out = Vec::new();
        version_skew(std::slice::from_ref(&s), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, FindingId::VersionSkew);
        assert_eq!(out[0].figures["versions"], 2.0);
        // One version everywhere (or none said): nothing.
        s.endpoints[1].n8n_version = Some("2.41.1".into());
        let mut out = Vec::new();
        version_skew(&[s], &mut out);
        assert!(out.is_empty());
    }
}
