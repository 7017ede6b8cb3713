//! Simulated n8n worker: takes at most `concurrency` jobs from the queue (slots), and runs each:
//! an external-call wait holding only the slot, then a Code task it asks its task broker for.
//! The broker hands tasks to runners that offered capacity; a task no runner takes within
//! `N8N_RUNNERS_TASK_REQUEST_TIMEOUT` fails, as in n8n. In internal mode the worker starts its own
//! runner with its own `N8N_RUNNERS_MAX_CONCURRENCY`; in external mode that variable has no
//! effect here and only the runners' own limits count.

use super::bull;
use super::config::{RunnerConfig, RunnersMode, WorkerConfig};
use super::db_fail::JobFailed;
use super::process::{write_default_metrics, LagMonitor};
use super::rendezvous::Rendezvous;
use super::runner;
use super::wire::{self, BrokerMsg, JobSpec, QueueMsg};
use super::SIM_VERSION;
use crate::wire::http::{self, json, respond, Resp};
use crate::wire::prometheus::TextWriter;
use crate::wire::resp::{self as redis, Conn, RedisUrl};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::json as j;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

struct TaskRequest {
    id: u64,
    sleep_ms: u64,
    alloc_mb: u64,
    matched: oneshot::Sender<()>,
    result: oneshot::Sender<TaskResult>,
}

struct Offer {
    runner: u64,
    tx: mpsc::UnboundedSender<BrokerMsg>,
}

struct TaskResult {
    ok: bool,
    slept_ms: u64,
    allocated: u64,
    error: Option<String>,
}

struct RunnerConn {
    name: String,
    max_concurrency: u32,
    pending: HashMap<u64, oneshot::Sender<TaskResult>>,
}

struct State {
    cfg: WorkerConfig,
    broker: Mutex<Rendezvous<TaskRequest, Offer>>,
    runners: Mutex<HashMap<u64, RunnerConn>>,
    next_task: AtomicU64,
    next_runner: AtomicU64,
    tasks_requested: AtomicU64,
    responses_received: AtomicU64,
    /// Tasks that came back from a runner, and the microseconds they spent there (from the match
    /// to the result), for `GET /sim/runners`: the runner's own service time, which tests hold
    /// throughput against (a busy machine stretches both alike).
    tasks_done: AtomicU64,
    task_micros: AtomicU64,
    queue_connected: AtomicBool,
    lag: LagMonitor,
    started: SystemTime,
    js: super::cpu::JsThread,
    /// The executions' database, when there is one: read and written through this pool.
    db: Option<std::sync::Arc<super::db::Db>>,
    /// SIGTERM arrived: no slot takes another job.
    stopping: AtomicBool,
    /// Held while a slot checks `stopping` and counts its job in, and while the stop sets it
    /// and counts what runs: the count said at the signal is exact.
    gate: Mutex<()>,
    /// Jobs taken and not yet reported (n8n's running job ids).
    running: AtomicU64,
    /// The shutdown window closed: a job that finishes now is one the worker left, and its
    /// outcome never leaves the process (n8n exits with it).
    abandoned: AtomicBool,
    /// Outcomes on their way out when the window closed: the stop waits for them before it
    /// counts what was left, so the count said is exact.
    reporting: AtomicU64,
    /// The connection to main's simulated queue, to tell it the worker pauses.
    queue_tx: Mutex<Option<mpsc::UnboundedSender<QueueMsg>>>,
    /// The task budget of a stopping worker ran out: every Code task still asked for or
    /// running is aborted (true), as n8n's task broker does at 0.8 × the shutdown window.
    abort_tasks: tokio::sync::watch::Sender<bool>,
    /// Code tasks asked for and not yet ended (at a runner or waiting for one).
    code_tasks: AtomicU64,
}

#[path = "worker_broker.rs"]
mod broker;
use broker::{accept_runners, attached_runners, request_task};
#[path = "worker_stop.rs"]
mod stop;
use stop::stalled_check;
pub use stop::{Stop, Stopped};

