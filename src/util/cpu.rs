//! CPU seconds of this process and of the host, and the cores of this machine.

/// CPU seconds (user + system) this process has used, from /proc/self/stat (0 where absent).
pub fn own_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// CPU seconds every core of this machine spent busy (all but idle and I/O wait) since boot,
/// from the first line of /proc/stat (USER_HZ = 100, as for [`own_cpu_seconds`]); None where
/// the file is absent or unreadable.
pub fn host_busy_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    if ticks.len() < 5 || ticks.iter().any(|t| !t.is_finite() || *t < 0.0) {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is inside user already).
    let busy: f64 = ticks.iter().take(8).sum::<f64>() - ticks[3] - ticks[4];
    Some(busy.max(0.0) / 100.0)
}

/// Cores this process may run on (1 when unknown).
pub fn cores() -> f64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}
