//! A stage's result from what it measured: its figures from the steady window, validity
//! (errors and checks against the thresholds, k6's defaults when the profile has none), the
//! thresholds evaluated, each scenario's part, and the open model's books.

use super::*;

pub(super) fn finish_summary(summary: &mut Summary, totals: &[Agg], thresholds: &[Threshold]) {
    summary.finished_at = crate::util::utc_rfc3339(SystemTime::now());
    let checks = totals.first().map(|a| a.check_passes.len()).unwrap_or(0);
    let mut all = Agg::new(checks);
    for a in totals {
        all.merge(a);
    }
    let window: f64 = summary.stages.iter().map(|s| s.window_s).sum();
    let dropped: u64 = summary.stages.iter().map(|s| s.dropped_iterations).sum();
    summary.thresholds = evaluate(thresholds, &all, window, dropped);
    summary.thresholds_passed = summary.thresholds.iter().all(|t| t.passed);
}

/// The open model's throughput is what completed in the window, by completion time; what
/// arrived and did not complete in it is the backlog, reported with its growth.
pub(super) fn apply_flow(st: &mut StageResult, b: &crate::load::stats::FlowBooks, inherited: u64) {
    let w = st.window_s;
    if w <= 0.0 {
        return;
    }
    st.request_rate = b.completions as f64 / w;
    st.throughput_rps = b.good_completions as f64 / w;
    st.throughput_ci = Some(crate::load::stats::interval(
        &b.completion_offsets,
        (0.0, w),
        st.throughput_rps,
        b.good_completions as f64 / b.completions.max(1) as f64,
        0.0,
        0.0,
    ));
    st.flow = Some(crate::record::stage::Flow {
        inherited,
        ..crate::record::stage::Flow::of(
            w,
            (b.arrivals, b.dropped),
            b.completions,
            (b.backlog_start, b.backlog_end),
            b.late,
        )
    });
}

/// What one stage measured, before it becomes a [`StageResult`].
pub(super) struct StageInput<'a> {
    pub(super) index: usize,
    pub(super) stage: &'a Stage,
    pub(super) profile: &'a Profile,
    pub(super) agg: &'a Agg,
    pub(super) dropped: u64,
    pub(super) window: Duration,
    pub(super) partial: bool,
    pub(super) check_names: &'a [String],
}

/// The pass rate of a stage's checks: passes ÷ evaluations (1 when nothing was checked but
/// something completed, 0 when nothing completed).
pub(super) fn check_pass_rate(agg: &Agg) -> f64 {
    let passes: u64 = agg.check_passes.iter().sum();
    let evaluations = passes + agg.check_fails.iter().sum::<u64>();
    match (evaluations, agg.requests) {
        (0, 0) => 0.0,
        (0, _) => 1.0,
        _ => passes as f64 / evaluations as f64,
    }
}

pub(super) fn check_results(names: &[String], agg: &Agg) -> Vec<CheckResult> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| CheckResult {
            name: name.clone(),
            passes: agg.check_passes.get(i).copied().unwrap_or(0),
            fails: agg.check_fails.get(i).copied().unwrap_or(0),
        })
        .collect()
}

/// Each scenario's figures: its part of the stage's throughput is the stage's throughput ×
/// its share of the good answers, so the parts add up to the whole (the closed model's
/// throughput comes from Little's law over all requests).
pub(super) fn scenario_results(
    stage: &StageResult,
    names: &[ScenarioNames],
    aggs: &[Agg],
) -> Vec<ScenarioResult> {
    let good = |a: &Agg| a.ok.saturating_sub(a.errors.check_failed);
    let all_good: u64 = aggs.iter().map(good).sum();
    let all_requests: u64 = aggs.iter().map(|a| a.requests).sum();
    let rate_per_request = if stage.requests > 0 {
        stage.request_rate / stage.requests as f64
    } else {
        0.0
    };
    names
        .iter()
        .zip(aggs)
        .map(|(n, a)| ScenarioResult {
            name: n.name.clone(),
            requests: a.requests,
            ok: a.ok,
            throughput_rps: if all_good > 0 {
                stage.throughput_rps * good(a) as f64 / all_good as f64
            } else {
                0.0
            },
            request_rate: a.requests as f64 * rate_per_request,
            share: if all_requests > 0 {
                a.requests as f64 / all_requests as f64
            } else {
                0.0
            },
            latency: a.latency_summary(),
            error_rate: if a.requests > 0 {
                a.errors.http_failed() as f64 / a.requests as f64
            } else {
                0.0
            },
            errors: a.errors.clone(),
            checks: check_results(&n.checks, a),
            check_pass_rate: check_pass_rate(a),
            bytes_sent: a.bytes_sent,
            bytes_received: a.bytes_received,
        })
        .collect()
}

