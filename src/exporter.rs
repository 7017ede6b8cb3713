//! `n8ncap exporter`: the runner metrics n8n does not expose. Reads the deployment from the
//! Docker API every `refresh` and publishes, per worker and runner, worker concurrency, runner
//! limit, attached runner capacity, effective concurrency, memory limit and memory, and — given a
//! job time — the theoretical ceiling min(runner capacity, worker concurrency) ÷ job time, as
//! Prometheus text, so dashboards can draw the limit the queue gauges hide.

use crate::model::settings::{Provenance, Sourced};
use crate::model::{self, Job, WorkerLimits};
use crate::observe::docker;
use crate::topology::{Role, Topology};
use crate::wire::http::{self, respond};
use crate::wire::prometheus::TextWriter;
use hyper::StatusCode;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct ExporterConfig {
    pub listen: SocketAddr,
    pub project: Option<String>,
    pub refresh: Duration,
    /// Job time for the ceiling (seconds).
    pub job_time: Option<f64>,
}

/// Renders the exposition for one reading of the deployment.
/// A worker's limits as the model takes them (no runner known: 0 runner tasks).
fn limits(w: &crate::topology::Node) -> WorkerLimits {
    WorkerLimits {
        worker_concurrency: w.worker_concurrency.as_ref().map(|c| c.value).unwrap_or(0),
        runner_capacity: w.runner_capacity.unwrap_or(0),
    }
}

pub fn render(t: Option<&Topology>, memory: &[(String, u64)], job_time: Option<f64>) -> String {
    let mut e = TextWriter::new("n8ncap_");
    e.single(
        "up",
        "gauge",
        "1 when the last read of the Docker API succeeded.",
        if t.is_some() { 1.0 } else { 0.0 },
    );
    let Some(t) = t else { return e.out };
    if let Some(j) = job_time {
        e.single(
            "job_time_seconds",
            "gauge",
            "Job time the ceilings are computed with (--job-time).",
            j,
        );
    }
    let workers: Vec<_> = t.nodes.iter().filter(|n| n.role == Role::Worker).collect();
    let svc = |n: &crate::topology::Node| n.facts.service.clone().unwrap_or_default();
    e.family("worker_concurrency", "gauge", "Effective worker concurrency (slots) of each worker: --concurrency, or N8N_CONCURRENCY_PRODUCTION_LIMIT when not -1.");
    for w in &workers {
        if let Some(c) = &w.worker_concurrency {
            e.sample(
                "worker_concurrency",
                &[("container", w.name()), ("service", &svc(w))],
                c.value as f64,
            );
        }
    }
    e.end_family();
    e.family(
        "runner_limit",
        "gauge",
        "N8N_RUNNERS_MAX_CONCURRENCY of each runner container (n8n's default 10 when unset).",
    );
    for r in t.nodes.iter().filter(|n| n.role == Role::Runner) {
        if let Some(l) = &r.runner_limit {
            let attached = r.attached_to.clone().unwrap_or_default();
            e.sample(
                "runner_limit",
                &[
                    ("container", r.name()),
                    ("service", &svc(r)),
                    ("attached_to", &attached),
                ],
                l.value as f64,
            );
        }
    }
    e.end_family();
    e.family(
        "worker_runner_capacity",
        "gauge",
        "Sum of the runner limits attached to each worker's task broker.",
    );
    for w in &workers {
        e.sample(
            "worker_runner_capacity",
            &[("container", w.name()), ("service", &svc(w))],
            w.runner_capacity.unwrap_or(0) as f64,
        );
    }
    e.end_family();
    e.family(
        "worker_effective_concurrency",
        "gauge",
        "min(runner capacity, worker concurrency): Code-node executions a worker can run at once.",
    );
    for w in &workers {
        let eff = limits(w).effective_concurrency() as f64;
        e.sample(
            "worker_effective_concurrency",
            &[("container", w.name()), ("service", &svc(w))],
            eff,
        );
    }
    e.end_family();
    if let Some(j) = job_time.filter(|j| *j > 0.0) {
        ceilings(&mut e, (t, &workers), j);
    }
    memory_families(&mut e, t, memory);
    e.out
}

