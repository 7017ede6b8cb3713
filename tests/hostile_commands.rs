//! Hardening, round 5 (issue #61), item 1 and 2: the operator's commands n8ncap runs
//! (`--scale-cmd`, drain's `--stop-cmd`) are contained — their whole process group ended on an
//! interrupt before the return runs, a background child holding their output does not hold the
//! step, their output is read with only its end kept — and a Redis that takes the connection
//! and never answers ends the wait. Each input is built by the test; each test failed on the
//! code before.

use crate::common::hostile::*;
use crate::common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `sweep --workers COUNTS --scale-cmd CMD --restore-workers 1 --out OUT` at `url`, and `extra`.
fn scale_sweep(url: &str, counts: &str, cmd: &str, out: &Path, extra: &[&str]) -> Child {
    let out = out.display().to_string();
    let mut args = vec![
        "sweep",
        "--url",
        url,
        "--workers",
        counts,
        "--scale-cmd",
        cmd,
        "--restore-workers",
        "1",
        "--out",
        &out,
    ];
    args.extend(extra);
    spawn(&args)
}

/// Waits (bounded) until `file` holds a whole line.
fn written(file: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(file) {
            if t.ends_with('\n') {
                return t;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{file:?} never written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) of the test's own child, by its pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Whether `pid` runs (a zombie runs nothing).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// Waits (bounded) until `pid` has ended.
fn ended(pid: i32) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// Ctrl-C during a scale command: its subshell (which would set the count it was given a few
/// seconds later) is ended with it, before the return to 1 worker runs — the deployment ends at
/// 1, as n8ncap says (before: only `sh` was killed, and the subshell set 2 after the return).
#[test]
fn an_interrupted_scale_command_ends_its_children_before_the_return() {
    let d = dir("scale-interrupt");
    let counts = d.join("counts");
    let child_pid = d.join("child");
    let script = write(
        &d,
        "scale.sh",
        &format!(
            "if [ \"$1\" = 1 ]; then echo 1 >> {c}; exit 0; fi\n\
             sh -c 'echo $$ > {p}; sleep 3; echo '$1' >> {c}' &\n\
             sleep 600\n",
            c = counts.display(),
            p = child_pid.display()
        ),
    );
    let out_dir = d.join("out");
    let n8n = scale_sweep(
        "http://127.0.0.1:9/webhook/load",
        "2,3",
        &format!("sh {script} {{workers}}"),
        &out_dir,
        &[],
    );
    let pid: i32 = written(&child_pid).trim().parse().unwrap();
    signal(&n8n, libc::SIGINT);
    let out = output_within(n8n, Duration::from_secs(120), "interrupted scale sweep");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        ended(pid),
        "the scale command's subshell outlived the interrupt"
    );
    assert_eq!(std::fs::read_to_string(&counts).unwrap(), "1\n");
    let book: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("scale.json")).unwrap()).unwrap();
    assert_eq!(book["ended"], "interrupted", "{book}");
    let steps = book["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{book}");
    assert!(steps[0]["failure"]
        .as_str()
        .is_some_and(|f| f.contains("interrupted")));
    assert_eq!(
        (steps[1]["workers"].as_u64(), steps[1]["restore"].as_bool()),
        (Some(1), Some(true))
    );
}

/// scale.json read while the sweep runs (or left by a kill) never says it completed.
#[test]
fn a_scale_sweep_still_running_is_not_saved_as_completed() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec(),
        false,
    );
    let d = dir("scale-running");
    let out_dir = d.join("out");
    let n8n = scale_sweep(&url, "1,2", "true {workers}", &out_dir, &[]);
    let book = out_dir.join("scale.json");
    let start = Instant::now();
    let text = loop {
        if let Ok(t) = std::fs::read(&book) {
            break t;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no scale.json");
        std::thread::sleep(Duration::from_millis(50));
    };
    signal(&n8n, libc::SIGKILL);
    let _ = output_within(n8n, Duration::from_secs(30), "killed scale sweep");
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert!(
        v["ended"]
            .as_str()
            .is_some_and(|e| e.starts_with("running")),
        "{v}"
    );
}

