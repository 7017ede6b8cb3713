//! The worker's task broker: a Code task waits for a runner that offered capacity, and one no
//! runner takes within `N8N_RUNNERS_TASK_REQUEST_TIMEOUT` fails, as in n8n; runners connect,
//! offer and return their results here.

use super::*;

/// Asks the broker for a runner task and waits for its result — unless the worker is stopping
/// and its task budget runs out first: then the task is aborted, as n8n's broker aborts it, and
/// the execution ends in error (its Bull job completes: n8n's failed counter does not count it).
pub(super) async fn request_task(
    st: &State,
    sleep_ms: u64,
    alloc_mb: u64,
) -> Result<TaskResult, JobFailed> {
    st.code_tasks.fetch_add(1, Ordering::SeqCst);
    let mut abort = st.abort_tasks.subscribe();
    let r = tokio::select! {
        r = task_at_runner(st, sleep_ms, alloc_mb) => r,
        _ = abort.wait_for(|a| *a) => Err(JobFailed {
            why: TASK_ABORTED.into(),
            counted: false,
        }),
    };
    st.code_tasks.fetch_sub(1, Ordering::SeqCst);
    r
}

async fn task_at_runner(st: &State, sleep_ms: u64, alloc_mb: u64) -> Result<TaskResult, JobFailed> {
    st.tasks_requested.fetch_add(1, Ordering::Relaxed);
    let id = st.next_task.fetch_add(1, Ordering::Relaxed);
    let (matched_tx, matched_rx) = oneshot::channel();
    let (result_tx, result_rx) = oneshot::channel();
    let req = TaskRequest {
        id,
        sleep_ms,
        alloc_mb,
        matched: matched_tx,
        result: result_tx,
    };
    submit(st, req);
    let timeout = st.cfg.task_request_timeout;
    let matched = tokio::time::timeout(timeout, matched_rx).await.is_ok();
    let at_runner = Instant::now();
    if !matched {
        let removed = st
            .broker
            .lock()
            .map(|mut b| !b.drain_left(|r| r.id != id).is_empty())
            .unwrap_or(true);
        if removed {
            return Err(JobFailed::counted(format!(
                "Task request timed out after {} seconds: the task was not matched to a runner \
                 (no runner connected, not ready, or at capacity)",
                trim_secs(timeout)
            )));
        }
    }
    let r = result_rx
        .await
        .map_err(|_| JobFailed::counted("the runner running this task disconnected".into()))?;
    st.responses_received.fetch_add(1, Ordering::Relaxed);
    st.tasks_done.fetch_add(1, Ordering::Relaxed);
    let micros = u64::try_from(at_runner.elapsed().as_micros()).unwrap_or(u64::MAX);
    st.task_micros.fetch_add(micros, Ordering::Relaxed);
    Ok(r)
}

fn trim_secs(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn submit(st: &State, req: TaskRequest) {
    let paired = match st.broker.lock() {
        Ok(mut b) => b.push_left(req),
        Err(_) => return,
    };
    if let Some((req, offer)) = paired {
        dispatch(st, req, offer);
    }
}

fn offer(st: &State, offer: Offer) {
    let paired = match st.broker.lock() {
        Ok(mut b) => b.push_right(offer),
        Err(_) => return,
    };
    if let Some((req, offer)) = paired {
        dispatch(st, req, offer);
    }
}

/// Sends a matched task to its runner. If that runner is gone, the request goes back first in line.
fn dispatch(st: &State, req: TaskRequest, offer: Offer) {
    let TaskRequest {
        id,
        sleep_ms,
        alloc_mb,
        matched,
        result,
    } = req;
    let registered = st
        .runners
        .lock()
        .ok()
        .and_then(|mut r| {
            r.get_mut(&offer.runner)
                .map(|rc| rc.pending.insert(id, result))
        })
        .is_some();
    let sent = registered
        && offer
            .tx
            .send(BrokerMsg::Task {
                id,
                sleep_ms,
                alloc_mb,
            })
            .is_ok();
    if sent {
        let _ = matched.send(());
        return;
    }
    let result = st.runners.lock().ok().and_then(|mut r| {
        r.get_mut(&offer.runner)
            .and_then(|rc| rc.pending.remove(&id))
    });
    if let Some(result) = result {
        let req = TaskRequest {
            id,
            sleep_ms,
            alloc_mb,
            matched,
            result,
        };
        if let Ok(mut b) = st.broker.lock() {
            b.unshift_left(req);
        }
    }
}

pub(super) async fn accept_runners(st: Arc<State>, listener: TcpListener) {
    let mut conns = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while conns.try_join_next().is_some() {}
        let st = st.clone();
        conns.spawn(async move { runner_conn(st, stream).await });
    }
}

async fn runner_conn(st: Arc<State>, stream: TcpStream) {
    let (mut reader, tx) = wire::split::<BrokerMsg>(stream);
    let Ok(Some(BrokerMsg::Hello {
        runner,
        max_concurrency,
        token,
    })) = reader.next::<BrokerMsg>().await
    else {
        return;
    };
    if !st.cfg.auth_token.is_empty() && token != st.cfg.auth_token {
        let _ = tx.send(BrokerMsg::Rejected {
            reason: "N8N_RUNNERS_AUTH_TOKEN does not match the broker's".into(),
        });
        eprintln!(
            "n8ncap sim worker {}: refused runner {runner}: its N8N_RUNNERS_AUTH_TOKEN does not match",
            st.cfg.name
        );
        return;
    }
    let id = st.next_runner.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut r) = st.runners.lock() {
        r.insert(
            id,
            RunnerConn {
                name: runner,
                max_concurrency,
                pending: HashMap::new(),
            },
        );
    }
    while let Ok(Some(msg)) = reader.next::<BrokerMsg>().await {
        match msg {
            BrokerMsg::Offer => offer(
                &st,
                Offer {
                    runner: id,
                    tx: tx.clone(),
                },
            ),
            BrokerMsg::TaskDone {
                id: task,
                ok,
                slept_ms,
                allocated,
                error,
            } => {
                let waiter = st
                    .runners
                    .lock()
                    .ok()
                    .and_then(|mut r| r.get_mut(&id).and_then(|rc| rc.pending.remove(&task)));
                if let Some(w) = waiter {
                    let _ = w.send(TaskResult {
                        ok,
                        slept_ms,
                        allocated,
                        error,
                    });
                }
            }
            _ => {}
        }
    }
    // Runner gone: its offers vanish; dropping its pending senders fails those tasks.
    if let Ok(mut b) = st.broker.lock() {
        b.retain_right(|o| o.runner != id);
    }
    if let Ok(mut r) = st.runners.lock() {
        r.remove(&id);
    }
}

/// Runners attached to this worker's broker, for `GET /sim/runners` (a simulator-only endpoint:
/// n8n exposes no such thing, which is why n8ncap reads runner limits from Docker).
pub(super) fn attached_runners(st: &State) -> serde_json::Value {
    let runners: Vec<serde_json::Value> = st
        .runners
        .lock()
        .map(|r| {
            r.values()
                .map(|rc| j!({"name": rc.name, "max_concurrency": rc.max_concurrency}))
                .collect()
        })
        .unwrap_or_default();
    j!({
        "concurrency": st.cfg.concurrency,
        "runners_mode": st.cfg.runners_mode,
        "runners": runners,
        "tasks_done": st.tasks_done.load(Ordering::Relaxed),
        "task_seconds": st.task_micros.load(Ordering::Relaxed) as f64 / 1e6,
    })
}
