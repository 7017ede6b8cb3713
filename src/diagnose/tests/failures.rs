//! Failed responses: the failure point, the task request timeout's signature, fast failures,
//! and a warm-up shorter than the response.

use super::*;

pub(super) fn failing(index: usize, vus: u32, status: Option<u16>, after_ms: f64) -> StageResult {
    let mut s = closed(index, vus, vus as f64 / (after_ms / 1000.0));
    s.ok = 0;
    s.valid = false;
    s.error_rate = 1.0;
    s.throughput_rps = 0.0;
    s.invalid_reasons = vec!["http_req_failed rate<0.05 (observed 1.0000)".into()];
    match status {
        Some(code) => {
            s.errors.http_status.insert(code, s.requests);
        }
        None => s.errors.timeout = s.requests,
    }
    if let Some(l) = s.latency.as_mut() {
        l.p50_ms = after_ms;
        l.p95_ms = after_ms * 1.01;
        l.mean_ms = after_ms;
    }
    s
}

#[test]
fn http_500_after_a_constant_time_is_the_task_request_timeout() {
    // No --task-request-timeout given: n8n's default 60 s matches.
    let d = run(
        &[failing(0, 5, Some(500), 60_150.0)],
        settings(1.0, None, None),
    );
    let f = finding(&d, "worker-without-runner");
    assert!((f.get("fails_after_s").unwrap() - 60.15).abs() < 1e-6);
    assert_eq!(d.capping_limit, Some(Capping::NoRunner));
    // A timeout set to 20 s on the deployment: still named, with the measured time.
    let d = run(
        &[failing(0, 5, Some(500), 20_050.0)],
        settings(1.0, None, None),
    );
    assert!(
        (finding(&d, "worker-without-runner")
            .get("fails_after_s")
            .unwrap()
            - 20.05)
            .abs()
            < 1e-6
    );
}

#[test]
fn a_short_timeout_s_answers_may_wait_for_a_busy_host() {
    // A 1 s timeout whose answers spread to 1.2 s (a CPU hog beside): still one timeout.
    let mut s = failing(0, 3, Some(500), 1_000.0);
    s.latency.as_mut().unwrap().p95_ms = 1_200.0;
    let d = run(&[s.clone()], settings(1.0, None, None));
    assert_eq!(
        finding(&d, "worker-without-runner").get("status"),
        Some(500.0)
    );
    // Spread to 1.5 s: not the same time, no signature.
    s.latency.as_mut().unwrap().p95_ms = 1_500.0;
    let d = run(&[s], settings(1.0, None, None));
    assert!(!d.findings.iter().any(|f| f.id == "worker-without-runner"));
}

#[test]
fn other_constant_failures_are_a_timeout_signature() {
    let d = run(
        &[failing(0, 5, Some(504), 30_000.0)],
        settings(1.0, None, None),
    );
    let f = finding(&d, "timeout-signature");
    assert_eq!(f.get("status"), Some(504.0));
    assert!(!d.findings.iter().any(|f| f.id == "worker-without-runner"));
    let d = run(&[failing(0, 5, None, 10_000.0)], settings(1.0, None, None));
    assert_eq!(finding(&d, "timeout-signature").get("status"), Some(0.0));
}

#[test]
fn fast_failures_are_never_a_latency_and_name_no_limit() {
    let mut s = failing(0, 5, None, 0.4);
    s.errors.timeout = 0;
    s.errors.connect_refused = s.requests;
    let d = run(&[s], settings(1.0, Some(10), Some(10)));
    let f = finding(&d, "fast-failures-hide-latency");
    assert!(f.get("refused").unwrap() > 0.0);
    assert!(!f.evidence.iter().any(|e| e.contains("{}")));
    assert_eq!(d.capping_limit, None);
    assert!(d.measured_ceiling.is_none());
    assert!(d.findings.iter().any(|f| f.id == "measurement-invalid"));
}

#[test]
fn the_failure_point_is_the_first_failing_level() {
    let stages = [
        closed(0, 10, 9.4),
        closed(1, 20, 9.6),
        failing(2, 40, Some(503), 900.0),
    ];
    let d = run(&stages, settings(1.0, Some(10), Some(20)));
    let f = d.failure_point.as_ref().unwrap();
    assert_eq!(f.level, LoadLevel::InFlight(40));
    assert_eq!(f.in_flight, 40.0);
    // 9.4 req/s at 10 in flight is within 5 % of the 9.6 ceiling: the knee is at the slots.
    let k = d.knee.as_ref().unwrap();
    assert_eq!(k.level, LoadLevel::InFlight(10));
}

#[test]
fn a_warmup_shorter_than_the_response_is_named() {
    let mut s = closed(0, 20, 10.0);
    s.warmup_s = 0.5;
    let d = run(&[s], settings(0.5, Some(15), Some(5)));
    let f = finding(&d, "warmup-too-short");
    assert_eq!(f.get("warmup_s"), Some(0.5));
    let d = run(&[closed(0, 20, 10.0)], settings(0.5, Some(15), Some(5)));
    assert!(!d.findings.iter().any(|f| f.id == "warmup-too-short"));
    // One virtual user has no ramp: a short warm-up there is not named.
    let mut one = closed(0, 1, 1.0);
    one.warmup_s = 0.5;
    let d = run(&[one], settings(1.0, Some(15), Some(5)));
    assert!(!d.findings.iter().any(|f| f.id == "warmup-too-short"));
}