/// Addresses a started worker listens on, and its stop.
#[derive(Clone)]
pub struct WorkerAddrs {
    pub health: SocketAddr,
    pub broker: SocketAddr,
    pub stop: Stop,
}

pub async fn start(cfg: WorkerConfig, tasks: &mut JoinSet<()>) -> anyhow::Result<WorkerAddrs> {
    let health_listener = http::bind(
        cfg.health_listen,
        "the worker's health and metrics server (QUEUE_HEALTH_CHECK_PORT)",
    )
    .await?;
    let broker_listener = http::bind(
        cfg.broker_listen,
        "the worker's task broker (N8N_RUNNERS_BROKER_PORT)",
    )
    .await?;
    let (health, broker) = (health_listener.local_addr()?, broker_listener.local_addr()?);
    let lag = LagMonitor::start(tasks);
    let db = match &cfg.db {
        Some(d) => Some(super::db::Db::start(d, &cfg.name, tasks).await?),
        None => None,
    };
    let st = Arc::new(State {
        db,
        broker: Mutex::new(Rendezvous::default()),
        runners: Mutex::new(HashMap::new()),
        next_task: AtomicU64::new(1),
        next_runner: AtomicU64::new(1),
        tasks_requested: AtomicU64::new(0),
        responses_received: AtomicU64::new(0),
        tasks_done: AtomicU64::new(0),
        task_micros: AtomicU64::new(0),
        queue_connected: AtomicBool::new(false),
        js: super::cpu::JsThread::start(&cfg.name, cfg.cpu),
        cfg,
        lag,
        started: SystemTime::now(),
        stopping: AtomicBool::new(false),
        gate: Mutex::new(()),
        running: AtomicU64::new(0),
        abandoned: AtomicBool::new(false),
        reporting: AtomicU64::new(0),
        queue_tx: Mutex::new(None),
        abort_tasks: tokio::sync::watch::channel(false).0,
        code_tasks: AtomicU64::new(0),
    });
    let s = st.clone();
    tasks.spawn(
        async move { http::serve(health_listener, move |r| handle_http(s.clone(), r)).await },
    );
    let s = st.clone();
    tasks.spawn(async move { accept_runners(s, broker_listener).await });
    if st.cfg.runners_mode == RunnersMode::Internal {
        // n8n launches the runner as a child and passes it its own N8N_RUNNERS_MAX_CONCURRENCY.
        let rc = RunnerConfig {
            name: format!("{}-internal-runner", st.cfg.name),
            broker: (broker.ip().to_string(), broker.port()),
            max_concurrency: st.cfg.internal_runner_limit,
            auth_token: st.cfg.auth_token.clone(),
            cpu: st.cfg.internal_runner_cpu,
        };
        tasks.spawn(async move { runner::run(rc).await });
    }
    let s = st.clone();
    tasks.spawn(async move { queue_loop(s).await });
    Ok(WorkerAddrs {
        health,
        broker,
        stop: Stop(st),
    })
}

