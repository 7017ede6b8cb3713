//! The observer that runs beside a sweep: every interval it scrapes each `/metrics` endpoint
//! and samples each container's stats, appends what it saw to `timeline.jsonl`, and keeps
//! per-stage aggregates (steady window only) for the stage results. A source that is down or
//! answers garbage leaves a gap, recorded and counted; the sweep goes on.

use super::bull::queue_lengths;
use super::docker::{self, RawStats};
use super::events::{started_before, EventBooks, MAX_LIFECYCLE_EVENTS};
use super::queue_refresh::{QueueRefresh, RefreshSeen};
use super::scrape::{self, queue_gauges, queue_gauges_checked};
use crate::record::lifecycle::{LifecycleAction, LifecycleEvent};
use crate::record::observation::{Observer, StageObservation};
use crate::record::stage::{
    ContainerObserved, EndpointObserved, QueueObserved, QueueSource, RoleMemory,
};
use crate::record::timeline::{Event, TimelineWriter};
use crate::record::Role;
use crate::wire::prometheus::Exposition;
use crate::wire::resp::{Conn, RedisUrl};
use bollard::Docker;
use std::collections::BTreeMap;
use std::fs::File;
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
                let role = match role.parse::<Role>() {
                    Ok(r @ (Role::Main | Role::Worker | Role::Webhook)) => r,
                    _ => {
                        return Err(format!(
                        "--metrics {}: unknown role {:?} (use main=URL, worker=URL or webhook=URL)",
                        crate::wire::url::redact(text),
                        crate::wire::url::truncate(role, 40)
                    ))
                    }
                };
                crate::wire::url::HttpUrl::parse(url, "--metrics").map_err(|e| e.0)?;
                Ok(Endpoint {
                    url: url.to_string(),
                    role: Some(role),
                })
            }
            _ => {
                crate::wire::url::HttpUrl::parse(text, "--metrics").map_err(|e| e.0)?;
                Ok(Endpoint {
                    url: text.to_string(),
                    role: None,
                })
            }
        }
    }
}

/// A container to sample.
#[derive(Debug, Clone)]
pub struct WatchedContainer {
    pub id: String,
    pub name: String,
    pub role: Role,
    /// CPU limit in cores, from the container's settings.
    pub cpu_limit_cores: Option<f64>,
    /// Memory limit, from the container's settings.
    pub memory_limit_bytes: Option<u64>,
    /// Runners: the container whose broker they attach to, and their limit.
    pub attached_to: Option<String>,
    pub runner_limit: Option<u32>,
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
    cpu_limit_cores: Option<f64>,
    memory: Vec<f64>,
    cpu: Vec<f64>,
    gaps: u32,
    gone: bool,
    /// The whole stage's readings, warm-up included (the peak before a death).
    peak: f64,
    last: f64,
    events: Vec<LifecycleEvent>,
}

/// Each role's memory over the stage: Σ of its containers per reading, with their baselines.
fn role_memory(acc: &StageAcc, baselines: &BTreeMap<String, f64>) -> Vec<RoleMemory> {
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
    acc.role_totals
        .iter()
        .map(|(role, v)| {
            let (n, base) = roles_of.get(role).copied().unwrap_or_default();
            RoleMemory {
                role: *role,
                containers: n,
                baseline_bytes: base,
                mean_bytes: mean(v),
                max_bytes: max(v).max(0.0),
            }
        })
        .collect()
}

