//! The drills' load: arrivals at a constant rate (an open model, as a webhook's callers are),
//! every request kept with when it was sent and how it ended, and the drill's action run at its
//! time beside the load. Measures only; each drill judges.

use crate::load::client::{Connection, Failure, Target};
use crate::record::drain::{Outcome, Sent};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Requests in flight at most: a stopped deployment's backlog beyond this is dropped, counted.
pub const MAX_IN_FLIGHT: usize = 2000;

/// The load's shape.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub rate_per_s: f64,
    pub duration: Duration,
    /// When the stop runs, from the start.
    pub stop_at: Duration,
    /// Requests in flight at most; an arrival beyond is dropped and counted.
    pub max_in_flight: usize,
}

/// What the load measured, and what the stop returned (None: interrupted before its time).
pub struct Loaded<T> {
    pub sent: Vec<Sent>,
    pub dropped: u64,
    pub stop: Option<T>,
    /// Seconds from the start to the stop's beginning.
    pub stop_s: Option<f64>,
    pub interrupted: bool,
}

/// Runs the arrivals; at `stop_at` runs `stop` beside them, and waits for it and for every
/// request sent (each bounded by the target's timeout) before returning.
pub async fn run<F, T>(
    target: &Target,
    plan: &Plan,
    stop: F,
    interrupt: &crate::util::Interrupt,
) -> Loaded<T>
where
    F: Future<Output = T>,
{
    let t0 = tokio::time::Instant::now();
    let start = Instant::now();
    let log: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let pool: Arc<Mutex<Vec<Connection>>> = Arc::default();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut requests = tokio::task::JoinSet::new();
    let stop_at = t0 + plan.stop_at;
    let staged = async {
        tokio::time::sleep_until(stop_at).await;
        let s = start.elapsed().as_secs_f64();
        (stop.await, s)
    };
    tokio::pin!(staged);
    let mut stopped: Option<(T, f64)> = None;
    let mut dropped = 0u64;
    let mut interrupted = false;
    let arrivals = (plan.rate_per_s * plan.duration.as_secs_f64()).floor() as u64;
    for i in 0..arrivals {
        let due = t0 + Duration::from_secs_f64(i as f64 / plan.rate_per_s);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(due) => break,
                r = &mut staged, if stopped.is_none() => stopped = Some(r),
                _ = interrupt.clone().wait() => { interrupted = true; break }
            }
        }
        if interrupted {
            break;
        }
        if in_flight.load(Ordering::SeqCst) >= plan.max_in_flight {
            dropped += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::SeqCst);
        let (target, log, pool, in_flight) =
            (target.clone(), log.clone(), pool.clone(), in_flight.clone());
        requests.spawn(async move {
            one(&target, &log, &pool, start).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
    // The stop runs to its end even when the arrivals are over (a restart outlasts them) and
    // once begun even when interrupted (it brings the worker back); an interrupt before its
    // time leaves the worker alone.
    if stopped.is_none() && !interrupted {
        tokio::select! {
            r = &mut staged => stopped = Some(r),
            _ = interrupt.clone().wait() => interrupted = true,
        }
    }
    if stopped.is_none() && tokio::time::Instant::now() >= stop_at {
        stopped = Some(staged.await);
    }
    while requests.join_next().await.is_some() {}
    let mut sent = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    sent.sort_by(|a, b| a.sent_s.total_cmp(&b.sent_s));
    let stop_s = stopped.as_ref().map(|(_, s)| *s);
    Loaded {
        sent,
        dropped,
        stop: stopped.map(|(t, _)| t),
        stop_s,
        interrupted,
    }
}

/// One request before the load (every drill's pre-flight): a judgement of what a stop
/// costs needs a webhook that answers OK before it. Err (bad input, exit 2) with the status or
/// the failure when it does not: nothing was stopped.
pub async fn preflight(target: &crate::load::client::Target) -> anyhow::Result<()> {
    let mut conn = crate::load::client::Connection::new();
    let ex = conn.exchange(target).await;
    let what = match ex.result {
        Ok((status, _)) if (200..300).contains(&status) => return Ok(()),
        Ok((status, _)) => format!("answered HTTP {status}"),
        Err(f) => crate::load::run::failure_words(f),
    };
    Err(crate::error::BadInput(format!(
        "pre-flight: POST {} {what}: nothing was stopped — the loss a stop causes can only be \
         told from a webhook that answers OK before it (check --url and --body; a short sweep \
         shows why it fails)",
        crate::wire::url::redact(&target.url)
    ))
    .into())
}

/// The webhook a steady load POSTs to: `body` (`--body`, JSON) and each request's `timeout`.
pub async fn post_target(
    url: &str,
    body: &str,
    timeout: Duration,
) -> anyhow::Result<crate::load::client::Target> {
    let body: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| crate::error::BadInput(format!("--body is not JSON: {e}")))?;
    let body = crate::load::body::build(&crate::load::body::BodySource {
        json: Some(&body),
        file: None,
        files: &[],
        fields: &Default::default(),
        base: std::path::Path::new("."),
        at: "--body",
    })?;
    crate::load::client::Target::new(url, "POST", &Default::default(), &body, timeout).await
}

/// One request on a pooled connection, logged with its times and how it ended.
async fn one(
    target: &Target,
    log: &Mutex<Vec<Sent>>,
    pool: &Mutex<Vec<Connection>>,
    start: Instant,
) {
    let sent_s = start.elapsed().as_secs_f64();
    let mut conn = pool
        .lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_default();
    let limit = target.timeout + Duration::from_secs(1);
    let outcome = match tokio::time::timeout(limit, conn.exchange(target)).await {
        Ok(ex) => match ex.result {
            Ok((status, _)) => Outcome::Answered(status),
            Err(Failure::Timeout) => Outcome::Unanswered,
            Err(_) => Outcome::Broken,
        },
        Err(_) => Outcome::Unanswered,
    };
    let ended_s = (outcome != Outcome::Unanswered).then(|| start.elapsed().as_secs_f64());
    if let Ok(mut l) = log.lock() {
        l.push(Sent {
            sent_s,
            ended_s,
            outcome,
        });
    }
    if matches!(outcome, Outcome::Answered(_)) {
        if let Ok(mut p) = pool.lock() {
            p.push(conn);
        }
    }
}
