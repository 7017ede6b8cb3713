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
        // The window closed: what finishes from now on is lost with the process; what was
        // already being reported is let out (a Redis round trip or two) before counting.
        {
            let _g = st.gate.lock();
            st.abandoned.store(true, Ordering::SeqCst);
        }
        let settle = Instant::now() + Duration::from_secs(2);
        while st.reporting.load(Ordering::SeqCst) > 0 && Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(5)).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::config::{MainConfig, MetricsConfig, ShutdownConfig, Workflows};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// POSTs one webhook request; its status, or None when no answer came within `wait`.
    async fn post(port: u16, body: &str, wait: Duration) -> Option<u16> {
        let work = async {
            let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            let req = format!(
                "POST /webhook/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(req.as_bytes()).await.ok()?;
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).await.ok()?;
            String::from_utf8_lossy(&answer)
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        tokio::time::timeout(wait, work).await.ok().flatten()
    }

    /// A job still running when the window closes is left: its outcome never reaches main, even
    /// when it finishes while the process is still there, so the count the worker says is the
    /// count main never hears about (the drain test holds the loss to it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_finishes_after_the_window_is_left_and_never_answered() {
        let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let metrics = MetricsConfig {
            enabled: false,
            prefix: "n8n_".into(),
            queue_metrics: false,
            queue_metrics_interval: Duration::from_secs(5),
            event_bus_metrics: false,
        };
        let mut tasks = JoinSet::new();
        let main = crate::sim::main_role::start(
            MainConfig {
                listen: loopback,
                queue_listen: loopback,
                workflows: Workflows::default(),
                regular: None,
                metrics: metrics.clone(),
                overhead: Duration::ZERO,
                cpu: Duration::ZERO,
                shared_process: true,
                redis: None,
                bull_prefix: "bull".into(),
                db: None,
            },
            &mut tasks,
        )
        .await
        .unwrap();
        let queue = main.queue.unwrap();
        let worker = super::super::start(
            WorkerConfig {
                name: "w".into(),
                concurrency: 4,
                queue: (queue.ip().to_string(), queue.port()),
                health_listen: loopback,
                broker_listen: loopback,
                runners_mode: RunnersMode::External,
                internal_runner_limit: 10,
                auth_token: String::new(),
                task_request_timeout: Duration::from_secs(20),
                metrics,
                overhead: Duration::ZERO,
                cpu: Duration::ZERO,
                shared_process: true,
                redis: None,
                bull_prefix: "bull".into(),
                db: None,
                shutdown: ShutdownConfig {
                    graceful: Duration::from_secs(1),
                    ..ShutdownConfig::default()
                },
            },
            &mut tasks,
        )
        .await
        .unwrap();
        // Two jobs the window outlasts (200 ms) and two it does not (2 500 ms): the long ones
        // finish 1.5 s after the window, while this process still runs.
        let port = main.http.port();
        let mut sent = JoinSet::new();
        for ms in [200, 200, 2500, 2500] {
            let body = format!(r#"{{"sleep_ms":{ms},"code":false}}"#);
            sent.spawn(async move { post(port, &body, Duration::from_secs(4)).await });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while worker.stop.0.running.load(Ordering::SeqCst) < 4 {
            assert!(
                Instant::now() < deadline,
                "the worker never took the 4 jobs"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stopped = worker.stop.shut_down().await;
        let mut answered = Vec::new();
        while let Some(status) = sent.join_next().await {
            answered.push(status.unwrap());
        }
        assert_eq!(stopped.held, 4);
        assert_eq!(stopped.left, 2, "{answered:?}");
        assert_eq!(answered.iter().filter(|a| **a == Some(200)).count(), 2);
        assert_eq!(answered.iter().filter(|a| a.is_none()).count(), 2);
    }
}