/// The queue over the stage: from Redis when it was read (it is read directly and at the
/// scrape interval, so it wins over n8n's gauges), else from n8n's queue gauges.
fn queue_observed(acc: &StageAcc, coarse: bool, refresh: &RefreshSeen) -> QueueObserved {
    // Redis is read directly and at the scrape interval: it wins over n8n's gauges.
    let from_redis = !acc.redis_active.is_empty() || acc.redis_gaps > 0;
    let (active, waiting, gaps, source) = if from_redis {
        (
            &acc.redis_active,
            &acc.redis_waiting,
            acc.redis_gaps,
            QueueSource::Redis,
        )
    } else {
        (
            &acc.queue_active,
            &acc.queue_waiting,
            acc.queue_gaps,
            QueueSource::Metrics,
        )
    };
    QueueObserved {
        source,
        active_mean: mean(active),
        active_max: max(active).max(0.0),
        waiting_mean: mean(waiting),
        waiting_max: max(waiting).max(0.0),
        samples: active.len() as u32,
        gaps,
        coarse: (coarse || refresh.too_few) && !from_redis,
        refresh_s: refresh.period_s,
        refresh_contradicts_flag: !coarse && refresh.too_few && !from_redis,
    }
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
    /// When main's queue gauges changed.
    refresh: QueueRefresh,
    /// First memory reading of each container in the run.
    baselines: BTreeMap<String, f64>,
    /// The stage under way and when it began (lifecycle events are stamped with both).
    stage: Option<(usize, Instant)>,
    /// Containers (by id) that are not running now: their last `die` not followed by a start.
    down: std::collections::BTreeSet<String>,
    /// Each container's latest memory reading of the run (a container that dies before its
    /// first reading in a stage keeps this one).
    last_memory: BTreeMap<String, f64>,
    /// Containers (by id) that started again: their next stats reading starts new counters.
    restarted: std::collections::BTreeSet<String>,
    steady_from: Option<Instant>,
    acc: StageAcc,
    timeline: TimelineWriter,
    started: Instant,
}

/// What a stage hands over when it ends: its readings, the run's baselines, the containers
/// down, their last memory, and what the refresh measured says of it.
type Closed = (
    StageAcc,
    BTreeMap<String, f64>,
    std::collections::BTreeSet<String>,
    BTreeMap<String, f64>,
    RefreshSeen,
);

impl State {
    fn close_stage(&mut self) -> Closed {
        let steady = self.steady_from.map(|f| f.elapsed().as_secs_f64());
        let period_s = self.refresh.period_s();
        let seen = RefreshSeen {
            period_s,
            too_few: matches!((steady, period_s), (Some(w), Some(p)) if w < 2.0 * p),
        };
        self.steady_from = None;
        self.stage = None;
        (
            std::mem::take(&mut self.acc),
            self.baselines.clone(),
            self.down.clone(),
            self.last_memory.clone(),
            seen,
        )
    }
}

/// A container's memory limit, the container it attaches to and its runner limit.
type ContainerSettings = (Option<u64>, Option<String>, Option<u32>);

/// The observer of `observe`: scrapes, samples and records in a background task.
pub struct Watcher {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
    /// Follows the Docker events stream (None without Docker).
    events: Option<JoinHandle<()>>,
    /// Container name → what its settings say, recorded with each stage.
    settings: BTreeMap<String, ContainerSettings>,
    ids: BTreeMap<String, String>,
    first: Option<tokio::sync::oneshot::Receiver<()>>,
    has_queue_source: bool,
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

impl Watcher {
    pub fn start(cfg: WatchConfig) -> Watcher {
        let state = Arc::new(Mutex::new(State {
            refresh: QueueRefresh::default(),
            baselines: BTreeMap::new(),
            stage: None,
            down: Default::default(),
            last_memory: BTreeMap::new(),
            restarted: Default::default(),
            steady_from: None,
            acc: StageAcc::default(),
            timeline: TimelineWriter::new(cfg.timeline),
            started: Instant::now(),
        }));
        let has_queue_source = !cfg.endpoints.is_empty() || cfg.redis.is_some();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let settings = cfg
            .containers
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    (c.memory_limit_bytes, c.attached_to.clone(), c.runner_limit),
                )
            })
            .collect();
        let ids = cfg
            .containers
            .iter()
            .map(|c| (c.name.clone(), c.id.clone()))
            .collect();
        let events = cfg
            .docker
            .as_ref()
            .filter(|_| !cfg.containers.is_empty())
            .map(|d| {
                tokio::spawn(follow_lifecycle(
                    state.clone(),
                    d.clone(),
                    cfg.containers.clone(),
                ))
            });
        let sources = Sources {
            endpoints: cfg.endpoints,
            redis: cfg.redis,
            docker: cfg.docker,
            containers: cfg.containers,
            interval: cfg.interval,
            prefix: cfg.prefix,
        };
        let task = tokio::spawn(run(state.clone(), first_tx, sources));
        Watcher {
            state,
            task,
            events,
            settings,
            ids,
            first: Some(first_rx),
            has_queue_source,
        }
    }

    /// Starts watching and waits (at most `limit`) for the first readings, the baselines
    /// taken before any load.
    pub async fn start_with_baselines(cfg: WatchConfig, limit: Duration) -> Watcher {
        let mut w = Watcher::start(cfg);
        w.first_round(limit).await;
        w
    }

    /// Waits (at most `limit`) for the first round of readings: the baselines.
    pub async fn first_round(&mut self, limit: Duration) {
        if let Some(rx) = self.first.take() {
            let _ = tokio::time::timeout(limit, rx).await;
        }
    }
}

