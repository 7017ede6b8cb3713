//! Simulated n8n main: receives `POST /webhook/<path>`, puts the execution on the queue, answers
//! when a worker reports it finished (respond-after-last-node), and serves `/metrics` with the
//! queue gauges n8n main has (refreshed every `N8N_METRICS_QUEUE_METRICS_INTERVAL`).

use super::bull;
use super::config::MainConfig;
use super::process::{write_default_metrics, LagMonitor};
use super::rendezvous::Rendezvous;
use super::wire::{self, JobSpec, QueueMsg};
use super::SIM_VERSION;
use crate::wire::http::{self, json, respond, Resp};
use crate::wire::prometheus::TextWriter;
use crate::wire::resp::{self as redis, Conn};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::json as j;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

#[path = "main_queue.rs"]
mod queue;
use queue::{accept_workers, enqueue, redis_enqueue, redis_outcomes};

/// n8n's execution-duration histogram buckets (seconds), as in the real captures.
const DURATION_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

struct QueuedJob {
    id: u64,
    spec: JobSpec,
}

struct Taker {
    conn: u64,
    tx: mpsc::UnboundedSender<QueueMsg>,
}

struct Outcome {
    ok: bool,
    result: Option<serde_json::Value>,
    error: Option<String>,
}

#[derive(Default, Clone, Copy)]
struct QueueSnapshot {
    waiting: u64,
    active: u64,
    completed: u64,
    failed: u64,
}

#[derive(Default)]
struct DurationHistogram {
    counts: [u64; DURATION_BUCKETS.len()],
    count: u64,
    sum: f64,
}

struct State {
    cfg: MainConfig,
    queue: Mutex<Rendezvous<QueuedJob, Taker>>,
    waiters: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
    /// Jobs each worker connection holds (Bull's "active").
    held: Mutex<HashMap<u64, HashSet<u64>>>,
    next_id: AtomicU64,
    next_conn: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    snapshot: Mutex<QueueSnapshot>,
    durations: Mutex<[DurationHistogram; 2]>,
    /// Command connection to Redis, when the queue is Redis.
    redis: tokio::sync::Mutex<Option<Conn>>,
    lag: LagMonitor,
    started: SystemTime,
    js: super::cpu::JsThread,
    /// Regular mode: main runs the executions itself.
    regular: Option<super::regular::Executor>,
    /// The executions' database, when there is one: each execution written at intake.
    db: Option<Arc<super::db::Db>>,
}

/// Addresses a started main listens on.
#[derive(Debug, Clone, Copy)]
pub struct MainAddrs {
    pub http: SocketAddr,
    /// The simulated queue's address (None when the queue is a real Redis).
    pub queue: Option<SocketAddr>,
}

/// Binds main's ports (failing fast with a clear message) and spawns its tasks into `tasks`.
pub async fn start(cfg: MainConfig, tasks: &mut JoinSet<()>) -> anyhow::Result<MainAddrs> {
    let http_listener = http::bind(cfg.listen, "n8n main (N8N_PORT)").await?;
    // With a real Redis the queue lives there; main must not take its port. In regular mode
    // there is no queue at all.
    let queue_listener = match (&cfg.redis, &cfg.regular) {
        (Some(_), _) | (_, Some(_)) => None,
        (None, None) => Some(
            http::bind(
                cfg.queue_listen,
                "the simulated queue (QUEUE_BULL_REDIS_PORT)",
            )
            .await?,
        ),
    };
    let addrs = MainAddrs {
        http: http_listener.local_addr()?,
        queue: match &queue_listener {
            Some(l) => Some(l.local_addr()?),
            None => None,
        },
    };
    let lag = LagMonitor::start(tasks);
    let db = match &cfg.db {
        Some(d) => Some(super::db::Db::start(d, "main", tasks).await?),
        None => None,
    };
    // Executions are numbered after the database's last, as its sequence would.
    let first_id = match &db {
        Some(db) => {
            db.last_execution_id()
                .await
                .map_err(|e| anyhow::anyhow!("the database: {e}"))?
                + 1
        }
        None => 1,
    };
    let state = Arc::new(State {
        db,
        queue: Mutex::new(Rendezvous::default()),
        waiters: Mutex::new(HashMap::new()),
        held: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(first_id),
        next_conn: AtomicU64::new(1),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        snapshot: Mutex::new(QueueSnapshot::default()),
        durations: Mutex::new(Default::default()),
        redis: tokio::sync::Mutex::new(None),
        js: super::cpu::JsThread::start(
            "main",
            cfg.cpu + cfg.regular.as_ref().map(|r| r.cpu).unwrap_or_default(),
        ),
        regular: cfg.regular.clone().map(super::regular::Executor::new),
        cfg,
        lag,
        started: SystemTime::now(),
    });
    let st = state.clone();
    tasks.spawn(async move {
        http::serve(http_listener, move |req| handle_http(st.clone(), req)).await
    });
    match state
        .cfg
        .redis
        .clone()
        .filter(|_| state.cfg.regular.is_none())
    {
        Some(url) => {
            // The queue is Redis: jobs go to Bull's wait list, outcomes come back on a channel.
            let conn = Conn::open(&url).await?;
            *state.redis.lock().await = Some(conn);
            let sub = Conn::open(&url).await?;
            let st = state.clone();
            tasks.spawn(async move { redis_outcomes(st, sub).await });
        }
        None => {
            if let Some(l) = queue_listener {
                let st = state.clone();
                tasks.spawn(async move { accept_workers(st, l).await });
            }
        }
    }
    let st = state.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(st.cfg.metrics.queue_metrics_interval);
        loop {
            tick.tick().await;
            refresh_snapshot(&st).await;
        }
    });
    Ok(addrs)
}