impl State {
    /// A job counted in as running, unless the worker stops.
    fn take(&self) -> bool {
        let _g = self.gate.lock();
        if self.stopping.load(Ordering::SeqCst) {
            return false;
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// A finished job's outcome goes out unless the shutdown window closed; one that may not
    /// never returns (the process exits with it, as n8n's does).
    async fn may_report(&self) {
        {
            let _g = self.gate.lock();
            if !self.abandoned.load(Ordering::SeqCst) {
                self.reporting.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
        std::future::pending::<()>().await
    }

    /// The outcome [`may_report`](Self::may_report) let out was sent (or could not be).
    fn reported(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.reporting.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handle_http(st: Arc<State>, req: Request<Incoming>) -> Resp {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz") => json(StatusCode::OK, &j!({"status": "ok"})),
        (&Method::GET, "/healthz/readiness") => {
            if st.queue_connected.load(Ordering::Relaxed) {
                json(StatusCode::OK, &j!({"status": "ok"}))
            } else {
                json(StatusCode::SERVICE_UNAVAILABLE, &j!({"status": "error"}))
            }
        }
        (&Method::GET, "/sim/runners") => json(StatusCode::OK, &attached_runners(&st)),
        (&Method::GET, "/metrics") if st.cfg.metrics.enabled => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render_metrics(&st),
        ),
        _ => json(
            StatusCode::NOT_FOUND,
            &j!({"code": 404, "message": "Not Found"}),
        ),
    }
}

/// Connects to the queue (retrying, as Bull does) and keeps `concurrency` slots busy.
async fn queue_loop(st: Arc<State>) {
    if let Some(url) = st.cfg.redis.clone() {
        let mut slots = JoinSet::new();
        for slot in 0..st.cfg.concurrency {
            slots.spawn(redis_slot(st.clone(), url.clone(), slot == 0));
        }
        slots.spawn(stalled_check(st.clone(), url.clone()));
        while slots.join_next().await.is_some() {}
        return;
    }
    let (host, port) = st.cfg.queue.clone();
    let mut warned = false;
    loop {
        match TcpStream::connect((host.as_str(), port)).await {
            Ok(stream) => {
                warned = false;
                st.queue_connected.store(true, Ordering::Relaxed);
                serve_queue(st.clone(), stream).await;
                st.queue_connected.store(false, Ordering::Relaxed);
            }
            Err(e) if !warned => {
                eprintln!(
                    "n8ncap sim worker {}: cannot reach the queue at {host}:{port} \
                     (QUEUE_BULL_REDIS_HOST/PORT): {e}; retrying",
                    st.cfg.name
                );
                warned = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One worker slot on a Redis queue, as Bull does it: move a job id from the wait list to the
/// active list (blocking), run it, remove it from active, report the outcome.
/// The first slot's connection carries Bull's worker name, as a Bull worker's client does.
async fn redis_slot(st: Arc<State>, url: RedisUrl, named: bool) {
    let prefix = st.cfg.bull_prefix.clone();
    let (wait, active) = (bull::key(&prefix, "wait"), bull::key(&prefix, "active"));
    let channel = super::bull::outcome_channel(&prefix);
    let mut warned = false;
    loop {
        let mut c = match Conn::open(&url).await {
            Ok(c) => c,
            Err(e) => {
                if !warned {
                    eprintln!("n8ncap sim worker {}: {e}; retrying", st.cfg.name);
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        if named {
            let name = super::bull::worker_name(&prefix);
            if c.cmd(&["CLIENT", "SETNAME", &name]).await.is_err() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        }
        st.queue_connected.store(true, Ordering::Relaxed);
        loop {
            if st.stopping.load(Ordering::SeqCst) {
                return;
            }
            let got = match c.cmd(&["BRPOPLPUSH", &wait, &active, "1"]).await {
                Ok(v) => v,
                Err(_) => break,
            };
            let Some(id) = got.as_str() else { continue };
            if !st.take() {
                // Taken as the pause came: back at the head of the wait list for another worker.
                let _ = c.cmd(&["LREM", &active, "1", &id]).await;
                let _ = c.cmd(&["RPUSH", &wait, &id]).await;
                return;
            }
            let key = bull::key(&prefix, &id);
            let lock = bull::key(&prefix, &format!("{id}:lock"));
            let lease = st.cfg.shutdown.lock.as_millis().to_string();
            let token = format!("{}:{}", st.cfg.name, std::process::id());
            if c.cmd(&["SET", &lock, &token, "PX", &lease]).await.is_err() {
                st.running.fetch_sub(1, Ordering::SeqCst);
                break;
            }
            let spec: JobSpec = match c.cmd(&["HGET", &key, "data"]).await {
                Ok(v) => v
                    .as_str()
                    .and_then(|d| serde_json::from_str(&d).ok())
                    .unwrap_or_default(),
                Err(_) => {
                    st.running.fetch_sub(1, Ordering::SeqCst);
                    break;
                }
            };
            let job_id: u64 = id.parse().unwrap_or(0);
            let done = {
                let job = run_job(&st, job_id, spec);
                tokio::pin!(job);
                let mut renew = tokio::time::interval(st.cfg.shutdown.renew);
                renew.tick().await;
                loop {
                    tokio::select! {
                        d = &mut job => break d,
                        _ = renew.tick() => {
                            let _ = c.cmd(&["PEXPIRE", &lock, &lease]).await;
                        }
                    }
                }
            };
            st.may_report().await;
            let payload = serde_json::to_string(&done).unwrap_or_default();
            let keys = [active.as_str(), id.as_str(), lock.as_str(), key.as_str()];
            let named = named.then_some(prefix.as_str());
            report(&mut c, &url, named, keys, &channel, &payload).await;
            st.reported();
        }
        st.queue_connected.store(false, Ordering::Relaxed);
    }
}

/// A job's end on Redis: out of the active list, its lease gone, its outcome in its hash (as
/// Bull keeps a return value: a main resubscribing finds it) and published; with Redis gone it
/// waits for it (n8n's client queues its commands). `named`: Bull's worker name's prefix.
async fn report(
    c: &mut Conn,
    url: &RedisUrl,
    named: Option<&str>,
    [active, id, lock, key]: [&str; 4],
    channel: &str,
    payload: &str,
) {
    loop {
        let ok = c.cmd(&["LREM", active, "1", id]).await.is_ok()
            && c.cmd(&["DEL", lock]).await.is_ok()
            && c.cmd(&["HSET", key, "outcome", payload]).await.is_ok()
            && c.cmd(&["EXPIRE", key, bull::OUTCOME_KEPT_S]).await.is_ok()
            && c.cmd(&["PUBLISH", channel, payload]).await.is_ok();
        if ok {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Ok(mut fresh) = Conn::open(url).await {
            if let Some(prefix) = named {
                let name = super::bull::worker_name(prefix);
                let _ = fresh.cmd(&["CLIENT", "SETNAME", &name]).await;
            }
            *c = fresh;
        }
    }
}

async fn serve_queue(st: Arc<State>, stream: TcpStream) {
    let (mut reader, tx) = wire::split::<QueueMsg>(stream);
    if let Ok(mut t) = st.queue_tx.lock() {
        *t = Some(tx.clone());
    }
    let _ = tx.send(QueueMsg::Hello {
        worker: st.cfg.name.clone(),
        concurrency: st.cfg.concurrency,
    });
    // One Take per slot; each finished job frees its slot with a new Take (none once the
    // worker stops).
    if st.stopping.load(Ordering::SeqCst) {
        return;
    }
    for _ in 0..st.cfg.concurrency {
        let _ = tx.send(QueueMsg::Take);
    }
    let mut jobs = JoinSet::new();
    while let Ok(Some(msg)) = reader.next::<QueueMsg>().await {
        if let QueueMsg::Job { id, spec } = msg {
            if !st.take() {
                // Sent before main saw the pause: back to the queue, as Bull's does.
                let _ = tx.send(QueueMsg::Release { id, spec });
                continue;
            }
            while jobs.try_join_next().is_some() {}
            let st = st.clone();
            let tx = tx.clone();
            jobs.spawn(async move {
                let done = run_job(&st, id, spec).await;
                st.may_report().await;
                let _ = tx.send(done);
                st.reported();
                if !st.stopping.load(Ordering::SeqCst) {
                    let _ = tx.send(QueueMsg::Take);
                }
            });
        }
    }
    // Queue connection lost: jobs in progress are abandoned (main fails them).
    jobs.abort_all();
}

async fn run_job(st: &State, id: u64, spec: JobSpec) -> QueueMsg {
    let t0 = Instant::now();
    let outcome = async {
        if let Some(db) = &st.db {
            db.start_execution(id)
                .await
                .map_err(|e| JobFailed::of(id, &e))?;
        }
        if !st.cfg.overhead.is_zero() {
            tokio::time::sleep(st.cfg.overhead).await;
        }
        // Loading the execution and running the workflow's own JavaScript: one thread, queued.
        st.js.run(st.cfg.cpu).await;
        // Binary data read back from its store: held in the worker while the job runs.
        let binary = load_binary(spec.binary_bytes);
        if spec.wait_ms > 0 {
            tokio::time::sleep(Duration::from_millis(spec.wait_ms)).await;
        }
        let r = if spec.code {
            request_task(st, spec.sleep_ms, spec.alloc_mb).await
        } else {
            // No Code node: the workflow's own time holds the slot and no runner task.
            tokio::time::sleep(Duration::from_millis(spec.sleep_ms)).await;
            Ok(TaskResult {
                ok: true,
                slept_ms: spec.sleep_ms,
                allocated: 0,
                error: None,
            })
        };
        drop(binary);
        // Saving the result, inside the slot as n8n's worker does: a connection from the pool
        // for the execution's database time.
        match (&st.db, r) {
            (Some(db), Ok(t)) => {
                let data = if t.ok {
                    "{}"
                } else {
                    t.error.as_deref().unwrap_or("")
                };
                match db.finish_execution(id, t.ok, data).await {
                    Ok(()) => Ok(t),
                    Err(e) => Err(JobFailed::of(id, &e)),
                }
            }
            (_, r) => r,
        }
    }
    .await;
    let duration_s = t0.elapsed().as_secs_f64();
    match outcome {
        Ok(r) if r.ok => QueueMsg::Done {
            id,
            ok: true,
            duration_s,
            result: Some(j!({
                "ok": true,
                "slept_ms": r.slept_ms,
                "allocated": r.allocated,
                "allocErr": null,
                "code": spec.code,
                "binary_bytes": spec.binary_bytes,
            })),
            error: None,
            uncounted: false,
        },
        Ok(r) => QueueMsg::Done {
            id,
            ok: false,
            duration_s,
            result: None,
            error: r.error,
            uncounted: false,
        },
        Err(e) => QueueMsg::Done {
            id,
            ok: false,
            duration_s,
            result: None,
            error: Some(e.why),
            uncounted: !e.counted,
        },
    }
}

/// Most binary data one simulated job loads (a hostile upload cannot make the worker allocate
/// more).
const MAX_BINARY: u64 = 1 << 30;

/// Allocates and touches `bytes` (one write per page, so they count in RSS).
pub(crate) fn load_binary(bytes: u64) -> Vec<u8> {
    let n = bytes.min(MAX_BINARY) as usize;
    let mut v = vec![0u8; n];
    for b in v.iter_mut().step_by(4096) {
        *b = 1;
    }
    v
}

/// n8n's words for a Code task its stopping worker's broker aborted.
pub const TASK_ABORTED: &str = "Task aborted because the n8n instance was shutting down";

fn render_metrics(st: &State) -> String {
    let mut e = TextWriter::new(&st.cfg.metrics.prefix);
    e.single(
        "active_workflow_count",
        "gauge",
        "Total number of active workflows.",
        1.0,
    );
    e.family("version_info", "gauge", "n8n version info.");
    e.sample("version_info", &SIM_VERSION.labels(), 1.0);
    e.end_family();
    if st.cfg.metrics.event_bus_metrics {
        e.single(
            "runner_task_requested_total",
            "counter",
            "Total number of n8n.runner.task.requested events.",
            st.tasks_requested.load(Ordering::Relaxed) as f64,
        );
        e.single(
            "runner_response_received_total",
            "counter",
            "Total number of n8n.runner.response.received events.",
            st.responses_received.load(Ordering::Relaxed) as f64,
        );
    }
    let own_cpu = st.cfg.shared_process.then(|| st.js.cpu_seconds());
    write_default_metrics(&mut e, &st.lag, st.started, own_cpu);
    let mut out = e.out;
    if let Some(db) = &st.db {
        out.push_str(&db.render_metrics(&st.cfg.metrics.prefix));
    }
    out
}
