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

/// One process of this machine as /proc shows it: its id and start time (ticks since boot,
/// together a process's identity), its name, its command line (arguments joined by spaces, cut
/// to 512 bytes) and the CPU seconds it has used (user + system).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcCpu {
    pub pid: u32,
    pub ppid: u32,
    pub start: u64,
    pub comm: String,
    pub cmdline: String,
    pub cpu_s: f64,
}

/// Every process of this machine readable in /proc (none where /proc is absent); a process
/// that ends while it is read is left out, a figure that cannot be true too.
pub fn processes() -> Vec<ProcCpu> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(p) = parse_stat(pid, &stat) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| {
                let b = &b[..b.len().min(512)];
                String::from_utf8_lossy(b)
                    .split('\0')
                    .filter(|a| !a.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        out.push(ProcCpu { cmdline, ..p });
    }
    out
}

/// A process's `/proc/PID/stat` line: its name (between the first `(` and the last `)`), its
/// CPU (utime + stime, USER_HZ 100) and start time.
pub fn parse_stat(pid: u32, stat: &str) -> Option<ProcCpu> {
    let open = stat.find('(')?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.get(open + 1..)?.to_string();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let cpu_s = (num(11)? + num(12)?) as f64 / 100.0;
    Some(ProcCpu {
        pid,
        ppid: num(1)? as u32,
        start: num(19)?,
        comm,
        cmdline: String::new(),
        cpu_s,
    })
}

/// A TCP socket of this machine's network namespace (`/proc/net/tcp`, `tcp6`): its local and
/// remote ports, whether it listens, and its inode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpSocket {
    pub local_port: u16,
    pub remote_port: u16,
    pub listening: bool,
    pub established: bool,
    pub inode: u64,
}

/// Every TCP socket /proc lists (none where it is absent).
pub fn tcp_sockets() -> Vec<TcpSocket> {
    let mut seen_inodes = std::collections::HashSet::new();
    let mut out = Vec::new();
    // Every network namespace a readable process is in (containers have their own: a target on
    // a Docker-published port is reached through docker-proxy here and main's socket in its
    // container's namespace), each table read once; this process's own first.
    let mut tables: Vec<String> = vec!["/proc/self/net".into()];
    let mut namespaces = std::collections::HashSet::new();
    if let Ok(me) = std::fs::read_link("/proc/self/ns/net") {
        namespaces.insert(me);
    }
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            if let Ok(ns) = std::fs::read_link(format!("/proc/{pid}/ns/net")) {
                if namespaces.insert(ns) {
                    tables.push(format!("/proc/{pid}/net"));
                }
            }
        }
    }
    for t in tables {
        for f in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("{t}/{f}")) else {
                continue;
            };
            for s in text.lines().skip(1).filter_map(parse_tcp_line) {
                if seen_inodes.insert(s.inode) {
                    out.push(s);
                }
            }
        }
    }
    out
}

/// One line of `/proc/net/tcp`: `sl local rem st … inode`, addresses as hex `IP:PORT`.
pub fn parse_tcp_line(line: &str) -> Option<TcpSocket> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = |a: &str| u16::from_str_radix(a.rsplit_once(':')?.1, 16).ok();
    let state = u8::from_str_radix(f.get(3)?, 16).ok()?;
    Some(TcpSocket {
        local_port: port(f.get(1)?)?,
        remote_port: port(f.get(2)?)?,
        listening: state == 0x0A,
        established: state == 0x01,
        inode: f.get(9)?.parse().ok()?,
    })
}

/// Which process holds each socket inode (from `/proc/PID/fd`; only the processes this user
/// may read).
pub fn socket_owners() -> std::collections::HashMap<u64, u32> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            if let Some(inode) = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.insert(inode, pid);
            }
        }
    }
    out
}
