//! Diagnose: reads a sweep's stages and the known settings, applies the capacity model, and
//! names the limit that caps throughput — with the numbers that prove it — plus every other
//! finding DESIGN.md lists that the data can show. When the data cannot separate two
//! explanations it says so instead of guessing.

pub mod stats;

use crate::findings::{Finding, Severity};
use crate::load::StageResult;
use crate::model::settings::{Settings, Sourced};
use crate::model::{self, Capacity, Job, Limit, WorkerLimits};
use serde::{Deserialize, Serialize};
use stats::Estimate;

/// One load level, its repeats merged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Level {
    /// In flight (closed model) or arrivals/s (open model).
    pub load: f64,
    pub stages: Vec<usize>,
    pub valid: bool,
    pub throughput: Estimate,
    pub p95_ms: Option<Estimate>,
    pub p50_ms: Option<f64>,
    pub slots_taken: Option<f64>,
    pub waiting: Option<f64>,
    pub error_rate: f64,
    pub client_cpu_percent: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BreakPoint {
    /// The load level (in flight) where the sweep broke.
    pub in_flight: u32,
    pub reason: String,
}

/// Measured against predicted, per load level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub in_flight: u32,
    pub measured: f64,
    pub predicted: f64,
    pub predicted_mva: f64,
    pub predicted_response_s: f64,
    pub predicted_waiting_for_runner: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The limit that caps throughput, when the data shows one.
    pub capping_limit: Option<Limit>,
    /// One sentence: the answer.
    pub verdict: String,
    /// Settings used, each with its source (flags, run, inference).
    pub settings: Settings,
    pub capacity: Option<Capacity>,
    /// Highest throughput measured on a valid level (with its interval when repeated).
    pub measured_ceiling: Option<Estimate>,
    /// Latency at 1 in flight minus job time.
    pub fixed_overhead_s: Option<f64>,
    pub break_point: Option<BreakPoint>,
    pub levels: Vec<Level>,
    pub comparison: Vec<Comparison>,
    pub findings: Vec<Finding>,
}