impl Observer for Watcher {
    /// Samples before `steady_from` (the warm-up) are only written to the timeline.
    fn begin_stage(&mut self, index: usize, steady_from: Instant) {
        if let Ok(mut s) = self.state.lock() {
            s.steady_from = Some(steady_from);
            s.stage = Some((index, Instant::now()));
            // Lifecycle events between two stages belong to the next one (at its start).
            let carried: Vec<(String, Vec<LifecycleEvent>)> = s
                .acc
                .containers
                .iter_mut()
                .filter(|(_, a)| !a.events.is_empty())
                .map(|(n, a)| (n.clone(), std::mem::take(&mut a.events)))
                .collect();
            s.acc = StageAcc::default();
            for (name, mut events) in carried {
                events.iter_mut().for_each(|e| e.at_s = 0.0);
                s.acc.containers.entry(name).or_default().events = events;
            }
            let t = s.started.elapsed().as_secs_f64();
            s.timeline.write(&Event::Stage { t, stage: index });
        }
    }

    fn end_stage(&mut self, coarse: bool) -> StageObservation {
        let (acc, baselines, down, last_memory, refresh) = match self.state.lock() {
            Ok(mut s) => s.close_stage(),
            Err(_) => (
                StageAcc::default(),
                BTreeMap::new(),
                Default::default(),
                BTreeMap::new(),
                RefreshSeen {
                    period_s: None,
                    too_few: false,
                },
            ),
        };
        let memory_by_role = role_memory(&acc, &baselines);
        let queue = self
            .has_queue_source
            .then(|| queue_observed(&acc, coarse, &refresh));
        let endpoints = acc
            .endpoints
            .into_iter()
            .map(|(url, a)| EndpointObserved {
                url,
                role: a.role,
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
            .map(|(name, a)| {
                let (memory_limit_bytes, attached_to, runner_limit) =
                    self.settings.get(&name).cloned().unwrap_or_default();
                let down_at_end = self.ids.get(&name).is_some_and(|id| down.contains(id));
                // No reading in the stage (it died first): the run's last one before.
                let last = if a.last > 0.0 {
                    a.last
                } else {
                    last_memory.get(&name).copied().unwrap_or(0.0)
                };
                ContainerObserved {
                    memory_baseline_bytes: baselines.get(&name).copied().unwrap_or(0.0),
                    role: a.role.unwrap_or_default(),
                    samples: a.memory.len() as u32,
                    gaps: a.gaps,
                    gone: a.gone
                        || a.events
                            .iter()
                            .any(|e| e.action == LifecycleAction::Destroy),
                    memory_first_bytes: a.memory.first().copied().unwrap_or(0.0),
                    memory_mean_bytes: mean(&a.memory),
                    memory_max_bytes: max(&a.memory).max(0.0),
                    cpu_percent_mean: mean(&a.cpu),
                    cpu_percent_max: max(&a.cpu).max(0.0),
                    cpu_limit_cores: a.cpu_limit_cores,
                    memory_limit_bytes,
                    attached_to,
                    runner_limit,
                    memory_peak_bytes: a.peak.max(last),
                    memory_last_bytes: last,
                    exited: a.events.iter().any(|e| e.action == LifecycleAction::Die),
                    oom_killed: a
                        .events
                        .iter()
                        .any(|e| e.action == LifecycleAction::Oom || e.oom_killed),
                    restarted: a
                        .events
                        .iter()
                        .filter(|e| e.action == LifecycleAction::Start)
                        .count() as u32,
                    down_at_end,
                    events: a.events,
                    name,
                }
            })
            .collect();
        StageObservation {
            memory_by_role,
            queue,
            endpoints,
            containers,
        }
    }

    fn stop(&mut self) {
        self.task.abort();
        if let Some(e) = &self.events {
            e.abort();
        }
    }
}

/// What the background task reads.
struct Sources {
    endpoints: Vec<Endpoint>,
    redis: Option<(RedisUrl, String)>,
    docker: Option<Docker>,
    containers: Vec<WatchedContainer>,
    interval: Duration,
    prefix: String,
}

/// Starts the observer when there is anything to observe, and takes its baselines before any
/// load.
pub async fn observer(
    endpoints: Vec<Endpoint>,
    docker: Option<(bollard::Docker, Vec<WatchedContainer>)>,
    redis: Option<(RedisUrl, String)>,
    interval: Duration,
    timeline: Option<File>,
) -> Option<Box<dyn Observer>> {
    if endpoints.is_empty() && docker.is_none() && redis.is_none() {
        return None;
    }
    let (docker, containers) = match docker {
        Some((d, c)) => (Some(d), c),
        None => (None, Vec::new()),
    };
    let cfg = WatchConfig {
        endpoints,
        redis,
        docker,
        containers,
        interval,
        prefix: "n8n_".into(),
        timeline,
    };
    Some(Box::new(
        Watcher::start_with_baselines(cfg, Duration::from_secs(5)).await,
    ))
}

async fn run(state: Arc<Mutex<State>>, first: tokio::sync::oneshot::Sender<()>, src: Sources) {
    let mut rates = Rates {
        roles: src.endpoints.iter().map(|e| e.role).collect(),
        cpu: vec![None; src.endpoints.len()],
        requested: vec![None; src.endpoints.len()],
        stats: HashMapStats::default(),
    };
    let mut tick = tokio::time::interval(src.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = Some(first);
    let mut redis_conn: Option<Conn> = None;
    loop {
        tick.tick().await;
        let now = Instant::now();
        let queue_read = read_redis(&src, &mut redis_conn).await;
        let scrapes = futures_util::future::join_all(
            src.endpoints
                .iter()
                .map(|e| scrape::scrape(&e.url, src.interval.max(Duration::from_millis(500)))),
        )
        .await;
        let stats = match &src.docker {
            Some(d) => {
                futures_util::future::join_all(
                    src.containers.iter().map(|c| docker::stats_once(d, &c.id)),
                )
                .await
            }
            None => Vec::new(),
        };
        let Ok(mut st) = state.lock() else { return };
        let at = Moment {
            now,
            t: st.started.elapsed().as_secs_f64(),
            unix: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            steady: st.steady_from.is_some_and(|s| now >= s),
        };
        for (i, got) in scrapes.into_iter().enumerate() {
            record_scrape(&mut st, &mut rates, &src, i, got, &at);
        }
        if let Some(got) = queue_read {
            record_redis(&mut st, got, &at);
        }
        let mut totals: BTreeMap<Role, f64> = BTreeMap::new();
        for (c, got) in src.containers.iter().zip(stats) {
            record_container(&mut st, &mut rates, c, got, &at, &mut totals);
        }
        if at.steady {
            for (role, total) in totals {
                st.acc.role_totals.entry(role).or_default().push(total);
            }
        }
        st.timeline.flush();
        drop(st);
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
    }
}

/// When a round of readings was taken.
struct Moment {
    now: Instant,
    t: f64,
    unix: f64,
    /// Inside a stage's steady window: aggregate, not only write to the timeline.
    steady: bool,
}

/// What turns counters into rates between rounds, and roles read from content.
struct Rates {
    roles: Vec<Option<Role>>,
    cpu: Vec<Option<(f64, Instant)>>,
    requested: Vec<Option<(f64, Instant)>>,
    stats: HashMapStats,
}

async fn read_redis(src: &Sources, conn: &mut Option<Conn>) -> Option<anyhow::Result<(f64, f64)>> {
    let (url, prefix) = src.redis.as_ref()?;
    // A Redis that accepts and never answers (AUTH, SELECT) must not stall the other readings.
    let mut why = None;
    if conn.is_none() {
        match tokio::time::timeout(REDIS_WAIT, Conn::open(url)).await {
            Ok(Ok(c)) => *conn = Some(c),
            Ok(Err(e)) => why = Some(format!("{e:#}")),
            Err(_) => {
                why = Some(format!(
                    "Redis at {} accepted but did not answer within {} s",
                    url.shown(),
                    REDIS_WAIT.as_secs()
                ))
            }
        }
    }
    let got = match conn.as_mut() {
        Some(c) => redis_queue_lengths(c, prefix).await,
        None => Err(anyhow::anyhow!(why.unwrap_or_else(|| format!(
            "cannot reach Redis at {}",
            url.shown()
        )))),
    };
    if got.is_err() {
        *conn = None;
    }
    Some(got)
}

/// The per-second rate of a counter since the previous reading.
fn counter_rate(prev: &mut Option<(f64, Instant)>, cur: Option<f64>, now: Instant) -> Option<f64> {
    let cur = cur?;
    let r = prev.and_then(|(p, pt)| {
        let dt = now.duration_since(pt).as_secs_f64();
        (dt > 0.0 && cur >= p).then(|| (cur - p) / dt)
    });
    *prev = Some((cur, now));
    r
}

/// The most cores a process at `url` can use and be believed: this machine's (a quarter more
/// for the sampling's jitter) when the endpoint is on loopback, else 256 (no host is bigger
/// here, and a counter that jumps between two processes implies thousands).
fn most_cores(url: &str) -> f64 {
    if crate::wire::url::is_loopback_url(url) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        cores * 1.25 + 0.25
    } else {
        256.0
    }
}

/// Cores a process used since its last reading, from `process_cpu_seconds_total`: Err when
/// the reading cannot be true — the counter fell (the process restarted, or two processes
/// answer at one URL behind a load balancer) or it implies more than `max_cores`.
fn cpu_rate(
    prev: &mut Option<(f64, Instant)>,
    cur: Option<f64>,
    now: Instant,
    max_cores: f64,
) -> Result<Option<f64>, String> {
    let Some(cur) = cur else { return Ok(None) };
    if !(cur.is_finite() && cur >= 0.0) {
        return Err(format!(
            "process_cpu_seconds_total is {cur}: a CPU counter is a finite number of seconds"
        ));
    }
    let last = prev.replace((cur, now));
    let Some((p, pt)) = last else { return Ok(None) };
    let dt = now.duration_since(pt).as_secs_f64();
    if dt <= 0.0 {
        return Ok(None);
    }
    if cur < p {
        return Err(format!(
            "process_cpu_seconds_total fell from {p:.2} to {cur:.2}: the process restarted, or \
             two processes answer at this URL (a load balancer): no CPU figure for this interval"
        ));
    }
    let cores = (cur - p) / dt;
    if cores > max_cores {
        return Err(format!(
            "process_cpu_seconds_total rose {:.2} s in {dt:.2} s: {cores:.1} cores, more than \
             the {max_cores:.1} a process there can use",
            cur - p
        ));
    }
    Ok(Some(cores))
}

/// A scrape that failed: a gap in the timeline, and in the stage's figures when steady (main's
/// also leaves the queue gauges with a gap).
fn scrape_failed(st: &mut State, url: &str, role: Option<Role>, err: &anyhow::Error, at: &Moment) {
    let msg = format!("{err:#}");
    st.timeline.write(&Event::Gap {
        t: at.t,
        unix: at.unix,
        source: url.to_string(),
        error: msg.clone(),
        gone: false,
    });
    if at.steady {
        let acc = st.acc.endpoints.entry(url.to_string()).or_default();
        acc.role = role;
        acc.gaps += 1;
        acc.last_error = Some(msg);
        if role.is_none_or(|r| r == Role::Main) {
            st.acc.queue_gaps += 1;
        }
    }
}

fn record_scrape(
    st: &mut State,
    rates: &mut Rates,
    src: &Sources,
    i: usize,
    got: anyhow::Result<Exposition>,
    at: &Moment,
) {
    let e = &src.endpoints[i];
    let prefix = &src.prefix;
    let exp = match got {
        Ok(exp) => exp,
        Err(err) => return scrape_failed(st, &e.url, rates.roles[i], &err, at),
    };
    if rates.roles[i].is_none() {
        rates.roles[i] = Some(role_of(&exp, prefix));
    }
    let v = |n: &str| exp.value(&format!("{prefix}{n}"));
    let cpu = match cpu_rate(
        &mut rates.cpu[i],
        v("process_cpu_seconds_total"),
        at.now,
        most_cores(&e.url),
    ) {
        Ok(c) => c,
        Err(why) => {
            // A CPU reading that cannot be true is a gap with its reason, never a figure.
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: format!("{} (process CPU)", e.url),
                error: why.clone(),
                gone: false,
            });
            if at.steady {
                let acc = st.acc.endpoints.entry(e.url.clone()).or_default();
                acc.gaps += 1;
                acc.last_error = Some(why);
            }
            None
        }
    };
    let req = counter_rate(
        &mut rates.requested[i],
        v("runner_task_requested_total"),
        at.now,
    );
    let q = match queue_gauges_checked(&exp, prefix) {
        Ok(q) => q,
        Err(why) => {
            // An impossible gauge is a gap with its reason, never a figure.
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: format!("{} (queue gauges)", e.url),
                error: why,
                gone: false,
            });
            if at.steady {
                st.acc.queue_gaps += 1;
            }
            None
        }
    };
    if let Some(q) = q {
        let done = v("scaling_mode_queue_jobs_completed").unwrap_or(-1.0);
        st.refresh.saw([q.active, q.waiting, done], at.now);
    }
    st.timeline.write(&Event::Metrics {
        t: at.t,
        unix: at.unix,
        url: e.url.clone(),
        role: rates.roles[i],
        rss_bytes: v("process_resident_memory_bytes"),
        heap_used_bytes: v("nodejs_heap_size_used_bytes"),
        external_bytes: v("nodejs_external_memory_bytes"),
        eventloop_lag_s: v("nodejs_eventloop_lag_seconds"),
        cpu_percent: cpu.map(|c| c * 100.0),
        queue_active: q.map(|q| q.active),
        queue_waiting: q.map(|q| q.waiting),
    });
    if at.steady {
        steady_scrape(st, (&e.url, rates.roles[i]), &v, (cpu, req), q);
    }
}

