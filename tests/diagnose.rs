//! Diagnosis against the simulator: one test per scenario, each asserting the named finding and
//! its numbers.

mod common;
use common::*;
use n8ncap::analysis::analyze;
use n8ncap::model::settings::{Settings, Sourced};
use n8ncap::model::Limit;
use n8ncap::sim::{Stack, StackConfig};
use std::time::Duration;

fn known(c: u32, r: u32) -> Settings {
    Settings {
        workers: Some(Sourced::new(1, "test")),
        worker_concurrency: Some(Sourced::new(c, "test")),
        runner_limit: Some(Sourced::new(r, "test")),
        runners_per_worker: Some(Sourced::new(1, "test")),
        ..Settings::default()
    }
}

/// Warm-up must outlast the slowest response (up to 3 s here) so the window is steady.
async fn sweep_sim(c: u32, r: u32, vus: &[u32], job_ms: u64, dur: &str) -> n8ncap::load::Summary {
    let stack = Stack::start(StackConfig {
        worker_concurrency: c,
        runner_limit: r,
        queue_metrics_interval: Duration::from_millis(500),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    sweep(
        closed_profile(
            &stack.webhook_url,
            vus,
            serde_json::json!({"sleep_ms": job_ms}),
            "3s",
            dur,
        ),
        Some(format!("{}/metrics", stack.main_url)),
    )
    .await
}

async fn runner_case(r: u32) {
    let mut s = sweep_sim(15, r, &[20, 30], 200, "8s").await;
    let (d, _) = analyze(&mut s, known(15, r), 60.0);
    // The simulator holds each slot 20 ms longer than the job (its fixed in-slot overhead),
    // which the worker-bound ceiling feels and the runner-bound one does not.
    let ceiling = if r < 15 { r as f64 / 0.2 } else { 15.0 / 0.22 };
    if r < 15 {
        assert_eq!(
            d.capping_limit,
            Some(Limit::RunnerLimit),
            "r={r}: {}",
            d.verdict
        );
        let f = d
            .findings
            .iter()
            .find(|f| f.id == "runner-limit-caps")
            .expect("finding");
        let text = f.evidence.join(" | ");
        assert!(text.contains("slots 100 % taken"), "{text}");
        // "throughput N % under slots ÷ job time": 1 − r/15, give or take a point.
        let expect = (1.0 - r as f64 / 15.0) * 100.0;
        let found =
            (-1..=1).any(|d| text.contains(&format!("{:.0} % under", expect.round() + d as f64)));
        assert!(found, "r={r}: expected ≈{expect:.0} % under in {text}");
    } else {
        assert_eq!(
            d.capping_limit,
            Some(Limit::WorkerConcurrency),
            "{}",
            d.verdict
        );
        assert!(d.findings.iter().any(|f| f.id == "worker-concurrency-caps"));
    }
    let m = d.measured_ceiling.unwrap();
    // In-slot overhead (20 ms) lowers the worker-bound case by ≈4 %.
    assert!(
        within(m.mean, ceiling, 0.06),
        "r={r}: {} vs {ceiling}",
        m.mean
    );
    assert!(s.diagnosis.is_some() && s.recommendation.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_2_is_named() {
    runner_case(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_5_is_named() {
    runner_case(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_10_is_named() {
    runner_case(10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_20_leaves_worker_concurrency_named() {
    runner_case(20).await;
}

async fn inferred_case(r: u32) {
    // Nothing known but the request body: worker concurrency from the queue gauges, runner
    // limit from the measured ceiling × Code time.
    let mut s = sweep_sim(15, r, &[20, 30], 200, "8s").await;
    let (d, _) = analyze(&mut s, Settings::default(), 60.0);
    let inferred = d
        .settings
        .runner_limit
        .as_ref()
        .expect("runner limit inferred");
    assert!(
        inferred.source.starts_with("inferred"),
        "{}",
        inferred.source
    );
    assert!(
        (inferred.value as i64 - r as i64).abs() <= 1,
        "true runner limit {r}, inferred {}",
        inferred.value
    );
    let c = d
        .settings
        .worker_concurrency
        .as_ref()
        .expect("worker concurrency inferred");
    assert_eq!(c.value, 15, "{}", c.source);
    assert_eq!(d.capping_limit, Some(Limit::RunnerLimit), "{}", d.verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_2_is_inferred_without_docker() {
    inferred_case(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_6_is_inferred_without_docker() {
    inferred_case(6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_limit_10_is_inferred_without_docker() {
    inferred_case(10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ceiling_reached_and_queue_backlog() {
    // The queue gauges are snapshots: read every 100 ms (refreshed as often), their mean over
    // the 3 s window is a time average, not three moments that may fall between a batch of
    // jobs leaving their slots and the next arriving. Jobs of 500 ms keep the share of jobs in
    // transit (main's overhead, the wire) small even when the test shares the cores.
    let stack = Stack::start(StackConfig {
        worker_concurrency: 10,
        runner_limit: 20,
        queue_metrics_interval: Duration::from_millis(100),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let mut s = sweep_scraped(
        closed_profile(
            &stack.webhook_url,
            &[5, 10, 20, 40],
            serde_json::json!({"sleep_ms": 500}),
            "3s",
            "6s",
        ),
        Some(format!("{}/metrics", stack.main_url)),
        Duration::from_millis(100),
    )
    .await;
    let (d, rec) = analyze(&mut s, known(10, 20), 60.0);
    let ceiling = d
        .findings
        .iter()
        .find(|f| f.id == "ceiling-reached")
        .expect("ceiling-reached");
    assert!(
        ceiling.title.contains("from 20 to 40") || ceiling.title.contains("from 10 to 20"),
        "{}",
        ceiling.title
    );
    let backlog = d
        .findings
        .iter()
        .find(|f| f.id == "queue-backlog")
        .expect("queue-backlog");
    assert!(
        backlog.title.contains("at 40 in flight"),
        "{}",
        backlog.title
    );
    let waiting = d.levels.last().unwrap().waiting.unwrap();
    eprintln!("waiting at 40 in flight: {waiting:.2}");
    assert!(
        (27.0..=30.5).contains(&waiting),
        "40 in flight − 10 slots ≈ 30 waiting, got {waiting}"
    );
    // Throughput grows ≈4 % from 10 to 20 in flight (the knee is at the 10 slots): the break
    // point is where it stops growing, 20 or 40 depending on noise around the 5 % rule.
    let bp = d.break_point.expect("break point");
    assert!(bp.in_flight == 20 || bp.in_flight == 40, "{}", bp.reason);
    let rec = rec.expect("recommendation");
    assert_eq!(rec.operating_concurrency, bp.in_flight * 2 / 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_port_is_fast_failures_and_invalid() {
    let url = format!("http://127.0.0.1:{}/webhook/load", free_port());
    let mut s = sweep(
        closed_profile(
            &url,
            &[5],
            serde_json::json!({"sleep_ms": 1000}),
            "200ms",
            "1s",
        ),
        None,
    )
    .await;
    let (d, _) = analyze(&mut s, known(15, 10), 60.0);
    let fast = d
        .findings
        .iter()
        .find(|f| f.id == "fast-failures-hide-latency")
        .expect("fast failures");
    assert!(fast.title.contains("100 %"), "{}", fast.title);
    assert!(fast.evidence[0].contains("refused"), "{:?}", fast.evidence);
    assert!(d.findings.iter().any(|f| f.id == "measurement-invalid"));
    assert_eq!(d.capping_limit, None);
    assert!(d.measured_ceiling.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_without_runner_is_recognised_by_the_timeout() {
    let stack = Stack::start(StackConfig {
        runners_per_worker: 0,
        task_request_timeout: Duration::from_secs(1),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let mut s = sweep(
        closed_profile(
            &stack.webhook_url,
            &[3],
            serde_json::json!({"sleep_ms": 100}),
            "0s",
            "3s",
        ),
        None,
    )
    .await;
    let (d, _) = analyze(&mut s, Settings::default(), 1.0);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "worker-without-runner")
        .expect("finding");
    assert!(f.evidence[0].contains("answered 500"), "{:?}", f.evidence);
}

/// A "mock server" that serves at most 3 requests at a time, 100 ms each: a limit the n8n model
/// does not contain.
async fn capped_server() -> String {
    use bytes::Bytes;
    use http_body_util::Full;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let gate = gate.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    let gate = gate.clone();
                    async move {
                        let _p = gate.acquire().await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from_static(b"{\"ok\":true}"),
                        )))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}/webhook/load")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceiling_below_every_modelled_one_is_an_unmodelled_limit() {
    let url = capped_server().await;
    let mut s = sweep(
        closed_profile(
            &url,
            &[10, 20],
            serde_json::json!({"sleep_ms": 100}),
            "500ms",
            "3s",
        ),
        None,
    )
    .await;
    // Settings say 15 slots and 10 runner tasks for 100 ms jobs: 100 req/s; the server allows 30.
    let (d, _) = analyze(&mut s, known(15, 10), 60.0);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "unmodelled-limit")
        .expect("unmodelled-limit");
    assert!(
        f.title.contains("70 %") || f.title.contains("69 %") || f.title.contains("71 %"),
        "{}",
        f.title
    );
    assert_eq!(d.capping_limit, None);
    assert!(d.verdict.contains("unmodelled"), "{}", d.verdict);
    assert!(
        f.evidence.iter().any(|e| e.contains("no CPU signal")),
        "{:?}",
        f.evidence
    );
    assert!(!d.findings.iter().any(|f| f.id == "cpu-bound-process"));
    // The same run with a container at a full core: the signal points at it.
    for st in &mut s.stages {
        st.containers
            .push(n8ncap::load::results::ContainerObserved {
                name: "stack-n8n-worker-1".into(),
                role: "worker".into(),
                samples: 3,
                cpu_percent_mean: 99.0,
                cpu_percent_max: 101.0,
                ..Default::default()
            });
    }
    let (d, _) = analyze(&mut s, known(15, 10), 60.0);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "unmodelled-limit")
        .unwrap();
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("stack-n8n-worker-1") && e.contains("99 %")),
        "{:?}",
        f.evidence
    );
    assert!(d.findings.iter().any(|f| f.id == "cpu-bound-process"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_stages_give_intervals_and_equal_limits_are_not_guessed() {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 10,
        runner_limit: 10,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let (mut s, _) = n8ncap::load::run::run_sweep(
        n8ncap::load::run::SweepOptions {
            profile: closed_profile(
                &stack.webhook_url,
                &[12, 20],
                serde_json::json!({"sleep_ms": 300}),
                "1s",
                "3s",
            ),
            out_dir: None,
            abort_on_fail: false,
            progress: false,
            metrics: Vec::new(),
            docker: None,
            scrape_interval: Duration::from_secs(1),
            redis: None,
            queue_metrics_interval: Duration::from_secs(1),
            repeat: 3,
        },
        std::future::pending(),
    )
    .await
    .unwrap();
    assert_eq!(s.stages.len(), 6);
    assert_eq!(s.stages[2].repeat, 2);
    let (d, _) = analyze(&mut s, known(10, 10), 60.0);
    assert_eq!(d.levels.len(), 2);
    let x = &d.levels[0].throughput;
    assert_eq!(x.n, 3);
    assert!(x.low <= x.mean && x.mean <= x.high && x.high > x.low);
    assert_eq!(d.capping_limit, Some(Limit::Both), "{}", d.verdict);
    assert!(d.findings.iter().any(|f| f.id == "limits-inseparable"));
}

#[test]
fn demo_ends_with_the_runner_limit_verdict_and_a_recommendation() {
    let out = std::process::Command::new(bin())
        .args(["demo", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["diagnosis"]["capping_limit"], "runner_limit");
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    let x40 = stages[3]["throughput_rps"].as_f64().unwrap();
    assert!(within(x40, 20.0, 0.05), "{x40}");
    assert_eq!(stages[3]["queue"]["active_max"], 15.0);
    assert!(v["recommendation"]["worker_concurrency"].as_u64().unwrap() >= 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_shorter_than_the_response_time_is_named() {
    // 20 in flight on 5 runner tasks of 500 ms: responses take 2 s, the warm-up is 0.5 s.
    let mut s = sweep_sim(15, 5, &[20], 500, "4s").await;
    for st in &mut s.stages {
        st.warmup_s = 0.5;
    }
    let (d, _) = analyze(&mut s, known(15, 5), 60.0);
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "warmup-too-short")
        .expect("warmup-too-short");
    assert!(f.title.contains("0.5 s"), "{}", f.title);
    // With the stage's real 3 s warm-up there is no such finding.
    let mut s2 = sweep_sim(15, 5, &[20], 500, "8s").await;
    let (d2, _) = analyze(&mut s2, known(15, 5), 60.0);
    assert!(
        !d2.findings.iter().any(|f| f.id == "warmup-too-short"),
        "{:?}",
        d2.findings
    );
}
