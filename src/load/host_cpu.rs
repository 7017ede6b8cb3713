//! The whole host's CPU over a stage, when the target runs on this machine: every process in
//! /proc read at the stage's start and end, and what each spent placed on what it is — n8n's
//! main, workers, runners and webhook processors (real n8n or the simulator), Postgres, Redis,
//! the load generator (n8ncap itself, k6, wrk…), or another program by its name. The host's
//! bound then comes from all the CPU the work needs, not from the processes a sweep was given
//! metrics of (a real n8n 2.41.1 scaled to 3 workers on 2 cores: the workers' 1.7 cores were
//! n8n's own, not "other work").

use crate::record::stage::HostProcessCpu;
use crate::record::Role;
use crate::util::ProcCpu;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

/// The host's processes at one instant.
pub struct Snapshot {
    at: Instant,
    cpu: HashMap<(u32, u64), f64>,
}

/// Every process now.
pub fn snapshot() -> Snapshot {
    let at = Instant::now();
    let cpu = crate::util::processes()
        .into_iter()
        .map(|p| ((p.pid, p.start), p.cpu_s))
        .collect();
    Snapshot { at, cpu }
}

/// The program words that are a load generator.
const LOAD_TOOLS: [&str; 8] = ["k6", "wrk", "wrk2", "hey", "oha", "vegeta", "ab", "locust"];

/// What a process is: its group's name, n8n's role, and whether it is part of the work.
pub fn classify(p: &ProcCpu, own_pid: u32) -> (String, Option<Role>, bool) {
    if p.pid == own_pid {
        return ("n8ncap (the load)".into(), None, true);
    }
    let comm = p.comm.as_str();
    if comm == "postgres" || comm.starts_with("postgres:") || comm.starts_with("postmaster") {
        return ("postgres".into(), None, true);
    }
    if comm.starts_with("redis-server") || comm.starts_with("valkey-server") {
        return ("redis".into(), None, true);
    }
    let args: Vec<&str> = p.cmdline.split_whitespace().collect();
    let n8n = |role: Role| (format!("n8n {}", role.word()), Some(role), true);
    // The simulator: `n8ncap sim ROLE`, and `sim n8n [worker|webhook]` as n8n's command line.
    if let Some(i) = args.iter().position(|a| *a == "sim") {
        let after = |k: usize| args.get(i + k).copied();
        match (after(1), after(2)) {
            (Some("worker"), _) | (Some("n8n"), Some("worker")) => return n8n(Role::Worker),
            (Some("runner"), _) => return n8n(Role::Runner),
            (Some("n8n"), Some("webhook")) => return n8n(Role::Webhook),
            (Some("main" | "all" | "n8n"), _) => return n8n(Role::Main),
            _ => {}
        }
    }
    if p.cmdline.contains("task-runner") {
        return n8n(Role::Runner);
    }
    let is_n8n = args
        .iter()
        .take(3)
        .any(|a| *a == "n8n" || a.ends_with("/n8n") || a.ends_with("/n8n/bin/n8n"));
    if is_n8n {
        return match args.iter().find(|a| ["worker", "webhook"].contains(*a)) {
            Some(&"worker") => n8n(Role::Worker),
            Some(_) => n8n(Role::Webhook),
            None => n8n(Role::Main),
        };
    }
    if LOAD_TOOLS.contains(&comm) {
        return (comm.to_string(), None, true);
    }
    let name = if p.cmdline.is_empty() {
        "the kernel's threads".to_string()
    } else {
        crate::util::escape_control(comm).into_owned()
    };
    (name, None, false)
}

/// What each group of processes spent between `start` and now, in cores: a process seen at both
/// ends by its difference, one started since by all it used. The work is the deployment behind
/// the target's `port` (see [`deployment`]); where it cannot be told, what n8n, Postgres, Redis
/// and a load tool spent. Groups most busy first; a group that used nothing measurable is left
/// out. Nothing when n8ncap itself serves the port (an in-process simulator reports its roles'
/// CPU itself).
pub fn since(start: &Snapshot, port: u16) -> Vec<HostProcessCpu> {
    let wall = start.at.elapsed().as_secs_f64();
    let own = std::process::id();
    let now = crate::util::processes();
    let sockets = crate::util::tcp_sockets();
    let owners = crate::util::socket_owners();
    let members = match deployment(port, &now, &sockets, &owners) {
        Linked::Ours => return Vec::new(),
        Linked::Members(m) => Some(m),
        Linked::Unknown => None,
    };
    groups(&start.cpu, &now, own, wall, members.as_ref())
}

