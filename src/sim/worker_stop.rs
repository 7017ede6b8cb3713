//! A simulated worker's end, as n8n 2.41's: its shutdown (the queue paused, the Code tasks
//! aborted when the task budget — 0.8 × `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` — runs out, the other
//! running jobs waited for up to the window, the process gone shortly after its last execution)
//! and Bull's stalled check, which fails the jobs a killed worker left on Redis once their lease
//! lapsed. Each figure is a real n8n 2.41.1's, measured (docs/sim.md, "A worker's stop").

use super::*;

/// After its last execution ended, a stopping n8n 2.41.1 worker closed its connections and
/// exited 1–2.5 s later: the simulator waits the middle of that.
const EXIT_AFTER_LAST: Duration = Duration::from_millis(1500);
/// An idle n8n 2.41.1 worker exited 2.1–3.3 s after SIGTERM.
const EXIT_AFTER_SIGNAL: Duration = Duration::from_millis(2500);
/// How often the shutdown looks at what still runs.
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// How often it says so (n8n's "Waiting for N active executions to finish...").
const SAY_EVERY: u32 = 40;

/// A started worker's shutdown, as n8n 2.41's: the queue paused (no job taken any more), the
/// running jobs waited for up to `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` — their Code tasks only up to
/// 0.8 of it, then aborted with n8n's error, which main answers HTTP 500 at once — then the
/// caller exits and what still runs (work outside a Code task) is left: on Redis the other
/// workers' stalled check fails it once its lease lapsed; on main's own queue main does the
/// same after the lease and the check interval.
#[derive(Clone)]
pub struct Stop(pub(super) Arc<State>);

/// What a worker's shutdown found and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Jobs running when the signal came.
    pub held: u64,
    /// Code tasks aborted when the task budget ran out: their executions failed (HTTP 500).
    pub aborted: u64,
    /// Jobs still running when the window closed: they fail after the stalled check.
    pub left: u64,
}

impl Stop {
    pub async fn shut_down(&self) -> Stopped {
        let st = &self.0;
        let signal = Instant::now();
        let held = {
            let _g = st.gate.lock();
            st.stopping.store(true, Ordering::SeqCst);
            st.running.load(Ordering::SeqCst)
        };
        println!("Received SIGTERM. Shutting down...");
        if let Some(tx) = st.queue_tx.lock().ok().and_then(|t| t.clone()) {
            let _ = tx.send(QueueMsg::Pause);
        }
        let budget = signal + st.cfg.shutdown.task_budget();
        let deadline = signal + st.cfg.shutdown.graceful;
        let tasks = st.code_tasks.load(Ordering::SeqCst);
        if tasks > 0 {
            // n8n's broker, at the signal (task-broker-ws-server).
            println!("Capped {tasks} in-flight task timeout(s) to fit the shutdown window");
        }
        let mut aborted = 0;
        let mut round = 0u32;
        let mut last_end = signal;
        loop {
            let now = Instant::now();
            let now_running = st.running.load(Ordering::SeqCst);
            if now_running == 0 || now >= deadline {
                break;
            }
            if now >= budget && !*st.abort_tasks.borrow() {
                aborted = st.code_tasks.load(Ordering::SeqCst);
                // n8n logs one line per aborted task.
                for _ in 0..aborted {
                    println!("{TASK_ABORTED}");
                }
                let _ = st.abort_tasks.send(true);
            }
            if round.is_multiple_of(SAY_EVERY) {
                // n8n's own words (ScalingService.stop), which `n8ncap drain` reads back.
                println!("Waiting for {now_running} active executions to finish...");
            }
            round += 1;
            let next = if now < budget { budget } else { deadline };
            tokio::time::sleep((next - now).min(LOOK_EVERY)).await;
            last_end = Instant::now();
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
        } else {
            // Nothing left: n8n closes its connections and exits shortly after.
            let exit = (last_end + EXIT_AFTER_LAST).max(signal + EXIT_AFTER_SIGNAL);
            tokio::time::sleep_until(exit.into()).await;
        }
        Stopped {
            held,
            aborted,
            left,
        }
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
                uncounted: true,
            };
            let payload = serde_json::to_string(&done).unwrap_or_default();
            let key = bull::key(&prefix, id);
            let _ = c.cmd(&["HSET", &key, "outcome", &payload]).await;
            let _ = c.cmd(&["EXPIRE", &key, bull::OUTCOME_KEPT_S]).await;
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

