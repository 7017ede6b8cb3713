//! Diagnosis against the simulator: one test per scenario, each asserting the named finding and
//! its numbers.

use crate::common::*;
use n8ncap::model::settings::Provenance;
use n8ncap::model::settings::{Settings, Sourced};
use n8ncap::model::{Capping, Limit};
use n8ncap::recommend::analyze::analyze;
use n8ncap::record::diagnosis::CpuSite;
use n8ncap::record::Summary;
use n8ncap::sim::{Stack, StackConfig};
use std::time::Duration;

fn known(c: u32, r: u32) -> Settings {
    Settings {
        workers: Some(Sourced::new(1, Provenance::Assumed("test".into()))),
        worker_concurrency: Some(Sourced::new(c, Provenance::Assumed("test".into()))),
        runner_limit: Some(Sourced::new(r, Provenance::Assumed("test".into()))),
        runners_per_worker: Some(Sourced::new(1, Provenance::Assumed("test".into()))),
        ..Settings::default()
    }
}

/// Warm-up must outlast the slowest response (up to 3 s here) so the window is steady.
async fn sweep_sim(c: u32, r: u32, vus: &[u32], job_ms: u64, dur: &str) -> Summary {
    sweep_served(c, r, vus, job_ms, dur).await.0
}

/// [`sweep_sim`] and the stack's own service times in the same run.
async fn sweep_served(c: u32, r: u32, vus: &[u32], job_ms: u64, dur: &str) -> (Summary, Served) {
    let stack = Stack::start(StackConfig {
        worker_concurrency: c,
        runner_limit: r,
        queue_metrics_interval: Duration::from_millis(500),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let summary = sweep(
        closed_profile(
            &stack.webhook_url,
            vus,
            serde_json::json!({"sleep_ms": job_ms}),
            "3s",
            dur,
        ),
        Some(format!("{}/metrics", stack.main_url)),
    )
    .await;
    (summary, served(&stack).await)
}

fn finding<'a>(d: &'a n8ncap::record::Diagnosis, id: &str) -> &'a n8ncap::findings::Finding {
    d.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id}: {}", d.verdict))
}