/// Groups stages by load level (repeats of one level are consecutive).
pub fn levels(stages: &[StageResult]) -> Vec<Level> {
    let mut out: Vec<Level> = Vec::new();
    let mut i = 0;
    while i < stages.len() {
        let load = stages[i].load_level();
        let mut j = i;
        while j < stages.len() && stages[j].load_level() == load && (j == i || stages[j].repeat > 0)
        {
            j += 1;
        }
        let group: Vec<&StageResult> = stages[i..j]
            .iter()
            .filter(|s| !s.partial || j - i == 1)
            .collect();
        let valid_group: Vec<&&StageResult> = group.iter().filter(|s| s.valid).collect();
        let use_group: Vec<&StageResult> = if valid_group.is_empty() {
            group.clone()
        } else {
            valid_group.into_iter().copied().collect()
        };
        let xs: Vec<f64> = use_group.iter().map(|s| s.throughput_rps).collect();
        let p95s: Vec<f64> = use_group
            .iter()
            .filter_map(|s| s.latency.as_ref().map(|l| l.p95_ms))
            .collect();
        // Mean of a per-stage figure over the group's stages that have it.
        let mean_over = |f: &dyn Fn(&StageResult) -> Option<f64>| {
            let v: Vec<f64> = use_group.iter().filter_map(|s| f(s)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let queue = |s: &StageResult| s.queue.clone().filter(|q| q.samples > 0);
        out.push(Level {
            load,
            stages: (i..j).collect(),
            valid: group.iter().all(|s| s.valid) && !group.is_empty(),
            throughput: Estimate::of(&xs),
            p95_ms: (!p95s.is_empty()).then(|| Estimate::of(&p95s)),
            p50_ms: mean_over(&|s| s.latency.as_ref().map(|l| l.p50_ms)),
            slots_taken: mean_over(&|s| queue(s).map(|q| q.active_mean)),
            waiting: mean_over(&|s| queue(s).map(|q| q.waiting_mean)),
            error_rate: mean_over(&|s| Some(s.error_rate)).unwrap_or(0.0),
            client_cpu_percent: mean_over(&|s| Some(s.client_cpu_percent)).unwrap_or(0.0),
        });
        i = j;
    }
    out
}

/// Growth under which throughput counts as flat between two load levels.
const FLAT: f64 = 0.05;

/// The break point: the first level that fails its thresholds, or where throughput stops
/// growing although the load grew.
pub fn break_point(stages: &[StageResult], levels: &[Level]) -> Option<BreakPoint> {
    for (k, l) in levels.iter().enumerate() {
        let failed = l.stages.iter().any(|i| {
            let s = &stages[*i];
            !s.valid || s.thresholds.iter().any(|t| !t.passed)
        });
        if failed {
            let s = &stages[l.stages[0]];
            let why = if !s.valid {
                s.invalid_reasons.join("; ")
            } else {
                s.thresholds
                    .iter()
                    .filter(|t| !t.passed)
                    .map(|t| format!("{} {}", t.metric, t.expr))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            return Some(BreakPoint {
                in_flight: l.load.round() as u32,
                reason: format!("thresholds failed at {} in flight: {why}", l.load),
            });
        }
        if k > 0 {
            let prev = &levels[k - 1];
            if l.load > prev.load * 1.2
                && prev.throughput.mean > 0.0
                && l.throughput.mean < prev.throughput.mean * (1.0 + FLAT)
            {
                return Some(BreakPoint {
                    in_flight: l.load.round() as u32,
                    reason: format!(
                        "throughput stopped growing: {:.2} req/s at {} in flight, {:.2} at {}",
                        l.throughput.mean, l.load, prev.throughput.mean, prev.load
                    ),
                });
            }
        }
    }
    None
}

/// Everything `diagnose` needs beyond the stages.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub settings: Settings,
    /// Task request timeout (s) to recognise a worker without a runner (n8n's default 60).
    pub task_request_timeout_s: f64,
}

pub fn diagnose(stages: &[StageResult], inputs: &Inputs) -> Diagnosis {
    let levels = levels(stages);
    let mut findings = Vec::new();
    let mut settings = inputs.settings.clone();
    let timeout_s = if inputs.task_request_timeout_s > 0.0 {
        inputs.task_request_timeout_s
    } else {
        60.0
    };

    validity_findings(stages, &levels, timeout_s, &mut findings);
    let valid: Vec<&Level> = levels.iter().filter(|l| l.valid).collect();
    let measured_ceiling = valid
        .iter()
        .max_by(|a, b| a.throughput.mean.total_cmp(&b.throughput.mean))
        .map(|l| l.throughput.clone());
    let job_time = settings.job_time.as_ref().map(|s| s.value);
    let fixed_overhead_s = match (valid.iter().find(|l| l.load == 1.0), job_time) {
        (Some(l), Some(s)) => l.p50_ms.map(|p| (p / 1000.0 - s).max(0.0)),
        _ => None,
    };
    let bp = break_point(stages, &levels);
    let plateau = plateau(&valid);

    infer_settings(&mut settings, &valid, plateau.as_ref());
    let capacity = model_capacity(&settings);
    let job = job_of(&settings);

    let mut comparison = Vec::new();
    if let (Some(cap), Some(job)) = (capacity.as_ref(), job) {
        let o = fixed_overhead_s.unwrap_or(0.0);
        let max_n = valid
            .iter()
            .map(|l| l.load.round() as u32)
            .max()
            .unwrap_or(1)
            .max(1);
        let mva = model::predict_mva(cap, job, o, max_n);
        for l in &valid {
            let n = l.load.round().max(1.0) as u32;
            let b = model::predict_bound(cap, job, o, n);
            comparison.push(Comparison {
                in_flight: n,
                measured: l.throughput.mean,
                predicted: b.throughput,
                predicted_mva: mva[(n - 1) as usize].throughput,
                predicted_response_s: b.response_s,
                predicted_waiting_for_runner: b.waiting_for_runner,
            });
        }
    }

    let (capping_limit, verdict) = verdict(
        &settings,
        capacity.as_ref(),
        job,
        plateau.as_ref(),
        &levels,
        &mut findings,
    );
    other_findings(&levels, stages, &mut findings);
    let signals = cpu_signals(stages);
    if let Some(f) = findings.iter_mut().find(|f| f.id == "unmodelled-limit") {
        if signals.is_empty() {
            f.evidence.push(
                "no CPU signal was measured: sweep with --docker and --metrics main=… worker=… to see which process saturates"
                    .into(),
            );
        }
        f.evidence.extend(signals.iter().cloned());
    }
    if !signals.is_empty() {
        let mut f = Finding::new(
            "cpu-bound-process",
            Severity::Warning,
            "A process ran at a full core (or its event loop lagged) while load was applied",
        )
        .why("A Node.js process (n8n main, worker or runner) uses one core for JavaScript: at 100 % it caps throughput whatever the concurrency settings, and latency grows with its event-loop lag.")
        .fix("spread the load: more workers (each with its runner), more runners per worker for Code-heavy work, or a faster CPU; move n8ncap off the machine if it is the one saturated");
        f.evidence = signals;
        findings.push(f);
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Diagnosis {
        capping_limit,
        verdict,
        settings,
        capacity,
        measured_ceiling,
        fixed_overhead_s,
        break_point: bp,
        levels,
        comparison,
        findings,
    }
}

/// The plateau: valid levels at the end of the sweep whose throughput stayed flat while the
/// load grew. Returns the throughput estimate there and the load where it was first reached.
#[derive(Debug, Clone)]
struct Plateau {
    throughput: Estimate,
    from_load: f64,
    at: Vec<f64>,
}

fn plateau(valid: &[&Level]) -> Option<Plateau> {
    if valid.len() < 2 {
        return None;
    }
    // Walk back from the highest load while the next-lower level is within FLAT of it.
    let last = valid.len() - 1;
    let mut first = last;
    while first > 0 {
        let lower = &valid[first - 1].throughput;
        let top = &valid[last].throughput;
        if top.mean <= 0.0 || (lower.mean - top.mean).abs() > FLAT * top.mean {
            break;
        }
        first -= 1;
    }
    if first == last {
        return None;
    }
    let xs: Vec<f64> = valid[first..]
        .iter()
        .flat_map(|l| l.throughput.samples.clone())
        .collect();
    Some(Plateau {
        throughput: Estimate::of(&xs),
        from_load: valid[first].load,
        at: valid[first..].iter().map(|l| l.load).collect(),
    })
}

fn job_of(s: &Settings) -> Option<Job> {
    let job = s.job_time.as_ref()?.value;
    let code = s.code_time.as_ref().map(|c| c.value).unwrap_or(job);
    Some(Job {
        wait_s: (job - code).max(0.0),
        code_s: code.min(job),
    })
}

fn model_capacity(s: &Settings) -> Option<Capacity> {
    let job = job_of(s)?;
    let workers = s.workers.as_ref().map(|w| w.value).unwrap_or(1);
    let c = s.worker_concurrency.as_ref()?.value;
    let r = s.runner_limit.as_ref()?.value
        * s.runners_per_worker.as_ref().map(|r| r.value).unwrap_or(1);
    let ws = vec![
        WorkerLimits {
            worker_concurrency: c,
            runner_capacity: r,
        };
        workers.max(1) as usize
    ];
    Some(model::capacity(&ws, job))
}

/// Fills unknown limits from what the run shows: worker concurrency from the slots the queue
/// gauges showed while jobs waited in Redis; runner capacity from the measured ceiling × C.
fn infer_settings(s: &mut Settings, valid: &[&Level], plateau: Option<&Plateau>) {
    let workers = s.workers.as_ref().map(|w| w.value).unwrap_or(1).max(1);
    if s.worker_concurrency.is_none() {
        // Saturated: jobs were waiting in Redis, so every slot was taken.
        let saturated = valid
            .iter()
            .filter(|l| l.waiting.unwrap_or(0.0) >= 1.0)
            .filter_map(|l| l.slots_taken)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        if let Some(slots) = saturated {
            let per = (slots / workers as f64).round() as u32;
            if per > 0 {
                s.worker_concurrency = Some(Sourced::new(
                    per,
                    "inferred: slots taken (n8n_scaling_mode_queue_jobs_active) while jobs waited in Redis",
                ));
            }
        }
    }
    if s.runner_limit.is_none() {
        if let (Some(p), Some(code)) = (plateau, s.code_time.as_ref()) {
            let r_total = p.throughput.mean * code.value;
            let per_worker_slots = s.worker_concurrency.as_ref().map(|c| c.value as f64);
            let runner_bound = per_worker_slots
                .map(|c| r_total / (workers as f64) < c - 0.5)
                .unwrap_or(true);
            if runner_bound && r_total >= 0.5 {
                let runners = s
                    .runners_per_worker
                    .as_ref()
                    .map(|r| r.value)
                    .unwrap_or(1)
                    .max(1);
                let per = (r_total / (workers * runners) as f64).round().max(1.0) as u32;
                s.runner_limit = Some(Sourced::new(
                    per,
                    format!(
                        "inferred from the measured ceiling: {:.2} req/s × Code time {:.2} s = {:.1} tasks",
                        p.throughput.mean, code.value, r_total
                    ),
                ));
            }
        }
    }
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

fn verdict(
    s: &Settings,
    cap: Option<&Capacity>,
    job: Option<Job>,
    plateau: Option<&Plateau>,
    levels: &[Level],
    findings: &mut Vec<Finding>,
) -> (Option<Limit>, String) {
    let (Some(cap), Some(job)) = (cap, job) else {
        let missing: Vec<&str> = [
            (
                "job time (--job-time or sleep_ms in the body)",
                s.job_time.is_none(),
            ),
            (
                "worker concurrency (--worker-concurrency)",
                s.worker_concurrency.is_none(),
            ),
            ("runner limit (--runner-limit)", s.runner_limit.is_none()),
        ]
        .iter()
        .filter(|(_, m)| *m)
        .map(|(n, _)| *n)
        .collect();
        return (
            None,
            format!(
                "No capacity verdict: unknown {}, and the run could not infer it.",
                missing.join(", ")
            ),
        );
    };
    let s_time = job.job_time();
    let c = cap.total_worker_concurrency;
    let r = cap.total_runner_capacity;
    let src = |o: &Option<Sourced<u32>>| {
        o.as_ref()
            .map(|x| format!(" ({})", x.source))
            .unwrap_or_default()
    };
    if cap.capping == Limit::NoRunner {
        return (
            Some(Limit::NoRunner),
            "No runner is attached: every Code task fails after the task request timeout.".into(),
        );
    }
    // One level only (a k6 summary, a single stage): the ceiling counts as reached when the load
    // is well past the effective concurrency and throughput sits at the modelled ceiling.
    let single = match plateau {
        Some(_) => None,
        None => {
            let valid: Vec<&Level> = levels.iter().filter(|l| l.valid).collect();
            match valid.as_slice() {
                [l] if l.load >= cap.effective_concurrency * 1.1
                    && (l.throughput.mean - cap.ceiling).abs() <= 0.1 * cap.ceiling.max(1e-9) =>
                {
                    Some(Plateau {
                        throughput: l.throughput.clone(),
                        from_load: l.load,
                        at: vec![l.load],
                    })
                }
                _ => None,
            }
        }
    };
    let Some(p) = plateau.or(single.as_ref()) else {
        let top = levels
            .iter()
            .filter(|l| l.valid)
            .map(|l| l.load)
            .fold(0.0, f64::max);
        return (
            None,
            format!(
                "Throughput kept growing up to {top} in flight: the ceiling was not reached. The \
                 model puts it at {:.2} req/s ({}), reached from about {:.0} in flight; sweep higher.",
                cap.ceiling,
                cap.capping.words(),
                cap.effective_concurrency
            ),
        );
    };
    let x = p.throughput.mean;
    let ratio = x / cap.ceiling.max(1e-9);
    // The data cannot separate the two limits when both ceilings lie inside the interval.
    let inside = |v: f64| p.throughput.low <= v * 1.02 && v * 0.98 <= p.throughput.high;
    if cap.capping == Limit::Both || (inside(cap.worker_bound) && inside(cap.runner_bound)) {
        findings.push(
            Finding::new(
                "limits-inseparable",
                Severity::Info,
                "Runner limit and worker concurrency give the same ceiling; the data cannot say which caps",
            )
            .evidence(format!(
                "worker concurrency {c} ÷ job time {s_time:.2} s = {:.2} req/s; runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s; measured {}",
                cap.worker_bound, job.code_s, cap.runner_bound, p.throughput.describe("req/s")
            ))
            .fix("raise both together (runner capacity ≥ worker concurrency), then sweep again"),
        );
        return (
            Some(Limit::Both),
            format!(
                "Throughput tops out at {} — worker concurrency and runner limit both allow {:.2} req/s; raise them as a pair.",
                p.throughput.describe("req/s"),
                cap.ceiling
            ),
        );
    }
    if ratio < 0.8 {
        findings.push(
            Finding::new(
                "unmodelled-limit",
                Severity::Error,
                format!(
                    "Measured ceiling {:.2} req/s is {} below the model's {:.2} req/s: something else caps throughput",
                    x,
                    pct(1.0 - ratio),
                    cap.ceiling
                ),
            )
            .evidence(format!(
                "plateau {} from {} in flight on; worker-bound {:.2} req/s, runner-bound {:.2} req/s",
                p.throughput.describe("req/s"),
                p.from_load,
                cap.worker_bound,
                cap.runner_bound
            ))
            .why("Raising worker concurrency or the runner limit will not help until this limit is found.")
            .fix("look for a CPU-saturated process (one core at 100 %, event-loop lag up), the database pool, a mock server, or the load generator (client CPU); n8ncap's CPU and container signals point at which"),
        );
        return (
            None,
            format!(
                "Throughput tops out at {} — below every modelled limit ({:.2} req/s): an unmodelled limit caps it.",
                p.throughput.describe("req/s"),
                cap.ceiling
            ),
        );
    }
    if ratio > 1.15 {
        findings.push(
            Finding::new(
                "settings-disagree",
                Severity::Warning,
                format!(
                    "Measured ceiling {x:.2} req/s is above what the given settings allow ({:.2} req/s)",
                    cap.ceiling
                ),
            )
            .evidence(format!(
                "worker concurrency {c}{}, runner limit {}{}",
                src(&s.worker_concurrency),
                s.runner_limit.as_ref().map(|r| r.value).unwrap_or(0),
                src(&s.runner_limit)
            ))
            .fix("check the settings: the running containers may not have the values given (n8ncap inspect reads them)"),
        );
    }
    let slots = levels
        .iter()
        .filter(|l| p.at.contains(&l.load))
        .filter_map(|l| l.slots_taken)
        .fold(None, |m: Option<f64>, v| {
            Some(m.map_or(v, |m: f64| m.max(v)))
        });
    match cap.capping {
        Limit::RunnerLimit => {
            let under = 1.0 - x / cap.worker_bound;
            let mut f = Finding::new(
                "runner-limit-caps",
                Severity::Error,
                format!(
                    "The runner limit caps throughput at {x:.2} req/s: {r} runner tasks for {c} worker slots"
                ),
            );
            if let Some(sl) = slots {
                f = f.evidence(format!(
                    "slots {} taken ({sl:.1} of {c}), yet throughput {x:.2} req/s is {} under worker concurrency ÷ job time ({c} ÷ {s_time:.2} s = {:.2} req/s)",
                    pct(sl / c as f64),
                    pct(under),
                    cap.worker_bound
                ));
            } else {
                f = f.evidence(format!(
                    "throughput {x:.2} req/s is {} under worker concurrency ÷ job time ({c} ÷ {s_time:.2} s = {:.2} req/s)",
                    pct(under),
                    cap.worker_bound
                ));
            }
            f = f
                .evidence(format!(
                    "runner capacity {r}{} ÷ Code time {:.2} s = {:.2} req/s; measured plateau {} from {} in flight on ({} of the runner-bound ceiling)",
                    src(&s.runner_limit),
                    job.code_s,
                    cap.runner_bound,
                    p.throughput.describe("req/s"),
                    p.from_load,
                    pct(ratio)
                ))
                .evidence(format!(
                    "at the ceiling {:.1} slots hold a job that waits for a runner; n8n's queue gauges count slots taken, not runner tasks, and n8n has no runner metric — the dashboard shows {c} busy",
                    (c as f64 - x * s_time).max(0.0)
                ))
                .why("Adding workers or raising --concurrency changes nothing while each worker's runners cap Code tasks.")
                .fix(format!(
                    "raise N8N_RUNNERS_MAX_CONCURRENCY on the runner containers (or add runners per worker) to at least {} per worker",
                    (c as f64 / s.workers.as_ref().map(|w| w.value).unwrap_or(1).max(1) as f64 * job.code_s / s_time).ceil()
                ));
            findings.push(f);
            (
                Some(Limit::RunnerLimit),
                format!(
                    "The runner limit caps throughput: {} measured, {r} runner tasks ÷ {:.2} s = {:.2} req/s, while {c} worker slots would allow {:.2} req/s.",
                    p.throughput.describe("req/s"),
                    job.code_s,
                    cap.runner_bound,
                    cap.worker_bound
                ),
            )
        }
        _ => {
            findings.push(
                Finding::new(
                    "worker-concurrency-caps",
                    Severity::Warning,
                    format!("Worker concurrency caps throughput at {x:.2} req/s: {c} slots"),
                )
                .evidence(format!(
                    "worker concurrency {c}{} ÷ job time {s_time:.2} s = {:.2} req/s; measured plateau {} from {} in flight on ({} of it)",
                    src(&s.worker_concurrency),
                    cap.worker_bound,
                    p.throughput.describe("req/s"),
                    p.from_load,
                    pct(ratio)
                ))
                .evidence(format!(
                    "runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s leaves room",
                    job.code_s, cap.runner_bound
                ))
                .fix("raise worker concurrency (--concurrency / N8N_CONCURRENCY_PRODUCTION_LIMIT) or add workers — each with its runner, keeping runner capacity ≥ the slots that run Code"),
            );
            (
                Some(Limit::WorkerConcurrency),
                format!(
                    "Worker concurrency caps throughput: {} measured, {c} slots ÷ {s_time:.2} s = {:.2} req/s (runners allow {:.2}).",
                    p.throughput.describe("req/s"),
                    cap.worker_bound,
                    cap.runner_bound
                ),
            )
        }
    }
}

fn validity_findings(
    stages: &[StageResult],
    levels: &[Level],
    timeout_s: f64,
    out: &mut Vec<Finding>,
) {
    // A window that opens before the first responses at this load came back is not steady.
    if let Some(s) = stages.iter().find(|s| {
        s.valid
            && s.latency
                .as_ref()
                .is_some_and(|l| s.warmup_s + 1e-9 < l.p50_ms / 1000.0)
    }) {
        out.push(
            Finding::new(
                "warmup-too-short",
                Severity::Warning,
                format!(
                    "Stage {}: warm-up {:.1} s is shorter than the response time ({:.1} s p50) — its figures mix in the ramp",
                    s.index + 1,
                    s.warmup_s,
                    s.latency.as_ref().map(|l| l.p50_ms / 1000.0).unwrap_or(0.0)
                ),
            )
            .why("Until every virtual user has had one answer at the new load, the stage is not steady: throughput and latency are biased.")
            .fix("set warmup (profile) or --warmup to at least the p50 of the highest stage"),
        );
    }
    let baseline_p50 = levels
        .iter()
        .find(|l| l.valid && l.load == 1.0)
        .and_then(|l| l.p50_ms);
    for s in stages.iter().filter(|s| !s.valid) {
        let fast = s.latency.as_ref().map(|l| l.p50_ms).filter(|p50| {
            s.error_rate > 0.5 && baseline_p50.is_none_or(|b| *p50 < 0.5 * b) && *p50 < 1000.0
        });
        let status500 = s.errors.http_status.get(&500).copied().unwrap_or(0);
        let slow500 = s.latency.as_ref().is_some_and(|l| {
            l.p50_ms >= 0.9 * timeout_s * 1000.0 && l.p50_ms <= 1.3 * timeout_s * 1000.0
        });
        if status500 > 0 && status500 * 2 >= s.requests && slow500 {
            out.push(
                Finding::new(
                    "worker-without-runner",
                    Severity::Error,
                    format!(
                        "Stage {}: executions fail with HTTP 500 after ≈{timeout_s:.0} s — the task request timeout",
                        s.index + 1
                    ),
                )
                .evidence(format!(
                    "{status500} of {} requests answered 500, p50 {:.1} s ≈ N8N_RUNNERS_TASK_REQUEST_TIMEOUT ({timeout_s:.0} s)",
                    s.requests,
                    s.latency.as_ref().map(|l| l.p50_ms / 1000.0).unwrap_or(0.0)
                ))
                .why("A worker with no runner attached (or runners all busy for a minute) fails every Code task, a minute late and silently.")
                .fix("attach a runner to every worker: an n8nio/runners container with N8N_RUNNERS_TASK_BROKER_URI pointing at that worker, N8N_RUNNERS_MODE=external and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on the worker"),
            );
        } else if let Some(p50) = fast {
            out.push(
                Finding::new(
                    "fast-failures-hide-latency",
                    Severity::Error,
                    format!(
                        "Stage {}: {:.0} % of requests failed fast (p50 {p50:.1} ms) — that latency is not a result",
                        s.index + 1,
                        s.error_rate * 100.0
                    ),
                )
                .evidence(format!(
                    "errors: {} refused, {} other connect, {} TLS, {} timeout, {} broken, HTTP {:?}",
                    s.errors.connect_refused,
                    s.errors.connect_other,
                    s.errors.tls,
                    s.errors.timeout,
                    s.errors.io,
                    s.errors.http_status
                ))
                .why("Failures that return in milliseconds make latency look excellent and request rates look high.")
                .fix("check the URL, port and webhook path (n8n answers 404 for an unregistered webhook, 400 for a malformed body)"),
            );
        }
        out.push(
            Finding::new(
                "measurement-invalid",
                Severity::Error,
                format!("Stage {} ({}) is invalid: its figures are not results", s.index + 1, s.label),
            )
            .evidence(s.invalid_reasons.join("; "))
            .fix("fix the failures first; a stage with failing checks is never reported as a good latency"),
        );
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Where CPU saturated during valid stages: containers near a full core, endpoints whose event
/// loop lagged or whose process used a full core, and n8ncap itself.
fn cpu_signals(stages: &[StageResult]) -> Vec<String> {
    let mut out = Vec::new();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0);
    for s in stages.iter().filter(|s| s.valid) {
        for c in s.containers.iter().filter(|c| c.cpu_percent_mean >= 85.0) {
            out.push(format!(
                "stage {} ({}): container {} ({}) at {:.0} % CPU (max {:.0} %) — about one core or more",
                s.index + 1,
                s.label,
                c.name,
                c.role,
                c.cpu_percent_mean,
                c.cpu_percent_max
            ));
        }
        for e in s.endpoints.iter().filter(|e| e.samples > 0) {
            if e.cpu_percent_mean >= 85.0 || e.eventloop_lag_mean_s >= 0.05 {
                out.push(format!(
                    "stage {} ({}): {} {} at {:.0} % CPU, event-loop lag {:.0} ms (max {:.0} ms)",
                    s.index + 1,
                    s.label,
                    e.role.as_deref().unwrap_or("endpoint"),
                    e.url,
                    e.cpu_percent_mean,
                    e.eventloop_lag_mean_s * 1000.0,
                    e.eventloop_lag_max_s * 1000.0
                ));
            }
        }
        if s.client_cpu_percent >= 85.0 * cores {
            out.push(format!(
                "stage {} ({}): n8ncap itself at {:.0} % CPU of {cores:.0} cores",
                s.index + 1,
                s.label,
                s.client_cpu_percent
            ));
        }
    }
    out.dedup();
    out.truncate(8);
    out
}

/// Memory grows in the runner, not the worker: from container stats (all containers of a
/// role summed per reading), and the worker's heap gauge when it was scraped.
fn memory_findings(stages: &[StageResult], out: &mut Vec<Finding>) {
    let growth = |s: &StageResult, role: &str| {
        s.memory_by_role
            .iter()
            .find(|r| r.role == role)
            .map(|r| (r.max_bytes - r.baseline_bytes).max(0.0))
    };
    let Some(s) = stages
        .iter()
        .filter(|s| growth(s, "runner").is_some())
        .max_by(|a, b| {
            growth(a, "runner")
                .unwrap_or(0.0)
                .total_cmp(&growth(b, "runner").unwrap_or(0.0))
        })
    else {
        return;
    };
    let runner_growth = growth(s, "runner").unwrap_or(0.0);
    let worker_growth = growth(s, "worker").unwrap_or(0.0);
    if runner_growth < 32.0 * MIB || runner_growth < 4.0 * worker_growth {
        return;
    }
    let mut f = Finding::new(
        "memory-in-runner",
        Severity::Warning,
        format!(
            "Stage {}: memory grew {:.0} MiB in the runners and {:.0} MiB in the workers — Code-node memory lives in the runner",
            s.index + 1,
            runner_growth / MIB,
            worker_growth / MIB
        ),
    );
    for c in s
        .containers
        .iter()
        .filter(|c| c.role == "runner" || c.role == "worker")
    {
        f = f.evidence(format!(
            "{} ({}): {:.0} MiB before load, up to {:.0} MiB{}",
            c.name,
            c.role,
            c.memory_baseline_bytes / MIB,
            c.memory_max_bytes / MIB,
            if c.gone {
                " (container disappeared)"
            } else {
                ""
            }
        ));
    }
    for e in s
        .endpoints
        .iter()
        .filter(|e| e.role.as_deref() == Some("worker") && e.samples > 0)
    {
        f = f.evidence(format!(
            "worker heap (nodejs_heap_size_used_bytes) {:.0}–{:.0} MiB at {}: heap panels stay flat while the runner grows",
            e.heap_used_mean_bytes / MIB,
            e.heap_used_max_bytes / MIB,
            e.url
        ));
    }
    if let Some(v) = s.vus {
        f = f.evidence(format!(
            "≈ {:.0} MiB per job in flight ({} in flight)",
            runner_growth / MIB / v as f64,
            v
        ));
    }
    f = f
        .why("A memory limit on the worker does not bound Code-node memory; an unbounded runner takes the host's memory instead.")
        .fix("set a memory limit on every runner container: runner limit × per-task peak + idle base");
    out.push(f);
}

fn other_findings(levels: &[Level], stages: &[StageResult], out: &mut Vec<Finding>) {
    // Queue backlog in Redis.
    if let Some(l) = levels
        .iter()
        .filter(|l| l.valid && l.waiting.unwrap_or(0.0) >= 1.0)
        .max_by(|a, b| a.load.total_cmp(&b.load))
    {
        out.push(
            Finding::new(
                "queue-backlog",
                Severity::Info,
                format!(
                    "Jobs wait in Redis at {} in flight: {:.1} waiting on average, {:.1} slots taken",
                    l.load,
                    l.waiting.unwrap_or(0.0),
                    l.slots_taken.unwrap_or(0.0)
                ),
            )
            .evidence("n8n_scaling_mode_queue_jobs_waiting > 0: every worker slot is taken and new executions queue")
            .why("Queued jobs add their wait to every response; past the break point latency grows with the load while throughput does not."),
        );
    }
    // Ceiling reached: X flat while p95 grows.
    let valid: Vec<&Level> = levels.iter().filter(|l| l.valid).collect();
    for w in valid.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.load > a.load * 1.2
            && b.throughput.mean < a.throughput.mean * (1.0 + FLAT)
            && a.throughput.mean > 0.0
        {
            let (pa, pb) = (
                a.p95_ms.as_ref().map(|p| p.mean).unwrap_or(0.0),
                b.p95_ms.as_ref().map(|p| p.mean).unwrap_or(0.0),
            );
            let separable =
                a.throughput.high < b.throughput.low * (1.0 + FLAT) || a.throughput.n < 2;
            let mut f = Finding::new(
                "ceiling-reached",
                Severity::Warning,
                format!(
                    "Throughput flat from {} to {} in flight ({:.2} → {:.2} req/s) while p95 grew {:.0} → {:.0} ms",
                    a.load, b.load, a.throughput.mean, b.throughput.mean, pa, pb
                ),
            )
            .evidence(format!(
                "load +{:.0} %, throughput {:+.1} %, p95 {:+.0} %",
                (b.load / a.load - 1.0) * 100.0,
                (b.throughput.mean / a.throughput.mean - 1.0) * 100.0,
                if pa > 0.0 { (pb / pa - 1.0) * 100.0 } else { 0.0 }
            ))
            .why("Past the ceiling more load only queues: latency grows, throughput does not.");
            if !separable {
                f = f.evidence("the repeats' intervals overlap: the data cannot separate 'flat' from 'slightly growing'");
            }
            out.push(f);
            break;
        }
    }
    memory_findings(stages, out);
    for s in stages {
        for c in s.containers.iter().filter(|c| c.gone) {
            out.push(
                Finding::new(
                    "container-gone",
                    Severity::Warning,
                    format!("Container {} ({}) disappeared during stage {}", c.name, c.role, s.index + 1),
                )
                .evidence(format!("{} stats readings, then {} gaps", c.samples, c.gaps))
                .why("A restarted or removed container changes the capacity mid-stage: that stage's figures mix two deployments."),
            );
        }
    }
    // Client-side connection churn.
    if let Some(s) = stages
        .iter()
        .filter(|s| s.valid && s.requests >= 20)
        .find(|s| s.new_conns_per_request > 0.5)
    {
        out.push(
            Finding::new(
                "connection-churn",
                Severity::Warning,
                format!(
                    "Stage {}: {:.2} new connections per request — keep-alive is missing",
                    s.index + 1,
                    s.new_conns_per_request
                ),
            )
            .evidence(format!(
                "{} new connections for {} requests; connect p95 {:.1} ms",
                s.new_connections, s.requests, s.phases.connecting.p95_ms
            ))
            .why("Every request pays a TCP handshake and leaves a TIME_WAIT socket; at high rates the client or a proxy runs out of ports.")
            .fix("check the proxy in front of n8n (keep-alive to the client) or the server's Connection: close"),
        );
    }
    // Load generator saturated.
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0);
    if let Some(s) = stages.iter().find(|s| s.dropped_iterations > 0) {
        out.push(
            Finding::new(
                "load-generator-saturated",
                Severity::Warning,
                format!(
                    "Stage {}: {} arrivals dropped — {} requests were already in flight",
                    s.index + 1,
                    s.dropped_iterations,
                    s.max_vus.unwrap_or(0)
                ),
            )
            .evidence("open model: an arrival that finds every virtual user busy is not sent (k6's dropped_iterations)")
            .why("The arrival rate asked for was not offered: the figures describe a lower load.")
            .fix("raise max_vus in the profile, or lower the rate"),
        );
    } else if let Some(s) = stages.iter().find(|s| s.client_cpu_percent > 85.0 * cores) {
        out.push(
            Finding::new(
                "load-generator-saturated",
                Severity::Warning,
                format!(
                    "Stage {}: n8ncap used {:.0} % CPU ({cores:.0} cores) — the load generator may be the limit",
                    s.index + 1,
                    s.client_cpu_percent
                ),
            )
            .fix("run n8ncap on another machine than n8n, or lower the load"),
        );
    }
}