/// A scrape inside the stage's steady window, added to its readings.
fn steady_scrape(
    st: &mut State,
    (url, role): (&str, Option<Role>),
    v: &dyn Fn(&str) -> Option<f64>,
    (cpu, req): (Option<f64>, Option<f64>),
    q: Option<super::scrape::QueueGauges>,
) {
    let acc = st.acc.endpoints.entry(url.to_string()).or_default();
    acc.role = role;
    acc.rss.extend(v("process_resident_memory_bytes"));
    acc.heap.extend(v("nodejs_heap_size_used_bytes"));
    acc.external.extend(v("nodejs_external_memory_bytes"));
    acc.lag.extend(v("nodejs_eventloop_lag_seconds"));
    acc.cpu_rate.extend(cpu);
    acc.runner_requested_rate.extend(req);
    // A gauge read before main refreshed it inside this stage's window describes what came
    // before: not evidence for this stage.
    let fresh = st
        .refresh
        .changed_at
        .zip(st.steady_from)
        .is_some_and(|(c, f)| c >= f);
    if let Some(q) = q.filter(|_| fresh) {
        st.acc.queue_active.push(q.active);
        st.acc.queue_waiting.push(q.waiting);
    }
}

fn record_redis(st: &mut State, got: anyhow::Result<(f64, f64)>, at: &Moment) {
    let got = got.and_then(|(waiting, active)| {
        for (what, v) in [
            ("LLEN of the wait list", waiting),
            ("LLEN of the active list", active),
        ] {
            if let Some(why) = super::scrape::implausible_jobs(what, v) {
                anyhow::bail!("Redis answered {why}");
            }
        }
        Ok((waiting, active))
    });
    match got {
        Ok((waiting, active)) => {
            st.timeline.write(&Event::Redis {
                t: at.t,
                unix: at.unix,
                waiting,
                active,
            });
            if at.steady {
                st.acc.redis_waiting.push(waiting);
                st.acc.redis_active.push(active);
            }
        }
        Err(e) => {
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: "redis".into(),
                error: format!("{e:#}"),
                gone: false,
            });
            if at.steady {
                st.acc.redis_gaps += 1;
            }
        }
    }
}

