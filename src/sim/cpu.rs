//! CPU cost per execution, burnt for real on one thread per simulated process — the way a Node
//! process runs its JavaScript on one thread. Executions queue for that thread, so a simulated
//! worker saturates at one core like an n8n worker does, and its throughput is capped at
//! 1 ÷ CPU seconds per execution whatever its slots.
//!
//! When several roles share one process (`sim all`, the in-process stack), each role's
//! `process_cpu_seconds_total` reports its own thread's CPU, so the roles can be told apart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

type Work = (Duration, oneshot::Sender<()>);

/// The simulated JavaScript thread of one process.
#[derive(Clone)]
pub struct JsThread {
    tx: Option<mpsc::Sender<Work>>,
    cpu_ns: Arc<AtomicU64>,
}

/// CPU time this thread has used, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Spins until this thread has used `d` more CPU time (wall time is longer when the cores are
/// shared).
fn burn(d: Duration) {
    let start = thread_cpu_ns();
    let want = d.as_nanos().min(u64::MAX as u128) as u64;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while thread_cpu_ns().saturating_sub(start) < want {
        for _ in 0..1000 {
            x = x.rotate_left(5) ^ x.wrapping_mul(0x100_0000_01b3);
        }
        std::hint::black_box(x);
    }
}

impl JsThread {
    /// A thread for `name`; with `per_execution` zero no thread is started and [`burn`] returns
    /// at once.
    pub fn start(name: &str, per_execution: Duration) -> JsThread {
        let cpu_ns = Arc::new(AtomicU64::new(0));
        if per_execution.is_zero() {
            return JsThread { tx: None, cpu_ns };
        }
        let (tx, rx) = mpsc::channel::<Work>();
        let used = cpu_ns.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{name}-js"))
            .spawn(move || {
                while let Ok((d, done)) = rx.recv() {
                    let t0 = thread_cpu_ns();
                    burn(d);
                    used.fetch_add(thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
                    let _ = done.send(());
                }
            });
        JsThread {
            tx: spawned.ok().map(|_| tx),
            cpu_ns,
        }
    }

    /// Runs `d` of CPU work on the thread, after the work queued before it.
    pub async fn run(&self, d: Duration) {
        let Some(tx) = &self.tx else { return };
        if d.is_zero() {
            return;
        }
        let (done_tx, done_rx) = oneshot::channel();
        if tx.send((d, done_tx)).is_ok() {
            let _ = done_rx.await;
        }
    }

    /// CPU seconds the thread has used.
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn burns_the_cpu_time_asked_for_on_one_thread() {
        let js = JsThread::start("t", Duration::from_millis(20));
        let t0 = std::time::Instant::now();
        // Two executions at once queue for the one thread.
        tokio::join!(
            js.run(Duration::from_millis(20)),
            js.run(Duration::from_millis(20))
        );
        let cpu = js.cpu_seconds();
        assert!((0.039..0.06).contains(&cpu), "{cpu}");
        assert!(t0.elapsed() >= Duration::from_millis(39));
        let none = JsThread::start("z", Duration::ZERO);
        none.run(Duration::from_millis(50)).await;
        assert_eq!(none.cpu_seconds(), 0.0);
    }
}