    /// The answer to one webhook request: its status and body, or None when none came within
    /// `wait`.
    async fn post(port: u16, body: &str, wait: Duration) -> Option<(u16, String)> {
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
            let text = String::from_utf8_lossy(&answer).to_string();
            let status = text.split_whitespace().nth(1)?.parse().ok()?;
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
            Some((status, body))
        };
        tokio::time::timeout(wait, work).await.ok().flatten()
    }

    /// main (its own queue, metrics on) and one worker of 4 slots with a 1 s window and, with
    /// `runner`, an external runner of 4 tasks: main's port and the worker. The worker's tasks
    /// go to `worker_tasks` (dropping them kills it); main fails a lost worker's jobs after
    /// `stalled_after`.
    async fn stack_with(
        tasks: &mut JoinSet<()>,
        worker_tasks: &mut JoinSet<()>,
        runner: bool,
        stalled_after: Duration,
    ) -> (u16, WorkerAddrs) {
        let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let metrics = MetricsConfig {
            enabled: true,
            prefix: "n8n_".into(),
            queue_metrics: true,
            queue_metrics_interval: Duration::from_millis(100),
            event_bus_metrics: false,
        };
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
                stalled_after,
            },
            tasks,
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
                internal_runner_cpu: Duration::ZERO,
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
            worker_tasks,
        )
        .await
        .unwrap();
        if runner {
            let rc = RunnerConfig {
                name: "r".into(),
                broker: (worker.broker.ip().to_string(), worker.broker.port()),
                max_concurrency: 4,
                auth_token: String::new(),
                cpu: Duration::ZERO,
            };
            worker_tasks.spawn(runner::run(rc));
        }
        (main.http.port(), worker)
    }

    async fn stack(tasks: &mut JoinSet<()>, runner: bool) -> (u16, WorkerAddrs) {
        let mut worker_tasks = JoinSet::new();
        let r = stack_with(
            tasks,
            &mut worker_tasks,
            runner,
            ShutdownConfig::default().stalled_after(),
        )
        .await;
        tasks.spawn(async move { while worker_tasks.join_next().await.is_some() {} });
        r
    }

    /// Sends one request per job time and waits until the worker runs all of them.
    async fn load(
        port: u16,
        worker: &WorkerAddrs,
        jobs: &[(u64, bool)],
    ) -> JoinSet<Option<(u16, String)>> {
        let mut sent = JoinSet::new();
        for (ms, code) in jobs {
            let body = format!(r#"{{"sleep_ms":{ms},"code":{code}}}"#);
            sent.spawn(async move { post(port, &body, Duration::from_secs(4)).await });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while worker.stop.0.running.load(Ordering::SeqCst) < jobs.len() as u64
            || worker.stop.0.code_tasks.load(Ordering::SeqCst)
                < jobs.iter().filter(|j| j.1).count() as u64
        {
            assert!(Instant::now() < deadline, "the worker never took the jobs");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sent
    }

    /// Main's `n8n_scaling_mode_queue_jobs_completed` and `_failed`, as scraped now.
    async fn queue_counters(port: u16) -> (Option<f64>, Option<f64>) {
        let (_, metrics) = crate::wire::http::http_get(
            &format!("http://127.0.0.1:{port}/metrics"),
            Duration::from_secs(2),
        )
        .await
        .unwrap();
        let text = String::from_utf8_lossy(&metrics);
        let counter = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("n8n_scaling_mode_queue_jobs_{name} ")))
                .map(|v| v.trim().parse::<f64>().unwrap())
        };
        (counter("completed"), counter("failed"))
    }

    async fn answers(mut sent: JoinSet<Option<(u16, String)>>) -> Vec<Option<(u16, String)>> {
        let mut out = Vec::new();
        while let Some(a) = sent.join_next().await {
            out.push(a.unwrap());
        }
        out
    }

    /// A job still running when the window closes is left: its outcome never reaches main, even
    /// when it finishes while the process is still there, so the count the worker says is the
    /// count main never hears about (the drain test holds the loss to it). Work outside a Code
    /// task (`code: false`) is not cut by the task budget.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_finishes_after_the_window_is_left_and_never_answered() {
        let mut tasks = JoinSet::new();
        let (port, worker) = stack(&mut tasks, false).await;
        // Two jobs the window outlasts (200 ms) and two it does not (2 500 ms): the long ones
        // finish 1.5 s after the window, while this process still runs.
        let sent = load(
            port,
            &worker,
            &[(200, false), (200, false), (2500, false), (2500, false)],
        )
        .await;
        let stopped = worker.stop.shut_down().await;
        let answered = answers(sent).await;
        assert_eq!(
            (stopped.held, stopped.aborted, stopped.left),
            (4, 0, 2),
            "{answered:?}"
        );
        assert_eq!(
            answered
                .iter()
                .filter(|a| matches!(a, Some((200, _))))
                .count(),
            2
        );
        assert_eq!(answered.iter().filter(|a| a.is_none()).count(), 2);
    }

    /// n8n 2.41's task budget: a Code task still running at 0.8 × the window is aborted, and its
    /// caller gets HTTP 500 "Error in workflow" then, not when the window closes — the 2.5 s
    /// jobs here are answered although the window (1 s) would have left them; the short ones
    /// finish. n8n's failed-jobs counter does not count the aborted ones (measured: it stayed 0).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn code_tasks_past_the_task_budget_are_aborted_and_answered_500() {
        let mut tasks = JoinSet::new();
        let (port, worker) = stack(&mut tasks, true).await;
        let sent = load(
            port,
            &worker,
            &[(200, true), (200, true), (2500, true), (2500, true)],
        )
        .await;
        let stopped = worker.stop.shut_down().await;
        let answered = answers(sent).await;
        assert_eq!(
            (stopped.held, stopped.aborted, stopped.left),
            (4, 2, 0),
            "{answered:?}"
        );
        assert_eq!(
            answered
                .iter()
                .filter(|a| matches!(a, Some((200, _))))
                .count(),
            2
        );
        let failed: Vec<&String> = answered
            .iter()
            .filter_map(|a| a.as_ref().filter(|(s, _)| *s == 500).map(|(_, b)| b))
            .collect();
        assert_eq!(failed.len(), 2, "{answered:?}");
        for body in failed {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(v["message"], "Error in workflow");
        }
        // The counters were refreshed after the jobs ended: the completed ones are there.
        assert_eq!(queue_counters(port).await, (Some(2.0), Some(0.0)));
    }

    /// A worker killed on main's own queue: its jobs are failed as Bull's stalled check fails a
    /// killed worker's on Redis — after the lease and the check interval (here 300 ms), with
    /// HTTP 500, and not in n8n's failed counter — never at once, never re-run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_worker_s_jobs_fail_after_the_stalled_check_on_main_s_queue() {
        let mut tasks = JoinSet::new();
        let mut worker_tasks = JoinSet::new();
        let (port, worker) = stack_with(
            &mut tasks,
            &mut worker_tasks,
            true,
            Duration::from_millis(300),
        )
        .await;
        let sent = load(port, &worker, &[(3000, true), (3000, true)]).await;
        let killed = Instant::now();
        // Its tasks and its state gone: the connection to main closes, as a killed process's.
        drop(worker_tasks);
        drop(worker);
        let answered = answers(sent).await;
        assert_eq!(
            answered
                .iter()
                .filter(|a| matches!(a, Some((500, _))))
                .count(),
            2,
            "{answered:?}"
        );
        // Not before the stalled check could have run.
        assert!(killed.elapsed() >= Duration::from_millis(300));
        assert_eq!(queue_counters(port).await.1, Some(0.0));
    }
}
