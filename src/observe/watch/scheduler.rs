//! The observer's background task: a round of readings every interval, and the stages it opens
//! and closes for the sweep.

use super::aggregate::{max, mean, queue_observed, role_memory};
use super::lifecycle::follow_lifecycle;
use super::sources::{read_redis, record_container, record_redis, record_scrape};
use super::*;

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
            .map(|(url, a)| endpoint_observed(url, a))
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
            database: None,
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

pub(super) async fn run(
    state: Arc<Mutex<State>>,
    first: tokio::sync::oneshot::Sender<()>,
    src: Sources,
) {
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
    let mut round: u64 = 0;
    let mut last_round = Duration::ZERO;
    loop {
        tick.tick().await;
        // Each round starts at a random point of the slack its interval leaves (at most half
        // of it): a gauge read at a fixed period phase-locks with steady job times (a pool
        // always busy, or always idle, at the instant it is read); a random phase samples the
        // time in use fairly. A round that takes its interval (Docker's stats) has no slack and
        // keeps its pace.
        round += 1;
        let slack = (src.interval / 2).saturating_sub(last_round);
        tokio::time::sleep(slack.mul_f64(unit_random(round))).await;
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
        last_round = now.elapsed();
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
    }
}

/// A number in [0, 1), different for each `n` and each run (std's random hasher keys).
fn unit_random(n: u64) -> f64 {
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static KEYS: std::collections::hash_map::RandomState = std::collections::hash_map::RandomState::new();
    }
    let h = KEYS.with(|k| {
        let mut h = k.build_hasher();
        h.write_u64(n);
        h.finish()
    });
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// One `/metrics` endpoint's readings over a stage, reduced to its figures.
fn endpoint_observed(url: String, a: super::aggregate::EndpointAcc) -> EndpointObserved {
    EndpointObserved {
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
        db_pool: super::aggregate::db_pool(&a.pool, a.pool_gaps),
        n8n_version: a.version,
    }
}
