//! n8ncap as a hostile user meets it: absurd flags, malformed files, faulty servers, signals.
//! Every case must end in a clear refusal (exit 2, the field named, no secret quoted) or in
//! honest measurements — never a panic, a wrong target or an invented figure.

use crate::common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run n8ncap")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Exit 2, no panic, and a message containing every one of `names`.
fn refused(o: &Output, names: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in names {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

fn dir(name: &str) -> PathBuf {
    let d = crate::common::scratch().join(format!("n8ncap-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, text: &str) -> String {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// A server that answers every request on a connection with `answer` (the raw bytes, head and
/// body), then keeps or closes the connection.
fn canned_server(answer: Vec<u8>, close: bool) -> String {
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

fn sweep_json(url: &str, extra: &[&str]) -> serde_json::Value {
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

#[test]
fn invalid_urls_are_refused_before_any_request() {
    let target = "http://127.0.0.1:99999/x";
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let good = format!("http://{}/x", listener.local_addr().unwrap());
    let target_hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hits = target_hits.clone();
    std::thread::spawn(move || {
        for _ in listener.incoming().flatten() {
            hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    for args in [
        vec!["sweep", "--url", target, "--no-out"],
        vec![
            "sweep",
            "--url",
            &good,
            "--metrics",
            "main=http://127.0.0.1:99999/metrics",
            "--no-out",
        ],
    ] {
        let out = run(&args);
        refused(&out, &["99999", "1–65535"]);
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    // Before any request: the valid target never saw a connection (not even the pre-flight's).
    assert_eq!(
        target_hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a request reached the target"
    );
    for bad in ["", "not a url", "http://", "http://h:0/x"] {
        let out = run(&[
            "sweep",
            "--url",
            "http://127.0.0.1:1/x",
            "--metrics",
            bad,
            "--no-out",
        ]);
        refused(&out, &["--metrics"]);
    }
    // Credentials are refused, and never shown.
    let out = run(&[
        "sweep",
        "--url",
        "http://admin:s3cr3t@127.0.0.1:1/x",
        "--no-out",
    ]);
    refused(&out, &["***@127.0.0.1"]);
    assert!(!stderr(&out).contains("s3cr3t"));
}

#[test]
fn absurd_flags_and_values_exit_2_naming_the_field() {
    let url = "http://127.0.0.1:1/x";
    for (args, names) in [
        (vec!["--timeout", "0"], vec!["timeout"]),
        (vec!["--stage-duration", "1e300"], vec!["1e300", "30 days"]),
        (vec!["--stage-duration", "inf"], vec!["inf"]),
        (vec!["--stage-duration", "NaN"], vec!["NaN"]),
        (vec!["--warmup", "18446744073709551616s"], vec!["30 days"]),
        (vec!["--vus=-1"], vec!["-1"]),
        (vec!["--vus", "2000000"], vec!["vus"]),
        (vec!["--rates=-5"], vec!["rate"]),
        (vec!["--rates", "0"], vec!["rate"]),
        (vec!["--rates", "NaN"], vec!["rate"]),
        (
            vec!["--ca-cert", "/nonexistent/ca.pem"],
            vec!["/nonexistent/ca.pem"],
        ),
        (
            vec!["--profile", "/dev/zero"],
            vec!["/dev/zero", "regular file"],
        ),
        (
            vec!["--worker-concurrency", "4294967295"],
            vec!["--worker-concurrency"],
        ),
    ] {
        let mut all = vec!["sweep", "--url", url, "--no-out"];
        all.extend_from_slice(&args);
        let out = run(&all);
        refused(&out, &names);
    }
    refused(
        &run(&["sim", "all", "--workers", "4294967295"]),
        &["--workers"],
    );
    let out = Command::new(bin())
        .args(["sim", "runner"])
        .env("N8N_RUNNERS_TASK_BROKER_URI", "http://127.0.0.1:1")
        .env("N8N_RUNNERS_MAX_CONCURRENCY", "1e12")
        .output()
        .unwrap();
    refused(&out, &["N8N_RUNNERS_MAX_CONCURRENCY"]);
    let out = Command::new(bin())
        .args(["sim", "main", "--port", "1"])
        .env("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1e300")
        .output()
        .unwrap();
    refused(&out, &["N8N_METRICS_QUEUE_METRICS_INTERVAL"]);
}

#[test]
fn open_profiles_with_impossible_rates_are_refused() {
    let d = dir("rates");
    for (stage, field) in [
        ("{rate: -1}", "rate"),
        ("{rate: .nan}", "rate"),
        ("{rate: .inf}", "rate"),
        ("{rate: 5, ramp_to: -3}", "ramp_to"),
        ("{rate: 5, ramp_to: .nan}", "ramp_to"),
        ("{rate: 5, max_vus: 0}", "max_vus"),
    ] {
        let p = write(
            &d,
            "p.yaml",
            &format!("model: open\nrequest: {{url: 'http://127.0.0.1:1/x'}}\nstages: [{stage}]\n"),
        );
        refused(&run(&["sweep", "--profile", &p, "--no-out"]), &[field]);
    }
    let p = write(
        &d,
        "t.yaml",
        "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{vus: 1}]\n\
         thresholds: {http_req_failed: ['rate<NaN']}\n",
    );
    refused(
        &run(&["sweep", "--profile", &p, "--no-out"]),
        &["http_req_failed", "finite"],
    );
}

#[test]
fn the_open_scheduler_stops_at_its_stage_end() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("sched");
    let p = write(
        &d,
        "p.yaml",
        &format!(
            "model: open\nrequest: {{url: '{url}', timeout: 2s}}\nwarmup: 0s\nstages:\n  \
             - {{rate: 100000000, duration: 1s, max_vus: 50}}\n  - {{rate: 1, duration: 3s}}\n"
        ),
    );
    let out = run(&["sweep", "--profile", &p, "--no-out", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let second = &s["stages"][1];
    // 1/s for 3 s: 3 arrivals (4 at most with the one at t = 0 and rounding), none from the
    // first stage's backlog.
    let n = second["requests"].as_u64().unwrap();
    assert!(n <= 4, "second stage counted {n} requests");
    assert!(s["stages"][0]["requests"].as_u64().unwrap() > 0);
    // What the generator could not start is counted as dropped, never as an offered load: at
    // most a few hundred thousand of the 10^8 due were started.
    let dropped = s["stages"][0]["dropped_iterations"].as_u64().unwrap();
    assert!(dropped > 90_000_000, "dropped {dropped}");
    let ids: Vec<&str> = s["diagnosis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(ids.contains(&"load-generator-saturated"), "{ids:?}");
}

#[test]
fn malformed_answers_are_io_errors_and_the_virtual_user_lives_on() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n",
        b"garbage that is not HTTP at all\r\n\r\n",
    ] {
        let url = canned_server(answer.to_vec(), true);
        let s = sweep_json(&url, &[]);
        let st = &s["stages"][0];
        let io = st["errors"]["io"].as_u64().unwrap_or(0);
        let requests = st["requests"].as_u64().unwrap();
        // Two virtual users, 1.3 s: a dead user would stop at one request.
        assert!(
            requests > 4,
            "{}: {requests} requests",
            String::from_utf8_lossy(answer)
        );
        assert_eq!(io, requests, "{}: {st}", String::from_utf8_lossy(answer));
        assert_eq!(st["valid"], false);
        assert!(st["latency"].is_null() || st["valid"] == false);
    }
    // Oversized headers: 200 headers of 1 KB.
    let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..200 {
        big.extend_from_slice(format!("X-H{i}: {}\r\n", "a".repeat(1000)).as_bytes());
    }
    big.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    let s = sweep_json(&canned_server(big, true), &[]);
    let st = &s["stages"][0];
    assert_eq!(st["errors"]["io"], st["requests"]);
}

#[test]
fn large_bodies_are_read_and_cut_at_1_mib_for_checks() {
    let body = format!("{{\"ok\":true,\"pad\":\"{}\"}}", "x".repeat(3 << 20));
    let mut answer =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    answer.extend_from_slice(body.as_bytes());
    let s = sweep_json(&canned_server(answer, false), &[]);
    let st = &s["stages"][0];
    let requests = st["requests"].as_u64().unwrap();
    assert!(requests > 0);
    assert_eq!(st["bodies_cut"].as_u64(), Some(requests));
    assert!(st["bytes_received"].as_u64().unwrap() >= requests * (3 << 20));
    // The JSON check cannot parse a cut body: the stage says why it is invalid.
    assert_eq!(st["valid"], false);
    let reasons = st["invalid_reasons"].to_string();
    assert!(reasons.contains("1 MiB"), "{reasons}");
}

#[test]
fn k6_inputs_with_impossible_values_name_the_field() {
    let d = dir("k6");
    let summary = |metrics: &str| {
        format!("{{\"metrics\":{{\"http_reqs\":{{\"count\":10,\"rate\":2}},{metrics}}}}}")
    };
    for (metrics, field) in [
        (
            r#""http_req_duration":{"med":-5,"avg":1}"#,
            "http_req_duration.med",
        ),
        (
            r#""http_req_failed":{"value":1.5}"#,
            "http_req_failed.value",
        ),
        (
            r#""http_req_duration":{"med":"fast"}"#,
            "http_req_duration.med",
        ),
        (r#""vus_max":{"value":1e12}"#, "vus_max.value"),
        (r#""checks":{"value":-0.1}"#, "checks.value"),
    ] {
        let f = write(&d, "s.json", &summary(metrics));
        refused(&run(&["diagnose", "--k6-summary", &f]), &[field]);
    }
    let f = write(
        &d,
        "s.json",
        r#"{"metrics":{"http_reqs":{"count":-3,"rate":2}}}"#,
    );
    refused(
        &run(&["diagnose", "--k6-summary", &f]),
        &["http_reqs.count"],
    );
    let point = |metric: &str, value: &str| {
        format!(
            "{{\"type\":\"Point\",\"metric\":\"{metric}\",\"data\":{{\"time\":\"2026-11-30T07:38:23.4Z\",\"value\":{value},\"tags\":{{}}}}}}\n"
        )
    };
    for (lines, field) in [
        (point("vus", "1e12"), "data.value"),
        (point("http_req_duration", "-4"), "data.value"),
        (point("http_req_duration", "\"slow\""), "data.value"),
    ] {
        let f = write(&d, "o.json", &lines);
        refused(&run(&["diagnose", "--k6-json", &f]), &[field, ":1"]);
    }
    refused(
        &run(&["diagnose", "--k6-json", "/dev/zero"]),
        &["regular file"],
    );
}

#[test]
fn a_k6_file_with_many_levels_is_grouped_in_one_pass() {
    // 5 000 requests, each at its own VU count for 1 ms: the old grouping compared each request
    // with every group so far (quadratic). No count is held long enough to be a level: the
    // whole run is one ramp window, judged as no level.
    let d = dir("k6many");
    let mut text = String::new();
    for i in 0..5_000u32 {
        let t = format!(
            "2026-11-30T07:{:02}:{:02}.{:06}Z",
            i / 60_000 % 60,
            i / 1000 % 60,
            i % 1000 * 1000
        );
        text.push_str(&format!(
            "{{\"type\":\"Point\",\"metric\":\"vus\",\"data\":{{\"time\":\"{t}\",\"value\":{},\"tags\":{{}}}}}}\n",
            i + 1
        ));
        text.push_str(&format!(
            "{{\"type\":\"Point\",\"metric\":\"http_req_duration\",\"data\":{{\"time\":\"{t}\",\"value\":5,\"tags\":{{}}}}}}\n"
        ));
    }
    let f = write(&d, "o.json", &text);
    let v = run_json(&["diagnose", "--k6-json", &f, "--json"]);
    assert_eq!(v["diagnosis"]["levels"].as_array().map(Vec::len), Some(0));
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1);
    assert_eq!(stages[0]["ramp"]["from"], 1);
    assert_eq!(stages[0]["ramp"]["to"], 5000);
    assert_eq!(stages[0]["requests"], 5000);
}

#[test]
fn saved_summaries_with_impossible_values_name_the_field() {
    let valid: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("fixtures/hostile/summary-valid.json").unwrap(),
    )
    .unwrap();
    let d = dir("summary");
    // The fixture itself is read.
    let f = write(&d, "summary.json", &valid.to_string());
    assert_eq!(run(&["diagnose", &f]).status.code(), Some(0));
    for (path, value, field) in [
        (
            "/stages/0/throughput_rps",
            serde_json::json!(-1.0),
            "stages[0].throughput_rps",
        ),
        (
            "/stages/1/error_rate",
            serde_json::json!(1.5),
            "stages[1].error_rate",
        ),
        (
            "/stages/0/latency/p95_ms",
            serde_json::json!(-3.0),
            "stages[0].latency.p95_ms",
        ),
        (
            "/stages/0/requests",
            serde_json::json!("many"),
            "stages[0].requests",
        ),
        ("/stages/1/vus", serde_json::json!(1e12), "stages[1].vus"),
        // A rate beyond any load generator (it printed 309 digits).
        (
            "/stages/0/throughput_rps",
            serde_json::json!(1.7e308),
            "stages[0].throughput_rps",
        ),
        // A count near 2^64 would wrap a sum: no generator sends ten million a second.
        (
            "/stages/0/requests",
            serde_json::json!(u64::MAX - 3),
            "stages[0].requests",
        ),
        (
            "/stages/1/warmup_requests",
            serde_json::json!(u64::MAX),
            "stages[1].warmup_requests",
        ),
        ("/stages/0/ok", serde_json::json!(1e9), "stages[0].ok"),
        // Percentiles out of order, a host of no cores, settings no deployment has.
        (
            "/stages/0/latency/p50_ms",
            serde_json::json!(500.0),
            "stages[0].latency",
        ),
        ("/host/cores/value", serde_json::json!(0.0), "host.cores"),
        (
            "/settings/worker_concurrency",
            serde_json::json!({"value": 0, "source": "hand edit"}),
            "settings.worker_concurrency",
        ),
        (
            "/settings/job_time",
            serde_json::json!({"value": -1.0, "source": "hand edit"}),
            "settings.job_time",
        ),
        // 5000 req/s over the window is more answers than the stage counted.
        (
            "/stages/0/throughput_rps",
            serde_json::json!(5000.0),
            "stages[0]: 5000.00 req/s",
        ),
    ] {
        let mut v = valid.clone();
        *v.pointer_mut(path).unwrap() = value;
        let f = write(&d, "summary.json", &v.to_string());
        let out = run(&["diagnose", &f]);
        refused(&out, &[field]);
        assert!(!stderr(&out).contains("many"), "{}", stderr(&out));
    }
    // An interval upside down.
    let mut v = valid.clone();
    v["stages"][0]["throughput_ci"] = serde_json::json!([3.0, 1.0]);
    let f = write(&d, "summary.json", &v.to_string());
    refused(&run(&["diagnose", &f]), &["stages[0].throughput_ci"]);
}

#[test]
fn an_existing_results_directory_needs_force() {
    let d = dir("force");
    std::fs::write(d.join("summary.json"), "{}").unwrap();
    let out = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:1/x",
        "--out",
        d.to_str().unwrap(),
    ]);
    refused(&out, &["--force", d.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(d.join("summary.json")).unwrap(),
        "{}"
    );
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn sigterm_keeps_the_partial_stage_writes_the_report_and_exits_143() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("term").join("out");
    let child = Command::new(bin())
        .args([
            "sweep",
            "--profile",
            "smoke",
            "--url",
            &url,
            "--vus",
            "2,2",
            "--stage-duration",
            "2s",
            "--warmup",
            "200ms",
            "--out",
            d.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    signal(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["stages"].as_array().unwrap().len(), 2);
    assert_eq!(s["stages"][1]["partial"], true);
    assert!(s["stages"][0]["requests"].as_u64().unwrap() > 10);
    assert!(d.join("report.html").exists());
    // No temporary file is left behind.
    for e in std::fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".tmp"), "{name}");
    }
}

#[test]
fn sigint_before_the_first_stage_still_writes_the_summary() {
    // The target resolves slowly? No: the signal lands while Docker is being asked (an
    // unreachable DOCKER_HOST waits up to 3 s), before the first stage.
    let d = dir("early").join("out");
    let child = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--profile",
            "smoke",
            "--url",
            "http://127.0.0.1:1/x",
            "--docker",
            "--out",
            d.to_str().unwrap(),
        ])
        .env("DOCKER_HOST", "tcp://10.255.255.1:2375")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["interrupted"], true);
}

#[test]
fn an_empty_docker_host_means_the_default_socket() {
    let out = Command::new(bin())
        .args(["inspect", "--json"])
        .env("DOCKER_HOST", "")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    if out.status.code() != Some(0) {
        // The default socket was used: it answered (no containers here) or is named.
        assert!(
            err.contains("/var/run/docker.sock") || err.contains("no running containers"),
            "{err}"
        );
    }
}

#[test]
fn garbage_redis_replies_are_gaps_not_crashes() {
    // A "Redis" that announces 10^11 elements, or answers LLEN with -5 or 2^63-1.
    for reply in [
        &b"*100000000000\r\n"[..],
        b":-5\r\n",
        b":9223372036854775807\r\n",
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(reply).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let url = canned_server(
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
            false,
        );
        let redis = format!("redis://127.0.0.1:{port}");
        let s = sweep_json(&url, &["--redis", &redis]);
        let st = &s["stages"][0];
        let shown = String::from_utf8_lossy(reply);
        assert!(st["requests"].as_u64().unwrap() > 0);
        assert_eq!(
            st["queue"]["samples"].as_u64().unwrap_or(0),
            0,
            "{shown}: {st}"
        );
        assert!(
            st["queue"]["gaps"].as_u64().unwrap_or(0) >= 1,
            "{shown}: {st}"
        );
        assert_eq!(st["queue"]["source"], "redis", "{st}");
    }
}

#[test]
fn a_redis_that_accepts_and_never_answers_is_a_counted_gap() {
    // It takes the connection and the AUTH, and says nothing: the observer must neither hang
    // nor call its queue figures the metrics'.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let redis = format!("redis://:pw@127.0.0.1:{port}");
    let out = run(&[
        "sweep",
        "--profile",
        "smoke",
        "--url",
        &url,
        "--vus",
        "2",
        "--stage-duration",
        "5s",
        "--warmup",
        "200ms",
        "--timeout",
        "2s",
        "--no-out",
        "--json",
        "--redis",
        &redis,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let st = &s["stages"][0];
    assert!(st["requests"].as_u64().unwrap() > 0);
    assert_eq!(st["queue"]["source"], "redis", "{st}");
    assert_eq!(st["queue"]["samples"].as_u64(), Some(0), "{st}");
    assert!(st["queue"]["gaps"].as_u64().unwrap() >= 1, "{st}");
}

/// A clean one-worker stack (it audits without error) with `{worker}` and `{runner}` extra
/// lines spliced into the worker's and the runner's service.
fn stack(worker: &str, runner: &str) -> String {
    format!(
        r#"x-env: &env
  EXECUTIONS_MODE: queue
  QUEUE_BULL_REDIS_HOST: n8n
  N8N_ENCRYPTION_KEY: fixture-key-not-secret
  N8N_RUNNERS_MODE: external
  N8N_RUNNERS_AUTH_TOKEN: fixture-token-not-secret
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0
  N8N_METRICS: "true"
  N8N_METRICS_INCLUDE_QUEUE_METRICS: "true"
  OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS: "true"
services:
  n8n:
    image: n8nio/n8n:2.41.1
    environment:
      <<: *env
  n8n-worker:
    image: n8nio/n8n:2.41.1
    command: worker --concurrency=10
    environment:
      <<: *env
{worker}
  n8n-worker-runner:
    image: n8nio/runners:2.41.1
    mem_limit: 1g
    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_AUTH_TOKEN: fixture-token-not-secret
      N8N_RUNNERS_MAX_CONCURRENCY: "10"
{runner}
"#
    )
}

fn audit_json(file: &str) -> (Option<i32>, serde_json::Value, String) {
    let out = run(&["audit", "-f", file, "--format", "json"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, stderr(&out))
}

fn finding_ids(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["id"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn compose_files_compose_refuses_are_refused_naming_the_place() {
    let d = dir("compose");
    let clean = write(&d, "clean.yml", &stack("", ""));
    let (code, v, err) = audit_json(&clean);
    assert_eq!(code, Some(0), "{err} {v}");
    for (name, text, names) in [
        (
            "list.yml",
            "services: [a, b]\n".to_string(),
            vec!["list.yml:1", "services"],
        ),
        (
            "scalar.yml",
            "services:\n  n8n: hello\n".to_string(),
            vec!["scalar.yml:2", "n8n"],
        ),
        (
            "conc.yml",
            stack("", "").replace("--concurrency=10", "--concurrency=-5"),
            vec!["conc.yml:16", "n8n-worker", "--concurrency"],
        ),
        (
            "mem.yml",
            stack("", "").replace("mem_limit: 1g", "mem_limit: -1g"),
            vec!["mem.yml", "n8n-worker-runner", "mem_limit"],
        ),
        (
            "envfile.yml",
            stack("    env_file: missing.env", ""),
            vec!["envfile.yml:16", "n8n-worker", "missing.env"],
        ),
        (
            "replicas.yml",
            stack("    deploy: {replicas: -2}", ""),
            vec!["replicas.yml", "n8n-worker", "replicas"],
        ),
    ] {
        let f = write(&d, name, &text);
        refused(&run(&["audit", "-f", &f]), &names);
    }
    std::fs::write(d.join("bin.env"), b"A=1\0\xff\xfe").unwrap();
    let f = write(&d, "binenv.yml", &stack("    env_file: bin.env", ""));
    refused(&run(&["audit", "-f", &f]), &["bin.env", "binary"]);
    // An optional env_file may be missing, as in Compose.
    let f = write(
        &d,
        "optional.yml",
        &stack("    env_file: [{path: missing.env, required: false}]", ""),
    );
    assert_eq!(audit_json(&f).0, Some(0));
}

#[test]
fn a_runner_with_zero_replicas_is_no_runner() {
    let d = dir("zero");
    let f = write(&d, "z.yml", &stack("", "    deploy: {replicas: 0}"));
    let (code, v, err) = audit_json(&f);
    assert_eq!(code, Some(1), "{err}");
    // The stack has no runner at all now.
    assert_eq!(finding_ids(&v), vec!["external-mode-without-runner"], "{v}");
    assert_eq!(v["services"], 2);
}

#[test]
fn nested_defaults_interpolate_and_errors_quote_no_value() {
    let d = dir("interp");
    // ${C:-${D:-20}}: worker concurrency 20 over a runner limit of 10.
    let f = write(
        &d,
        "n.yml",
        &stack("", "").replace("--concurrency=10", "--concurrency=${NOPE_C:-${NOPE_D:-20}}"),
    );
    let (code, v, err) = audit_json(&f);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        finding_ids(&v).contains(&"runner-limit-below-worker-concurrency".to_string()),
        "{v}"
    );
    assert!(v.to_string().contains("20"), "{v}");
    // A required variable that is not set: its name and line, nothing else of the line.
    let f = write(
        &d,
        "r.yml",
        &stack("", "").replace(
            "N8N_ENCRYPTION_KEY: fixture-key-not-secret",
            "N8N_ENCRYPTION_KEY: planted-s3cret-${NOPE_KEY:?say it}",
        ),
    );
    let out = run(&["audit", "-f", &f]);
    refused(&out, &["r.yml:4", "NOPE_KEY"]);
    assert!(!stderr(&out).contains("planted-s3cret"), "{}", stderr(&out));
    let f = write(
        &d,
        "u.yml",
        &stack("", "").replace(
            "N8N_ENCRYPTION_KEY: fixture-key-not-secret",
            "N8N_ENCRYPTION_KEY: planted-s3cret-${NOPE_KEY",
        ),
    );
    let out = run(&["audit", "-f", &f]);
    refused(&out, &["u.yml:4"]);
    assert!(!stderr(&out).contains("planted-s3cret"), "{}", stderr(&out));
}

#[test]
fn credentials_in_broker_uris_never_reach_any_output() {
    let d = dir("creds");
    let f = write(
        &d,
        "c.yml",
        &stack("", "").replace(
            "http://n8n-worker:5679",
            "http://runner:planted-pw-77@n8n-worker:5679",
        ),
    );
    for format in ["table", "json", "sarif"] {
        let out = run(&["audit", "-f", &f, "--format", format]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!all.contains("planted-pw-77"), "{format}: {all}");
        assert!(!all.contains("panicked"), "{all}");
    }
    // The runner is still paired with its worker: the host is read past the credentials.
    let (code, v, _) = audit_json(&f);
    assert_eq!(code, Some(0), "{v}");
}

#[test]
fn a_full_disk_is_reported_at_once_and_the_last_good_summary_stays() {
    // A 96 KiB tmpfs in a private mount namespace (root only: CI runs as root here).
    let ok = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs -o size=8k tmpfs /mnt && umount /mnt",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !require(
        "a private tmpfs mount (unshare -m, root)",
        ok,
        "run the tests as root",
    ) {
        return;
    }
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("full");
    let keep = d.join("kept");
    std::fs::create_dir_all(&keep).unwrap();
    let vus = vec!["1"; 40].join(",");
    // Fill the tmpfs to leave ~12 KiB: a few stages fit, then a write fails.
    let script = format!(
        "set -u; mount -t tmpfs -o size=96k tmpfs {mnt}; \
         head -c 86000 /dev/zero > {mnt}/fill; \
         {bin} sweep --profile smoke --url {url} --vus {vus} --stage-duration 300ms --warmup 0s \
           --out {mnt}/out > {keep}/stdout 2> {keep}/stderr; echo $? > {keep}/rc; \
         ls -a {mnt}/out > {keep}/listing; cp {mnt}/out/summary.json {keep}/ 2>/dev/null; true",
        mnt = d.join("m").display(),
        bin = bin(),
        keep = keep.display(),
    );
    std::fs::create_dir_all(d.join("m")).unwrap();
    let st = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(st.success());
    let rc = std::fs::read_to_string(keep.join("rc")).unwrap();
    let err = std::fs::read_to_string(keep.join("stderr")).unwrap();
    assert_eq!(rc.trim(), "1", "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("/out/"), "the path is named: {err}");
    let listing = std::fs::read_to_string(keep.join("listing")).unwrap();
    assert!(!listing.contains(".tmp"), "{listing}");
    // The last summary that was written whole is still there, and valid.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(keep.join("summary.json")).unwrap())
            .expect("the last good summary.json");
    let n = s["stages"].as_array().unwrap().len();
    assert!((1..40).contains(&n), "{n} stages");
}

#[test]
fn a_garbage_metrics_page_is_a_short_gap_not_a_copy_of_itself() {
    let garbage = format!("{}\n", "z{".repeat(1 << 20));
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        garbage.len()
    )
    .into_bytes();
    answer.extend_from_slice(garbage.as_bytes());
    let metrics = canned_server(answer, false).replace("/webhook/load", "/metrics");
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("garbage").join("out");
    let out = run(&[
        "sweep",
        "--profile",
        "smoke",
        "--url",
        &url,
        "--vus",
        "1",
        "--stage-duration",
        "2s",
        "--warmup",
        "0s",
        "--metrics",
        &format!("main={metrics}"),
        "--scrape-interval",
        "200ms",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let timeline = std::fs::read_to_string(d.join("timeline.jsonl")).unwrap();
    let gaps: Vec<&str> = timeline.lines().filter(|l| l.contains("\"gap\"")).collect();
    assert!(gaps.len() >= 3, "{} gaps", gaps.len());
    assert!(gaps.iter().all(|l| l.len() < 1000), "{}", gaps[0].len());
    let summary = std::fs::read_to_string(d.join("summary.json")).unwrap();
    assert!(summary.len() < 200_000, "{} bytes", summary.len());
}

#[test]
fn profile_errors_quote_no_secret_and_no_library_wording() {
    let d = dir("profsecret");
    for text in [
        "model: closed\nrequest:\n  headers:\n    Authorization: \"Bearer planted-tok-1\"\n    Authorization: \"Bearer planted-tok-2\"\nstages: [{vus: 1}]\n",
        "model: closed\nrequest:\n  headers: {Authorization: \"Bearer planted-tok-1\"}\n  timeout: [planted-tok-2]\nstages: [{vus: 1}]\n",
        "model: closed\nrequest: {headers: {X-Key: planted-tok-1}}\nstages: [{vus: \"planted-tok-2\"}]\n",
    ] {
        let p = write(&d, "p.yaml", text);
        let out = run(&["sweep", "--profile", &p, "--no-out"]);
        refused(&out, &["p.yaml:"]);
        let err = stderr(&out);
        assert!(!err.contains("planted-tok"), "{err}");
        assert!(!err.contains("DuplicateKeyPolicy"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_custom_runner_image_is_a_runner_by_its_variables() {
    let d = dir("customrunner");
    for image in [
        "ghcr.io/acme/n8n-runners-custom:2.41.1",
        "evalsim/runners:local",
    ] {
        let f = write(
            &d,
            "c.yml",
            &stack("", "").replace("image: n8nio/runners:2.41.1", &format!("image: {image}")),
        );
        let (code, v, err) = audit_json(&f);
        // Only the tag comparison can differ (a custom image's tag is its own business).
        let ids = finding_ids(&v);
        assert!(
            ids.iter().all(|i| i == "runner-image-mismatch"),
            "{image}: {ids:?} {err}"
        );
        assert_eq!(code, Some(0), "{image}: {err}");
        let out = run(&["inspect", "-f", &f, "--json"]);
        let t: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let runner = t["topology"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["facts"]["name"] == "n8n-worker-runner")
            .unwrap()
            .clone();
        assert_eq!(runner["role"], "runner");
        assert_eq!(runner["role_by"], "N8N_RUNNERS_TASK_BROKER_URI is set");
        assert_eq!(runner["attached_to"], "n8n-worker");
    }
}

#[test]
fn no_output_contains_an_unfilled_placeholder() {
    // Fast 500s, garbage, a refused port and a slow timeout: every finding's text is filled in.
    let fast_500 = canned_server(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        false,
    );
    let garbage = canned_server(b"garbage\r\n\r\n".to_vec(), true);
    let refused = format!("http://127.0.0.1:{}/x", free_port());
    for url in [fast_500.as_str(), garbage.as_str(), refused.as_str()] {
        let out = run(&[
            "sweep",
            "--no-preflight",
            "--profile",
            "smoke",
            "--url",
            url,
            "--vus",
            "1,2",
            "--stage-duration",
            "1s",
            "--warmup",
            "0s",
            "--timeout",
            "1s",
            "--no-out",
        ]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("Diagnosis"), "{text}");
        assert!(!text.contains("{}"), "{url}: {text}");
    }
}

#[test]
fn mixes_uploads_and_ramps_that_cannot_run_are_refused_naming_the_field() {
    let d = dir("mixes");
    let sc = |s: &str| {
        format!(
            "model: closed\nrequest: {{url: 'http://127.0.0.1:1'}}\nstages: [{{vus: 1}}]\nscenarios:\n{s}"
        )
    };
    let cases: Vec<(String, &[&str])> = vec![
        (sc("- {name: a, weight: 0, request: {url: /x}}\n"), &["scenarios[0].weight"]),
        (sc("- {name: a, weight: .nan, request: {url: /x}}\n"), &["scenarios[0].weight"]),
        (
            sc("- {name: a, request: {url: /x}}\n- {name: a, request: {url: /y}}\n"),
            &["scenarios[1]", "used twice"],
        ),
        (sc("- {name: '', request: {url: /x}}\n"), &["scenarios[0].name"]),
        (
            sc("- {name: a, request: {url: /x, body: {}, files: [{size: 1kB}]}}\n"),
            &["scenarios[0].request", "one of body"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{size: 10XB}]}}\n"),
            &["files[0].size", "unit"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{size: 5GB}]}}\n"),
            &["files[0].size", "MiB"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{path: /no/such/file}]}}\n"),
            &["files[0]", "/no/such/file"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{path: /dev/zero}]}}\n"),
            &["/dev/zero", "not a regular file"],
        ),
        (
            sc("- {name: a, request: {url: /x, fields: {k: v}}}\n"),
            &["fields", "files"],
        ),
        (
            sc("- {name: a, job_time: 1s, code_time: 2s, request: {url: /x}}\n"),
            &["code_time", "job_time"],
        ),
        (sc("- {name: a, request: {url: /x, colour: red}}\n"), &[":5:", "unknown field"]),
        (
            sc("- {name: a, request: {url: /x, timeout: 0s}}\n"),
            &["scenarios[0].request.timeout", "more than 0"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1', body: {a: 1}}\nstages: [{vus: 1}]\n\
             scenarios: [{name: a, request: {url: /x}}]\n"
                .to_string(),
            &["request.body", "scenarios"],
        ),
        (
            format!(
                "model: closed\nrequest: {{url: 'http://127.0.0.1:1'}}\nstages: [{{vus: 1}}]\nscenarios:\n{}",
                (0..17)
                    .map(|i| format!("- {{name: s{i}, request: {{url: /x}}}}\n"))
                    .collect::<String>()
            ),
            &["17 scenarios", "at most 16"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3}]\n".into(),
            &["stage 1", "duration"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3, duration: 1s}, {vus: 2}]\n"
                .into(),
            &["stage 2", "target"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 99999999, duration: 1s}]\n"
                .into(),
            &["target", "at most"],
        ),
        (
            "model: open\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3, duration: 1s}]\n".into(),
            &["target", "closed model"],
        ),
    ];
    for (text, names) in &cases {
        let p = write(&d, "p.yaml", text);
        refused(&run(&["sweep", "--profile", &p, "--no-out"]), names);
    }
    // --body cannot say which scenario it is for.
    refused(
        &run(&["sweep", "--profile", "mix", "--body", "{}", "--no-out"]),
        &["--body", "2 scenarios"],
    );
}

/// A reader that closes the pipe (`| head -1`) ends the command quietly: no panic, exit 0,
/// for every command that prints.
#[test]
fn a_closed_pipe_ends_quietly() {
    for args in [
        vec!["grafana"],
        vec!["man"],
        vec![
            "audit",
            "-f",
            "fixtures/compose/n8n-hosting/withPostgresAndWorker/docker-compose.yml",
        ],
        vec![
            "diagnose",
            "--k6-summary",
            "fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json",
            "--worker-concurrency",
            "15",
        ],
    ] {
        // The reading end is closed before the command starts: its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(bin())
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// Names and values from a file are shown with their control characters escaped: an escape
/// sequence in a service name or an image clears no screen and forges no table line.
#[test]
fn control_characters_from_input_never_reach_the_terminal() {
    let d = dir("control");
    let f = write(
        &d,
        "docker-compose.yml",
        "services:\n  \"worker\\e[2J\\rFAKE: all clean\":\n    image: \"n8nio/n8n\\e]0;pwned\\a\"\n    command: worker\n    environment:\n      EXECUTIONS_MODE: queue\n",
    );
    for args in [
        vec!["audit", "-f", f.as_str()],
        vec!["inspect", "-f", f.as_str()],
    ] {
        let out = run(&args);
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(text.contains("worker"), "{args:?}: {text}");
        let bad: Vec<char> = text
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(bad.is_empty(), "{args:?} printed {bad:?}: {text}");
        assert!(
            text.contains("\\u{1b}"),
            "{args:?}: the escape is shown: {text}"
        );
    }
}

/// A Docker Engine API on a unix socket: each request's path goes to `answer`, whose body is
/// sent with 200 (404 when it says "not here"); None holds the connection unanswered.
fn docker_api(
    sock: &Path,
    answer: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> std::thread::JoinHandle<()> {
    let _ = std::fs::remove_file(sock);
    let listener = std::os::unix::net::UnixListener::bind(sock).unwrap();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end + 4);
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    let path = path.split('?').next().unwrap_or("");
                    let Some(body) = answer(path) else {
                        // Never answers: holds the connection until the client gives up.
                        std::thread::sleep(Duration::from_secs(3600));
                        return;
                    };
                    let status = if body.contains("not here") {
                        "404 Not Found"
                    } else {
                        "200 OK"
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nApi-Version: 1.47\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    })
}

/// A Docker Engine API that names its one container with escape sequences (clear screen,
/// window title, colours) in its name, image, service and broker URI.
fn fake_docker_api(sock: &Path) -> std::thread::JoinHandle<()> {
    let inspect = serde_json::json!({
        "Id": "c0ffee",
        "Name": "/evil\u{1b}[2J\u{1b}[HFAKE: all clean",
        "RestartCount": 0,
        "State": {"Running": true, "OOMKilled": false, "ExitCode": 0},
        "Config": {
            "Image": "n8nio/runners:1\u{1b}]0;pwned\u{7}",
            "Env": ["N8N_RUNNERS_TASK_BROKER_URI=http://x\u{1b}[31m:5679"],
            "Labels": {
                "com.docker.compose.project": "evil",
                "com.docker.compose.service": "svc\u{1b}[2J"
            }
        },
        "HostConfig": {}
    })
    .to_string();
    let list = serde_json::json!([{"Id": "c0ffee", "Names": ["/evil"]}]).to_string();
    docker_api(sock, move |path| {
        Some(if path.ends_with("/_ping") {
            "OK".to_string()
        } else if path.ends_with("/containers/json") {
            list.clone()
        } else if path.ends_with("/json") {
            inspect.clone()
        } else if path.ends_with("/info") {
            r#"{"NCPU":2}"#.to_string()
        } else {
            r#"{"message":"not here"}"#.to_string()
        })
    })
}

#[test]
fn a_docker_api_naming_containers_with_escape_sequences_drives_no_terminal() {
    let d = dir("fakedocker");
    let sock = d.join("docker.sock");
    let _server = fake_docker_api(&sock);
    let host = format!("unix://{}", sock.display());
    for args in [
        &["audit", "--live", "--project", "evil"][..],
        &["inspect", "--project", "evil"][..],
    ] {
        let out = Command::new(bin())
            .args(args)
            .env("DOCKER_HOST", &host)
            .env("COLUMNS", "200")
            .output()
            .unwrap();
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all).to_string();
        // It read the container (its name is shown) …
        assert!(text.contains("FAKE: all clean"), "{args:?}: {text}");
        // … and no control character but line breaks reached the terminal.
        assert!(
            !all.iter().any(|b| *b < 0x20 && *b != b'\n'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("\\u{1b}"), "{args:?}: {text}");
    }
}

/// An HTTP/1.1 server on loopback: each request's head goes to `answer`, which gives the
/// status line's tail and the body; connections are kept alive, request bodies read past.
fn http_server<F>(answer: F) -> u16
where
    F: Fn(&str) -> (&'static str, String) + Send + Sync + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + 4 + len);
                    let (status, body) = answer(&head);
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A `/metrics` that answers, in turn, gauges of NaN, +Inf, −100 and 1e308 and a CPU counter
/// that jumps between two processes (10 s, 0.5 s, 10 s …); everything else is a webhook's 200.
fn impossible_metrics_server() -> u16 {
    let turn = std::sync::atomic::AtomicUsize::new(0);
    http_server(move |head| {
        if !head.starts_with("GET /metrics") {
            return ("200 OK", "{\"ok\":true}".to_string());
        }
        let i = turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (w, a) = [("NaN", "+Inf"), ("-100", "1e308"), ("1e308", "-5")][i % 3];
        let cpu = if i.is_multiple_of(2) { "10" } else { "0.5" };
        (
            "200 OK",
            format!(
                "n8n_scaling_mode_queue_jobs_waiting {w}\nn8n_scaling_mode_queue_jobs_active {a}\n\
                 n8n_scaling_mode_queue_jobs_completed 5\nn8n_scaling_mode_queue_jobs_failed 0\n\
                 n8n_process_cpu_seconds_total {cpu}\nn8n_process_resident_memory_bytes 1e8\n"
            ),
        )
    })
}

#[test]
fn a_metrics_endpoint_serving_impossible_values_gives_gaps_not_a_verdict() {
    let port = impossible_metrics_server();
    let out = run(&[
        "sweep",
        "--profile",
        "smoke",
        "--url",
        &format!("http://127.0.0.1:{port}/webhook/load"),
        "--vus",
        "2,8",
        "--stage-duration",
        "3s",
        "--warmup",
        "500ms",
        "--no-out",
        "--json",
        "--metrics",
        &format!("main=http://127.0.0.1:{port}/metrics"),
        "--queue-metrics-interval",
        "1",
        "--job-time",
        "10ms",
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{}",
        stderr(&out)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for st in s["stages"].as_array().unwrap() {
        // Every gauge reading was impossible: gaps, no figure.
        assert_eq!(st["queue"]["samples"].as_u64(), Some(0), "{st}");
        assert!(st["queue"]["gaps"].as_u64().unwrap() >= 1, "{st}");
        // The counter that jumps between two processes gives no CPU figure.
        let e = &st["endpoints"][0];
        assert_eq!(e["cpu_percent_mean"].as_f64(), Some(0.0), "{e}");
        assert!(e["gaps"].as_u64().unwrap() >= 1, "{e}");
    }
    let d = &s["diagnosis"];
    // No level is saturated by jobs "waiting", and no limit is inferred from the gauges.
    for l in d["levels"].as_array().unwrap() {
        let by = l["saturated_by"].to_string();
        assert!(!by.contains("jobs_waited_in_redis"), "{l}");
    }
    let wc = d["settings"]["worker_concurrency"]["value"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(wc < 1000.0, "worker concurrency {wc}");
    assert!(
        d["cpu"].as_array().is_none_or(|c| c.is_empty()),
        "{}",
        d["cpu"]
    );
}

/// A Prometheus API that answers only with the right bearer token: empty matrices then, a 401
/// page otherwise; it records every Authorization header it saw.
fn guarded_prometheus(token: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let port = http_server(move |head| {
        let auth = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: ")
                    .or(l.strip_prefix("Authorization: "))
            })
            .unwrap_or("")
            .to_string();
        log.lock().unwrap().push(auth.clone());
        if auth != format!("Bearer {token}") {
            return ("401 Unauthorized", "<html>401 Unauthorized</html>".into());
        }
        let kind = if head.contains("/api/v1/query_range") {
            "matrix"
        } else {
            "vector"
        };
        (
            "200 OK",
            format!(r#"{{"status":"success","data":{{"resultType":"{kind}","result":[]}}}}"#),
        )
    });
    (port, seen)
}

#[test]
fn prometheus_credentials_come_from_the_environment_or_a_file_and_are_never_shown() {
    let token = "prom-token-5e6f7a8b9c";
    let (port, seen) = guarded_prometheus("prom-token-5e6f7a8b9c");
    let url = format!("http://127.0.0.1:{port}");
    let out = Command::new(bin())
        .args(["diagnose", "--prometheus", &url, "--since", "10m", "--json"])
        .args(["--prometheus-token-env", "N8NCAP_TEST_PROM_TOKEN"])
        .env("N8NCAP_TEST_PROM_TOKEN", token)
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains(token), "the token was printed");
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|a| a == &format!("Bearer {token}")));
    // From a file, the same.
    let d = dir("promtoken");
    let f = write(&d, "token", &format!("{token}\n"));
    let out = run(&[
        "diagnose",
        "--prometheus",
        &url,
        "--since",
        "10m",
        "--prometheus-token-file",
        &f,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(token));
    // Without it: Prometheus' refusal is named as what it is, nothing judged; exit 1.
    let out = run(&["diagnose", "--prometheus", &url, "--since", "10m"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 401"), "{}", stderr(&out));
    // An unset variable and a bad matcher are bad input (exit 2), before any request.
    let out = run(&[
        "diagnose",
        "--prometheus",
        &url,
        "--prometheus-token-env",
        "N8NCAP_NO_SUCH_VARIABLE",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("N8NCAP_NO_SUCH_VARIABLE"),
        "{}",
        stderr(&out)
    );
    let out = run(&["diagnose", "--prometheus", &url, "--match", "namespace=n8n"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--match"), "{}", stderr(&out));
}

#[test]
fn a_prometheus_that_never_answers_times_out_with_its_name() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(s);
        }
    });
    let results = dir("silentprom").join("out");
    let out = run(&[
        "diagnose",
        "--prometheus",
        &format!("http://127.0.0.1:{port}"),
        "--since",
        "1h",
        "--prometheus-timeout",
        "1s",
        "--out",
        results.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did not answer within"),
        "{}",
        stderr(&out)
    );
    // The timeout ended the history at its first silent query, not after a retry per step (a
    // wall clock would be what a busy machine moves; the connections are not).
    let first = accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=2).contains(&first), "{first} connections");
    // Nothing was read: no empty results directory is left behind.
    assert!(!results.exists());
    // Each request may take 60 s, the whole history 2 s: the deadline ends it, named.
    let out = run(&[
        "diagnose",
        "--prometheus",
        &format!("http://127.0.0.1:{port}"),
        "--since",
        "1h",
        "--prometheus-timeout",
        "60s",
        "--deadline",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--deadline 2s"), "{}", stderr(&out));
}

/// A sweep and a Prometheus diagnosis into a pipe whose reader is gone: their own exit code,
/// quietly, after the work.
#[test]
fn a_sweep_and_a_history_into_a_closed_pipe_end_quietly() {
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let (port, _) = guarded_prometheus("tok");
    let prom = format!("http://127.0.0.1:{port}");
    for (args, env) in [
        (
            vec![
                "sweep",
                "--url",
                url.as_str(),
                "--vus",
                "2",
                "--stage-duration",
                "1s",
                "--warmup",
                "200ms",
                "--no-out",
            ],
            None,
        ),
        (
            vec![
                "diagnose",
                "--prometheus",
                prom.as_str(),
                "--since",
                "5m",
                "--json",
                "--prometheus-token-env",
                "N8NCAP_TEST_PIPE_TOKEN",
            ],
            Some(("N8NCAP_TEST_PIPE_TOKEN", "tok")),
        ),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = Command::new(bin());
        cmd.args(&args).stdout(writer).stderr(Stdio::piped());
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            matches!(out.status.code(), Some(0) | Some(99)),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn history_ranges_steps_and_credentials_that_cannot_be_are_refused_before_any_request() {
    // Nothing listens on port 9: a refusal must come before any request.
    let prom = "http://127.0.0.1:9";
    let o = run(&[
        "diagnose",
        "--prometheus",
        prom,
        "--end",
        "1733000000000000000",
    ]);
    refused(&o, &["--end", "nanoseconds"]);
    let o = run(&["diagnose", "--prometheus", prom, "--start", "1733000000000"]);
    refused(&o, &["--start", "milliseconds"]);
    let o = run(&[
        "diagnose",
        "--prometheus",
        prom,
        "--since",
        "1h",
        "--step",
        "1ms",
    ]);
    refused(&o, &["--step", "3600000 steps"]);
    let d = dir("empty-token");
    let token = write(&d, "token", "  \n");
    let o = run(&[
        "diagnose",
        "--prometheus",
        prom,
        "--prometheus-token-file",
        &token,
    ]);
    refused(&o, &["--prometheus-token-file", "empty"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// Waits for the child to exit (a state, not a time): the bound, two minutes, only a hang
/// reaches; then the child is killed and the test fails naming `what`.
fn exit_of(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    for _ in 0..1200 {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("{what}: it hangs");
}

#[test]
fn a_fifo_given_as_an_input_file_is_refused_at_once() {
    let d = dir("fifo");
    let fifo = d.join("profile.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    // With no writer, opening a FIFO for reading blocks for ever: it must be refused instead.
    for args in [
        vec![
            "sweep",
            "--profile",
            f,
            "--url",
            "http://127.0.0.1:9/x",
            "--no-out",
        ],
        vec!["diagnose", "--k6-summary", f],
        vec!["audit", "-f", f],
    ] {
        let mut child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = exit_of(&mut child, &format!("{args:?} on a FIFO"));
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn links_planted_in_a_results_directory_are_never_written_through() {
    let d = dir("links");
    let victim = d.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("summary.tmp")).unwrap();
    let o = run(&[
        "sweep",
        "--url",
        "http://127.0.0.1:9/webhook/load",
        "--vus",
        "1",
        "--stage-duration",
        "1s",
        "--warmup",
        "0s",
        "--out",
        out.to_str().unwrap(),
    ]);
    refused(&o, &["summary.tmp", "symbolic link"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    // A timeline that is a link to a file outside the directory is not read.
    let saved = d.join("saved");
    std::fs::create_dir_all(&saved).unwrap();
    std::os::unix::fs::symlink(&victim, saved.join("timeline.jsonl")).unwrap();
    let t = n8ncap::record::timeline::read_file(&saved.join("timeline.jsonl"));
    assert!(t.is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

/// A Docker Engine API with three containers of project "slow", whose third never answers
/// its inspect.
fn stalling_docker_api(sock: &Path) {
    let inspect = |id: &str, service: &str| {
        serde_json::json!({
            "Id": id,
            "Name": format!("/slow-{service}-1"),
            "RestartCount": 0,
            "State": {"Running": true, "OOMKilled": false, "ExitCode": 0},
            "Config": {
                "Image": "n8nio/n8n:2.41.1",
                "Cmd": if service == "worker" { vec!["worker"] } else { vec![] },
                "Env": ["EXECUTIONS_MODE=queue"],
                "Labels": {
                    "com.docker.compose.project": "slow",
                    "com.docker.compose.service": service
                }
            },
            "HostConfig": {}
        })
        .to_string()
    };
    let (main, worker) = (inspect("aaa", "n8n"), inspect("bbb", "worker"));
    let list = serde_json::json!([
        {"Id": "aaa", "Names": ["/slow-n8n-1"]},
        {"Id": "bbb", "Names": ["/slow-worker-1"]},
        {"Id": "ccc", "Names": ["/slow-stuck-1"]}
    ])
    .to_string();
    docker_api(sock, move |path| {
        if path.ends_with("/ccc/json") {
            return None;
        }
        Some(if path.ends_with("/_ping") {
            "OK".to_string()
        } else if path.ends_with("/containers/json") {
            list.clone()
        } else if path.ends_with("/aaa/json") {
            main.clone()
        } else if path.ends_with("/bbb/json") {
            worker.clone()
        } else {
            r#"{"NCPU":2}"#.to_string()
        })
    });
}

/// An inspect that never answers is a gap, named, and the other containers are audited.
#[test]
fn a_docker_inspect_that_never_answers_is_a_named_gap() {
    let d = dir("stall");
    let sock = d.join("docker.sock");
    stalling_docker_api(&sock);
    let host = format!("unix://{}", sock.display());
    let mut child = Command::new(bin())
        .args(["audit", "--live", "--project", "slow", "--json"])
        .env("DOCKER_HOST", &host)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = exit_of(&mut child, "audit --live on an inspect that never answers");
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(matches!(status.code(), Some(0) | Some(1)), "{err}");
    assert!(err.contains("slow-stuck-1") && err.contains("gap"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let text = v.to_string();
    assert!(
        text.contains("slow-worker-1") && !text.contains("slow-stuck-1"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A Prometheus API whose range answers are `points(start, end, step)` for every query, and whose
/// instant queries (raw samples) are empty.
fn fake_prometheus(
    points: impl Fn(f64, f64, f64) -> Vec<(f64, String)> + Send + Sync + 'static,
) -> u16 {
    http_server(move |head| {
        let target = head.split_whitespace().nth(1).unwrap_or("");
        let param = |k: &str| {
            target
                .split(['?', '&'])
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        if !target.starts_with("/api/v1/query_range") {
            return (
                "200 OK",
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into(),
            );
        }
        let values: Vec<String> = points(param("start"), param("end"), param("step"))
            .into_iter()
            .map(|(t, v)| format!("[{t},\"{v}\"]"))
            .collect();
        (
            "200 OK",
            format!(
                r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{"job":"n8n","instance":"main:5678"}},"values":[{}]}}]}}}}"#,
                values.join(",")
            ),
        )
    })
}

/// More points than steps asked is no range answer (memory grows with what is kept, not with
/// what a server sends); a counter rising 1e15/s is a gap with its reason, and what --out
/// writes from such a history reads back.
#[test]
fn a_prometheus_answering_too_much_or_the_impossible_is_bounded_and_believed_in_nothing() {
    let flood = fake_prometheus(|start, end, step| {
        let n = ((end - start) / step) as usize * 3 + 10;
        (0..n)
            .map(|i| (start + i as f64, "1".to_string()))
            .collect()
    });
    let out = run(&[
        "diagnose",
        "--prometheus",
        &format!("http://127.0.0.1:{flood}"),
        "--since",
        "10m",
        "--step",
        "15s",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("steps asked"), "{}", stderr(&out));

    let absurd = fake_prometheus(|start, end, step| {
        let n = ((end - start) / step).floor() as usize + 1;
        (0..n)
            .map(|i| {
                (
                    start + i as f64 * step,
                    format!("{:e}", 1e15 * i as f64 * step),
                )
            })
            .collect()
    });
    let d = dir("absurdprom");
    let saved = d.join("out");
    let out = run(&[
        "diagnose",
        "--prometheus",
        &format!("http://127.0.0.1:{absurd}"),
        "--since",
        "10m",
        "--step",
        "15s",
        "--json",
        "--out",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // No window counts a completion it could not have had.
    for w in v["history"]["windows"].as_array().unwrap() {
        assert!(w["throughput_per_s"].as_f64().unwrap() < 1e5, "{w}");
    }
    assert!(
        v["history"]["gaps"].to_string().contains("beyond any n8n"),
        "{}",
        v["history"]["gaps"]
    );
    let again = run(&["diagnose", saved.to_str().unwrap(), "--json"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let _ = std::fs::remove_dir_all(&d);
}
