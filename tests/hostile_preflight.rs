//! The pre-flight against a target that redirects: a 3xx stops the run like a 404, naming the
//! status and where it leads (credentials in the Location redacted), before any load is sent.

use crate::common::*;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A server answering every request with `answer`, counting requests.
fn redirecting(answer: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut seen = Vec::new();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(p) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..p + 4);
                        count.fetch_add(1, Ordering::SeqCst);
                        if s.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}/webhook/load"), seen)
}

#[test]
fn a_redirect_stops_the_run_before_any_load_naming_status_and_location() {
    for (answer, status, shown) in [
        (
            "HTTP/1.1 301 Moved Permanently\r\nLocation: http://other.invalid/webhook/load\r\nContent-Length: 0\r\n\r\n",
            "301",
            "http://other.invalid/webhook/load",
        ),
        (
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: https://user:hunter2@elsewhere.invalid/x\r\nContent-Length: 0\r\n\r\n",
            "307",
            "elsewhere.invalid/x",
        ),
        (
            "HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n",
            "302",
            "no Location given",
        ),
    ] {
        let (url, seen) = redirecting(answer);
        let out = Command::new(bin())
            .args(["sweep", "--url", &url, "--vus", "1", "--stage-duration", "3s"])
            .args(["--no-out"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("HTTP {status}")), "{err}");
        assert!(err.contains(shown), "{shown:?} not in {err}");
        assert!(!err.contains("hunter2"), "{err}");
        assert_eq!(seen.load(Ordering::SeqCst), 1, "one request, no load");
    }
}