fn drain_with(url: &str, stop_cmd: &str, duration: &str, out: Option<&Path>) -> Child {
    let mut args = vec![
        "drain",
        "--url",
        url,
        "--rate",
        "4",
        "--duration",
        duration,
        "--stop-after",
        "2s",
        "--warmup",
        "1s",
        "--stop-cmd",
        stop_cmd,
        "--shutdown-timeout",
        "1s",
        "--timeout",
        "5s",
        "--json",
    ];
    let shown;
    if let Some(o) = out {
        shown = o.display().to_string();
        args.extend(["--out", &shown]);
    }
    spawn(&args)
}

fn ok_server() -> String {
    canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec(),
        false,
    )
}

/// A stop command that leaves a daemon behind holding its output is done when it returns
/// (before: the drain waited for the daemon, up to the 30-minute deadline, then recorded a
/// successful command as failed).
#[test]
fn a_stop_command_leaving_a_daemon_is_done_when_it_returns() {
    let url = ok_server();
    let d = dir("stop-daemon");
    let pidfile = d.join("daemon");
    let cmd = format!("sleep 600 & echo $! > {}; echo stopped", pidfile.display());
    let out = output_within(
        drain_with(&url, &cmd, "5s", None),
        Duration::from_secs(120),
        "drain with a daemon",
    );
    let pid: i32 = written(&pidfile).trim().parse().unwrap();
    // SAFETY: kill(2) of the test's own daemon, by its pid.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stop"]["exit_code"], 0, "{v}");
    assert!(v["stop_failed"].is_null(), "{v}");
}

/// Ctrl-C while a stop command hangs ends the command's group and the drain at once (before:
/// ignored until the 30-minute deadline).
#[test]
fn a_hanging_stop_command_yields_to_an_interrupt() {
    let url = ok_server();
    let d = dir("stop-hangs");
    let pidfile = d.join("pid");
    let cmd = format!("sleep 600 & echo $! > {}; wait", pidfile.display());
    let n8n = drain_with(&url, &cmd, "6s", None);
    let pid: i32 = written(&pidfile).trim().parse().unwrap();
    signal(&n8n, libc::SIGINT);
    let out = output_within(
        n8n,
        Duration::from_secs(60),
        "drain interrupted in its stop",
    );
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        ended(pid),
        "the stop command's child outlived the interrupt"
    );
}

/// 300 MB of output from a stop command: n8ncap's peak memory stays far below it, and the
/// record keeps the end and counts the rest (before: the output was held whole, 1.38 GB for
/// 700 MB).
#[test]
fn a_command_output_of_any_size_is_read_in_bounded_memory() {
    let url = ok_server();
    let d = dir("stop-output");
    let out_dir = d.join("out");
    let cmd = "head -c 300000000 /dev/zero | tr '\\0' a; echo; echo THE END";
    let n8n = drain_with(&url, cmd, "8s", Some(&out_dir));
    let status = format!("/proc/{}/status", n8n.id());
    let mut peak_kb = 0u64;
    let start = Instant::now();
    let mut n8n = n8n;
    while n8n.try_wait().unwrap().is_none() {
        if let Ok(s) = std::fs::read_to_string(&status) {
            if let Some(v) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                peak_kb = peak_kb.max(v);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "drain never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = n8n.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(peak_kb > 0 && peak_kb < 150_000, "peak {peak_kb} kB");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("drain.json")).unwrap()).unwrap();
    let detail = v["stop"]["detail"].as_str().unwrap();
    assert!(
        detail.len() < 2100 && detail.ends_with("THE END"),
        "{}",
        detail.len()
    );
    let dropped: u64 = detail
        .trim_start_matches('[')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(dropped > 299_000_000, "{dropped}");
}

/// A "Redis" that takes the connection and never answers: the join wait ends (each exchange
/// has a deadline, so the wait's own limits are checked) and the sweep goes on to its end
/// (before: it waited for ever).
#[test]
#[ignore = "stack tier (≈ 40 s): a scale sweep waiting out a silent Redis"]
fn a_silent_redis_does_not_hold_the_join_wait() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let d = dir("silent-redis");
    let out_dir = d.join("out");
    let redis = format!("redis://127.0.0.1:{port}");
    let n8n = scale_sweep(
        "http://127.0.0.1:9/webhook/load",
        "1,2",
        "true {workers}",
        &out_dir,
        &["--redis", &redis],
    );
    let out = output_within(n8n, Duration::from_secs(240), "sweep beside a silent Redis");
    let book: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("scale.json")).unwrap()).unwrap();
    let first = &book["steps"][0];
    assert!(first["queue_workers"].is_null(), "{book}");
    assert!(
        first["joined"]
            .as_str()
            .is_some_and(|j| j.contains("not observable")),
        "{book}"
    );
    // The sweep at 1 worker failed (nothing listens at the webhook): exit 1, not a hang.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// A webhook that never answered OK (HTTP 500): the drain refuses before stopping anything
