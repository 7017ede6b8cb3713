//! Hardening, round 5 (issue #61), in part: what n8ncap runs and reads beside a deployment is
//! bounded and honest — an arrival file that is a FIFO is refused at once instead of waiting
//! for a writer for ever, a worker count to restore is held to the bounds of --workers, a drain
//! needs a request timeout above 0, and a stop that failed is never reported as a clean
//! scale-down. Each input is built by the test.

use crate::common::hostile::*;
use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs n8ncap; a run that does not end within `limit` is killed and fails the test.
fn run_within(args: &[&str], limit: Duration) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("n8ncap {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_arrival_curve_that_is_a_fifo_is_refused_not_waited_for() {
    let d = dir("fifo");
    let fifo = d.join("arrivals.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = root.join("examples/runs/after");
    let manifest = root.join("fixtures/k8s/rendered/official-keda-autoscaling.yaml");
    let out = run_within(
        &[
            "replay",
            run.to_str().unwrap(),
            "--arrivals",
            fifo.to_str().unwrap(),
            "-f",
            manifest.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    refused(&out, &["arrivals.csv", "not a regular file"]);
}

#[test]
fn a_worker_count_to_restore_is_held_to_the_bounds_of_workers() {
    let out = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--workers",
        "1,2",
        "--scale-cmd",
        "true",
        "--restore-workers",
        "4000000000",
    ]);
    refused(&out, &["--restore-workers"]);
}

#[test]
fn a_drain_needs_a_request_timeout_above_zero() {
    let out = run(&[
        "drain",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--rate",
        "2",
        "--stop-cmd",
        "true",
        "--timeout",
        "0s",
    ]);
    refused(&out, &["--timeout"]);
}

/// A stop command that failed (exit 7) stopped nothing: the drain says so, predicts and advises
/// nothing, and exits 1 — never "a scale-down loses nothing here".
#[test]
fn a_stop_that_failed_is_not_reported_as_a_clean_scale_down() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            .to_vec(),
        false,
    );
    let out = run_within(
        &[
            "drain",
            "--url",
            &url,
            "--rate",
            "4",
            "--duration",
            "4s",
            "--stop-after",
            "2s",
            "--warmup",
            "1s",
            "--stop-cmd",
            "exit 7",
            "--shutdown-timeout",
            "1s",
            "--timeout",
            "5s",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stop"]["exit_code"], 7, "{v}");
    assert!(
        v["stop_failed"].as_str().is_some_and(|s| s.contains('7')),
        "{v}"
    );
    assert!(v["advice"].is_null() && v["predicted"].is_null(), "{v}");
}

/// A password holding `/`, `#`, `?` or a space never reaches an error message, whatever flag
/// carries the URL (the userinfo hidden before the URL is parsed).
#[test]
fn a_password_with_url_punctuation_is_never_printed() {
    let cases: [&[&str]; 4] = [
        &[
            "sweep",
            "--url",
            "http://u:se#cret9@127.0.0.1:9/webhook/load",
            "--vus",
            "1",
        ],
        &[
            "drain",
            "--url",
            "http://u:se?cret9@127.0.0.1:9/webhook/load",
            "--rate",
            "1",
            "--stop-cmd",
            "true",
        ],
        &[
            "sweep",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--metrics",
            "main=http://a:se cret9@127.0.0.1:1/metrics",
            "--vus",
            "1",
        ],
        &[
            "sweep",
            "--url",
            "http://127.0.0.1:9/webhook/load",
            "--redis",
            "redis://:se/cret9@127.0.0.1:1:2",
            "--vus",
            "1",
        ],
    ];
    for args in cases {
        let out = run(args);
        let text = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(!text.contains("cret9"), "{args:?}: {text}");
    }
}
