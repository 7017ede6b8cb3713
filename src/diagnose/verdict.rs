//! The verdict: which limit caps throughput, from the capacity measured at the saturated levels.
//!
//! Executions in progress at the ceiling are X × S (Little's law), runner tasks running X × C.
//! Compared with the known limits: ≈ worker slots → worker concurrency; ≈ runner capacity →
//! runner limit; below both → a third limit, CPU when CPU was measured (else "unmodelled", with
//! the flags that would tell). A limit that is not known is inferred from one saturated level
//! and marked inferred.

use super::{cpu, floor};
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Settings, Sourced};
use crate::model::{Bound, Capacity, Holds, Job, Limit};
use crate::record::diagnosis::{CpuSite, CpuUse, Level};
use crate::record::Estimate;

/// Utilisation (executions in progress ÷ limit) from which a limit counts as reached.
pub const MATCH: f64 = 0.85;
/// Utilisation above which the settings cannot be the ones running.
pub const ABOVE: f64 = 1.15;

/// What the verdict step needs.
pub struct Ceiling<'a> {
    /// Capacity: throughput at the saturated levels.
    pub x: &'a Estimate,
    /// Where it was measured.
    pub level: &'a Level,
    /// Service time S (overhead included), s.
    pub s: f64,
    pub overhead_s: f64,
    pub cpu: &'a [CpuUse],
}

