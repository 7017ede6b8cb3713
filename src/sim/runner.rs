//! Simulated task runner (the `n8nio/runners` container): connects to a task broker, offers its
//! `N8N_RUNNERS_MAX_CONCURRENCY` slots, and runs Code tasks: it allocates and touches `alloc_mb`
//! MiB (so this process's RSS grows, outside the heap gauges), burns its CPU per task
//! (`SIM_RUNNER_CPU_MS`, n8n 2.41.1's runner: 4–5 ms) on one thread, and holds the task for
//! `sleep_ms`.

use super::config::RunnerConfig;
use super::process::EXTERNAL_BYTES;
use super::wire::{self, BrokerMsg};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const MIB: u64 = 1024 * 1024;

/// Runs until the task is aborted, reconnecting to the broker whenever the link drops (the
/// launcher in `n8nio/runners` does the same).
pub async fn run(cfg: RunnerConfig) {
    // Tasks beyond the limit wait here; the broker never sends more than the offers, so this
    // only bites if a broker misbehaves.
    let permits = Arc::new(Semaphore::new(cfg.max_concurrency as usize));
    // The runner's JavaScript thread: one per runner process, as in n8nio/runners.
    let js = Arc::new(super::cpu::JsThread::start(&cfg.name, cfg.cpu));
    let mut warned = false;
    loop {
        let (host, port) = &cfg.broker;
        match TcpStream::connect((host.as_str(), *port)).await {
            Ok(stream) => {
                warned = false;
                eprintln!(
                    "n8ncap sim runner {}: broker {host}:{port}, {} tasks at most",
                    cfg.name, cfg.max_concurrency
                );
                session(&cfg, stream, permits.clone(), js.clone()).await;
                eprintln!(
                    "n8ncap sim runner {}: the task broker at {host}:{port} closed the \
                     connection; reconnecting",
                    cfg.name
                );
            }
            Err(e) if !warned => {
                eprintln!(
                    "n8ncap sim runner {}: cannot reach the task broker at {host}:{port} \
                     (N8N_RUNNERS_TASK_BROKER_URI): {e}; retrying",
                    cfg.name
                );
                warned = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn session(
    cfg: &RunnerConfig,
    stream: TcpStream,
    permits: Arc<Semaphore>,
    js: Arc<super::cpu::JsThread>,
) {
    let (mut reader, tx) = wire::split::<BrokerMsg>(stream);
    let _ = tx.send(BrokerMsg::Hello {
        runner: cfg.name.clone(),
        max_concurrency: cfg.max_concurrency,
        token: cfg.auth_token.clone(),
    });
    for _ in 0..cfg.max_concurrency {
        let _ = tx.send(BrokerMsg::Offer);
    }
    let mut tasks = JoinSet::new();
    while let Ok(Some(msg)) = reader.next::<BrokerMsg>().await {
        match msg {
            BrokerMsg::Task {
                id,
                sleep_ms,
                alloc_mb,
            } => {
                while tasks.try_join_next().is_some() {}
                let tx = tx.clone();
                let permits = permits.clone();
                let (js, cpu) = (js.clone(), cfg.cpu);
                tasks.spawn(async move {
                    let Ok(_permit) = permits.acquire_owned().await else {
                        return;
                    };
                    js.run(cpu).await;
                    let done = run_task(id, sleep_ms, alloc_mb).await;
                    let _ = tx.send(done);
                    let _ = tx.send(BrokerMsg::Offer);
                });
            }
            BrokerMsg::Rejected { reason } => {
                eprintln!(
                    "n8ncap sim runner {}: the broker refused it: {reason}",
                    cfg.name
                );
                tokio::time::sleep(Duration::from_secs(2)).await;
                return;
            }
            _ => {}
        }
    }
    tasks.abort_all();
}

/// Runs one Code task: allocates and touches `alloc_mb` MiB, sleeps `sleep_ms`.
pub(crate) async fn run_task(id: u64, sleep_ms: u64, alloc_mb: u64) -> BrokerMsg {
    let t0 = Instant::now();
    let bytes = alloc_mb.saturating_mul(MIB);
    // Buffer.alloc(n, 1): allocate and write every byte, so the pages are really resident.
    let buf: Result<Vec<u8>, std::collections::TryReserveError> = if bytes == 0 {
        Ok(Vec::new())
    } else {
        let mut v = Vec::new();
        match v.try_reserve_exact(bytes as usize) {
            Ok(()) => {
                // Copy whole MiB chunks: memcpy-speed even in a debug build.
                static CHUNK: [u8; MIB as usize] = [1u8; MIB as usize];
                for _ in 0..alloc_mb {
                    v.extend_from_slice(&CHUNK);
                }
                EXTERNAL_BYTES.fetch_add(bytes, Ordering::Relaxed);
                Ok(v)
            }
            Err(e) => Err(e),
        }
    };
    if sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
    }
    let slept_ms = t0.elapsed().as_millis() as u64;
    match buf {
        Ok(v) => {
            let allocated = std::hint::black_box(&v).len() as u64;
            drop(v);
            if allocated > 0 {
                EXTERNAL_BYTES.fetch_sub(allocated, Ordering::Relaxed);
            }
            BrokerMsg::TaskDone {
                id,
                ok: true,
                slept_ms,
                allocated,
                error: None,
            }
        }
        Err(e) => BrokerMsg::TaskDone {
            id,
            ok: false,
            slept_ms,
            allocated: 0,
            error: Some(format!("cannot allocate {alloc_mb} MiB: {e}")),
        },
    }
}