/// The simulator holds each slot 20 ms longer than the job (its in-slot overhead), which the
/// worker-bound ceiling feels and the runner-bound one does not. On an idle machine the runner's
/// 5 tasks of 200 ms give 25/s; the rates are held against the task time this run measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 12 s): a simulated stack under load"]
async fn runner_limit_5_is_named_with_its_numbers() {
    let (mut s, served) = sweep_served(15, 5, &[20, 30], 200, "6s").await;
    let (d, _) = analyze(&mut s, known(15, 5), None);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
    let f = finding(&d, "runner-limit-caps");
    let expected = 5.0 / served.task_s;
    let x = f.get("throughput_per_s").unwrap();
    assert!(
        within(x, expected, 0.05),
        "{x} for {expected} from {served:?}"
    );
    assert!(x <= 25.0 * 1.02, "{x} above 5 tasks ÷ 0.2 s");
    // Every slot taken while a third of them run Code: the gauge's count, and X × C tasks running
    // (C the 200 ms asked for) — 5 of them, less what the measured task time adds beyond C.
    assert!(within(f.get("slots_taken").unwrap(), 15.0, 0.05));
    let running = f.get("runner_tasks_running").unwrap();
    assert!(running <= 5.0 * 1.02, "{running}");
    assert!(
        within(running, 5.0 * 0.2 / served.task_s, 0.05),
        "{running}"
    );
    let ceiling = d.measured_ceiling.as_ref().unwrap().mean;
    assert!(within(ceiling, expected, 0.05), "{ceiling} for {expected}");
    assert!(s.diagnosis.is_some() && s.recommendation.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 12 s): a simulated stack under load"]
async fn runner_limit_20_leaves_worker_concurrency_named() {
    let mut s = sweep_sim(15, 20, &[20, 30], 200, "6s").await;
    let (d, _) = analyze(&mut s, known(15, 20), None);
    assert_eq!(
        d.capping_limit,
        Some(Limit::WorkerConcurrency.into()),
        "{}",
        d.verdict
    );
    // What contention cannot move: 15 slots of at least 220 ms (job + in-slot overhead) allow
    // at most 15 ÷ 0.22 s — a busy machine only lengthens a slot — and at the ceiling n8n's
    // gauge counts the 15 slots taken while X × S fills them.
    let x = d.measured_ceiling.as_ref().unwrap().mean;
    assert!(x <= 15.0 / 0.22 * 1.06, "{x}");
    let at = d
        .levels
        .iter()
        .filter(|l| l.saturated())
        .filter_map(|l| l.slots_taken)
        .fold(0.0, f64::max);
    assert!(within(at, 15.0, 0.06), "slots taken {at}");
    let f = finding(&d, "worker-concurrency-caps");
    assert!(
        f.get("executions_in_progress").unwrap() >= 15.0 * 0.94,
        "{f:?}"
    );
}

/// One stage, nothing known but the request body: the level alone pins both limits — worker
/// concurrency from the queue gauges, the runner limit from X × C — as a single k6 run would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_level_pins_an_unknown_runner_limit() {
    let mut s = sweep_sim(15, 6, &[20], 200, "6s").await;
    let (d, _) = analyze(&mut s, Settings::default(), None);
    let r = d
        .settings
        .runner_limit
        .as_ref()
        .expect("runner limit inferred");
    assert!(matches!(r.source, Provenance::Inferred(_)), "{}", r.source);
    assert_eq!(r.value, 6);
    let c = d.settings.worker_concurrency.as_ref().expect("inferred");
    assert_eq!(c.value, 15, "{}", c.source);
    assert_eq!(
        d.capping_limit,
        Some(Limit::RunnerLimit.into()),
        "{}",
        d.verdict
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 18 s): a simulated stack under load"]
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
            &[10, 20, 40],
            serde_json::json!({"sleep_ms": 500}),
            "3s",
            "6s",
        ),
        Some(format!("{}/metrics", stack.main_url)),
        Duration::from_millis(100),
    )
    .await;
    let (d, rec) = analyze(&mut s, known(10, 20), None);
    let ceiling = finding(&d, "ceiling-reached");
    let from = ceiling.get("from").unwrap();
    assert!(from == 10.0 || from == 20.0, "{}", ceiling.title);
    let backlog = finding(&d, "queue-backlog");
    assert_eq!(backlog.get("in_flight"), Some(40.0));
    let waiting = d.levels.last().unwrap().waiting.unwrap();
    eprintln!("waiting at 40 in flight: {waiting:.2}");
    assert!(
        (27.0..=30.5).contains(&waiting),
        "40 in flight − 10 slots ≈ 30 waiting, got {waiting}"
    );
    // The knee: the ceiling begins at the 10 slots (X × S ≈ 10 executions in progress). On an
    // idle machine 10 in flight already runs within 5 % of the ceiling; on a busy one its
    // overhead can put it just under, and the level named is 20 — the executions in progress
    // are 10 either way, which is what contention cannot change.
    let knee = d.knee.as_ref().expect("knee");
    assert!(
        matches!(
            knee.level,
            n8ncap::record::LoadLevel::InFlight(10) | n8ncap::record::LoadLevel::InFlight(20)
        ),
        "{}",
        knee.reason
    );
    assert!(within(knee.in_flight, 10.0, 0.1), "{}", knee.reason);
    assert!(d.failure_point.is_none());
    // No failure: the plan keeps the slots it measured and raises worker concurrency.
    let rec = rec.expect("recommendation");
    assert!(rec.settings.worker_concurrency_or_default() > 10);
    assert!(rec.predicted_throughput > d.measured_ceiling.as_ref().unwrap().mean);
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
    let (d, rec) = analyze(&mut s, known(15, 10), None);
    let fast = finding(&d, "fast-failures-hide-latency");
    assert_eq!(fast.get("error_rate"), Some(1.0));
    assert!(fast.get("refused").unwrap() > 0.0);
    assert!(rec.is_err());
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
    // No --task-request-timeout: the constant HTTP 500 after ≈1 s is enough.
    let (d, _) = analyze(&mut s, Settings::default(), None);
    let f = finding(&d, "worker-without-runner");
    assert_eq!(f.get("status"), Some(500.0));
    assert!(within(f.get("fails_after_s").unwrap(), 1.0, 0.2));
    assert_eq!(d.capping_limit, Some(Capping::NoRunner));
}