pub struct Verdict {
    pub limit: Option<Limit>,
    pub text: String,
    pub cpu: Option<CpuUse>,
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// Code time C: from the settings, else all of the job (a workflow of one Code node).
fn code_time(s: &Settings, ceiling: &Ceiling) -> f64 {
    match (&s.code_time, &s.job_time) {
        (Some(c), _) => c.value,
        (None, Some(j)) => j.value,
        (None, None) => (ceiling.s - ceiling.overhead_s).max(0.0),
    }
}

/// Fills unknown limits from the saturated level. Worker concurrency comes first from the
/// queue gauges (slots taken while jobs waited in Redis); then whichever of the two is still
/// unknown from X × S or X × C, when the other is known and not reached and no CPU binds.
pub fn infer_limits(s: &mut Settings, levels: &[Level], ceiling: Option<&Ceiling>) {
    let workers = s.worker_count() as f64;
    if s.worker_concurrency.is_none() {
        let slots = levels
            .iter()
            .filter(|l| l.valid && l.waiting.unwrap_or(0.0) >= 1.0)
            .filter_map(|l| l.slots_taken)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        if let Some(per) = slots
            .map(|v| (v / workers).round() as u32)
            .filter(|p| *p > 0)
        {
            s.worker_concurrency = Some(Sourced::new(
                per,
                "inferred: slots taken (n8n_scaling_mode_queue_jobs_active) while jobs waited in Redis",
            ));
        }
    }
    let Some(c) = ceiling else { return };
    if cpu::binding(c.cpu).is_some() {
        return;
    }
    let x = c.x.mean;
    let code = code_time(s, c);
    let in_progress = x * c.s;
    let tasks = x * code;
    // Saturated while no job waited in the queue: the worker had slots to spare, so something
    // behind the slots queued the jobs — the runners, CPU aside. Worker concurrency is then at
    // least the slots taken; the runner limit is what ran.
    if s.worker_concurrency.is_none() && s.runner_limit.is_none() {
        if let Some(taken) = c
            .level
            .slots_taken
            .filter(|t| *t >= 1.0 && c.level.waiting.is_some_and(|w| w < 1.0))
        {
            // Every job in flight held a slot (none waited): at least that many slots, even when
            // the gauge lags behind the level.
            let per = (taken.max(c.level.in_flight) / workers).ceil() as u32;
            s.worker_concurrency = Some(Sourced::new(
                per,
                format!(
                    "inferred: at least {per} — slots taken at {} while no job waited in the queue",
                    c.level.words()
                ),
            ));
        }
    }
    let rpw = s.runners_per_worker_count().max(1) as f64;
    match (&s.worker_concurrency, &s.runner_limit) {
        (Some(wc), None) if in_progress < MATCH * wc.value as f64 * workers && tasks >= 0.5 => {
            let k = code / (workers * rpw);
            s.runner_limit = Some(Sourced::inferred(
                x * k,
                [c.x.low * k, c.x.high * k],
                format!(
                    "inferred from one saturated level ({}): {x:.2} req/s × Code time {code:.2} s = {tasks:.1} runner tasks",
                    c.level.words()
                ),
            ));
        }
        (None, Some(r)) => {
            let cap = r.value as f64 * rpw * workers;
            if tasks < MATCH * cap && in_progress >= 0.5 {
                let k = c.s / workers;
                s.worker_concurrency = Some(Sourced::inferred(
                    x * k,
                    [c.x.low * k, c.x.high * k],
                    format!(
                        "inferred from one saturated level ({}): {x:.2} req/s × S {:.2} s = {in_progress:.1} executions in progress",
                        c.level.words(),
                        c.s
                    ),
                ));
            }
        }
        _ => {}
    }
}

/// Decides the capping limit and writes its finding.
pub fn decide(
    s: &Settings,
    cap: Option<&Capacity>,
    job: Option<Job>,
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let in_progress = x * ceiling.s;
    if let (Some(cap), Some(job)) = (cap, job) {
        if cap.capping == Limit::NoRunner && x > 0.0 {
            // The settings say no runner task can run, yet executions completed: the settings
            // are refuted, named, and the verdict follows what ran.
            findings.push(
                Finding::new(
                    FindingId::SettingsDisagree,
                    format!(
                        "The settings read give no runner task (runner capacity 0), yet {x:.2} executions/s completed"
                    ),
                )
                .evidence(format!(
                    "runner limit {}, runners per worker {}: measured {} from {} on",
                    source_of(&s.runner_limit),
                    source_of(&s.runners_per_worker),
                    ceiling.x.describe("req/s"),
                    ceiling.level.words()
                ))
                .figure("measured_per_s", x)
                .figure("runner_capacity", 0.0)
                .fix("check the runner settings where they run (n8ncap inspect): the runners' N8N_RUNNERS_MAX_CONCURRENCY, and which worker each attaches to"),
            );
            let refuted = Settings {
                runner_limit: None,
                runners_per_worker: None,
                ..s.clone()
            };
            return decide(&refuted, None, None, ceiling, findings);
        }
        if cap.capping == Limit::NoRunner {
            return Verdict {
                limit: Some(Limit::NoRunner),
                text:
                    "No runner is attached: every Code task fails after the task request timeout."
                        .into(),
                cpu: None,
            };
        }
        // Generic over the bounds: how busy each one's servers were at the measured ceiling (an
        // execution holds a slot for the S measured, a runner task for its Code time); the
        // binding bound names the limit, both when two are level.
        let busy = |b: &Bound| {
            let demand = match b.holds {
                Holds::Execution => ceiling.s,
                Holds::Code => job.code_s,
            };
            b.utilisation(x, demand)
        };
        let level = cap.capping == Limit::Both;
        let binding = cap.binding().filter(|b| b.per_s().is_finite());
        let u = if level {
            cap.bounds.iter().map(busy).fold(0.0, f64::max)
        } else {
            binding.map_or(0.0, busy)
        };
        if let (Some(b), true) = (binding, u >= MATCH) {
            if u > ABOVE {
                findings.push(settings_disagree(s, cap, x, u));
            }
            let lower = if level { Limit::Both } else { b.limit };
            let v = named_limit(lower, s, (cap, job), ceiling, findings);
            return hedge(v, b.per_s(), (s, ceiling), findings);
        }
        return third_limit(Some(cap), ceiling, in_progress, findings);
    }
    // A limit is unknown even after inference: say what the level shows.
    if let Some(site) = cpu::binding(ceiling.cpu) {
        return cpu_verdict(site.clone(), None, ceiling, findings);
    }
    if let Some(v) = one_limit_reached(s, ceiling, findings) {
        return v;
    }
    let missing = missing_settings(s);
    Verdict {
        limit: None,
        text: format!(
            "Throughput tops out at {} with {in_progress:.1} executions in progress (X × S) from {} on: \
             a limit of about {:.0} concurrent executions caps it. Unknown: {} — give them (or --docker) to say which limit that is.",
            ceiling.x.describe("req/s"),
            ceiling.level.words(),
            in_progress.round(),
            missing.join(", ")
        ),
        cpu: None,
    }
}

/// Only one of the two limits is known, and the level reached it: that limit caps, whatever the
/// other is (it allowed at least what ran).
fn one_limit_reached(
    s: &Settings,
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Option<Verdict> {
    let x = ceiling.x.mean;
    let workers = s.worker_count() as f64;
    let at = format!(
        "measured {} from {} on",
        ceiling.x.describe("req/s"),
        ceiling.level.words()
    );
    if let Some(c) = s
        .worker_concurrency
        .as_ref()
        .filter(|_| s.runner_limit.is_none())
    {
        let slots = c.value as f64 * workers;
        let u = x * ceiling.s / slots;
        if u >= MATCH {
            findings.push(
                Finding::new(FindingId::WorkerConcurrencyCaps,
                    format!("Worker concurrency caps throughput at {x:.2} req/s: {slots:.0} slots"),
                )
                .evidence(format!(
                    "{:.1} executions in progress (X × S = {x:.2} × {:.2} s) = {} of {slots:.0} slots ({}); {at}",
                    x * ceiling.s,
                    ceiling.s,
                    pct(u),
                    c.source
                ))
                .evidence("the runner limit is not known: the runners ran every Code task the slots handed them")
                .figure("throughput_per_s", x)
                .figure("executions_in_progress", x * ceiling.s)
                .figure("worker_slots", slots)
                .fix("raise worker concurrency or add workers — each with its runner, keeping runner capacity ≥ the slots that run Code"),
            );
            let v = Verdict {
                limit: Some(Limit::WorkerConcurrency),
                text: format!(
                    "Worker concurrency caps throughput: {at}; {slots:.0} slots ÷ S {:.2} s = {:.2} req/s.",
                    ceiling.s,
                    slots / ceiling.s
                ),
                cpu: None,
            };
            return Some(hedge(v, slots / ceiling.s, (s, ceiling), findings));
        }
    }
    if let (Some(r), None) = (&s.runner_limit, &s.worker_concurrency) {
        let tasks = r.value as f64 * s.runners_per_worker_count().max(1) as f64 * workers;
        let code = code_time(s, ceiling);
        let u = x * code / tasks;
        if u >= MATCH {
            findings.push(
                Finding::new(FindingId::RunnerLimitCaps,
                    format!("The runner limit caps throughput at {x:.2} req/s: {tasks:.0} runner tasks"),
                )
                .evidence(format!(
                    "{:.1} runner tasks running (X × C = {x:.2} × {code:.2} s) = {} of runner capacity {tasks:.0} ({}); {at}",
                    x * code,
                    pct(u),
                    r.source
                ))
                .figure("throughput_per_s", x)
                .figure("runner_tasks_running", x * code)
                .figure("runner_capacity", tasks)
                .fix("raise N8N_RUNNERS_MAX_CONCURRENCY on the runner containers (or add runners per worker)"),
            );
            let v = Verdict {
                limit: Some(Limit::RunnerLimit),
                text: format!(
                    "The runner limit caps throughput: {at}; {tasks:.0} runner tasks ÷ {code:.2} s = {:.2} req/s.",
                    tasks / code.max(1e-9)
                ),
                cpu: None,
            };
            return Some(hedge(v, tasks / code.max(1e-9), (s, ceiling), findings));
        }
    }
    None
}

/// A measured ceiling more than this share under the bound of the limit the verdict names is
/// evidence of a cost the model does not hold (a measured point far from the prediction is
/// itself a finding). 10 %: the model held within 1–5 % on a real n8n whenever CPU
/// was to spare, and a level's throughput interval is a few per cent wide.
pub const MISMATCH: f64 = 0.10;

/// The verdict with its doubt when the measured ceiling is more than [`MISMATCH`] under the
/// bound of the limit it names and even the top of its interval stays under the bound: the
/// limit is still the likeliest (its slots or tasks were ≥ 85 % in use), but something
/// unmeasured costs the difference.
fn hedge(
    v: Verdict,
    bound: f64,
    (s, ceiling): (&Settings, &Ceiling),
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x;
    let Some(limit) = v.limit else { return v };
    // The most the limit can allow: a slot is not held for the part of S outside the worker
    // (the webhook's intake and answer), so slots ÷ (S − overhead) is its upper end.
    let most = match limit {
        Limit::RunnerLimit | Limit::Cpu | Limit::NoRunner => bound,
        Limit::WorkerConcurrency | Limit::ProductionLimit | Limit::Both => {
            bound * ceiling.s / (ceiling.s - ceiling.overhead_s).max(1e-9)
        }
    };
    // A limit inferred from this very measurement equals it by construction, up to its
    // rounding to a whole number (its interval says how far): it is no reading to doubt.
    let inferred = |o: &Option<Sourced<u32>>| o.as_ref().is_some_and(|v| v.interval.is_some());
    let from_this_run = match limit {
        Limit::RunnerLimit => inferred(&s.runner_limit),
        Limit::WorkerConcurrency | Limit::ProductionLimit => inferred(&s.worker_concurrency),
        Limit::Both => inferred(&s.runner_limit) || inferred(&s.worker_concurrency),
        Limit::Cpu | Limit::NoRunner => false,
    };
    let measured = x.low.min(x.mean);
    if !from_this_run
        && most.is_finite()
        && measured > 0.0
        && most < (1.0 - floor::FLOOR_TOLERANCE) * measured
    {
        let m = floor::Measured {
            x: ceiling.x,
            s: ceiling.s,
            overhead_s: ceiling.overhead_s,
            at: ceiling.level.words(),
        };
        return Verdict {
            limit: None,
            text: floor::below_measured(limit, most, (s, &m), findings),
            cpu: None,
        };
    }
    if !(bound.is_finite() && bound > 0.0) || x.mean >= (1.0 - MISMATCH) * bound || x.high >= bound
    {
        return v;
    }
    let gap = 1.0 - x.mean / bound;
    let cause = if ceiling.cpu.is_empty() {
        "CPU is the usual cause (a real n8n worker spends about 0.1 CPU s per execution besides \
         the Code); add --metrics main=URL worker=URL or --docker to tell"
    } else {
        "CPU was measured and is not saturated: look at the database pool, a proxy, a mock \
         server or the load generator"
    };
    let mut f = Finding::new(FindingId::ModelMismatch,
        format!(
            "The measured ceiling is {} under the {bound:.2} req/s that {} allows: something unmeasured costs that much",
            pct(gap),
            limit.words()
        ),
    )
    .evidence(format!(
        "measured {} from {} on; the model puts {} at {bound:.2} req/s",
        x.describe("req/s"),
        ceiling.level.words(),
        limit.words()
    ))
    .figure("measured_per_s", x.mean)
    .figure("measured_high_per_s", x.high)
    .figure("named_bound_per_s", bound)
    .figure("gap", gap)
    .figure("cpu_measured", if ceiling.cpu.is_empty() { 0.0 } else { 1.0 })
    .why("The model held within 1–5 % on a real n8n whenever CPU was to spare; a ceiling this far under it means a cost the settings do not show, and raising the named limit may buy less than the model says.");
    f = f.fix(if ceiling.cpu.is_empty() {
        "sweep again with --docker (container CPU) or --metrics main=URL worker=URL (process CPU): a saturated CPU would be the limit instead"
    } else {
        "look for the database pool, a proxy, a mock server, or the load generator (client CPU)"
    });
    findings.push(f);
    let rest = v
        .text
        .split_once(": ")
        .map_or(v.text.as_str(), |(_, r)| r)
        .to_string();
    let rest = floor::capitalise(&rest);
    Verdict {
        text: format!(
            "Most likely {} caps throughput, but the measured {:.2} req/s is {} under its {bound:.2} req/s: something unmeasured costs that much — {cause}. {rest}",
            limit.words(),
            x.mean,
            pct(gap)
        ),
        ..v
    }
}

fn missing_settings(s: &Settings) -> Vec<&'static str> {
    [
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
    .collect()
}

fn settings_disagree(s: &Settings, cap: &Capacity, x: f64, u: f64) -> Finding {
    let src = |o: &Option<Sourced<u32>>| {
        o.as_ref()
            .map(|v| format!("{} ({})", v.value, v.source))
            .unwrap_or_else(|| "unknown".into())
    };
    Finding::new(FindingId::SettingsDisagree,
        format!(
            "Measured ceiling {x:.2} req/s is above what the given settings allow ({:.2} req/s)",
            cap.ceiling
        ),
    )
    .evidence(format!(
        "worker concurrency {}, runner limit {}: {} of the limit in use",
        src(&s.worker_concurrency),
        src(&s.runner_limit),
        pct(u)
    ))
    .figure("measured_per_s", x)
    .figure("model_ceiling_per_s", cap.ceiling)
    .fix("check the settings: the running containers may not have the values given (n8ncap inspect reads them)")
}

fn named_limit(
    limit: Limit,
    s: &Settings,
    (cap, job): (&Capacity, Job),
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let u_w = x * ceiling.s / cap.total_worker_concurrency.max(1) as f64;
    let (c, r, st) = (
        cap.total_worker_concurrency,
        cap.total_runner_capacity,
        ceiling.s,
    );
    let at = format!(
        "measured {} from {} on",
        ceiling.x.describe("req/s"),
        ceiling.level.words()
    );
    let base = |f: Finding| {
        f.figure("throughput_per_s", x)
            .figure("service_time_s", st)
            .figure("executions_in_progress", x * st)
            .figure("runner_tasks_running", x * job.code_s)
            .figure("worker_slots", c as f64)
            .figure("runner_capacity", r as f64)
            .figure("worker_bound_per_s", cap.worker_bound)
            .figure("runner_bound_per_s", cap.runner_bound)
    };
    match limit {
        Limit::RunnerLimit => runner_limit_caps(base, (s, cap, job), ceiling, &at, findings),
        Limit::WorkerConcurrency if s.is_regular() => {
            production_limit(base, (s, cap, job), ceiling, &at, findings)
        }
        Limit::ProductionLimit => production_limit(base, (s, cap, job), ceiling, &at, findings),
        // The settings' model holds slots and runners; a limit outside it is named as the slots
        // (the caller maps it so, as `lower` above).
        Limit::WorkerConcurrency | Limit::NoRunner | Limit::Cpu => {
            findings.push(
                base(Finding::new(FindingId::WorkerConcurrencyCaps,
                    format!("Worker concurrency caps throughput at {x:.2} req/s: {c} slots"),
                ))
                .evidence(format!(
                    "{:.1} executions in progress (X × S = {x:.2} × {st:.2} s) = {} of {c} slots{}; {at}",
                    x * st,
                    pct(u_w),
                    source_of(&s.worker_concurrency)
                ))
                .evidence(format!(
                    "runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s leaves room",
                    job.code_s, cap.runner_bound
                ))
                .fix("raise worker concurrency (--concurrency / N8N_CONCURRENCY_PRODUCTION_LIMIT) or add workers — each with its runner, keeping runner capacity ≥ the slots that run Code"),
            );
            Verdict {
                limit: Some(Limit::WorkerConcurrency),
                text: format!(
                    "Worker concurrency caps throughput: {at}; {c} slots ÷ S {st:.2} s = {:.2} req/s (runners allow {:.2}).",
                    cap.worker_bound, cap.runner_bound
                ),
                cpu: None,
            }
        }
        Limit::Both => {
            findings.push(
                base(Finding::new(FindingId::LimitsInseparable,
                    "Runner limit and worker concurrency give nearly the same ceiling; the data cannot say which caps",
                ))
                .evidence(format!(
                    "worker concurrency {c} ÷ S {st:.2} s = {:.2} req/s; runner capacity {r} ÷ Code time {:.2} s = {:.2} req/s (within {:.0} %); {at}",
                    cap.worker_bound,
                    job.code_s,
                    cap.runner_bound,
                    crate::model::INSEPARABLE * 100.0
                ))
                .fix("raise both together (runner capacity ≥ worker concurrency), then sweep again"),
            );
            Verdict {
                limit: Some(Limit::Both),
                text: format!(
                    "Throughput tops out at {} — worker concurrency and runner limit allow about the same ({:.2} and {:.2} req/s); raise them as a pair.",
                    ceiling.x.describe("req/s"),
                    cap.worker_bound,
                    cap.runner_bound
                ),
                cpu: None,
            }
        }
    }
}

/// " (where it came from)" of a known setting, for the evidence; nothing when unknown.
fn source_of(o: &Option<Sourced<u32>>) -> String {
    o.as_ref()
        .map(|v| format!(" ({})", v.source))
        .unwrap_or_default()
}

/// The runner limit caps: the slots taken while throughput stays under what they allow, the
/// runner tasks running against runner capacity.
fn runner_limit_caps(
    base: impl Fn(Finding) -> Finding,
    (s, cap, job): (&Settings, &Capacity, Job),
    ceiling: &Ceiling,
    at: &str,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let st = ceiling.s;
    let (c, r) = (cap.total_worker_concurrency, cap.total_runner_capacity);
    let u_r = x * job.code_s / r.max(1) as f64;
    let slots = ceiling.level.slots_taken;
    // Slots taken: the gauge's reading, else every execution in progress holds one (at most
    // the slots there are).
    let taken = slots.unwrap_or(x * st).min(c as f64);
    let mut f = base(Finding::new(FindingId::RunnerLimitCaps,
        format!("The runner limit caps throughput at {x:.2} req/s: {r} runner tasks for {c} worker slots"),
    ))
    .figure("under_worker_bound", 1.0 - x / cap.worker_bound.max(1e-9));
    if let Some(sl) = slots {
        f = f.figure("slots_taken", sl).evidence(format!(
            "slots {} taken ({sl:.1} of {c}), yet throughput {x:.2} req/s is {} under worker concurrency ÷ S ({c} ÷ {st:.2} s = {:.2} req/s)",
            pct(sl / c.max(1) as f64),
            pct(1.0 - x / cap.worker_bound.max(1e-9)),
            cap.worker_bound
        ));
    }
    f = f
        .evidence(format!(
            "{:.1} runner tasks running (X × C = {x:.2} × {:.2} s) = {} of runner capacity {r}{}; {at}",
            x * job.code_s,
            job.code_s,
            pct(u_r),
            source_of(&s.runner_limit)
        ))
        .evidence(format!(
            "{:.1} executions in progress (X × S) of {c} slots: {:.1} slots taken hold a job that waits for a runner ({:.1} taken − {:.1} runner tasks running); n8n's queue gauges count slots taken, not runner tasks",
            x * st,
            (taken - x * job.code_s).max(0.0),
            taken,
            x * job.code_s
        ))
        .why("Adding workers or raising --concurrency changes nothing while each worker's runners cap Code tasks.")
        .fix(format!(
            "raise N8N_RUNNERS_MAX_CONCURRENCY on the runner containers (or add runners per worker) to at least {} per worker",
            (c as f64 / s.worker_count() as f64 * job.code_s / job.job_time().max(1e-9)).ceil()
        ));
    findings.push(f);
    Verdict {
        limit: Some(Limit::RunnerLimit),
        text: format!(
            "The runner limit caps throughput: {at}; {r} runner tasks ÷ {:.2} s = {:.2} req/s, while {c} worker slots would allow {:.2} req/s.",
            job.code_s, cap.runner_bound, cap.worker_bound
        ),
        cpu: None,
    }
}

/// Regular mode at its production limit: main's slots are what caps.
fn production_limit(
    base: impl Fn(Finding) -> Finding,
    (s, cap, job): (&Settings, &Capacity, Job),
    ceiling: &Ceiling,
    at: &str,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let st = ceiling.s;
    let (c, r) = (cap.total_worker_concurrency, cap.total_runner_capacity);
    let u_w = x * st / c.max(1) as f64;
    let src = s
        .worker_concurrency
        .as_ref()
        .map(|v| format!(" ({})", v.source))
        .unwrap_or_default();
    findings.push(
        base(Finding::new(FindingId::ProductionLimitCaps,
            format!("The production limit caps throughput at {x:.2} req/s: main runs {c} executions at once (regular mode)"),
        ))
        .evidence(format!(
            "{:.1} executions in progress (X × S = {x:.2} × {st:.2} s) = {} of N8N_CONCURRENCY_PRODUCTION_LIMIT {c}{}; {at}",
            x * st,
            pct(u_w),
            src
        ))
        .evidence(format!(
            "the internal runner's {r} tasks ÷ Code time {:.2} s = {:.2} req/s leave room; executions beyond the limit wait in main's concurrency queue, not in Redis",
            job.code_s, cap.runner_bound
        ))
        .why("In regular mode one process runs every execution: the production limit is its only slot count, and its one JavaScript thread is the next ceiling.")
        .fix(format!(
            "raise N8N_CONCURRENCY_PRODUCTION_LIMIT on main (now {c}) while main's CPU has room; past one core, switch to queue mode (EXECUTIONS_MODE=queue, Redis, workers each with a runner)"
        )),
    );
    Verdict {
        limit: Some(Limit::ProductionLimit),
        text: format!(
            "The production limit caps throughput (regular mode): {at}; {c} executions at once ÷ S {st:.2} s = {:.2} req/s (the internal runner allows {:.2}).",
            cap.worker_bound, cap.runner_bound
        ),
        cpu: None,
    }
}

/// Below every slot limit: CPU when a site is saturated, else an unmodelled limit.
fn third_limit(
    cap: Option<&Capacity>,
    ceiling: &Ceiling,
    in_progress: f64,
    findings: &mut Vec<Finding>,
) -> Verdict {
    if let Some(site) = cpu::binding(ceiling.cpu) {
        return cpu_verdict(site.clone(), cap, ceiling, findings);
    }
    let x = ceiling.x.mean;
    let model = cap.map(|c| c.ceiling).unwrap_or(f64::NAN);
    let mut f = Finding::new(FindingId::UnmodelledLimit,
        format!(
            "Measured ceiling {x:.2} req/s is {} below the settings' {model:.2} req/s: something else caps throughput",
            pct(1.0 - x / model.max(1e-9))
        ),
    )
    .evidence(format!(
        "{in_progress:.1} executions in progress at the ceiling (X × S) from {} on; worker-bound {:.2} req/s, runner-bound {:.2} req/s",
        ceiling.level.words(),
        cap.map(|c| c.worker_bound).unwrap_or(f64::NAN),
        cap.map(|c| c.runner_bound).unwrap_or(f64::NAN),
    ))
    .figure("throughput_per_s", x)
    .figure("model_ceiling_per_s", model)
    .figure("executions_in_progress", in_progress)
    .why("Raising worker concurrency or the runner limit will not help until this limit is found.");
    if ceiling.cpu.is_empty() {
        f = f.evidence(
            "no CPU signal was measured: sweep with --docker (container CPU) or --metrics main=URL worker=URL (process CPU) to see whether a process or the host is CPU-bound",
        );
    } else {
        for u in ceiling.cpu {
            f = f.evidence(format!(
                "{}: {:.2} cores ({:.3} CPU s per execution) of {:.1} usable — not saturated",
                u.name, u.cores_used, u.cpu_s_per_execution, u.usable_cores.value
            ));
        }
    }
    findings.push(f.fix(
        "look for the database pool, a mock server, a proxy, or the load generator (client CPU)",
    ));
    Verdict {
        limit: None,
        text: format!(
            "Throughput tops out at {} — below every modelled limit ({model:.2} req/s): an unmodelled limit caps it.",
            ceiling.x.describe("req/s")
        ),
        cpu: None,
    }
}

fn cpu_verdict(
    site: CpuUse,
    cap: Option<&Capacity>,
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x.mean;
    let where_ = match site.site {
        CpuSite::Host => "the host's CPU".to_string(),
        CpuSite::Process => format!(
            "the CPU of {} ({})",
            site.role.map(|r| r.word()).unwrap_or("a process"),
            site.name
        ),
    };
    let mut f = Finding::new(FindingId::CpuLimitCaps,
        format!("CPU caps throughput at {x:.2} req/s: {where_} is saturated"),
    )
    .evidence(format!(
        "{:.2} cores used of {:.1} usable ({}); {:.3} CPU s per execution → {:.1} usable ÷ {:.3} = {:.2} executions/s",
        site.cores_used,
        site.usable_cores.value,
        site.usable_cores.source,
        site.cpu_s_per_execution,
        site.usable_cores.value.max(site.cores_used),
        site.cpu_s_per_execution,
        site.bound_per_s
    ))
    .figure("throughput_per_s", x)
    .figure("cores_used", site.cores_used)
    .figure("usable_cores", site.usable_cores.value)
    .figure("cpu_s_per_execution", site.cpu_s_per_execution)
    .figure("cpu_bound_per_s", site.bound_per_s)
    .why("No concurrency setting raises a CPU ceiling: slots and runner tasks only wait for the CPU.");
    if let Some(c) = cap {
        f = f.evidence(format!(
            "the settings would allow {:.2} req/s (worker-bound {:.2}, runner-bound {:.2})",
            c.ceiling, c.worker_bound, c.runner_bound
        ));
    }
    f = f.fix(match (site.site, site.role) {
        (CpuSite::Process, Some(crate::record::Role::Worker)) => {
            "add workers, each with its runner (N8N_RUNNERS_TASK_BROKER_URI pointing at it), up to the host's cores"
        }
        (CpuSite::Process, Some(crate::record::Role::Runner)) => {
            "add runners per worker (each runner is one Node process)"
        }
        (CpuSite::Process, Some(crate::record::Role::Main)) => {
            "main's intake is CPU-bound: add webhook processes (n8n webhook) behind the load balancer, or a faster CPU"
        }
        _ => "more cores or another host: adding processes on this one adds nothing",
    });
    findings.push(f);
    Verdict {
        limit: Some(Limit::Cpu),
        text: format!(
            "CPU caps throughput: {} measured from {} on; {where_} uses {:.2} cores at {:.3} CPU s per execution, which allows {:.2} executions/s.",
            ceiling.x.describe("req/s"),
            ceiling.level.words(),
            site.cores_used,
            site.cpu_s_per_execution,
            site.bound_per_s
        ),
        cpu: Some(site),
    }
}
