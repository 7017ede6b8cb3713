//! The observer that runs beside a sweep: every interval it scrapes each `/metrics` endpoint
//! and samples each container's stats, appends what it saw to `timeline.jsonl`, and keeps
//! per-stage aggregates (steady window only) for the stage results. A source that is down or
//! answers garbage leaves a gap, recorded and counted; the sweep goes on.

use super::docker::{self, RawStats};
use super::prometheus::Exposition;
use super::redis::{queue_lengths, Conn, RedisUrl};
use super::scrape::{self, queue_gauges};
use crate::load::results::{ContainerObserved, EndpointObserved, QueueObserved, RoleMemory};
use crate::topology::Role;
use bollard::Docker;
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinHandle;

/// A `/metrics` endpoint and the role it plays (given as `role=URL`, else read from content).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub role: Option<Role>,
}

impl Endpoint {
    /// Parses `URL` or `role=URL` (role: main, worker, webhook).
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        match text.split_once('=') {
            Some((role, url)) if !role.contains(':') && !role.contains('/') => {
                let role = match role {
                    "main" => Role::Main,
                    "worker" => Role::Worker,
                    "webhook" => Role::Webhook,
                    other => {
                        return Err(format!(
                            "--metrics {text}: unknown role {other:?} (use main=URL, worker=URL or webhook=URL)"
                        ))
                    }
                };
                Ok(Endpoint {
                    url: url.to_string(),
                    role: Some(role),
                })
            }
            _ => Ok(Endpoint {
                url: text.to_string(),
                role: None,
            }),
        }
    }
}

/// A container to sample.
#[derive(Debug, Clone)]
pub struct WatchedContainer {
    pub id: String,
    pub name: String,
    pub role: Role,
}

pub struct WatchConfig {
    pub endpoints: Vec<Endpoint>,
    /// Bull's queue in Redis, sampled directly (and its key prefix).
    pub redis: Option<(RedisUrl, String)>,
    pub docker: Option<Docker>,
    pub containers: Vec<WatchedContainer>,
    pub interval: Duration,
    pub prefix: String,
    pub timeline: Option<File>,
}

#[derive(Default)]
struct EndpointAcc {
    role: Option<Role>,
    rss: Vec<f64>,
    heap: Vec<f64>,
    external: Vec<f64>,
    lag: Vec<f64>,
    cpu_rate: Vec<f64>,
    runner_requested_rate: Vec<f64>,
    gaps: u32,
    last_error: Option<String>,
}

#[derive(Default)]
struct ContainerAcc {
    role: Option<Role>,
    memory: Vec<f64>,
    cpu: Vec<f64>,
    gaps: u32,
    gone: bool,
}

#[derive(Default)]
struct StageAcc {
    redis_active: Vec<f64>,
    redis_waiting: Vec<f64>,
    redis_gaps: u32,
    /// Per role: the sum of its containers' memory at each reading.
    role_totals: BTreeMap<Role, Vec<f64>>,
    queue_active: Vec<f64>,
    queue_waiting: Vec<f64>,
    queue_gaps: u32,
    endpoints: BTreeMap<String, EndpointAcc>,
    containers: BTreeMap<String, ContainerAcc>,
}

struct State {
    /// First memory reading of each container in the run.
    baselines: BTreeMap<String, f64>,
    steady_from: Option<Instant>,
    acc: StageAcc,
    timeline: Option<File>,
    started: Instant,
}

pub struct Observer {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
    first: Option<tokio::sync::oneshot::Receiver<()>>,
    has_queue_source: bool,
}

/// What the observer saw during one stage's steady window.
pub struct StageObservation {
    pub memory_by_role: Vec<RoleMemory>,
    pub queue: Option<QueueObserved>,
    pub endpoints: Vec<EndpointObserved>,
    pub containers: Vec<ContainerObserved>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NAN, f64::max)
}

impl Observer {
    pub fn start(cfg: WatchConfig) -> Observer {
        let state = Arc::new(Mutex::new(State {
            baselines: BTreeMap::new(),
            steady_from: None,
            acc: StageAcc::default(),
            timeline: cfg.timeline,
            started: Instant::now(),
        }));
        let has_queue_source = !cfg.endpoints.is_empty() || cfg.redis.is_some();
        let st = state.clone();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(run(
            st,
            first_tx,
            cfg.endpoints,
            cfg.redis,
            cfg.docker,
            cfg.containers,
            cfg.interval,
            cfg.prefix,
        ));
        Observer {
            state,
            task,
            first: Some(first_rx),
            has_queue_source,
        }
    }