pub(super) fn stage_result(
    input: StageInput<'_>,
    thresholds: &[Threshold],
    queue: Option<QueueObserved>,
) -> StageResult {
    let StageInput {
        index,
        stage,
        profile,
        agg,
        dropped,
        window,
        partial,
        check_names,
    } = input;
    let window_s = window.as_secs_f64();
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    let error_rate = error_rate(agg);
    let good = agg.ok.saturating_sub(agg.errors.check_failed);
    let stage_thresholds = evaluate(thresholds, agg, window_s, dropped);
    let invalid_reasons = invalid_reasons(thresholds, agg, (window_s, dropped));
    StageResult {
        index,
        repeat: 0,
        label: stage.label(),
        model: profile.model,
        vus: stage.vus,
        rate: stage.rate,
        ramp_to: stage.ramp_to,
        max_vus: stage.max_vus,
        duration_s: stage.duration.as_secs_f64(),
        warmup_s: stage.warmup.as_secs_f64(),
        window_s,
        partial,
        requests: agg.requests,
        ok: agg.ok,
        throughput_rps: throughput(profile.model, stage, agg, (good, per_s(good))),
        request_rate: per_s(agg.requests),
        latency: agg.latency_summary(),
        phases: agg.phases(),
        error_rate,
        errors: agg.errors.clone(),
        checks: check_results(check_names, agg),
        check_pass_rate: check_pass_rate(agg),
        dropped_iterations: dropped,
        new_connections: agg.new_connections,
        new_conns_per_request: if agg.requests == 0 {
            0.0
        } else {
            agg.new_connections as f64 / agg.requests as f64
        },
        bytes_sent: agg.bytes_sent,
        bytes_received: agg.bytes_received,
        bodies_cut: agg.bodies_cut,
        warmup_requests: agg.warmup_requests,
        client_cpu_percent: 0.0,
        host_cpu_percent: None,
        valid: invalid_reasons.is_empty(),
        invalid_reasons,
        thresholds: stage_thresholds,
        queue,
        endpoints: Vec::new(),
        containers: Vec::new(),
        memory_by_role: Vec::new(),
        ended_by: None,
        scenarios: Vec::new(),
        ramp: stage.ramp,
        flow: None,
        throughput_ci: None,
        iterations: None,
        database: None,
        host_processes: Vec::new(),
        host_placed: false,
        history: None,
    }
}

/// The share of requests that failed in the steady window; when nothing reached it (a stage
/// interrupted in its warm-up), the warm-up's share, not 0.
fn error_rate(agg: &Agg) -> f64 {
    if agg.requests == 0 {
        if agg.warmup_requests > 0 {
            agg.warmup_failed as f64 / agg.warmup_requests as f64
        } else {
            0.0
        }
    } else {
        agg.errors.http_failed() as f64 / agg.requests as f64
    }
}

/// Good answers per second. Closed model: Little's law — in a closed loop N = X × R̄, exactly;
/// counting completions in the window is quantized when jobs finish in batches (a
/// deterministic stack finishes all its slots together), N ÷ R̄ is not. Else `counted` (the
/// `good` answers over the window).
fn throughput(model: LoadModel, stage: &Stage, agg: &Agg, (good, counted): (u64, f64)) -> f64 {
    match (model, stage.vus.filter(|_| stage.ramp.is_none())) {
        (LoadModel::Closed, Some(n)) if agg.requests > 0 && !agg.latency.is_empty() => {
            let mean_s = agg.latency.mean() / 1e6;
            if mean_s > 0.0 {
                n as f64 / mean_s * good as f64 / agg.requests as f64
            } else {
                counted
            }
        }
        _ => counted,
    }
}