fn record_container(
    st: &mut State,
    rates: &mut Rates,
    c: &WatchedContainer,
    got: Result<RawStats, docker::StatsError>,
    at: &Moment,
    totals: &mut BTreeMap<Role, f64>,
) {
    if st.restarted.remove(&c.id) {
        // A restart starts the container's counters again: no rate spans it.
        rates.stats.0.remove(&c.id);
    }
    match got {
        Ok(raw) => {
            let cpu = rates
                .stats
                .0
                .get(&c.id)
                .and_then(|p| docker::cpu_percent(p, &raw));
            rates.stats.0.insert(c.id.clone(), raw);
            st.baselines
                .entry(c.name.clone())
                .or_insert(raw.memory_bytes as f64);
            st.timeline.write(&Event::Container {
                t: at.t,
                unix: at.unix,
                name: c.name.clone(),
                role: c.role,
                memory_bytes: raw.memory_bytes,
                memory_limit_bytes: raw.memory_limit,
                cpu_percent: cpu,
            });
            *totals.entry(c.role).or_insert(0.0) += raw.memory_bytes as f64;
            st.last_memory
                .insert(c.name.clone(), raw.memory_bytes as f64);
            let in_stage = st.stage.is_some();
            let acc = st.acc.containers.entry(c.name.clone()).or_default();
            acc.role = Some(c.role);
            acc.cpu_limit_cores = c.cpu_limit_cores;
            if in_stage {
                acc.peak = acc.peak.max(raw.memory_bytes as f64);
                acc.last = raw.memory_bytes as f64;
            }
            if at.steady {
                acc.memory.push(raw.memory_bytes as f64);
                acc.cpu.extend(cpu);
            }
        }
        Err(err) => {
            if matches!(err, docker::StatsError::NotRunning) {
                // A stopped container's stats are empty: its counters start again with it.
                rates.stats.0.remove(&c.id);
            }
            let gone = matches!(err, docker::StatsError::Gone);
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: c.name.clone(),
                error: err.to_string(),
                gone,
            });
            if at.steady {
                let acc = st.acc.containers.entry(c.name.clone()).or_default();
                acc.role = Some(c.role);
                acc.gaps += 1;
                acc.gone |= gone;
            }
        }
    }
}