/// (before: exit 0, the failures charged to the stop).
#[test]
fn a_drain_against_a_failing_webhook_is_refused_before_the_stop() {
    let url = canned_server(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec(),
        false,
    );
    let d = dir("drain-500");
    let marker = d.join("stopped");
    let cmd = format!("echo stopped > {}", marker.display());
    let out = output_within(
        drain_with(&url, &cmd, "4s", None),
        Duration::from_secs(60),
        "drain against HTTP 500",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pre-flight") && stderr(&out).contains("500"));
    assert!(!marker.exists(), "the stop ran");
}

/// A webhook that answered the pre-flight and then only failed: the stop is not judged, exit 1
/// (nothing before it was answered OK).
#[test]
fn a_stop_is_not_judged_when_nothing_before_it_succeeded() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/webhook/load", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut answered = 0u32;
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 65536];
            // One request a connection (bodies here are tiny), then close.
            let _ = s.read(&mut buf);
            let head: &[u8] = if answered == 0 {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            } else {
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            };
            answered += 1;
            let _ = s.write_all(head);
        }
    });
    let out = output_within(
        drain_with(&url, "true", "5s", None),
        Duration::from_secs(60),
        "drain against a failing webhook",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["unjudged"]
            .as_str()
            .is_some_and(|u| u.contains("answered OK")),
        "{v}"
    );
    assert!(v["predicted"].is_null() && v["advice"].is_null(), "{v}");
}

/// `--grace`, `--no-restart` and `--worker` are the Docker API stop's: with `--stop-cmd` they
/// are refused, not ignored.
#[test]
fn docker_only_drain_flags_are_refused_with_a_stop_command() {
    for extra in [
        &["--grace", "5s"][..],
        &["--no-restart"],
        &["--worker", "w1"],
    ] {
        let mut args = vec![
            "drain",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--rate",
            "2",
            "--stop-cmd",
            "true",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        refused(&out, &[extra[0]]);
    }
}

/// A drain interrupted after its stop is saved as interrupted (before: as complete).
#[test]
fn an_interrupted_drain_is_saved_as_interrupted() {
    let url = ok_server();
    let d = dir("drain-interrupted");
    let marker = d.join("stopped");
    let out_dir = d.join("out");
    let cmd = format!("echo stopped > {}", marker.display());
    let n8n = drain_with(&url, &cmd, "60s", Some(&out_dir));
    written(&marker);
    signal(&n8n, libc::SIGINT);
    let out = output_within(n8n, Duration::from_secs(60), "interrupted drain");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("drain.json")).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true, "{}", v["verdict"]);
}