async fn refresh_snapshot(st: &State) {
    let (waiting, active) = if st.cfg.redis.is_some() {
        // As Bull's getJobCounts: the lengths of the wait and active lists.
        let mut guard = st.redis.lock().await;
        let Some(c) = guard.as_mut() else { return };
        let wait = c
            .cmd(&["LLEN", &bull::key(&st.cfg.bull_prefix, "wait")])
            .await;
        let active = c
            .cmd(&["LLEN", &bull::key(&st.cfg.bull_prefix, "active")])
            .await;
        match (wait, active) {
            (Ok(w), Ok(a)) => (
                w.as_int().unwrap_or(0).max(0) as u64,
                a.as_int().unwrap_or(0).max(0) as u64,
            ),
            _ => {
                // Gone: the next enqueue opens it again.
                *guard = None;
                return;
            }
        }
    } else {
        (
            st.queue.lock().map(|q| q.left_len() as u64).unwrap_or(0),
            st.held
                .lock()
                .map(|h| h.values().map(|s| s.len() as u64).sum())
                .unwrap_or(0),
        )
    };
    if let Ok(mut s) = st.snapshot.lock() {
        *s = QueueSnapshot {
            waiting,
            active,
            completed: st.completed.load(Ordering::Relaxed),
            failed: st.failed.load(Ordering::Relaxed),
        };
    }
}

async fn handle_http(st: Arc<State>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/metrics") if st.cfg.metrics.enabled => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render_metrics(&st),
        ),
        (&Method::GET, "/healthz") => json(StatusCode::OK, &j!({"status": "ok"})),
        // n8n's middleware before every route but the health checks: a database it holds not
        // connected answers 503 at once.
        _ if st.db.as_ref().is_some_and(|db| !db.health().connected()) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            &j!({"code": 503, "message": "Database is not ready!"}),
        ),
        (_, p) if p.starts_with("/webhook/") => {
            let hook = &p["/webhook/".len()..];
            let defaults = st.cfg.workflows.0.get(hook).cloned();
            match defaults {
                Some(d) if req.method() == Method::POST => webhook(st, req, d).await,
                _ => json(
                    StatusCode::NOT_FOUND,
                    &j!({"code": 404, "message": format!(
                        "The requested webhook \"{} {}\" is not registered.", req.method(), hook)}),
                ),
            }
        }
        _ => json(
            StatusCode::NOT_FOUND,
            &j!({"code": 404, "message": "Not Found"}),
        ),
    }
}

/// Largest request body the simulated webhook reads.
const MAX_WEBHOOK_BODY: usize = 1 << 30;

