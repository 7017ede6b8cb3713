//! What the hostile suites share: running n8ncap with no standard input, reading a refusal,
//! scratch files, and the fake servers that answer one canned reply.

use super::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run n8ncap")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Exit 2, no panic, and a message containing every one of `names`.
pub fn refused(o: &Output, names: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in names {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

pub fn dir(name: &str) -> PathBuf {
    let d = crate::common::scratch().join(format!("n8ncap-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn write(d: &Path, name: &str, text: &str) -> String {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// A server that answers every request on a connection with `answer` (the raw bytes, head and
/// body), then keeps or closes the connection.
pub fn canned_server(answer: Vec<u8>, close: bool) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut seen = Vec::new();
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    // One request per head (the bodies n8ncap sends here are empty or tiny).
                    while let Some(p) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..p]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if seen.len() < p + 4 + len {
                            break;
                        }
                        seen.drain(..p + 4 + len);
                        if s.write_all(&answer).is_err() {
                            return;
                        }
                        if close {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}/webhook/load")
}

pub fn sweep_json(url: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "sweep",
        "--profile",
        "smoke",
        "--url",
        url,
        "--vus",
        "2",
        "--stage-duration",
        "1500ms",
        "--warmup",
        "200ms",
        "--timeout",
        "2s",
        "--no-out",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("summary JSON")
}