/// Each worker's throughput ceiling and the deployment's, for a job time `j` (s).
fn ceilings(e: &mut TextWriter, (t, workers): (&Topology, &[&crate::topology::Node]), j: f64) {
    let svc = |n: &crate::topology::Node| n.facts.service.clone().unwrap_or_default();
    e.family(
        "theoretical_ceiling_per_second",
        "gauge",
        "Throughput ceiling of each worker: effective concurrency ÷ job time.",
    );
    // The exporter knows the job time only: an all-Code job, as the model computes it.
    let job = Job {
        wait_s: 0.0,
        code_s: j,
        overhead_s: 0.0,
    };
    let all: Vec<WorkerLimits> = workers.iter().map(|w| limits(w)).collect();
    for (w, l) in workers.iter().zip(&all) {
        e.sample(
            "theoretical_ceiling_per_second",
            &[("container", w.name()), ("service", &svc(w))],
            model::slots_and_runners(std::slice::from_ref(l), job).ceiling,
        );
    }
    e.end_family();
    // The deployment's ceiling from every bound its settings give (`limits::capacity`), when
    // the workers agree on them; else the sum over workers.
    let mut s = t.model_settings();
    s.job_time = Some(Sourced::new(j, Provenance::Flag("--job-time".into())));
    let total = crate::limits::capacity(&s, 0.0)
        .map(|c| c.ceiling)
        .unwrap_or_else(|| model::slots_and_runners(&all, job).ceiling);
    e.single(
        "theoretical_ceiling_total_per_second",
        "gauge",
        "Throughput ceiling of the deployment: the smallest of its bounds (Σ effective concurrency ÷ job time, and any other its settings give).",
        total,
    );
}

/// Memory limits of the n8n and runner containers, and each container's memory now.
fn memory_families(e: &mut TextWriter, t: &Topology, memory: &[(String, u64)]) {
    e.family(
        "memory_limit_bytes",
        "gauge",
        "Memory limit of each n8n and runner container (absent: no limit).",
    );
    for n in t.nodes.iter().filter(|n| {
        matches!(
            n.role,
            Role::Main | Role::Worker | Role::Webhook | Role::Runner
        )
    }) {
        if let Some(m) = n.facts.memory_limit_bytes {
            e.sample(
                "memory_limit_bytes",
                &[("container", n.name()), ("role", n.role.word())],
                m as f64,
            );
        }
    }
    e.end_family();
    e.family(
        "container_memory_bytes",
        "gauge",
        "Memory of each container as docker stats shows it (usage minus inactive file cache).",
    );
    for (name, bytes) in memory {
        let role = t
            .nodes
            .iter()
            .find(|n| n.name() == name)
            .map(|n| n.role.word())
            .unwrap_or("other");
        e.sample(
            "container_memory_bytes",
            &[("container", name), ("role", role)],
            *bytes as f64,
        );
    }
    e.end_family();
}

async fn read_once(project: Option<&str>, job_time: Option<f64>) -> anyhow::Result<String> {
    let d = docker::connect().await?;
    let found = docker::discover(&d, project).await?;
    let ids: Vec<(String, String)> = found
        .iter()
        .map(|(id, f)| (id.clone(), f.name.clone()))
        .collect();
    let t = Topology::build(found.into_iter().map(|(_, f)| f).collect());
    let mut memory = Vec::new();
    for (id, name) in ids {
        if let Ok(s) = docker::stats_once(&d, &id).await {
            memory.push((name, s.memory_bytes));
        }
    }
    Ok(render(Some(&t), &memory, job_time))
}

/// Serves `/metrics` until interrupted; the Docker read refreshes in the background.
pub async fn run(cfg: ExporterConfig) -> anyhow::Result<()> {
    let listener = http::bind(cfg.listen, "the exporter (--listen)").await?;
    if cfg.job_time.is_none() {
        eprintln!(
            "n8ncap exporter: no --job-time: n8ncap_theoretical_ceiling_per_second (and the \
             dashboard's two ceiling panels) stay empty; give the time a job holds its slot, \
             e.g. --job-time 3s (a sweep's diagnosis says it: service time S)"
        );
    }
    let current = Arc::new(Mutex::new(render(None, &[], cfg.job_time)));
    let cur = current.clone();
    let project = cfg.project.clone();
    let job_time = cfg.job_time;
    let refresh = cfg.refresh;
    let reader = tokio::spawn(async move {
        let mut warned = false;
        loop {
            let text = match read_once(project.as_deref(), job_time).await {
                Ok(t) => {
                    warned = false;
                    t
                }
                Err(e) => {
                    if !warned {
                        eprintln!(
                            "n8ncap exporter: {e:#}; publishing n8ncap_up 0 until it answers"
                        );
                        warned = true;
                    }
                    render(None, &[], job_time)
                }
            };
            if let Ok(mut c) = cur.lock() {
                *c = text;
            }
            tokio::time::sleep(refresh).await;
        }
    });
    println!("n8ncap exporter: http://{}/metrics", listener.local_addr()?);
    let serve = http::serve(
        listener,
        move |req: hyper::Request<hyper::body::Incoming>| {
            let current = current.clone();
            async move {
                if req.uri().path() == "/metrics" {
                    let body = current.lock().map(|c| c.clone()).unwrap_or_default();
                    respond(
                        StatusCode::OK,
                        "text/plain; version=0.0.4; charset=utf-8",
                        body,
                    )
                } else {
                    respond(StatusCode::NOT_FOUND, "text/plain", "see /metrics\n")
                }
            }
        },
    );
    tokio::select! {
        _ = serve => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    reader.abort();
    Ok(())
}
