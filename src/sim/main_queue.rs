//! How main hands jobs to workers and hears how they ended: its own queue over TCP (a job
//! to a free slot, or waiting), or Bull's lists in Redis, with the outcomes Redis publishes and
//! a catch-up after Redis comes back.

use super::*;

/// Hands a job to a free slot, or leaves it waiting in the queue.
pub(super) fn enqueue(st: &State, job: QueuedJob) {
    let mut job = job;
    loop {
        let paired = match st.queue.lock() {
            Ok(mut q) => q.push_left(job),
            Err(_) => return,
        };
        let Some((j, taker)) = paired else { return };
        match deliver(st, j, &taker) {
            Ok(()) => return,
            // That slot's worker is gone: try the next free slot.
            Err(back) => job = back,
        }
    }
}

fn deliver(st: &State, job: QueuedJob, taker: &Taker) -> Result<(), QueuedJob> {
    if let Ok(mut held) = st.held.lock() {
        match held.get_mut(&taker.conn) {
            Some(set) => {
                set.insert(job.id);
            }
            None => return Err(job),
        }
    }
    let msg = QueueMsg::Job {
        id: job.id,
        spec: job.spec,
    };
    if taker.tx.send(msg).is_err() {
        if let Ok(mut held) = st.held.lock() {
            if let Some(set) = held.get_mut(&taker.conn) {
                set.remove(&job.id);
            }
        }
        return Err(job);
    }
    Ok(())
}

pub(super) async fn accept_workers(st: Arc<State>, listener: TcpListener) {
    let mut conns = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        while conns.try_join_next().is_some() {}
        let st = st.clone();
        conns.spawn(async move { worker_conn(st, stream).await });
    }
}

async fn worker_conn(st: Arc<State>, stream: tokio::net::TcpStream) {
    let conn = st.next_conn.fetch_add(1, Ordering::Relaxed);
    let (mut reader, tx) = wire::split::<QueueMsg>(stream);
    if let Ok(mut held) = st.held.lock() {
        held.insert(conn, HashSet::new());
    }
    while let Ok(Some(msg)) = reader.next::<QueueMsg>().await {
        match msg {
            QueueMsg::Hello { .. } => {}
            QueueMsg::Take => {
                let taker = Taker {
                    conn,
                    tx: tx.clone(),
                };
                let paired = match st.queue.lock() {
                    Ok(mut q) => q.push_right(taker),
                    Err(_) => break,
                };
                if let Some((job, taker)) = paired {
                    if let Err(job) = deliver(&st, job, &taker) {
                        if let Ok(mut q) = st.queue.lock() {
                            q.unshift_left(job);
                        }
                    }
                }
            }
            done @ QueueMsg::Done { .. } => {
                let Some((id, ended)) = Ended::of(done) else {
                    continue;
                };
                if let Ok(mut held) = st.held.lock() {
                    if let Some(set) = held.get_mut(&conn) {
                        set.remove(&id);
                    }
                }
                finish(&st, id, ended);
            }
            QueueMsg::Pause => {
                if let Ok(mut q) = st.queue.lock() {
                    q.retain_right(|t| t.conn != conn);
                }
            }
            QueueMsg::Release { id, spec } => {
                if let Ok(mut held) = st.held.lock() {
                    if let Some(set) = held.get_mut(&conn) {
                        set.remove(&id);
                    }
                }
                enqueue(&st, QueuedJob { id, spec });
            }
            QueueMsg::Job { .. } => {}
        }
    }
    // The worker went away: its free slots vanish, and the jobs it held fail once their
    // lease lapsed and the stalled check found them, as on Redis (n8n ≥ 2: never re-run).
    if let Ok(mut q) = st.queue.lock() {
        q.retain_right(|t| t.conn != conn);
    }
    let lost = st
        .held
        .lock()
        .ok()
        .and_then(|mut h| h.remove(&conn))
        .unwrap_or_default();
    if lost.is_empty() {
        return;
    }
    tokio::time::sleep(st.cfg.stalled_after).await;
    for id in lost {
        finish(
            &st,
            id,
            Ended {
                ok: false,
                duration_s: 0.0,
                result: None,
                error: Some("job stalled more than maxStalledCount".into()),
                uncounted: true,
            },
        );
    }
}

/// Bull's layout: the job's data in the hash `bull:jobs:<id>`, its id pushed on `bull:jobs:wait`.
/// With Redis gone the request waits for it, as n8n's Redis client queues its commands while it
/// reconnects: answered once Redis is back, never when the process exits first.
pub(super) async fn redis_enqueue(st: &State, id: u64, spec: &JobSpec) -> anyhow::Result<()> {
    let key = bull::key(&st.cfg.bull_prefix, &id.to_string());
    let wait = bull::key(&st.cfg.bull_prefix, "wait");
    let data = serde_json::to_string(spec)?;
    let Some(url) = st.cfg.redis.clone() else {
        anyhow::bail!("no Redis configured");
    };
    loop {
        {
            let mut guard = st.redis.lock().await;
            if guard.is_none() {
                *guard = Conn::open(&url).await.ok();
            }
            if let Some(c) = guard.as_mut() {
                if c.cmd(&["HSET", &key, "data", &data]).await.is_ok()
                    && c.cmd(&["LPUSH", &wait, &id.to_string()]).await.is_ok()
                {
                    return Ok(());
                }
                *guard = None;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The outcomes published while main was not subscribed (Redis away, or main reconnecting):
/// read from the jobs' hashes of the executions still waiting.
async fn catch_up(st: &Arc<State>) {
    let ids: Vec<u64> = st
        .waiters
        .lock()
        .map(|w| w.keys().copied().collect())
        .unwrap_or_default();
    let Some(url) = st.cfg.redis.clone() else {
        return;
    };
    let mut guard = st.redis.lock().await;
    if guard.is_none() {
        *guard = Conn::open(&url).await.ok();
    }
    let Some(c) = guard.as_mut() else { return };
    for id in ids {
        let key = bull::key(&st.cfg.bull_prefix, &id.to_string());
        let Ok(v) = c.cmd(&["HGET", &key, "outcome"]).await else {
            *guard = None;
            return;
        };
        let Some(ended) = v
            .as_str()
            .and_then(|p| serde_json::from_str::<QueueMsg>(&p).ok())
            .and_then(Ended::of)
        else {
            continue;
        };
        finish_waiting(st, ended.0, ended.1);
    }
}

/// The outcomes channel, subscribed again whenever the connection drops.
pub(super) async fn redis_outcomes(st: Arc<State>, first: Conn) {
    let mut next = Some(first);
    loop {
        let sub = match next.take() {
            Some(c) => Some(c),
            None => match st.cfg.redis.as_ref() {
                Some(url) => Conn::open(url).await.ok(),
                None => return,
            },
        };
        if let Some(sub) = sub {
            outcomes_on(&st, sub).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

async fn outcomes_on(st: &Arc<State>, mut sub: Conn) {
    let channel = bull::outcome_channel(&st.cfg.bull_prefix);
    if sub.cmd(&["SUBSCRIBE", &channel]).await.is_err() {
        return;
    }
    catch_up(st).await;
    while let Ok(v) = sub.read().await {
        let redis::Value::Array(items) = v else {
            continue;
        };
        let Some(payload) = items.get(2).and_then(|p| p.as_str()) else {
            continue;
        };
        let Some((id, ended)) = serde_json::from_str::<QueueMsg>(&payload)
            .ok()
            .and_then(Ended::of)
        else {
            continue;
        };
        // The job's hash expires by itself (the worker set its age): nothing to do here.
        finish_waiting(st, id, ended);
    }
}