/// Why a stage's figures are not results: nothing completed, or the error and check
/// thresholds failed (k6's defaults when the profile has none).
pub(super) fn invalid_reasons(
    thresholds: &[Threshold],
    agg: &Agg,
    (window_s, dropped): (f64, u64),
) -> Vec<String> {
    let mut invalid_reasons = Vec::new();
    if agg.requests == 0 {
        invalid_reasons.push("no request completed in the steady window".to_string());
    }
    let validity: Vec<Threshold> = {
        let mut v: Vec<Threshold> = thresholds
            .iter()
            .filter(|t| {
                matches!(
                    t.metric,
                    ThresholdMetric::HttpReqFailed | ThresholdMetric::Checks
                )
            })
            .cloned()
            .collect();
        if !v.iter().any(|t| t.metric == ThresholdMetric::HttpReqFailed) {
            v.extend(Threshold::parse("http_req_failed", "rate<0.05").ok());
        }
        if !v.iter().any(|t| t.metric == ThresholdMetric::Checks) && !agg.check_passes.is_empty() {
            v.extend(Threshold::parse("checks", "rate>0.99").ok());
        }
        v
    };
    if agg.requests > 0 {
        for t in evaluate(&validity, agg, window_s, dropped) {
            if !t.passed {
                invalid_reasons.push(format!(
                    "{} {} (observed {:.4})",
                    t.metric,
                    t.expr,
                    t.observed.unwrap_or(f64::NAN)
                ));
            }
        }
    }
    if agg.checks_failed_on_cut_body > 0 && !invalid_reasons.is_empty() {
        invalid_reasons.push(format!(
            "{} answers longer than the {} MiB n8ncap keeps of a body failed a check: a check on \
             a later part of the body cannot pass (check a field near the start of the answer)",
            agg.checks_failed_on_cut_body,
            crate::load::client::KEEP_BODY / (1024 * 1024)
        ));
    }
    invalid_reasons
}

/// Evaluates thresholds on an aggregate over `window_s` seconds.
pub(super) fn evaluate(
    thresholds: &[Threshold],
    agg: &Agg,
    window_s: f64,
    dropped: u64,
) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let observed = observe_metric(t, agg, window_s, dropped);
            ThresholdResult {
                metric: t.metric,
                expr: t.expr.clone(),
                observed,
                passed: observed.map(|v| t.passes(v)).unwrap_or(false),
            }
        })
        .collect()
}

pub(super) fn observe_metric(t: &Threshold, agg: &Agg, window_s: f64, dropped: u64) -> Option<f64> {
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    use ThresholdMetric as M;
    match (t.metric, t.agg) {
        (M::HttpReqFailed, Aggregation::Rate) => {
            (agg.requests > 0).then(|| agg.errors.http_failed() as f64 / agg.requests as f64)
        }
        (M::Checks, Aggregation::Rate) => {
            let p: u64 = agg.check_passes.iter().sum();
            let f: u64 = agg.check_fails.iter().sum();
            (p + f > 0).then(|| p as f64 / (p + f) as f64)
        }
        (M::HttpReqDuration, a) => {
            let h = &agg.latency;
            if h.is_empty() {
                return None;
            }
            let ms = |v: u64| v as f64 / 1000.0;
            Some(match a {
                Aggregation::Percentile(q) => ms(h.value_at_quantile(q / 100.0)),
                Aggregation::Avg => h.mean() / 1000.0,
                Aggregation::Max => ms(h.max()),
                Aggregation::Min => ms(h.min()),
                Aggregation::Med => ms(h.value_at_quantile(0.5)),
                _ => return None,
            })
        }
        (M::HttpReqs, Aggregation::Count) => Some(agg.requests as f64),
        (M::HttpReqs, Aggregation::Rate) => Some(per_s(agg.requests)),
        (M::DroppedIterations, Aggregation::Count) => Some(dropped as f64),
        (M::DroppedIterations, Aggregation::Rate) => Some(per_s(dropped)),
        _ => None,
    }
}