async fn webhook(
    st: Arc<State>,
    req: Request<Incoming>,
    defaults: serde_json::Map<String, serde_json::Value>,
) -> Resp {
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let limited = http_body_util::Limited::new(req.into_body(), MAX_WEBHOOK_BODY);
    // The body stays in main's memory until the execution is answered, as an upload does.
    let body = match limited.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json(
                StatusCode::BAD_REQUEST,
                &j!({"code": 400, "message": "request body could not be read"}),
            )
        }
    };
    let intake = match super::intake::parse(content_type.as_deref(), &body, &defaults) {
        Ok(i) => i,
        Err(why) => return json(StatusCode::BAD_REQUEST, &j!({"code": 400, "message": why})),
    };
    let spec = intake.spec;
    // Webhook handling and execution bookkeeping on main, outside any worker slot.
    if !st.cfg.overhead.is_zero() {
        tokio::time::sleep(st.cfg.overhead).await;
    }
    st.js.run(st.cfg.cpu).await;
    let id = st.next_id.fetch_add(1, Ordering::Relaxed);
    // The execution is written before it runs or is queued: without a connection it fails.
    if let Some(db) = &st.db {
        if let Err(e) = db.insert_execution(id).await {
            // No job was queued: n8n's failed-jobs counter does not see it, the log does.
            super::db_fail::log_problem(id, &e.words);
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &j!({"message": super::db_fail::ERROR_IN_WORKFLOW}),
            );
        }
    }
    if let Some(exec) = &st.regular {
        let e = exec.run(&st.js, spec).await;
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = st.waiters.lock() {
            w.insert(id, tx);
        }
        finish(
            &st,
            id,
            Ended {
                ok: e.ok,
                duration_s: e.duration_s,
                result: e.result,
                error: e.error,
                uncounted: false,
            },
        );
        return answer(&st, id, rx.await.ok(), (intake.files, body.len())).await;
    }
    let (tx, rx) = oneshot::channel();
    if let Ok(mut w) = st.waiters.lock() {
        w.insert(id, tx);
    }
    if st.cfg.redis.is_some() {
        if let Err(e) = redis_enqueue(&st, id, &spec).await {
            if let Ok(mut w) = st.waiters.lock() {
                w.remove(&id);
            }
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &j!({"code": 0, "message": format!("cannot enqueue the execution: {e}")}),
            );
        }
    } else {
        enqueue(&st, QueuedJob { id, spec });
    }
    answer(&st, id, rx.await.ok(), (intake.files, body.len())).await
}

/// The respond node's answer: the workflow's result (read back from the database, as n8n's
/// main does), with what the upload carried; no answer names the database.
async fn answer(
    st: &State,
    id: u64,
    outcome: Option<Outcome>,
    (files, body_bytes): (u64, usize),
) -> Resp {
    match outcome {
        Some(Outcome {
            ok: true, result, ..
        }) => {
            if let Some(db) = &st.db {
                if db.read_result(id).await.is_err() {
                    return json(StatusCode::OK, &j!({"message": super::db_fail::NO_DATA}));
                }
            }
            let mut v = result.unwrap_or_else(|| j!({"ok": true}));
            if let (true, Some(o)) = (files > 0, v.as_object_mut()) {
                o.insert("files".into(), j!(files));
                o.insert("received_bytes".into(), j!(body_bytes));
            }
            json(StatusCode::OK, &v)
        }
        Some(Outcome { error, .. }) => {
            if let Some(words) = super::db_fail::db_words(error.as_deref()) {
                super::db_fail::log_problem(id, words);
            }
            json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &j!({"message": super::db_fail::ERROR_IN_WORKFLOW}),
            )
        }
        None => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &j!({"code": 0, "message": "Execution was lost"}),
        ),
    }
}

/// How a job ended, as main hears it.
struct Ended {
    ok: bool,
    duration_s: f64,
    result: Option<serde_json::Value>,
    error: Option<String>,
    /// Not one n8n's failed-jobs counter counts (see `QueueMsg::Done::uncounted`).
    uncounted: bool,
}

impl Ended {
    fn of(msg: QueueMsg) -> Option<(u64, Ended)> {
        match msg {
            QueueMsg::Done {
                id,
                ok,
                duration_s,
                result,
                error,
                uncounted,
            } => Some((
                id,
                Ended {
                    ok,
                    duration_s,
                    result,
                    error,
                    uncounted,
                },
            )),
            _ => None,
        }
    }
}