/// A "mock server" that serves at most 3 requests at a time, 100 ms each: a limit the n8n model
/// does not contain. Beside its URL, the requests it served and the microseconds they held a
/// place (its own service time, which a busy machine stretches).
async fn capped_server() -> (String, std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>) {
    use bytes::Bytes;
    use http_body_util::Full;
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let held = std::sync::Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let books = held.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let gate = gate.clone();
            let held = held.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    let gate = gate.clone();
                    let held = held.clone();
                    async move {
                        let _p = gate.acquire().await;
                        let t0 = std::time::Instant::now();
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        held[0].fetch_add(1, Ordering::Relaxed);
                        let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
                        held[1].fetch_add(us, Ordering::Relaxed);
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
    (format!("http://{addr}/webhook/load"), books)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceiling_below_every_modelled_one_is_an_unmodelled_limit() {
    let (url, held) = capped_server().await;
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
    // Settings say 15 slots and 10 runner tasks for 100 ms jobs (S assumed 160 ms): 94 req/s;
    // the server allows 3 ÷ its hold time (30/s idle), and no CPU was measured.
    let (d, _) = analyze(&mut s, known(15, 10), None);
    let f = finding(&d, "unmodelled-limit");
    let n = held[0].load(std::sync::atomic::Ordering::Relaxed) as f64;
    let hold_s = held[1].load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6 / n;
    let x = f.get("throughput_per_s").unwrap();
    assert!(within(x, 3.0 / hold_s, 0.1), "{x} for 3 ÷ {hold_s} s");
    assert!(x <= 30.0 * 1.02, "{x}");
    assert!(within(
        f.get("model_ceiling_per_s").unwrap(),
        15.0 / 0.16,
        0.01
    ));
    assert_eq!(d.capping_limit, None);
    assert!(f.evidence.iter().any(|e| e.contains("--docker")));
    assert!(d.cpu.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 18 s): a simulated stack under load"]
/// 10 slots (held 320 ms with the overhead) against 9 runner tasks of 300 ms: ceilings within
/// the overhead's uncertainty of each other, so the diagnosis does not guess.
async fn repeated_stages_give_intervals_and_equal_limits_are_not_guessed() {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 10,
        runner_limit: 9,
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let (mut s, _) = n8ncap::load::run::run_sweep(
        n8ncap::load::run::SweepOptions {
            repeat: 3,
            ..n8ncap::load::run::SweepOptions::new(closed_profile(
                &stack.webhook_url,
                &[12, 20],
                serde_json::json!({"sleep_ms": 300}),
                "1s",
                "3s",
            ))
        },
        std::future::pending(),
    )
    .await
    .unwrap();
    assert_eq!(s.stages.len(), 6);
    assert_eq!(s.stages[2].repeat, 2);
    let (d, _) = analyze(&mut s, known(10, 9), None);
    assert_eq!(d.levels.len(), 2);
    let x = &d.levels[0].throughput;
    assert_eq!(x.n, 3);
    assert!(x.low <= x.mean && x.mean <= x.high && x.high > x.low);
    assert_eq!(d.capping_limit, Some(Capping::Both), "{}", d.verdict);
    assert!(d.findings.iter().any(|f| f.id == "limits-inseparable"));
}

#[test]
#[ignore = "stack tier (≈ 32 s): the demo: a simulated stack swept"]
fn demo_ends_with_the_runner_limit_verdict_and_a_recommendation() {
    let out = std::process::Command::new(bin())
        .args(["demo", "--json"])
        .output()
        .unwrap();
    let v = json_of_success(&out);
    assert_eq!(v["diagnosis"]["capping_limit"], "runner_limit");
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    // The demo's runner allows 20/s on an idle machine and never more (sleeps never end early);
    // a busy machine lowers it, and the verdict above is what it cannot change.
    let x40 = stages[3]["throughput_rps"].as_f64().unwrap();
    assert!(x40 <= 20.0 * 1.02 && x40 > 0.0, "{x40}");
    assert_eq!(stages[3]["queue"]["active_max"], 15.0);
    assert!(v["recommendation"]["worker_concurrency"].as_u64().unwrap() >= 15);
}

/// A simulated worker that burns 100 ms of CPU per execution on its one JavaScript thread, with
/// slots and runners out of the way (worker 15, runner 20, 0.3 s Code): CPU caps. On an idle
/// machine the worker's core binds at ≈ 10 executions/s and the plan adds workers, each with its
/// runner; on a busy one (other tests, a build, a CPU hog beside the suite) the worker cannot get
/// its core: then either the stack's own processes still saturate (the worker's core, or the
/// host's cores by the stack's processes alone), or the other work is named as `host-shared`
/// and no CPU verdict is drawn from it.
/// Either way the CPU per execution (thread CPU time) is what contention cannot change, and the
/// site named allows what was measured.
/// A stack of 15 slots and runner limit 20 with `cfg`'s CPU costs, swept at 1 and 10 in flight
/// (300 ms Code jobs) with main's and the worker's CPU read from their `/metrics`, and judged.
async fn cpu_watched(
    cfg: StackConfig,
) -> (
    n8ncap::record::Diagnosis,
    Result<n8ncap::record::Recommendation, n8ncap::error::NoPlan>,
) {
    let stack = Stack::start(StackConfig {
        worker_concurrency: 15,
        runner_limit: 20,
        queue_metrics_interval: Duration::from_millis(500),
        ..cfg
    })
    .await
    .unwrap();
    let profile = closed_profile(
        &stack.webhook_url,
        &[1, 10],
        serde_json::json!({"sleep_ms": 300}),
        "2s",
        "7s",
    );
    let endpoints = vec![
        (
            format!("{}/metrics", stack.main_url),
            n8ncap::record::Role::Main,
        ),
        (
            stack.worker_metrics_urls[0].clone(),
            n8ncap::record::Role::Worker,
        ),
    ];
    let mut s = sweep_cpu_watched(profile, endpoints, known(15, 20)).await;
    let (d, rec) = analyze(&mut s, Settings::default(), None);
    (d, rec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 14 s): a simulated stack under load"]
async fn a_cpu_bound_simulated_worker_is_named_and_more_workers_are_proposed() {
    let (d, rec) = cpu_watched(StackConfig {
        worker_cpu: Duration::from_millis(100),
        ..StackConfig::default()
    })
    .await;
    if d.capping_limit != Some(Limit::Cpu.into()) {
        return crate::common::assert_host_shared(&d);
    }
    let worker = d
        .cpu
        .iter()
        .find(|u| u.site == CpuSite::Process && u.role == Some(n8ncap::record::Role::Worker))
        .expect("the worker's CPU measured");
    assert!(
        within(worker.cpu_s_per_execution, 0.1, 0.2),
        "CPU per execution {}",
        worker.cpu_s_per_execution
    );
    let ceiling = d.measured_ceiling.as_ref().unwrap().mean;
    let site = d.cpu_limit.as_ref().unwrap();
    eprintln!(
        "CPU binds at {} ({:.2} of {:.1} cores): allows {:.2}/s, measured {ceiling:.2}/s",
        site.name, site.cores_used, site.usable_cores.value, site.bound_per_s
    );
    // The bound is never below what ran.
    assert!(
        site.bound_per_s >= 0.95 * ceiling,
        "{} allows {} for {ceiling} measured",
        site.name,
        site.bound_per_s
    );
    match site.site {
        CpuSite::Process => {
            assert_eq!(site.role, Some(n8ncap::record::Role::Worker));
            // What ran is the CPU the worker really had ÷ the 100 ms the simulator spends per
            // execution: a busy host gives it less than its core, and the ceiling follows what
            // it got, not the core it was promised.
            assert!(ceiling <= 10.0 * 1.15, "{ceiling}");
            assert!(
                within(ceiling, site.cores_used / 0.1, 0.2),
                "{ceiling} measured with {} cores at 0.1 CPU s each",
                site.cores_used
            );
            let rec = rec.expect("a plan");
            assert!(rec.settings.worker_count() >= 2, "{rec:?}");
            assert!(rec.cpu_measured);
            assert!(rec.predicted_throughput > ceiling);
            assert!(rec.settings.runners_per_worker_count() >= 1);
        }
        CpuSite::Host => {
            // The worker got less than its core because the host's were busy.
            assert!(
                site.cores_used >= 0.85 * site.usable_cores.value,
                "{site:?}"
            );
            // Named because its bound is the lower one (the worker may be near its core too:
            // both saturate when other processes share the host).
            assert!(
                site.bound_per_s <= worker.bound_per_s * 1.02,
                "{site:?} named over {worker:?}"
            );
            assert!(ceiling < 10.0 * 1.15, "{ceiling}");
            let why = rec.expect_err("no setting raises the host's CPU");
            assert!(why.contains("host"), "{why}");
        }
    }
}

/// Main's gauges refreshed every 4 s (n8n's 20 s, scaled) while the sweep is told 1 s, stages of
/// 3 s: a gauge read in a stage is often the stage before's. 2 workers × 5 slots, runners of 3
/// tasks each, 0.5 s jobs (the stack: 6 tasks, 12/s). Whatever is named, its bound is
/// not below what was measured, and the refresh the scrapes saw is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 22 s): a simulated stack under load"]
async fn stale_gauges_never_name_a_bound_below_the_measured_ceiling() {
    let stack = Stack::start(StackConfig {
        workers: 2,
        worker_concurrency: 5,
        runner_limit: 3,
        queue_metrics_interval: Duration::from_secs(4),
        ..StackConfig::default()
    })
    .await
    .unwrap();
    let mut s = sweep_scraped(
        closed_profile(
            &stack.webhook_url,
            &[1, 4, 8, 12, 16, 20, 24],
            serde_json::json!({"sleep_ms": 500}),
            "1s",
            "3s",
        ),
        Some(format!("{}/metrics", stack.main_url)),
        Duration::from_millis(500),
    )
    .await;
    let given = Settings {
        workers: Some(Sourced::new(2, Provenance::Assumed("test".into()))),
        job_time: Some(Sourced::new(0.5, Provenance::Assumed("test".into()))),
        ..Settings::default()
    };
    let (d, _) = analyze(&mut s, given, None);
    let x = d.measured_ceiling.clone().expect("saturated");
    let st = d.service_time.as_ref().unwrap().value;
    let slot = (st - d.fixed_overhead_s.unwrap_or(0.0)).max(0.5);
    match d.capping_limit {
        Some(Capping::Kind(Limit::WorkerConcurrency)) => {
            let c = d.settings.worker_concurrency.as_ref().unwrap().value as f64 * 2.0;
            assert!(
                c / slot >= 0.97 * x.low,
                "{c} slots ÷ {slot} under {x:?}: {}",
                d.verdict
            );
        }
        Some(Capping::Kind(Limit::RunnerLimit)) => {
            let r = d.settings.runner_limit.as_ref().unwrap().value as f64 * 2.0;
            assert!(
                r / 0.5 >= 0.97 * x.low,
                "{r} tasks under {x:?}: {}",
                d.verdict
            );
        }
        None => {}
        other => panic!("{other:?}: {}", d.verdict),
    }
    // The refresh seen, ≈ 4 s, is reported with the stages that came after four changes.
    let seen: Vec<f64> = s
        .stages
        .iter()
        .filter_map(|st| st.queue.as_ref().and_then(|q| q.refresh_s))
        .collect();
    assert!(seen.iter().any(|r| (3.0..=5.5).contains(r)), "{seen:?}");
    assert!(
        d.findings.iter().any(|f| f.id == "queue-refresh-mismatch"),
        "{:?}",
        d.findings.iter().map(|f| f.id).collect::<Vec<_>>()
    );
}

/// main burning 60 ms of CPU per request on its one thread in queue mode, the workers' slots
/// and runners far above it: main's intake is named (not "CPU"), with main's CPU per execution,
/// and no plan adds workers. A busy host may saturate first: then that is what is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 14 s): a simulated stack under load"]
async fn a_simulated_main_at_its_core_is_named_as_mains_intake() {
    let (d, rec) = cpu_watched(StackConfig {
        main_cpu: Duration::from_millis(60),
        ..StackConfig::default()
    })
    .await;
    eprintln!("{}", d.verdict);
    if d.capping_limit != Some(Limit::MainIntake.into()) {
        assert_ne!(
            d.capping_limit,
            Some(Limit::WorkerConcurrency.into()),
            "{}",
            d.verdict
        );
        return crate::common::assert_host_shared(&d);
    }
    let site = d.cpu_limit.as_ref().expect("main's CPU site");
    assert_eq!(site.role, Some(n8ncap::record::Role::Main));
    // Main's CPU per execution: the 60 ms burnt and the simulator's own intake.
    assert!(
        (0.055..0.09).contains(&site.cpu_s_per_execution),
        "{site:?}"
    );
    let ceiling = d.measured_ceiling.as_ref().unwrap().mean;
    assert!(site.bound_per_s >= 0.95 * ceiling, "{site:?} for {ceiling}");
    let f = d
        .findings
        .iter()
        .find(|f| f.id == "main-intake-caps")
        .expect("main-intake-caps");
    assert!((f.get("cpu_s_per_execution").unwrap() - site.cpu_s_per_execution).abs() < 1e-9);
    assert!(rec.is_err(), "{rec:?}");
}
