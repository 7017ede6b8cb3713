//! A simulated worker's end, as n8n 2.x's: its shutdown (the queue paused, the running jobs
//! waited for up to `N8N_GRACEFUL_SHUTDOWN_TIMEOUT`, the rest left to fail) and Bull's stalled
//! check, which fails the jobs a stopped worker left on Redis once their lease lapsed.

use super::*;

/// A started worker's shutdown, as n8n 2.x's: the queue paused (no job taken any more), the
/// running jobs waited for up to `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` (looked at every 500 ms, with
/// n8n's log line), then the caller exits and what still runs is lost: main fails it when the
/// worker's connection closes, or, on Redis, the other workers' stalled check once its lease
/// lapses.
#[derive(Clone)]
pub struct Stop(pub(super) Arc<State>);

/// What a worker's shutdown found and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Jobs running when the signal came.
    pub held: u64,
    /// Jobs still running when the window closed: they fail.
    pub left: u64,
}

impl Stop {
    pub async fn shut_down(&self) -> Stopped {
        let st = &self.0;
        let held = {
            let _g = st.gate.lock();
            st.stopping.store(true, Ordering::SeqCst);
            st.running.load(Ordering::SeqCst)
        };
        if let Some(tx) = st.queue_tx.lock().ok().and_then(|t| t.clone()) {
            let _ = tx.send(QueueMsg::Pause);
        }
        let deadline = Instant::now() + st.cfg.shutdown.graceful;
        let mut round = 0u32;
        loop {
            let now_running = st.running.load(Ordering::SeqCst);
            let now = Instant::now();
            if now_running == 0 || now >= deadline {
                break;
            }
            if round.is_multiple_of(4) {
                // n8n's own words (ScalingService.stop), which `n8ncap drain` reads back.
                println!("Waiting for {now_running} active executions to finish...");
            }
            round += 1;
            tokio::time::sleep((deadline - now).min(Duration::from_millis(500))).await;
        }
        let left = st.running.load(Ordering::SeqCst);
        if left > 0 {
            println!(
                "n8ncap sim worker {}: N8N_GRACEFUL_SHUTDOWN_TIMEOUT ({} s) passed with {left} \
                 executions still running: they fail",
                st.cfg.name,
                st.cfg.shutdown.graceful.as_secs_f64()
            );
        }
        Stopped { held, left }
    }
}

/// Bull's stalled check, as n8n ≥ 2.0 runs it (no stalled retry): every
/// `QUEUE_WORKER_STALLED_INTERVAL`, a job in the active list whose lease lapsed in two rounds
/// running (the second round spares a job taken between the list move and its lease) is failed.
pub(super) async fn stalled_check(st: Arc<State>, url: RedisUrl) {
    let prefix = st.cfg.bull_prefix.clone();
    let active = bull::key(&prefix, "active");
    let channel = super::bull::outcome_channel(&prefix);
    let mut suspects: std::collections::HashSet<String> = Default::default();
    let mut conn: Option<Conn> = None;
    loop {
        tokio::time::sleep(st.cfg.shutdown.stalled).await;
        if st.stopping.load(Ordering::SeqCst) {
            return;
        }
        if conn.is_none() {
            conn = Conn::open(&url).await.ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        let Ok(list) = c.cmd(&["LRANGE", &active, "0", "-1"]).await else {
            conn = None;
            continue;
        };
        let mut lapsed = std::collections::HashSet::new();
        let ids = match list {
            redis::Value::Array(ids) => ids,
            _ => Vec::new(),
        };
        for id in ids {
            let Some(id) = id.as_str() else { continue };
            let lock = bull::key(&prefix, &format!("{id}:lock"));
            if matches!(c.cmd(&["EXISTS", &lock]).await, Ok(v) if v.as_int() == Some(0)) {
                lapsed.insert(id.to_string());
            }
        }
        for id in lapsed.intersection(&suspects) {
            let removed = c.cmd(&["LREM", &active, "1", id]).await;
            if !matches!(removed, Ok(v) if v.as_int() == Some(1)) {
                continue;
            }
            let done = QueueMsg::Done {
                id: id.parse().unwrap_or(0),
                ok: false,
                duration_s: 0.0,
                result: None,
                error: Some("job stalled more than maxStalledCount".into()),
            };
            let payload = serde_json::to_string(&done).unwrap_or_default();
            let _ = c.cmd(&["DEL", &bull::key(&prefix, id)]).await;
            let _ = c.cmd(&["PUBLISH", &channel, &payload]).await;
        }
        suspects = lapsed;
    }
}
