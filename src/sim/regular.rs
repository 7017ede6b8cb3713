//! Regular ("single") mode: main runs every execution itself. At most
//! `N8N_CONCURRENCY_PRODUCTION_LIMIT` production executions run at once (the others wait in
//! main's concurrency queue, first come first served); Code nodes run on main's internal runner
//! (`N8N_RUNNERS_MAX_CONCURRENCY` tasks); every execution's JavaScript shares main's one thread.
//! Limits are semaphores really held, as in the queue-mode roles.

use super::config::RegularConfig;
use super::cpu::JsThread;
use super::wire::{BrokerMsg, JobSpec};
use serde_json::json as j;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

pub struct Executor {
    cfg: RegularConfig,
    production: Option<Arc<Semaphore>>,
    runner: Arc<Semaphore>,
}

/// One execution's end, as main answers it.
pub struct Ended {
    pub ok: bool,
    pub duration_s: f64,
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
}

impl Executor {
    pub fn new(cfg: RegularConfig) -> Executor {
        Executor {
            production: cfg
                .production_limit
                .map(|n| Arc::new(Semaphore::new(n as usize))),
            runner: Arc::new(Semaphore::new(cfg.runner_limit as usize)),
            cfg,
        }
    }

    /// Runs one execution: waits for a production slot, then loads it, runs its nodes and
    /// saves it. The duration counts from the start of the execution, as n8n's does.
    pub async fn run(&self, js: &JsThread, spec: JobSpec) -> Ended {
        let _slot = match &self.production {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        let t0 = Instant::now();
        if !self.cfg.overhead.is_zero() {
            tokio::time::sleep(self.cfg.overhead).await;
        }
        js.run(self.cfg.cpu).await;
        let binary = super::worker::load_binary(spec.binary_bytes);
        if spec.wait_ms > 0 {
            tokio::time::sleep(Duration::from_millis(spec.wait_ms)).await;
        }
        let done = if spec.code {
            let _task = self.runner.clone().acquire_owned().await.ok();
            super::runner::run_task(0, spec.sleep_ms, spec.alloc_mb).await
        } else {
            tokio::time::sleep(Duration::from_millis(spec.sleep_ms)).await;
            BrokerMsg::TaskDone {
                id: 0,
                ok: true,
                slept_ms: spec.sleep_ms,
                allocated: 0,
                error: None,
            }
        };
        drop(binary);
        let duration_s = t0.elapsed().as_secs_f64();
        match done {
            BrokerMsg::TaskDone {
                ok: true,
                slept_ms,
                allocated,
                ..
            } => Ended {
                ok: true,
                duration_s,
                result: Some(j!({
                    "ok": true,
                    "slept_ms": slept_ms,
                    "allocated": allocated,
                    "allocErr": null,
                    "code": spec.code,
                    "binary_bytes": spec.binary_bytes,
                })),
                error: None,
            },
            BrokerMsg::TaskDone { error, .. } => Ended {
                ok: false,
                duration_s,
                result: None,
                error,
            },
            _ => Ended {
                ok: false,
                duration_s,
                result: None,
                error: Some("the internal runner answered nothing".into()),
            },
        }
    }
}