/// The deployment behind a port, as far as this machine's network namespace shows it.
#[derive(Debug, PartialEq)]
pub enum Linked {
    /// n8ncap's own process serves it.
    Ours,
    /// The processes linked to the one listening on it: through a TCP connection between two of
    /// them over this namespace (the load to main, main and the workers to Redis or main's
    /// queue, the runners to a worker's broker, every process to Postgres' backends), or as a
    /// child of one (an internal runner, Postgres' backends).
    Members(HashSet<u32>),
    /// Nothing here listens on it (a container's port published without a proxy).
    Unknown,
}

pub fn deployment(
    port: u16,
    procs: &[ProcCpu],
    sockets: &[crate::util::TcpSocket],
    owners: &HashMap<u64, u32>,
) -> Linked {
    let owner = |s: &crate::util::TcpSocket| owners.get(&s.inode).copied();
    let seeds: HashSet<u32> = sockets
        .iter()
        .filter(|s| s.listening && s.local_port == port)
        .filter_map(owner)
        .collect();
    if seeds.is_empty() {
        return Linked::Unknown;
    }
    if seeds.contains(&std::process::id()) {
        return Linked::Ours;
    }
    let ends: HashMap<(u16, u16), u32> = sockets
        .iter()
        .filter(|s| s.established)
        .filter_map(|s| Some(((s.local_port, s.remote_port), owner(s)?)))
        .collect();
    let mut linked: HashMap<u32, Vec<u32>> = HashMap::new();
    for ((l, r), a) in &ends {
        if let Some(b) = ends.get(&(*r, *l)).filter(|b| *b != a) {
            linked.entry(*a).or_default().push(*b);
        }
    }
    for p in procs {
        linked.entry(p.ppid).or_default().push(p.pid);
    }
    let mut members = seeds.clone();
    let mut todo: Vec<u32> = seeds.into_iter().collect();
    while let Some(pid) = todo.pop() {
        for next in linked.get(&pid).into_iter().flatten() {
            // pid 1 (an init) and 0 parent everything: never followed to their children.
            if *next > 1 && members.insert(*next) {
                todo.push(*next);
            }
        }
    }
    Linked::Members(members)
}