/// The longest one Redis reading may take.
const REDIS_WAIT: Duration = Duration::from_secs(2);

async fn redis_queue_lengths(c: &mut Conn, prefix: &str) -> anyhow::Result<(f64, f64)> {
    tokio::time::timeout(REDIS_WAIT, queue_lengths(c, prefix))
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

/// Follows the Docker events stream for the watched containers: each lifecycle event is
/// written to the timeline with the stage it fell in and kept for that stage; a `die` is
/// followed by an `inspect` for `State.OOMKilled` and the exit code.
async fn follow_lifecycle(state: Arc<Mutex<State>>, d: Docker, containers: Vec<WatchedContainer>) {
    use futures_util::StreamExt;
    let ids: Vec<String> = containers.iter().map(|c| c.id.clone()).collect();
    let stream = docker::lifecycle_events(&d, &ids);
    futures_util::pin_mut!(stream);
    let mut books = EventBooks::default();
    while let Some(ev) = stream.next().await {
        let Some(c) = containers.iter().find(|c| c.id == ev.id) else {
            continue;
        };
        // The same action again (a die while down, a start while up) adds nothing.
        if !books.news(&ev) {
            continue;
        }
        let (oom_killed, exit_code) = if ev.action == LifecycleAction::Die {
            match docker::state(&d, &c.id).await {
                // Running since before the event: the container did not die — the event is
                // refuted by its state, and left out.
                Ok(s) if s.running && started_before(s.started_at.as_deref(), ev.unix) => {
                    books.refuted += 1;
                    books.undo(&ev);
                    // Said in the timeline at 1, 2, 4, 8 … and every thousand: not once per event.
                    if books.refuted.is_power_of_two() || books.refuted % 1000 == 0 {
                        if let Ok(mut st) = state.lock() {
                            let t = st.started.elapsed().as_secs_f64();
                            st.timeline.write(&Event::Gap {
                                t,
                                unix: ev.unix,
                                source: format!("{} (Docker events)", c.name),
                                error: format!(
                                    "{} die event(s) refuted: the container runs since before them",
                                    books.refuted
                                ),
                                gone: false,
                            });
                        }
                    }
                    continue;
                }
                Ok(s) => (s.oom_killed, ev.exit_code.or(s.exit_code)),
                Err(_) => (false, ev.exit_code),
            }
        } else {
            (false, ev.exit_code)
        };
        let Ok(mut st) = state.lock() else { return };
        if books.recorded >= MAX_LIFECYCLE_EVENTS {
            continue;
        }
        books.recorded += 1;
        record_lifecycle(&mut st, c, ev, oom_killed, exit_code);
    }
}

fn record_lifecycle(
    st: &mut State,
    c: &WatchedContainer,
    ev: docker::Lifecycle,
    oom_killed: bool,
    exit_code: Option<i64>,
) {
    match ev.action {
        LifecycleAction::Die | LifecycleAction::Destroy => {
            st.down.insert(c.id.clone());
        }
        LifecycleAction::Start => {
            st.down.remove(&c.id);
            st.restarted.insert(c.id.clone());
        }
        _ => {}
    }
    let t = st.started.elapsed().as_secs_f64();
    let stage = st.stage.map(|(i, _)| i);
    st.timeline.write(&Event::Lifecycle {
        t,
        unix: ev.unix,
        stage,
        name: c.name.clone(),
        role: c.role,
        action: ev.action,
        exit_code,
        oom_killed,
    });
    st.timeline.flush();
    let at_s = st
        .stage
        .map_or(0.0, |(_, since)| since.elapsed().as_secs_f64());
    let acc = st.acc.containers.entry(c.name.clone()).or_default();
    acc.role = Some(c.role);
    acc.cpu_limit_cores = c.cpu_limit_cores;
    acc.events.push(LifecycleEvent {
        at_s,
        unix: ev.unix,
        action: ev.action,
        exit_code,
        oom_killed,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_dies_is_one_death_and_a_die_of_a_container_up_since_before_is_refuted() {
        let ev = |action, unix| docker::Lifecycle {
            id: "c".into(),
            action,
            exit_code: Some(1),
            unix,
        };
        let mut b = EventBooks::default();
        assert!(b.news(&ev(LifecycleAction::Die, 10.0)));
        for i in 0..10_000 {
            assert!(!b.news(&ev(LifecycleAction::Die, 11.0 + i as f64)));
        }
        assert!(b.news(&ev(LifecycleAction::Start, 20.0)));
        assert!(b.news(&ev(LifecycleAction::Die, 30.0)));
        // Running since 2026-12-01 (before the event): refuted; started after it: a restart.
        assert!(started_before(
            Some("2026-12-01T00:00:00Z"),
            1_800_000_000.0
        ));
        assert!(!started_before(
            Some("2027-12-01T00:00:00Z"),
            1_800_000_000.0
        ));
        assert!(!started_before(None, 1_800_000_000.0));
    }

    #[test]
    fn the_refresh_is_measured_from_the_changes_the_scrapes_saw() {
        // Scraped every second, refreshed every 20 s (n8n's default) while a flag says 1 s.
        let t0 = Instant::now();
        let mut r = QueueRefresh::default();
        for i in 0..120u64 {
            let k = (i / 20) as f64;
            r.saw([4.0, 6.0, 100.0 + 160.0 * k], t0 + Duration::from_secs(i));
        }
        assert_eq!(r.period_s(), Some(20.0));
        // A gauge read after the last change at 100 s is fresh only for a stage whose window
        // opened before it.
        assert_eq!(r.changed_at, Some(t0 + Duration::from_secs(100)));
        // Until four changes are seen, nothing is claimed.
        let mut few = QueueRefresh::default();
        for i in 0..50u64 {
            few.saw([1.0, 0.0, (i / 20) as f64], t0 + Duration::from_secs(i));
        }
        assert_eq!(few.period_s(), None);
    }

    #[test]
    fn cpu_counters_that_cannot_be_true_are_gaps() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut prev = None;
        // The first reading gives no rate; then 1.5 s of CPU in 1 s = 1.5 cores.
        assert_eq!(cpu_rate(&mut prev, Some(10.0), at(0.0), 2.75), Ok(None));
        let c = cpu_rate(&mut prev, Some(11.5), at(1.0), 2.75)
            .unwrap()
            .unwrap();
        assert!((c - 1.5).abs() < 1e-9);
        // Two processes behind one URL: the counter drops, then jumps back.
        let down = cpu_rate(&mut prev, Some(0.5), at(2.0), 2.75).unwrap_err();
        assert!(down.contains("fell"), "{down}");
        let up = cpu_rate(&mut prev, Some(13.0), at(3.0), 2.75).unwrap_err();
        assert!(up.contains("cores"), "{up}");
        // 50 cores on a 2-core host, a NaN counter.
        let mut prev = Some((0.0, at(0.0)));
        assert!(cpu_rate(&mut prev, Some(50.0), at(1.0), 2.75).is_err());
        assert!(cpu_rate(&mut prev, Some(f64::NAN), at(2.0), 2.75).is_err());
        assert!(most_cores("http://127.0.0.1:5678/metrics") < 256.0);
        assert_eq!(most_cores("http://n8n.example:5678/metrics"), 256.0);
    }
}
