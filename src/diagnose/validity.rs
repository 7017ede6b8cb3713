//! Validity before latency: stages whose figures are not results (failures, fast failures, a
//! warm-up shorter than the response), and failures with a timeout's signature — every request
//! failing the same way after the same time.

use crate::findings::{Finding, FindingId};
use crate::model::n8n_defaults;
use crate::record::diagnosis::Level;
use crate::record::stage::StageEnd;
use crate::record::{LoadLevel, StageResult};

/// p95 within this share of p50: the failures all took the same time.
const CONSTANT_SPREAD: f64 = 0.1;
/// …or within this many seconds of it: a fixed timeout's answers still wait for a busy host's
/// scheduler and the load generator's own turn, an amount that does not grow with the timeout
/// (a 1 s timeout beside a CPU hog answered between 1.0 and 1.2 s).
const CONSTANT_SPREAD_FLOOR_S: f64 = 0.25;

pub fn findings(
    stages: &[StageResult],
    levels: &[Level],
    timeout_s: Option<f64>,
    out: &mut Vec<Finding>,
) {
    warmup(stages, out);
    refresh_contradicts_flag(stages, out);
    let baseline_p50 = levels
        .iter()
        .find(|l| l.valid && l.level == LoadLevel::InFlight(1))
        .and_then(|l| l.p50_ms);
    // A ramp window is no level: its figures are reported, not judged.
    for s in stages.iter().filter(|s| !s.valid && s.ramp.is_none()) {
        if let Some(f) = timeout_signature(s, timeout_s) {
            out.push(f);
        } else if let Some(f) = fast_failures(s, baseline_p50) {
            out.push(f);
        }
        out.push(
            Finding::new(FindingId::MeasurementInvalid,
                format!("Stage {} ({}) is invalid: its figures are not results", s.index + 1, s.label),
            )
            .evidence(s.invalid_reasons.join("; "))
            .figure("stage", (s.index + 1) as f64)
            .figure("error_rate", s.error_rate)
            .fix("fix the failures first; a stage with failing checks is never reported as a good latency"),
        );
    }
    for l in levels {
        let Some(why) = &l.impossible else { continue };
        let mut f = Finding::new(
            FindingId::LevelImpossible,
            format!(
                "{} is left out: its figures break Little's law, so they are not a measurement",
                l.words()
            ),
        )
        .evidence(why.clone())
        .evidence(format!(
            "stage(s) {}",
            l.stages
                .iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .figure("throughput_per_s", l.throughput.mean)
        .figure("in_flight", l.in_flight);
        if let Some(ms) = l.mean_ms {
            f = f.figure("mean_ms", ms);
        }
        out.push(f.why("Throughput × mean response is the number in flight (Little's law): a closed level cannot complete more than its users at their fastest response allow, and an open window's arrivals minus completions is its backlog's growth. A level that breaks this was miscounted — requests attributed to the wrong window, a clock jump, or a file edited by hand.")
            .fix("re-run the level, or read the raw k6 output (--out json) instead of a summary; check that the load generator's clock did not jump"));
    }
}

/// The queue gauges refreshed less often than the interval given said: the stages whose steady
/// window held fewer than two refreshes measured had their gauges left out.
fn refresh_contradicts_flag(stages: &[StageResult], out: &mut Vec<Finding>) {
    // A level the adaptive search ended as soon as its throughput was steady chose its own
    // length: its gauges are left out all the same, but that is not the flag's fault.
    let hit: Vec<&StageResult> = stages
        .iter()
        .filter(|s| !ended_when_steady(s))
        .filter(|s| s.queue.as_ref().is_some_and(|q| q.refresh_contradicts_flag))
        .collect();
    let Some(r) = hit
        .iter()
        .filter_map(|s| s.queue.as_ref().and_then(|q| q.refresh_s))
        .reduce(f64::max)
    else {
        return;
    };
    out.push(
        Finding::new(
            FindingId::QueueRefreshMismatch,
            format!(
                "n8n refreshed its queue gauges every ≈ {r:.1} s: {} stage(s) held fewer than two refreshes, and their gauges were left out",
                hit.len()
            ),
        )
        .evidence(format!(
            "stages {}: main's slots, waiting and completion counter changed every ≈ {r:.1} s, longer than the --queue-metrics-interval given allows for these stages",
            hit.iter().map(|s| (s.index + 1).to_string()).collect::<Vec<_>>().join(", ")
        ))
        .figure("queue_refresh_s", r)
        .figure("stages", hit.len() as f64)
        .why("A gauge older than the stage describes the stage before: slots read from it cap nothing that ran.")
        .fix("set --queue-metrics-interval to main's N8N_METRICS_QUEUE_METRICS_INTERVAL, or make stages at least two refreshes long (or lower that setting on main)"),
    );
}

/// The adaptive search ended the stage once its throughput was steady (or answered its knee
/// question): it chose the length and judged steadiness itself, by batch means.
fn ended_when_steady(s: &StageResult) -> bool {
    matches!(
        s.ended_by,
        Some(StageEnd::Steady { .. } | StageEnd::Settled { .. })
    )
}

/// A window that opens before the first responses at this load came back is not steady. One
/// virtual user has no ramp to mix in (its requests follow each other from the first); a
/// ramp window is moving load by design (see `ramp`).
fn warmup(stages: &[StageResult], out: &mut Vec<Finding>) {
    let Some(s) = stages.iter().find(|s| {
        s.valid
            && !ended_when_steady(s)
            && !matches!(s.ended_by, Some(StageEnd::SlotsCounted))
            && s.vus != Some(1)
            && s.ramp.is_none()
            && s.history.is_none()
            && s.latency
                .as_ref()
                .is_some_and(|l| s.warmup_s + 1e-9 < l.p50_ms / 1000.0)
    }) else {
        return;
    };
    let p50_s = s.latency.as_ref().map(|l| l.p50_ms / 1000.0).unwrap_or(0.0);
    out.push(
        Finding::new(FindingId::WarmupTooShort,
            format!(
                "Stage {}: warm-up {:.1} s is shorter than the response time ({p50_s:.1} s p50) — its figures mix in the ramp",
                s.index + 1,
                s.warmup_s,
            ),
        )
        .figure("warmup_s", s.warmup_s)
        .figure("p50_s", p50_s)
        .why("Until every virtual user has had one answer at the new load, the stage is not steady: throughput and latency are biased.")
        .fix("leave at least the p50 of the highest stage out of each window: warmup (profile) or --warmup for a sweep; for a k6 run, --k6-json with --k6-warmup (a summary export keeps no time series to cut)"),
    );
}

/// Every request failing one way after the same ≥ 1 s: a timeout somewhere. HTTP 500 after a
/// constant time is n8n's task request timeout — a worker with no runner attached.
fn timeout_signature(s: &StageResult, timeout_s: Option<f64>) -> Option<Finding> {
    let l = s.latency.as_ref()?;
    let failed = s.requests.saturating_sub(s.ok);
    if s.requests == 0 || (failed as f64) < 0.9 * s.requests as f64 || l.p50_ms < 1000.0 {
        return None;
    }
    if l.p95_ms - l.p50_ms > (CONSTANT_SPREAD * l.p50_ms).max(CONSTANT_SPREAD_FLOOR_S * 1000.0) {
        return None;
    }
    let after = l.p50_ms / 1000.0;
    let (code, n) = s
        .errors
        .http_status
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(c, n)| (Some(*c), *n))
        .unwrap_or((None, s.errors.timeout));
    if (n as f64) < 0.9 * failed as f64 {
        return None;
    }
    let expected = timeout_s.unwrap_or(n8n_defaults::TASK_REQUEST_TIMEOUT_S);
    let matches = (after - expected).abs() <= 0.3 * expected;
    let f = match code {
        Some(500) => Finding::new(FindingId::WorkerWithoutRunner,
            format!(
                "Stage {}: executions fail with HTTP 500 after ≈{after:.0} s — the task request timeout: is a runner attached?",
                s.index + 1
            ),
        )
        .evidence(format!(
            "{n} of {} requests answered 500, p50 {after:.1} s, p95 {:.1} s: the same failure after the same time",
            s.requests,
            l.p95_ms / 1000.0
        ))
        .evidence(if matches {
            format!("≈ N8N_RUNNERS_TASK_REQUEST_TIMEOUT ({expected:.0} s{})", if timeout_s.is_some() { "" } else { ", n8n's default" })
        } else {
            format!("N8N_RUNNERS_TASK_REQUEST_TIMEOUT would be {after:.0} s here (n8n's default is {:.0} s): check what the deployment sets", n8n_defaults::TASK_REQUEST_TIMEOUT_S)
        })
        .why("A worker with no runner attached (or runners all busy for the whole timeout) fails every Code task, late and silently.")
        .fix("attach a runner to every worker: an n8nio/runners container with N8N_RUNNERS_TASK_BROKER_URI pointing at that worker, N8N_RUNNERS_MODE=external and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on the worker"),
        other => Finding::new(FindingId::TimeoutSignature,
            format!(
                "Stage {}: every request fails the same way ({}) after ≈{after:.1} s — a timeout",
                s.index + 1,
                other.map(|c| format!("HTTP {c}")).unwrap_or_else(|| "no answer".into())
            ),
        )
        .evidence(format!(
            "{n} of {} requests, p50 {after:.1} s, p95 {:.1} s",
            s.requests,
            l.p95_ms / 1000.0
        ))
        .fix("find whose timeout this is: the client's (--timeout), a proxy's (504), or n8n's (N8N_RUNNERS_TASK_REQUEST_TIMEOUT, EXECUTIONS_TIMEOUT)"),
    };
    Some(
        f.figure("fails_after_s", after)
            .figure("failed", n as f64)
            .figure("requests", s.requests as f64)
            .figure("status", code.map(f64::from).unwrap_or(0.0)),
    )
}

fn fast_failures(s: &StageResult, baseline_p50: Option<f64>) -> Option<Finding> {
    let p50 = s.latency.as_ref().map(|l| l.p50_ms).filter(|p50| {
        s.error_rate > 0.5 && baseline_p50.is_none_or(|b| *p50 < 0.5 * b) && *p50 < 1000.0
    })?;
    let statuses: Vec<String> = s
        .errors
        .http_status
        .iter()
        .map(|(code, n)| format!("{n}× HTTP {code}"))
        .collect();
    Some(
        Finding::new(FindingId::FastFailuresHideLatency,
            format!(
                "Stage {}: {:.0} % of requests failed fast (p50 {p50:.1} ms) — that latency is not a result",
                s.index + 1,
                s.error_rate * 100.0
            ),
        )
        .evidence(format!(
            "errors: {} refused, {} other connect, {} TLS, {} timeout, {} broken{}",
            s.errors.connect_refused,
            s.errors.connect_other,
            s.errors.tls,
            s.errors.timeout,
            s.errors.io,
            if statuses.is_empty() {
                String::new()
            } else {
                format!(", {}", statuses.join(", "))
            }
        ))
        .figure("error_rate", s.error_rate)
        .figure("p50_ms", p50)
        .figure("refused", s.errors.connect_refused as f64)
        .why("Failures that return in milliseconds make latency look excellent and request rates look high.")
        .fix("check the URL, port and webhook path (n8n answers 404 for an unregistered webhook, 400 for a malformed body)"),
    )
}
