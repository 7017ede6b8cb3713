//! The load engine against real local servers and the simulator: it measures what is there and
//! never presents a failing system as fast.

use crate::common::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use n8ncap::load::profile::{LoadModel, Profile, StageSpec};
use n8ncap::model::settings::Provenance;
use n8ncap::sim::{Stack, StackConfig};
use std::process::Command;
use std::time::Duration;

/// A plain HTTP server answering `{"ok":true}`; `keep_alive: false` closes every connection.
async fn ok_server(keep_alive: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        Bytes::from_static(b"{\"ok\":true}"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(keep_alive)
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}/webhook/load")
}

/// A raw keep-alive server that answers with a chunked body in two separate writes.
async fn chunked_server() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            // Without this, Nagle holds the second write for the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    // Read one request: head, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p + 4;
                        }
                        match stream.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        match stream.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    let first =
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{\"ok\":\r\n";
                    if stream.write_all(first).await.is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                    if stream
                        .write_all(b"5;x=y\r\ntrue}\r\n0\r\n\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/webhook/load")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_answers_are_read_and_checked() {
    let url = chunked_server().await;
    let st = one_stage(&url, 2, serde_json::json!({}), "200ms", "1s").await;
    assert!(st.requests > 50, "{} {:?}", st.requests, st.phases);
    assert_eq!(st.check_pass_rate, 1.0, "{:?}", st.checks);
    assert!(st.new_conns_per_request < 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_server_reuses_connections() {
    let url = ok_server(true).await;
    let st = one_stage(&url, 4, serde_json::json!({}), "300ms", "1500ms").await;
    assert!(st.valid, "{:?}", st.invalid_reasons);
    assert!(st.requests > 100, "{} requests", st.requests);
    assert!(
        st.new_conns_per_request < 0.01,
        "{}",
        st.new_conns_per_request
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_server_shows_one_new_connection_per_request() {
    let url = ok_server(false).await;
    let st = one_stage(&url, 4, serde_json::json!({}), "300ms", "1500ms").await;
    assert!(st.requests > 50, "{} requests", st.requests);
    assert!(
        st.new_conns_per_request > 0.95 && st.new_conns_per_request <= 1.0,
        "{}",
        st.new_conns_per_request
    );
    assert!(st.phases.connecting.mean_ms > 0.0);
    assert!(st.valid, "{:?}", st.invalid_reasons);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_port_is_all_failures_and_never_a_good_latency() {
    let url = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let st = one_stage(&url, 2, serde_json::json!({}), "200ms", "1s").await;
    // Refused connections back off (10 ms doubling to 0.5 s): a few per user, not thousands.
    assert!(
        (2..=40).contains(&st.requests),
        "refusals back off: {}",
        st.requests
    );
    assert_eq!(st.errors.connect_refused, st.requests);
    assert_eq!(st.error_rate, 1.0);
    assert_eq!(st.throughput_rps, 0.0);
    assert_eq!(st.check_pass_rate, 0.0);
    assert!(!st.valid);
    let table = n8ncap::report::table::stages_table(std::slice::from_ref(&st));
    assert!(table.contains("invalid"), "{table}");
    // Its row shows "invalid" in each latency column (p50, p95, p99), never a number.
    let row = table
        .lines()
        .find(|l| l.starts_with("│ 1 "))
        .unwrap_or_else(|| panic!("no row for stage 1:\n{table}"));
    assert_eq!(
        row.matches("invalid").count(),
        3,
        "an invalid stage printed a latency:\n{table}"
    );
}

#[test]
fn refused_port_exits_99_and_writes_the_summary() {
    let dir = tempdir("refused");
    let port = free_port();
    let out = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--profile",
            "steady",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "1",
            "--stage-duration",
            "1s",
            "--warmup",
            "200ms",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(99),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("✗ http_req_failed rate<0.05 (observed 1.0000)"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema"], "n8ncap.summary/2");
    assert_eq!(summary["thresholds_passed"], false);
    assert_eq!(summary["stages"][0]["valid"], false);
    let lines = std::fs::read_to_string(dir.join("stages.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = crate::common::scratch().join(format!("n8ncap-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 39 s): a simulated stack under load"]
async fn reference_p95_at_20_in_flight_is_about_6_seconds() {
    // Worker 15, runner 10, 3 s jobs, 20 in flight: R = 20 ÷ (10 ÷ 3 s) = 6 s; the reference
    // study measured p95 = 6.04 s on a real n8n. Must be within 10 %.
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 10,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let st = one_stage(
        &stack.webhook_url,
        20,
        serde_json::json!({"sleep_ms": 3000}),
        "9s",
        "39s",
    )
    .await;
    let l = st.latency.expect("latency");
    assert!(st.valid);
    // 6 s and 3.33/s on an idle machine; held against the task time this run measured (a busy
    // machine stretches the 3 s a little, and the rate and latency with it).
    let served = served(&stack).await;
    let r = 20.0 * served.task_s / 10.0;
    assert!(
        within(l.p95_ms, 1000.0 * r, 0.10),
        "p95 {:.0} ms for R = {r:.2} s from {served:?}",
        l.p95_ms
    );
    assert!(l.p95_ms >= 6000.0 * 0.98, "p95 {:.0} ms", l.p95_ms);
    assert!(
        within(st.throughput_rps, 10.0 / served.task_s, 0.05),
        "{:.3} req/s from {served:?}",
        st.throughput_rps
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_model_counts_dropped_iterations_when_max_vus_are_busy() {
    // Capacity 10 runner tasks × (1 ÷ 0.5 s) = 20/s … but only 5 requests may be in flight:
    // at most 5 ÷ 0.54 s ≈ 9/s start; the rest of 20/s arrivals are dropped.
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 10,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let mut p = closed_profile(
        &stack.webhook_url,
        &[1],
        serde_json::json!({"sleep_ms": 500}),
        "1s",
        "5s",
    );
    p.model = LoadModel::Open;
    p.stages = vec![StageSpec {
        rate: Some(20.0),
        max_vus: Some(5),
        ..Default::default()
    }];
    let s = sweep(p, None).await;
    let st = &s.stages[0];
    assert!(
        st.dropped_iterations > 30,
        "dropped {}",
        st.dropped_iterations
    );
    // 5 in flight, each for the latency this run measured (≈ 0.54 s idle): Little's law.
    let l = st.latency.as_ref().unwrap();
    let little = 5.0 / (l.mean_ms / 1000.0);
    assert!(
        within(st.throughput_rps, little, 0.15),
        "{:.2} for {little:.2}",
        st.throughput_rps
    );
    assert!(
        st.throughput_rps <= 5.0 / 0.5 * 1.02,
        "{:.2}",
        st.throughput_rps
    );
    assert!(l.p50_ms >= 500.0, "p50 {:.0}", l.p50_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_model_without_a_cap_problem_keeps_the_arrival_rate() {
    let url = ok_server(true).await;
    let mut p = closed_profile(&url, &[1], serde_json::json!({}), "500ms", "3s");
    p.model = LoadModel::Open;
    p.stages = vec![StageSpec {
        rate: Some(200.0),
        max_vus: Some(50),
        ..Default::default()
    }];
    let s = sweep(p, None).await;
    let st = &s.stages[0];
    assert_eq!(st.dropped_iterations, 0);
    assert!(
        within(st.request_rate, 200.0, 0.05),
        "{:.1}/s",
        st.request_rate
    );
}

#[test]
fn interrupt_keeps_what_was_measured_and_exits_130() {
    let dir = tempdir("interrupt");
    let port = free_port();
    let mut sim = ChildGuard(
        Command::new(bin())
            .args([
                "sim",
                "all",
                "--port",
                &port.to_string(),
                "--concurrency",
                "5",
                "--main-cpu-ms",
                "0",
                "--cpu-ms",
                "0",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    let child = Command::new(bin())
        .args([
            "sweep",
            "--profile",
            "smoke",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "2,4",
            "--stage-duration",
            "3s",
            "--warmup",
            "500ms",
            "--body",
            r#"{"sleep_ms":100}"#,
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(4200));
    send_sigint(child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupted"], true);
    let stages = summary["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2, "the interrupted stage is kept as partial");
    assert_eq!(stages[0]["partial"], false);
    assert_eq!(stages[1]["partial"], true);
    assert!(stages[0]["ok"].as_u64().unwrap() > 10);
    let _ = sim.0.kill();
}

fn send_sigint(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn profiles_run_by_name_or_path_and_bad_ones_exit_2() {
    let dir = tempdir("badprofile");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "model: closed\nstages: [{vus: 1}\n").unwrap();
    let out = Command::new(bin())
        .args(["sweep", "--profile", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml"), "{err}");
    let out = Command::new(bin())
        .args(["sweep", "--profile", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("breakpoint"));
    let out = Command::new(bin())
        .args([
            "sweep",
            "--profile",
            "smoke",
            "--url",
            "ftp://x/y",
            "--no-out",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(bin())
        .args(["sweep", "--stage-duration", "soon", "--no-out"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("soon"));
    let p = Profile::load("memory").unwrap();
    assert_eq!(p.request.body.unwrap()["alloc_mb"], 300);
}

#[test]
fn bad_results_directory_fails_before_any_load() {
    let out = Command::new(bin())
        .args([
            "sweep",
            "--profile",
            "smoke",
            "--url",
            "http://127.0.0.1:1/webhook/load",
            "--out",
            "/proc/definitely/not/writable",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/definitely/not/writable"), "{err}");
}

#[test]
fn abort_on_fail_stops_after_the_first_failing_stage() {
    let dir = tempdir("abort");
    let out = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--url",
            &format!("http://127.0.0.1:{}/webhook/load", free_port()),
            "--vus",
            "1,2,3",
            "--stage-duration",
            "1s",
            "--warmup",
            "200ms",
            "--abort-on-fail",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(99));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["aborted_by_threshold"], true);
    assert_eq!(summary["stages"].as_array().unwrap().len(), 1);
}

/// An https server (rustls) with a certificate for "localhost" made here; keep-alive on.
async fn tls_server(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let (acceptor, pem) = crate::common::tls_acceptor(dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let svc = hyper::service::service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        Bytes::from_static(b"{\"ok\":true}"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (format!("https://localhost:{port}/webhook/load"), pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_targets_time_the_handshake_and_refuse_untrusted_certificates() {
    let dir = tempdir("tls");
    std::fs::create_dir_all(&dir).unwrap();
    let (url, ca) = tls_server(&dir).await;
    // Trusted through --ca-cert: keep-alive over TLS, handshake timed on new connections.
    let mut p = closed_profile(&url, &[2], serde_json::json!({}), "300ms", "1500ms");
    p.request.ca_cert = Some(ca.display().to_string());
    let st = sweep(p, None).await.stages.remove(0);
    assert!(st.valid, "{:?} {:?}", st.invalid_reasons, st.errors);
    assert!(st.requests > 50, "{}", st.requests);
    assert!(st.new_conns_per_request < 0.05);
    // Not trusted: every request fails on the handshake, and the stage is invalid.
    let st = one_stage(&url, 2, serde_json::json!({}), "100ms", "600ms").await;
    assert!(
        st.errors.tls > 0 && st.errors.tls == st.requests,
        "{:?}",
        st.errors
    );
    assert!(!st.valid);
    // --insecure accepts it (self-signed test hosts).
    let mut p = closed_profile(&url, &[1], serde_json::json!({}), "100ms", "600ms");
    p.request.insecure = true;
    let st = sweep(p, None).await.stages.remove(0);
    assert!(st.valid, "{:?}", st.errors);
    // Every new connection paid a handshake, timed apart from the TCP connect.
    let mut p = closed_profile(&url, &[1], serde_json::json!({}), "0s", "300ms");
    p.request.insecure = true;
    let st = sweep(p, None).await.stages.remove(0);
    assert!(st.phases.tls_handshaking.mean_ms > 0.0, "{:?}", st.phases);
}

/// The sweep drives any observer through the `Observer` seam: a fake one here (the load engine
/// imports nothing of `observe`), whose observations land in the stages it was told about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_drives_any_observer_through_its_trait() {
    use n8ncap::record::observation::{Observer, StageObservation};
    use n8ncap::record::stage::QueueObserved;
    use std::sync::{Arc, Mutex};
    #[derive(Default)]
    struct Fake {
        calls: Arc<Mutex<Vec<String>>>,
    }
    impl Observer for Fake {
        fn begin_stage(&mut self, index: usize, _: std::time::Instant) {
            self.calls.lock().unwrap().push(format!("begin {index}"));
        }
        fn end_stage(&mut self, coarse: bool) -> StageObservation {
            let mut calls = self.calls.lock().unwrap();
            calls.push(format!("end {coarse}"));
            StageObservation {
                queue: Some(QueueObserved {
                    active_mean: calls.len() as f64,
                    samples: 1,
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        fn stop(&mut self) {
            self.calls.lock().unwrap().push("stop".into());
        }
    }
    let calls = Arc::new(Mutex::new(Vec::new()));
    let url = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let (s, _) = n8ncap::load::run::run_sweep(
        n8ncap::load::run::SweepOptions {
            observer: Some(Box::new(Fake {
                calls: calls.clone(),
            })),
            queue_metrics_interval: Duration::from_secs(1),
            ..n8ncap::load::run::SweepOptions::new(closed_profile(
                &url,
                &[1, 2],
                serde_json::json!({}),
                "0s",
                "300ms",
            ))
        },
        std::future::pending(),
    )
    .await
    .unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        ["begin 0", "end true", "begin 1", "end true", "stop"]
    );
    assert_eq!(s.stages[0].queue.as_ref().unwrap().active_mean, 2.0);
    assert_eq!(s.stages[1].queue.as_ref().unwrap().active_mean, 4.0);
}

/// A load tool never chooses its target: no --url and a built-in profile is refused before
/// anything is created or sent, naming the flag.
#[test]
fn a_sweep_without_a_target_is_refused() {
    let dir = tempdir("notarget");
    for profile in ["steady", "mix"] {
        let out = Command::new(bin())
            .args([
                "sweep",
                "--profile",
                profile,
                "--out",
                dir.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{profile}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--url"), "{err}");
        assert!(!dir.exists(), "nothing is created for a refused sweep");
    }
}

/// Nothing listens: the virtual users back off (10 ms doubling to 0.5 s) instead of making
/// hundreds of thousands of refused connections, and a stage interrupted in its warm-up shows
/// the warm-up's error share (all failed), not 0.
#[test]
fn refused_connections_back_off_and_an_interrupted_warmup_keeps_its_error_share() {
    let url = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let out = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--url",
            &url,
            "--vus",
            "2",
            "--stage-duration",
            "2s",
            "--warmup",
            "0s",
            "--no-out",
            "--json",
        ])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let stage = &s["stages"][0];
    let requests = stage["requests"].as_u64().unwrap();
    // Per user: 10 + 20 + 40 + … + 500 ms pauses, about 10 tries in 2 s.
    assert!((4..=60).contains(&requests), "{requests} refused requests");
    assert_eq!(stage["errors"]["connect_refused"].as_u64(), Some(requests));
    assert_eq!(stage["error_rate"].as_f64(), Some(1.0));

    let child = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--url",
            &url,
            "--vus",
            "2",
            "--stage-duration",
            "30s",
            "--warmup",
            "20s",
            "--no-out",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    send_sigint(child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let stage = &s["stages"][0];
    assert_eq!(stage["partial"], true);
    assert_eq!(stage["requests"].as_u64(), Some(0));
    assert!(stage["warmup_requests"].as_u64().unwrap() > 0);
    assert_eq!(stage["error_rate"].as_f64(), Some(1.0));
}

/// A closed terminal (SIGHUP) ends a sweep as Ctrl-C does: exit 129, the run saved.
#[test]
fn a_hangup_keeps_what_was_measured() {
    let dir = tempdir("hangup");
    let url = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let child = Command::new(bin())
        .args([
            "sweep",
            "--no-preflight",
            "--url",
            &url,
            "--vus",
            "1",
            "--stage-duration",
            "30s",
            "--warmup",
            "0s",
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let ok = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(129));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupted"], true);
    assert_eq!(summary["stages"][0]["partial"], true);
    assert!(summary["stages"][0]["requests"].as_u64().unwrap() > 0);
}

/// `--rates` below, near and at 1.6× the ceiling of a stack whose runner takes 5 tasks of
/// 0.4 s (12.5/s), its runner limit not given: the overloaded stage's throughput is what
/// completed (the ceiling, not the 20/s offered), its books add up, and the runner limit is
/// inferred from it with an interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 30 s): a simulated stack under load"]
async fn open_model_past_the_ceiling_counts_completions() {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 5,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let mut p = closed_profile(
        &stack.webhook_url,
        &[1],
        serde_json::json!({"sleep_ms": 400}),
        "2s",
        "8s",
    );
    p.model = LoadModel::Open;
    p.stages = [6.0, 12.0, 20.0]
        .iter()
        .map(|r| StageSpec {
            rate: Some(*r),
            max_vus: Some(400),
            ..Default::default()
        })
        .collect();
    let mut s = sweep(p, None).await;
    let served = served(&stack).await;
    let ceiling = 5.0 / served.task_s;
    for st in &s.stages {
        let f = st.flow.expect("an open stage has its books");
        assert_eq!(
            f.arrivals as i64 - f.completions as i64,
            f.backlog_end as i64 - f.backlog_start as i64,
            "{f:?}"
        );
        let offered = (f.arrivals + st.dropped_iterations) as f64 / st.window_s;
        assert!((f.offered_per_s - offered).abs() < 1e-9);
    }
    let low = &s.stages[0];
    assert!(
        within(low.throughput_rps, 6.0, 0.1),
        "{}",
        low.throughput_rps
    );
    let top = &s.stages[2];
    // 5 runner tasks ÷ their time in this run (12.5/s idle).
    assert!(
        within(top.throughput_rps, ceiling, 0.1),
        "completions {:.2}/s of 20 offered, ceiling {ceiling:.2}",
        top.throughput_rps
    );
    let f = top.flow.unwrap();
    assert!(
        within(f.backlog_growth_per_s, f.offered_per_s - ceiling, 0.25),
        "backlog {f:?}"
    );
    let settings = n8ncap::model::settings::Settings {
        worker_concurrency: Some(n8ncap::model::settings::Sourced::new(
            15,
            Provenance::Assumed("test".into()),
        )),
        ..Default::default()
    };
    let (d, _) = n8ncap::recommend::analyze::analyze(&mut s, settings, None);
    assert_eq!(
        d.capping_limit,
        Some(n8ncap::model::Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let r = d.settings.runner_limit.as_ref().unwrap();
    assert!((4..=6).contains(&r.value), "{r:?}");
    let [lo, hi] = r.interval.expect("an inferred limit's interval");
    assert!(lo <= 5.0 && 5.0 <= hi, "{r:?}");
    let x = d.measured_ceiling.as_ref().unwrap().mean;
    assert!(within(x, ceiling, 0.1), "{x} for {ceiling}");
    assert!(x <= 12.5 * 1.02, "{x}");
}

/// A server answering every request with `status` and counting the requests it read.
fn counting_server(status: u16) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = n.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(k) = s.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let body = "no such webhook";
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    (format!("http://127.0.0.1:{port}/webhook/typo"), n)
}

/// A wrong path (404) and a wrong port are each stopped after one request, exit 2, naming the
/// status and the URL, with no results directory left behind; --no-preflight sends the load.
#[test]
fn a_wrong_path_or_port_is_stopped_after_one_request() {
    let (url, seen) = counting_server(404);
    let dir = tempdir("preflight");
    let args = |url: &str| {
        vec![
            "sweep".to_string(),
            "--url".into(),
            url.to_string(),
            "--vus".into(),
            "4".into(),
            "--stage-duration".into(),
            "1s".into(),
            "--warmup".into(),
            "0s".into(),
            "--out".into(),
            dir.to_str().unwrap().to_string(),
        ]
    };
    let out = Command::new(bin()).args(args(&url)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("404") && err.contains(&url), "{err}");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(!dir.exists(), "a refused run leaves no directory");
    let port = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let out = Command::new(bin()).args(args(&port)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("refused") && err.contains(&port), "{err}");
    assert!(!dir.exists());
    // Skipped, the load goes: many requests, all 404, and the run says so (exit 99).
    let mut skip = args(&url);
    skip.insert(1, "--no-preflight".into());
    let out = Command::new(bin()).args(&skip).output().unwrap();
    assert_eq!(out.status.code(), Some(99));
    assert!(seen.load(std::sync::atomic::Ordering::SeqCst) > 1);
    let _ = std::fs::remove_dir_all(&dir);
}
