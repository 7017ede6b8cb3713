//! What the simulator knows about its own process, exposed as n8n's Node.js default metrics
//! (`n8n_process_*`, `n8n_nodejs_*`) with real values: RSS and CPU from /proc, event-loop lag
//! from a timer that measures how late the runtime wakes it.
//!
//! Node keeps `Buffer` memory outside the JS heap ("external"); the simulator's Code-work
//! allocations are counted the same way, so the heap gauges stay flat while RSS grows.

use crate::wire::prometheus::TextWriter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bytes currently held by Code-work allocations in this process (Node's "external" memory).
pub static EXTERNAL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Process-wide readings taken from /proc/self.
#[derive(Debug, Default, Clone)]
pub struct ProcStat {
    pub rss_bytes: u64,
    pub virtual_bytes: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub open_fds: u64,
    pub max_fds: u64,
}

const CLOCK_TICKS_PER_S: f64 = 100.0;

pub fn read_proc_stat() -> ProcStat {
    let mut s = ProcStat::default();
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("VmRSS:") {
                s.rss_bytes = parse_kb(v);
            } else if let Some(v) = line.strip_prefix("VmSize:") {
                s.virtual_bytes = parse_kb(v);
            }
        }
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let tick = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
                    / CLOCK_TICKS_PER_S
            };
            s.cpu_user_s = tick(11);
            s.cpu_system_s = tick(12);
        }
    }
    s.open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        for line in limits.lines() {
            if line.starts_with("Max open files") {
                s.max_fds = line
                    .split_whitespace()
                    .nth(3)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
        }
    }
    s
}

fn parse_kb(v: &str) -> u64 {
    v.split_whitespace()
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Event-loop lag as prom-client reports it: the latest delay and statistics of the delays
/// recorded since the last scrape.
#[derive(Clone, Default)]
pub struct LagMonitor {
    inner: Arc<Mutex<LagState>>,
}

#[derive(Default)]
struct LagState {
    last_s: f64,
    samples: Vec<f64>,
}

const LAG_PERIOD: Duration = Duration::from_millis(10);

impl LagMonitor {
    /// Starts the sampling timer as one of `tasks`.
    pub fn start(tasks: &mut tokio::task::JoinSet<()>) -> Self {
        let mon = LagMonitor::default();
        let inner = mon.inner.clone();
        tasks.spawn(async move {
            loop {
                let t0 = Instant::now();
                tokio::time::sleep(LAG_PERIOD).await;
                let lag = t0.elapsed().saturating_sub(LAG_PERIOD).as_secs_f64();
                if let Ok(mut st) = inner.lock() {
                    st.last_s = lag;
                    if st.samples.len() < 100_000 {
                        st.samples.push(lag);
                    }
                }
            }
        });
        mon
    }

    fn take(&self) -> (f64, Vec<f64>) {
        match self.inner.lock() {
            Ok(mut st) => (st.last_s, std::mem::take(&mut st.samples)),
            Err(_) => (0.0, Vec::new()),
        }
    }
}

/// Real n8n's heap against its RSS (`nodejs_heap_size_total_bytes` and `…_used_bytes` over
/// `process_resident_memory_bytes`, main and worker captures under load: 0.49–0.60 and
/// 0.26–0.47).
const HEAP_TOTAL_OF_RSS: f64 = 0.55;
const HEAP_USED_OF_RSS: f64 = 0.45;

/// Emits the process and Node.js families every n8n instance shows, with this process's values.
/// `own_cpu_s` replaces the process's CPU when several roles share the process.
pub fn write_default_metrics(
    e: &mut TextWriter,
    lag: &LagMonitor,
    started: SystemTime,
    own_cpu_s: Option<f64>,
) {
    let mut p = read_proc_stat();
    if let Some(cpu) = own_cpu_s {
        p.cpu_user_s = cpu;
        p.cpu_system_s = 0.0;
    }
    let external = EXTERNAL_BYTES.load(Ordering::Relaxed);
    let start_s = started
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Memory held apart from Code-work buffers plays the JS heap, in real n8n's proportions.
    let own = p.rss_bytes.saturating_sub(external) as f64;
    let (heap_total, heap_used) = (own * HEAP_TOTAL_OF_RSS, own * HEAP_USED_OF_RSS);
    let process: [(&str, &str, &str, f64); 9] = [
        (
            "process_cpu_user_seconds_total",
            "counter",
            "Total user CPU time spent in seconds.",
            p.cpu_user_s,
        ),
        (
            "process_cpu_system_seconds_total",
            "counter",
            "Total system CPU time spent in seconds.",
            p.cpu_system_s,
        ),
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            p.cpu_user_s + p.cpu_system_s,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            start_s as f64,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            p.rss_bytes as f64,
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            p.virtual_bytes as f64,
        ),
        (
            "process_heap_bytes",
            "gauge",
            "Process heap size in bytes.",
            heap_total,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            p.open_fds as f64,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            p.max_fds as f64,
        ),
    ];
    for (name, kind, help, v) in process {
        e.single(name, kind, help, v);
    }
    write_event_loop(e, lag);
    for (name, help, v) in [
        (
            "nodejs_heap_size_total_bytes",
            "Process heap size from Node.js in bytes.",
            heap_total,
        ),
        (
            "nodejs_heap_size_used_bytes",
            "Process heap size used from Node.js in bytes.",
            heap_used,
        ),
        (
            "nodejs_external_memory_bytes",
            "Node.js external memory size in bytes.",
            external as f64,
        ),
    ] {
        e.single(name, "gauge", help, v);
    }
}

/// Node's event-loop lag families (prom-client's), from the lag monitor's samples since the
/// last scrape.
fn write_event_loop(e: &mut TextWriter, lag: &LagMonitor) {
    let (last, mut samples) = lag.take();
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    let pct = |q: f64| {
        if n == 0 {
            0.0
        } else {
            samples[((q * (n - 1) as f64).round() as usize).min(n - 1)]
        }
    };
    let mean = if n == 0 {
        0.0
    } else {
        samples.iter().sum::<f64>() / n as f64
    };
    let stddev = if n < 2 {
        0.0
    } else {
        (samples.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
    };
    e.single(
        "nodejs_eventloop_lag_seconds",
        "gauge",
        "Lag of event loop in seconds.",
        last,
    );
    for (name, help, v) in [
        ("min", "The minimum recorded event loop delay.", pct(0.0)),
        ("max", "The maximum recorded event loop delay.", pct(1.0)),
        ("mean", "The mean of the recorded event loop delays.", mean),
        (
            "stddev",
            "The standard deviation of the recorded event loop delays.",
            stddev,
        ),
        (
            "p50",
            "The 50th percentile of the recorded event loop delays.",
            pct(0.5),
        ),
        (
            "p90",
            "The 90th percentile of the recorded event loop delays.",
            pct(0.9),
        ),
        (
            "p99",
            "The 99th percentile of the recorded event loop delays.",
            pct(0.99),
        ),
    ] {
        e.single(
            &format!("nodejs_eventloop_lag_{name}_seconds"),
            "gauge",
            help,
            v,
        );
    }
}