/// [`finish`] for an execution still waiting: on Redis an outcome can arrive twice (published,
/// and read back from the job's hash after a resubscription).
fn finish_waiting(st: &State, id: u64, e: Ended) {
    let waiting = st
        .waiters
        .lock()
        .map(|w| w.contains_key(&id))
        .unwrap_or(false);
    if waiting {
        finish(st, id, e);
    }
}

fn finish(st: &State, id: u64, e: Ended) {
    let Ended {
        ok,
        duration_s,
        result,
        error,
        uncounted,
    } = e;
    if ok {
        st.completed.fetch_add(1, Ordering::Relaxed);
    } else if !uncounted {
        st.failed.fetch_add(1, Ordering::Relaxed);
    }
    if let Ok(mut hists) = st.durations.lock() {
        let h = &mut hists[if ok { 0 } else { 1 }];
        h.count += 1;
        h.sum += duration_s;
        for (i, le) in DURATION_BUCKETS.iter().enumerate() {
            if duration_s <= *le {
                h.counts[i] += 1;
            }
        }
    }
    if super::db_fail::lost(error.as_deref()) {
        // Its end was lost with the database: the caller is held, never answered.
        return;
    }
    let waiter = st.waiters.lock().ok().and_then(|mut w| w.remove(&id));
    if let Some(tx) = waiter {
        let _ = tx.send(Outcome { ok, result, error });
    }
}

fn render_metrics(st: &State) -> String {
    let mut e = TextWriter::new(&st.cfg.metrics.prefix);
    e.single(
        "instance_role_leader",
        "gauge",
        "Whether this main instance is the leader (1) or not (0).",
        1.0,
    );
    e.single(
        "active_workflow_count",
        "gauge",
        "Total number of active workflows.",
        1.0,
    );
    e.family("version_info", "gauge", "n8n version info.");
    e.sample("version_info", &SIM_VERSION.labels(), 1.0);
    e.end_family();
    // Regular mode has no queue, so no queue metrics.
    if st.cfg.metrics.queue_metrics && st.cfg.regular.is_none() {
        let s = st.snapshot.lock().map(|s| *s).unwrap_or_default();
        e.single(
            "scaling_mode_queue_jobs_waiting",
            "gauge",
            "Current number of enqueued jobs waiting for pickup in scaling mode.",
            s.waiting as f64,
        );
        e.single(
            "scaling_mode_queue_jobs_active",
            "gauge",
            "Current number of jobs being processed across all workers in scaling mode.",
            s.active as f64,
        );
        e.single(
            "scaling_mode_queue_jobs_completed",
            "counter",
            "Total number of jobs completed across all workers in scaling mode since instance start.",
            s.completed as f64,
        );
        e.single(
            "scaling_mode_queue_jobs_failed",
            "counter",
            "Total number of jobs failed across all workers in scaling mode since instance start.",
            s.failed as f64,
        );
    }
    e.family(
        "workflow_execution_duration_seconds",
        "histogram",
        "Workflow execution duration in seconds.",
    );
    if let Ok(hists) = st.durations.lock() {
        for (status, h) in ["success", "error"].iter().zip(hists.iter()) {
            if h.count == 0 {
                continue;
            }
            for (le, c) in DURATION_BUCKETS.iter().zip(h.counts.iter()) {
                let le = format!("{le}");
                e.sample(
                    "workflow_execution_duration_seconds_bucket",
                    &[("le", &le), ("status", status), ("mode", "webhook")],
                    *c as f64,
                );
            }
            e.sample(
                "workflow_execution_duration_seconds_bucket",
                &[("le", "+Inf"), ("status", status), ("mode", "webhook")],
                h.count as f64,
            );
            e.sample(
                "workflow_execution_duration_seconds_sum",
                &[("status", status), ("mode", "webhook")],
                h.sum,
            );
            e.sample(
                "workflow_execution_duration_seconds_count",
                &[("status", status), ("mode", "webhook")],
                h.count as f64,
            );
        }
    }
    e.end_family();
    let own_cpu = st.cfg.shared_process.then(|| st.js.cpu_seconds());
    write_default_metrics(&mut e, &st.lag, st.started, own_cpu);
    let mut out = e.out;
    if let Some(db) = &st.db {
        out.push_str(&db.render_metrics(&st.cfg.metrics.prefix));
    }
    out
}