/// n8ncap's own CPU over the stage's wall time, and the host's when the target is on this
/// machine (from the readings at the stage's start).
pub(super) fn cpu_figures(
    result: &mut StageResult,
    (cpu_start, host_start): (f64, Option<f64>),
    wall: f64,
    local: bool,
) {
    if wall <= 0.0 {
        return;
    }
    result.client_cpu_percent =
        100.0 * (crate::util::own_cpu_seconds() - cpu_start).max(0.0) / wall;
    if local {
        if let (Some(a), Some(b)) = (host_start, crate::util::host_busy_cpu_seconds()) {
            result.host_cpu_percent = Some(100.0 * (b - a).max(0.0) / wall);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage's steady window of `n` requests, each `ms` long, `failed` of them HTTP 500;
    /// `checks` (passes, fails) of one check.
    fn agg(n: u64, ms: u64, failed: u64, checks: Option<(u64, u64)>) -> Agg {
        let mut a = Agg::new(usize::from(checks.is_some()));
        for _ in 0..n {
            a.latency.record(ms * 1000).unwrap();
        }
        a.requests = n;
        a.ok = n - failed;
        if failed > 0 {
            a.errors.http_status.insert(500, failed);
        }
        if let Some((p, f)) = checks {
            a.check_passes[0] = p;
            a.check_fails[0] = f;
        }
        a.latency_sum_s = (n * ms) as f64 / 1000.0;
        a
    }

    fn closed_stage(vus: u32) -> (Profile, Stage) {
        let p = Profile::parse(
            &format!("model: closed\nrequest: {{url: \"http://127.0.0.1:9/x\"}}\nstage_duration: 10s\nwarmup: 2s\nstages: [{{vus: {vus}}}]\n"),
            "t",
        )
        .unwrap();
        let s = p.resolve_stages().unwrap().remove(0);
        (p, s)
    }

    fn result(a: &Agg, vus: u32, thresholds: &[Threshold], window_s: u64) -> StageResult {
        let (p, s) = closed_stage(vus);
        stage_result(
            StageInput {
                index: 0,
                stage: &s,
                profile: &p,
                agg: a,
                dropped: 0,
                window: Duration::from_secs(window_s),
                partial: false,
                check_names: &[],
            },
            thresholds,
            None,
        )
    }

    #[test]
    fn a_closed_stage_s_throughput_is_little_s_law_over_the_good_share() {
        // 10 in flight, 500 ms each: 20 req/s; 5 % failed: 19 good answers per second.
        let r = result(&agg(400, 500, 20, None), 10, &[], 20);
        assert!(
            (r.throughput_rps - 19.0).abs() < 0.1,
            "{}",
            r.throughput_rps
        );
        assert!((r.request_rate - 20.0).abs() < 1e-9);
        assert!((r.error_rate - 0.05).abs() < 1e-9);
        // 5 % is not under k6's default http_req_failed rate<0.05: invalid.
        assert!(!r.valid);
        assert_eq!(r.invalid_reasons.len(), 1);
        let r = result(&agg(400, 500, 19, None), 10, &[], 20);
        assert!(r.valid, "{:?}", r.invalid_reasons);
    }

    #[test]
    fn nothing_completed_is_invalid_and_its_error_share_is_the_warm_up_s() {
        let mut a = agg(0, 0, 0, None);
        a.warmup_requests = 40;
        a.warmup_failed = 30;
        let r = result(&a, 10, &[], 20);
        assert!(!r.valid);
        assert_eq!(r.throughput_rps, 0.0);
        assert!((r.error_rate - 0.75).abs() < 1e-9);
    }

    #[test]
    fn checks_decide_validity_and_their_pass_rate_is_passes_over_evaluations() {
        let a = agg(100, 100, 0, Some((98, 2)));
        assert!((check_pass_rate(&a) - 0.98).abs() < 1e-9);
        // Under k6's default checks rate>0.99.
        assert_eq!(invalid_reasons(&[], &a, (10.0, 0)).len(), 1);
        let a = agg(100, 100, 0, Some((100, 0)));
        assert!(invalid_reasons(&[], &a, (10.0, 0)).is_empty());
        // Nothing checked, something completed: 1; nothing completed: 0.
        assert_eq!(check_pass_rate(&agg(5, 100, 0, None)), 1.0);
        assert_eq!(check_pass_rate(&agg(0, 0, 0, None)), 0.0);
    }

    #[test]
    fn thresholds_are_evaluated_on_the_window() {
        let a = agg(200, 300, 0, None);
        let t = [
            Threshold::parse("http_req_duration", "p(95)<250").unwrap(),
            Threshold::parse("http_req_duration", "avg<400").unwrap(),
            Threshold::parse("http_reqs", "rate>15").unwrap(),
            Threshold::parse("dropped_iterations", "count<1").unwrap(),
        ];
        let got = evaluate(&t, &a, 10.0, 3);
        let observed: Vec<f64> = got.iter().map(|r| r.observed.unwrap()).collect();
        assert!((observed[0] - 300.0).abs() < 1.0, "{observed:?}");
        assert!((observed[1] - 300.0).abs() < 1.0);
        assert!((observed[2] - 20.0).abs() < 1e-9);
        assert_eq!(observed[3], 3.0);
        let passed: Vec<bool> = got.iter().map(|r| r.passed).collect();
        assert_eq!(passed, [false, true, true, false]);
        // A latency threshold decides no validity: only errors and checks do.
        let r = result(&a, 6, &t, 10);
        assert!(r.valid);
        // The stage dropped nothing: only the p95 fails.
        assert_eq!(r.thresholds.iter().filter(|t| !t.passed).count(), 1);
    }
}