fn groups(
    start: &HashMap<(u32, u64), f64>,
    now: &[ProcCpu],
    own: u32,
    wall: f64,
    members: Option<&HashSet<u32>>,
) -> Vec<HostProcessCpu> {
    if wall <= 0.0 {
        return Vec::new();
    }
    // Keyed by name and by whether it is the work's: a process named like the target's server
    // but not linked to it is never merged into it.
    let mut by: BTreeMap<(String, bool), HostProcessCpu> = BTreeMap::new();
    for p in now {
        let before = start.get(&(p.pid, p.start)).copied().unwrap_or(0.0);
        let used = p.cpu_s - before;
        // A counter that fell, or moved faster than wall time allows on any machine, is no
        // figure (a pid reused within the start time's tick would be one).
        if !(used.is_finite() && used >= 0.0) || used > wall * 1024.0 {
            continue;
        }
        let (mut group, role, kind) = classify(p, own);
        let stack = match members {
            Some(m) => m.contains(&p.pid),
            None => kind,
        };
        if kind && !stack {
            group.push_str(" (not linked to the target)");
        }
        let g = by.entry((group.clone(), stack)).or_insert(HostProcessCpu {
            group,
            role,
            stack,
            processes: 0,
            cores: 0.0,
        });
        g.processes += 1;
        g.cores += used / wall;
    }
    let linked: HashSet<String> = by.keys().filter(|k| k.1).map(|k| k.0.clone()).collect();
    for ((name, stack), g) in by.iter_mut() {
        if !stack && linked.contains(name) {
            g.group.push_str(" (not linked to the target)");
        }
    }
    let mut out: Vec<HostProcessCpu> = by.into_values().filter(|g| g.cores >= 0.005).collect();
    out.sort_by(|a, b| b.cores.total_cmp(&a.cores));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, comm: &str, cmdline: &str, cpu_s: f64) -> ProcCpu {
        ProcCpu {
            pid,
            ppid: 1,
            start: 1000 + pid as u64,
            comm: comm.into(),
            cmdline: cmdline.into(),
            cpu_s,
        }
    }

    #[test]
    fn n8n_s_processes_real_and_simulated_postgres_redis_and_the_load_are_placed() {
        let cases = [
            (p(2, "node", "node /usr/local/bin/n8n worker --concurrency=5", 0.0), "n8n worker"),
            (p(3, "node", "node /usr/local/bin/n8n", 0.0), "n8n main"),
            (p(4, "node", "node /usr/local/bin/n8n webhook", 0.0), "n8n webhook"),
            (
                p(5, "node", "node --disallow-code-generation-from-strings /usr/local/lib/node_modules/n8n/node_modules/@n8n/task-runner/dist/start.js", 0.0),
                "n8n runner",
            ),
            (p(6, "n8ncap", "/n8ncap sim n8n worker --concurrency=5", 0.0), "n8n worker"),
            (p(7, "n8ncap", "n8ncap sim all --workers 2", 0.0), "n8n main"),
            (p(8, "n8ncap", "n8ncap sim runner", 0.0), "n8n runner"),
            (p(9, "postgres", "postgres: n8n n8n 127.0.0.1(5432) idle", 0.0), "postgres"),
            (p(10, "redis-server", "redis-server *:6379", 0.0), "redis"),
            (p(11, "wrk", "wrk -t2 -c16 http://127.0.0.1:5678/webhook/load", 0.0), "wrk"),
            (p(12, "stress-ng-cpu", "stress-ng --cpu 0", 0.0), "stress-ng-cpu"),
            (p(13, "kworker/0:1", "", 0.0), "the kernel's threads"),
            (p(1, "n8ncap", "n8ncap sweep --url …", 0.0), "n8ncap (the load)"),
        ];
        for (proc_, want) in &cases {
            let (group, _, stack) = classify(proc_, 1);
            assert_eq!(group, *want, "{proc_:?}");
            assert_eq!(
                stack,
                !want.starts_with("stress") && !want.contains("kernel")
            );
        }
    }

    #[test]
    fn a_stage_s_cpu_is_each_process_s_difference_grouped_and_impossible_counters_are_left_out() {
        let start: HashMap<(u32, u64), f64> = [
            ((2, 1002), 10.0),
            ((3, 1003), 10.0),
            ((9, 1009), 5.0),
            ((12, 1012), 50.0),
        ]
        .into_iter()
        .collect();
        let now = [
            p(2, "node", "node /usr/local/bin/n8n worker", 16.0),
            p(3, "node", "node /usr/local/bin/n8n worker", 15.0),
            // Started during the stage: all it used.
            p(4, "node", "node /usr/local/bin/n8n worker", 2.0),
            p(9, "postgres", "postgres: n8n", 6.0),
            // A counter that fell: left out.
            p(12, "stress-ng-cpu", "stress-ng --cpu 0", 40.0),
        ];
        let g = groups(&start, &now, 1, 10.0, None);
        assert_eq!(g[0].group, "n8n worker");
        assert_eq!(g[0].processes, 3);
        assert!((g[0].cores - 1.3).abs() < 1e-9, "{g:?}");
        assert_eq!(g[0].role, Some(Role::Worker));
        assert!((g[1].cores - 0.1).abs() < 1e-9);
        assert_eq!(g.len(), 2, "{g:?}");
        // Linked to the target: only the members are the work, the rest is named as unlinked.
        let members: HashSet<u32> = [2, 9].into_iter().collect();
        let g = groups(&start, &now, 1, 10.0, Some(&members));
        let worker = g.iter().find(|x| x.group == "n8n worker").unwrap();
        assert!(worker.stack && (worker.cores - 0.6).abs() < 1e-9, "{g:?}");
        let unlinked = g
            .iter()
            .find(|x| x.group == "n8n worker (not linked to the target)")
            .unwrap();
        assert!(
            !unlinked.stack && (unlinked.cores - 0.7).abs() < 1e-9,
            "{g:?}"
        );
    }

    #[test]
    fn the_deployment_is_what_connections_and_children_link_to_the_target_s_listener() {
        use crate::util::TcpSocket;
        let sock = |l: u16, r: u16, listening: bool, inode: u64| TcpSocket {
            local_port: l,
            remote_port: r,
            listening,
            established: !listening,
            inode,
        };
        // 10 main listens on 5678 and talks to Redis (20 on 6379); worker 30 talks to Redis and
        // has a runner child 31; the load 40 talks to main; stress 50 and another n8n 60 (its own
        // Redis 70) are not linked.
        let sockets = [
            sock(5678, 0, true, 1),
            sock(5678, 40001, false, 2),
            sock(40001, 5678, false, 3),
            sock(6379, 0, true, 4),
            sock(40002, 6379, false, 5),
            sock(6379, 40002, false, 6),
            sock(40003, 6379, false, 7),
            sock(6379, 40003, false, 8),
            sock(40004, 6380, false, 9),
            sock(6380, 40004, false, 10),
        ];
        let owners: HashMap<u64, u32> = [
            (1, 10),
            (2, 10),
            (3, 40),
            (4, 20),
            (5, 10),
            (6, 20),
            (7, 30),
            (8, 20),
            (9, 60),
            (10, 70),
        ]
        .into_iter()
        .collect();
        let mut procs = vec![
            p(31, "node", "task-runner", 0.0),
            p(50, "stress-ng", "stress-ng", 0.0),
        ];
        procs[0].ppid = 30;
        let Linked::Members(m) = deployment(5678, &procs, &sockets, &owners) else {
            panic!("not linked");
        };
        let mut m: Vec<u32> = m.into_iter().collect();
        m.sort();
        assert_eq!(m, vec![10, 20, 30, 31, 40]);
        assert_eq!(deployment(9999, &procs, &sockets, &owners), Linked::Unknown);
    }

    /// A CPU hog named like the target's server (both `python3`) but not linked to it is not
    /// merged into the work: 1.00 core outside, 0.01 inside (it was 1.01 inside).
    #[test]
    fn a_process_named_like_the_server_but_unlinked_is_not_the_work() {
        let start: HashMap<(u32, u64), f64> =
            [((2, 1002), 0.0), ((3, 1003), 0.0)].into_iter().collect();
        let now = [
            p(2, "python3", "python3 server.py", 0.1),
            p(3, "python3", "python3 -c while True: pass", 10.0),
        ];
        let members: HashSet<u32> = [2].into_iter().collect();
        let g = groups(&start, &now, 1, 10.0, Some(&members));
        let work = g.iter().find(|x| x.stack).unwrap();
        assert_eq!(work.group, "python3");
        assert!((work.cores - 0.01).abs() < 1e-9, "{g:?}");
        let hog = g.iter().find(|x| !x.stack).unwrap();
        assert_eq!(hog.group, "python3 (not linked to the target)");
        assert!((hog.cores - 1.0).abs() < 1e-9, "{g:?}");
    }

    /// A server in a network namespace of its own (a container's) listens where this process's
    /// /proc/net/tcp cannot see it: its namespace's table is read too (as root; the test says
    /// so and passes nothing when it may not create a namespace).
    #[test]
    fn sockets_in_another_network_namespace_are_read() {
        let port = 47_391u16;
        let child = std::process::Command::new("unshare")
            .args(["-n", "python3", "-c"])
            .arg(format!(
                "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',{port}))\ns.listen()\nprint('up',flush=True)\ntime.sleep(30)"
            ))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            assert!(std::env::var_os("CI").is_none(), "unshare is missing");
            return;
        };
        let mut line = String::new();
        use std::io::BufRead;
        let up = std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .is_ok_and(|n| n > 0);
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            // Not root (or no user namespaces): nothing here can be in another namespace.
            assert!(
                std::env::var_os("CI").is_none() || unsafe { libc::geteuid() } != 0,
                "unshare -n failed as root"
            );
            return;
        }
        let found = crate::util::tcp_sockets()
            .iter()
            .any(|s| s.listening && s.local_port == port);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "the listener in its own namespace was not read");
    }
}