    /// Waits (at most `limit`) for the first round of readings: the baselines.
    pub async fn first_round(&mut self, limit: Duration) {
        if let Some(rx) = self.first.take() {
            let _ = tokio::time::timeout(limit, rx).await;
        }
    }

    /// A new stage begins; samples before `steady_from` (its warm-up) are only written to the
    /// timeline.
    pub fn begin_stage(&self, index: usize, steady_from: Instant) {
        if let Ok(mut s) = self.state.lock() {
            s.steady_from = Some(steady_from);
            s.acc = StageAcc::default();
            let t = s.started.elapsed().as_secs_f64();
            write_line(
                &mut s.timeline,
                json!({"t": t, "kind": "stage", "stage": index}),
            );
        }
    }

    pub fn end_stage(&self, coarse: bool) -> StageObservation {
        let (acc, baselines) = match self.state.lock() {
            Ok(mut s) => {
                s.steady_from = None;
                (std::mem::take(&mut s.acc), s.baselines.clone())
            }
            Err(_) => (StageAcc::default(), BTreeMap::new()),
        };
        let roles_of: BTreeMap<Role, (u32, f64)> = {
            let mut m: BTreeMap<Role, (u32, f64)> = BTreeMap::new();
            for (name, a) in &acc.containers {
                if let Some(r) = a.role {
                    let e = m.entry(r).or_default();
                    e.0 += 1;
                    e.1 += baselines.get(name).copied().unwrap_or(0.0);
                }
            }
            m
        };
        let memory_by_role = acc
            .role_totals
            .iter()
            .map(|(role, v)| {
                let (n, base) = roles_of.get(role).copied().unwrap_or_default();
                RoleMemory {
                    role: role.word().to_string(),
                    containers: n,
                    baseline_bytes: base,
                    mean_bytes: mean(v),
                    max_bytes: max(v).max(0.0),
                }
            })
            .collect();
        // Redis is read directly and at the scrape interval: it wins over n8n's gauges.
        let from_redis = !acc.redis_active.is_empty() || acc.redis_gaps > 0;
        let queue = self.has_queue_source.then(|| {
            let (active, waiting, gaps, source) = if from_redis {
                (
                    &acc.redis_active,
                    &acc.redis_waiting,
                    acc.redis_gaps,
                    "redis",
                )
            } else {
                (
                    &acc.queue_active,
                    &acc.queue_waiting,
                    acc.queue_gaps,
                    "metrics",
                )
            };
            QueueObserved {
                source: source.into(),
                active_mean: mean(active),
                active_max: max(active).max(0.0),
                waiting_mean: mean(waiting),
                waiting_max: max(waiting).max(0.0),
                samples: active.len() as u32,
                gaps,
                coarse: coarse && !from_redis,
            }
        });
        let endpoints = acc
            .endpoints
            .into_iter()
            .map(|(url, a)| EndpointObserved {
                url,
                role: a.role.map(|r| r.word().to_string()),
                samples: a.rss.len() as u32,
                gaps: a.gaps,
                last_error: a.last_error,
                rss_mean_bytes: mean(&a.rss),
                rss_max_bytes: max(&a.rss).max(0.0),
                heap_used_mean_bytes: mean(&a.heap),
                heap_used_max_bytes: max(&a.heap).max(0.0),
                external_mean_bytes: mean(&a.external),
                eventloop_lag_mean_s: mean(&a.lag),
                eventloop_lag_max_s: max(&a.lag).max(0.0),
                cpu_percent_mean: mean(&a.cpu_rate) * 100.0,
                runner_tasks_requested_per_s: (!a.runner_requested_rate.is_empty())
                    .then(|| mean(&a.runner_requested_rate)),
            })
            .collect();
        let containers = acc
            .containers
            .into_iter()
            .map(|(name, a)| ContainerObserved {
                memory_baseline_bytes: baselines.get(&name).copied().unwrap_or(0.0),
                name,
                role: a.role.map(|r| r.word().to_string()).unwrap_or_default(),
                samples: a.memory.len() as u32,
                gaps: a.gaps,
                gone: a.gone,
                memory_first_bytes: a.memory.first().copied().unwrap_or(0.0),
                memory_mean_bytes: mean(&a.memory),
                memory_max_bytes: max(&a.memory).max(0.0),
                cpu_percent_mean: mean(&a.cpu),
                cpu_percent_max: max(&a.cpu).max(0.0),
            })
            .collect();
        StageObservation {
            memory_by_role,
            queue,
            endpoints,
            containers,
        }
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

fn write_line(f: &mut Option<File>, v: serde_json::Value) {
    if let Some(file) = f.as_mut() {
        let mut line = v.to_string();
        line.push('\n');
        if file.write_all(line.as_bytes()).is_err() {
            // The disk went away: keep observing, stop writing.
            *f = None;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    state: Arc<Mutex<State>>,
    first: tokio::sync::oneshot::Sender<()>,
    endpoints: Vec<Endpoint>,
    redis: Option<(RedisUrl, String)>,
    docker: Option<Docker>,
    containers: Vec<WatchedContainer>,
    interval: Duration,
    prefix: String,
) {
    let mut roles: Vec<Option<Role>> = endpoints.iter().map(|e| e.role).collect();
    let mut prev_cpu: Vec<Option<(f64, Instant)>> = vec![None; endpoints.len()];
    let mut prev_req: Vec<Option<(f64, Instant)>> = vec![None; endpoints.len()];
    let mut prev_stats: HashMapStats = HashMapStats::default();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = Some(first);
    let mut redis_conn: Option<Conn> = None;
    loop {
        tick.tick().await;
        let now = Instant::now();
        let queue_read = match &redis {
            Some((url, prefix)) => {
                if redis_conn.is_none() {
                    redis_conn = Conn::open(url).await.ok();
                }
                let got = match redis_conn.as_mut() {
                    Some(c) => redis_queue_lengths(c, prefix).await,
                    None => Err(anyhow::anyhow!("cannot reach Redis at {}", url.shown())),
                };
                if got.is_err() {
                    redis_conn = None;
                }
                Some(got)
            }
            None => None,
        };
        let scrapes = futures_util::future::join_all(
            endpoints
                .iter()
                .map(|e| scrape::scrape(&e.url, interval.max(Duration::from_millis(500)))),
        )
        .await;
        let stats = match &docker {
            Some(d) => {
                futures_util::future::join_all(
                    containers.iter().map(|c| docker::stats_once(d, &c.id)),
                )
                .await
            }
            None => Vec::new(),
        };
        let Ok(mut st) = state.lock() else { return };
        let t = st.started.elapsed().as_secs_f64();
        let steady = st.steady_from.is_some_and(|s| now >= s);
        let unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        for (i, (e, got)) in endpoints.iter().zip(scrapes).enumerate() {
            match got {
                Ok(exp) => {
                    if roles[i].is_none() {
                        roles[i] = Some(role_of(&exp, &prefix));
                    }
                    let v = |n: &str| exp.value(&format!("{prefix}{n}"));
                    let rate = |prev: &mut Option<(f64, Instant)>, cur: Option<f64>| {
                        let cur = cur?;
                        let r = prev.and_then(|(p, pt)| {
                            let dt = now.duration_since(pt).as_secs_f64();
                            (dt > 0.0 && cur >= p).then(|| (cur - p) / dt)
                        });
                        *prev = Some((cur, now));
                        r
                    };
                    let cpu = rate(&mut prev_cpu[i], v("process_cpu_seconds_total"));
                    let req = rate(&mut prev_req[i], v("runner_task_requested_total"));
                    let q = queue_gauges(&exp, &prefix);
                    write_line(
                        &mut st.timeline,
                        json!({
                            "t": t, "unix": unix, "kind": "metrics", "url": e.url,
                            "role": roles[i].map(|r| r.word()),
                            "rss_bytes": v("process_resident_memory_bytes"),
                            "heap_used_bytes": v("nodejs_heap_size_used_bytes"),
                            "external_bytes": v("nodejs_external_memory_bytes"),
                            "eventloop_lag_s": v("nodejs_eventloop_lag_seconds"),
                            "cpu_percent": cpu.map(|c| c * 100.0),
                            "queue_active": q.map(|q| q.active),
                            "queue_waiting": q.map(|q| q.waiting),
                        }),
                    );
                    if steady {
                        let acc = st.acc.endpoints.entry(e.url.clone()).or_default();
                        acc.role = roles[i];
                        acc.rss.extend(v("process_resident_memory_bytes"));
                        acc.heap.extend(v("nodejs_heap_size_used_bytes"));
                        acc.external.extend(v("nodejs_external_memory_bytes"));
                        acc.lag.extend(v("nodejs_eventloop_lag_seconds"));
                        acc.cpu_rate.extend(cpu);
                        acc.runner_requested_rate.extend(req);
                        if let Some(q) = q {
                            st.acc.queue_active.push(q.active);
                            st.acc.queue_waiting.push(q.waiting);
                        }
                    }
                }
                Err(err) => {
                    let msg = format!("{err:#}");
                    write_line(
                        &mut st.timeline,
                        json!({"t": t, "unix": unix, "kind": "gap", "source": e.url, "error": msg}),
                    );
                    if steady {
                        let acc = st.acc.endpoints.entry(e.url.clone()).or_default();
                        acc.role = roles[i];
                        acc.gaps += 1;
                        acc.last_error = Some(msg);
                        if roles[i].is_none_or(|r| r == Role::Main) {
                            st.acc.queue_gaps += 1;
                        }
                    }
                }
            }
        }
        match queue_read {
            Some(Ok((waiting, active))) => {
                write_line(
                    &mut st.timeline,
                    json!({"t": t, "unix": unix, "kind": "redis", "waiting": waiting, "active": active}),
                );
                if steady {
                    st.acc.redis_waiting.push(waiting);
                    st.acc.redis_active.push(active);
                }
            }
            Some(Err(e)) => {
                write_line(
                    &mut st.timeline,
                    json!({"t": t, "unix": unix, "kind": "gap", "source": "redis", "error": format!("{e:#}")}),
                );
                if steady {
                    st.acc.redis_gaps += 1;
                }
            }
            None => {}
        }
        let mut totals: BTreeMap<Role, f64> = BTreeMap::new();
        for (c, got) in containers.iter().zip(stats) {
            match got {
                Ok(raw) => {
                    let cpu = prev_stats
                        .0
                        .get(&c.id)
                        .and_then(|p| docker::cpu_percent(p, &raw));
                    prev_stats.0.insert(c.id.clone(), raw);
                    st.baselines
                        .entry(c.name.clone())
                        .or_insert(raw.memory_bytes as f64);
                    write_line(
                        &mut st.timeline,
                        json!({
                            "t": t, "unix": unix, "kind": "container", "name": c.name,
                            "role": c.role.word(), "memory_bytes": raw.memory_bytes,
                            "memory_limit_bytes": raw.memory_limit, "cpu_percent": cpu,
                        }),
                    );
                    *totals.entry(c.role).or_insert(0.0) += raw.memory_bytes as f64;
                    if steady {
                        let acc = st.acc.containers.entry(c.name.clone()).or_default();
                        acc.role = Some(c.role);
                        acc.memory.push(raw.memory_bytes as f64);
                        acc.cpu.extend(cpu);
                    }
                }
                Err(err) => {
                    let msg = format!("{err:#}");
                    let gone = msg.contains("No such container") || msg.contains("404");
                    write_line(
                        &mut st.timeline,
                        json!({"t": t, "unix": unix, "kind": "gap", "source": c.name, "error": msg, "gone": gone}),
                    );
                    if steady {
                        let acc = st.acc.containers.entry(c.name.clone()).or_default();
                        acc.role = Some(c.role);
                        acc.gaps += 1;
                        acc.gone |= gone;
                    }
                }
            }
        }
        if steady {
            for (role, total) in totals {
                st.acc.role_totals.entry(role).or_default().push(total);
            }
        }
        if let Some(f) = st.timeline.as_mut() {
            let _ = f.flush();
        }
        drop(st);
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
    }
}

async fn redis_queue_lengths(c: &mut Conn, prefix: &str) -> anyhow::Result<(f64, f64)> {
    tokio::time::timeout(Duration::from_secs(2), queue_lengths(c, prefix))
        .await
        .map_err(|_| anyhow::anyhow!("Redis did not answer within 2 s"))?
}

#[derive(Default)]
struct HashMapStats(std::collections::HashMap<String, RawStats>);

/// Main shows the queue gauges (or the leader gauge); a worker does not.
pub fn role_of(e: &Exposition, prefix: &str) -> Role {
    if queue_gauges(e, prefix).is_some()
        || e.family(&format!("{prefix}instance_role_leader")).is_some()
    {
        Role::Main
    } else {
        Role::Worker
    }
}
