//! Recommend: settings that follow the diagnosis. The capping limit is raised as a pair
//! (runner capacity with worker concurrency); a setting that is not the problem is never
//! lowered, except by the 2/3 factor applied to a *failure* break point (the reference study:
//! failed at 120 → plan for 80); a plan never comes from a run with no valid level, never
//! predicts less than was measured, and predicts with every ceiling it knows (CPU included, or
//! it says CPU was not measured).

pub mod alert_cases;
pub mod alerts;
pub mod analyze;
pub mod autoscaler;
pub mod memory;
pub mod operating_point;
pub mod replayed;
pub mod tuned;

use crate::diagnose::lifecycle::{memory_needed_mib, MEMORY_HEADROOM};
use crate::error::NoPlan;
use crate::limits::runner_limit::with_runners;
use crate::limits::{self};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::{self, n8n_defaults, Job};
use crate::record::diagnosis::{BreakPointKind, CpuUse, Diagnosis, RunnerMemory};
use crate::record::recommendation::Recommendation;

pub use crate::limits::runner_limit::RUNNER_LIMIT_PER_RUNNER;

/// Runner memory besides the tasks: an idle `n8nio/runners` container, when not measured.
pub const RUNNER_BASE_MB_ASSUMED: f64 = n8n_defaults::RUNNER_IDLE_MIB;

/// Past these no deployment runs: a plan that needs more gives up and says so.
pub const MAX_WORKERS: u32 = 200;
pub const MAX_WORKER_CONCURRENCY: u32 = 5_000;
pub const MAX_RUNNERS_PER_WORKER: u32 = 50;

/// The plan from a diagnosed run; `given` overrides the break point (`--break-point`, taken as
/// a failure point).
pub fn recommend(d: &Diagnosis, given: Option<Sourced<u32>>) -> Result<Recommendation, NoPlan> {
    if !d.levels.iter().any(|l| l.valid) {
        let first = d
            .findings
            .iter()
            .find(|f| f.severity == crate::findings::Severity::Error)
            .map(|f| f.id.as_str())
            .unwrap_or("measurement-invalid");
        return Err(NoPlan(format!(
            "no valid stage: nothing measured to plan from — fix {first} first"
        )));
    }
    if let Some(limit) = d.capping_limit {
        limits::answering(limit).plannable()?;
    } else if given.is_none() {
        return Err(if d.measured_ceiling.is_some() {
            "the limit that caps is not one a setting changes (unmodelled-limit): find it first"
                .into()
        } else {
            format!(
                "the ceiling was not reached{}: nothing to plan from yet, or give --break-point",
                d.next_level
                    .map(|n| format!(" — sweep to {n} in flight"))
                    .unwrap_or_default()
            )
            .into()
        });
    }
    let (kind, bp) = basis(d, given)?;
    let overhead = d.fixed_overhead_s.unwrap_or(model::DEFAULT_OVERHEAD_S);
    // A measured service time stands in for a job time nobody gave (a history's slot time, a
    // sweep's 1-in-flight level): S less the overhead, all of it assumed to hold the runner —
    // and never under half of S, since an overhead assumed larger than that says more about
    // the assumption than about the job.
    let measured = d
        .service_time
        .as_ref()
        .filter(|_| d.settings.job_time.is_none())
        .map(|st| {
            let job = (st.value - overhead).max(st.value * 0.5);
            let source = Provenance::Measured(format!(
                "measured: S {:.3} s less {overhead:.3} s of overhead ({})",
                st.value, st.source
            ));
            Settings {
                job_time: Some(Sourced::new(job, source.clone())),
                code_time: d
                    .settings
                    .code_time
                    .clone()
                    .or(Some(Sourced::new(job, source))),
                ..d.settings.clone()
            }
        });
    let s = measured.as_ref().unwrap_or(&d.settings);
    let job = s
        .job(overhead)
        .ok_or("job time unknown: give --job-time (or sweep with sleep_ms in the body)")?;
    let current = current(s)?;
    let operating = operating_concurrency(kind, bp.value, d);
    let plan = match kind {
        BreakPointKind::Failure => at_operating(&current, operating, job),
        BreakPointKind::Knee => raise(d, &current, job)?,
    };
    let ctx = Context {
        settings: s,
        job,
        current: &current,
        cpu: &d.cpu,
        cpu_read_zero: &d.cpu_read_zero,
        measured: d.measured_ceiling.as_ref().map(|m| m.mean),
        doubt: d.doubt.clone(),
        runner_memory: d.runner_memory.as_ref(),
    };
    let basis = Basis {
        kind,
        break_point: bp,
        operating,
    };
    let mut rec = finish(&ctx, basis, plan)?;
    rec.notes.extend(time_budget(spread(d), s, &rec));
    rec.notes.extend(memory::at_plan(&d.memory, &rec.settings));
    Ok(rec)
}

/// The p95/mean spread of response times measured below the ceiling (1 without a run).
fn spread(d: &Diagnosis) -> f64 {
    d.levels
        .iter()
        .filter(|l| l.valid && !l.saturated())
        .filter_map(|l| Some(l.p95_ms.as_ref()?.mean / l.mean_ms.filter(|m| *m > 0.0)?))
        .filter(|r| r.is_finite())
        .fold(1.0, f64::max)
}

/// The time budget at the planned load, said when n8n's defaults are short: a scale-down or
/// deploy kills the executions still running when the worker's shutdown window ends (n8n
/// #37651), so the window must outlast the planned load's slow executions — the predicted mean
/// response × the p95/mean `spread` measured below the ceiling, with half again as margin; and
/// a Code task longer than the runner's task timeout fails.
fn time_budget(spread: f64, s: &Settings, r: &Recommendation) -> Vec<String> {
    let mut out = Vec::new();
    let Some(mean) = r.predicted_response_s.filter(|m| m.is_finite() && *m > 0.0) else {
        return out;
    };
    let p95 = mean * spread;
    let need = (p95 * 1.5).ceil();
    if need > n8n_defaults::GRACEFUL_SHUTDOWN_S {
        out.push(format!(
            "N8N_GRACEFUL_SHUTDOWN_TIMEOUT={need:.0} on the workers (and terminationGracePeriodSeconds above it): at the planned load a slow execution takes about {p95:.1} s (the predicted mean {mean:.2} s × the p95/mean {spread:.2} measured below the ceiling), and a scale-down or deploy kills what still runs when n8n's 30 s window ends (`n8ncap audit --run` checks the deployment)"
        ));
    }
    let code = s
        .code_time
        .as_ref()
        .or(s.job_time.as_ref())
        .map(|c| c.value * spread);
    if let Some(code) =
        code.filter(|c| c.is_finite() && (c * 1.5).ceil() > n8n_defaults::TASK_TIMEOUT_S)
    {
        out.push(format!(
            "N8N_RUNNERS_TASK_TIMEOUT={:.0} on the runners: a Code task of about {code:.1} s outlasts the runner's {:.0} s default (60 s from n8n 3.0) and fails",
            (code * 1.5).ceil(), n8n_defaults::TASK_TIMEOUT_S
        ));
    }
    out
}

/// A plan from settings and a failure break point given by hand, with no run.
pub fn from_break_point(s: &Settings, bp: Sourced<u32>) -> Result<Recommendation, NoPlan> {
    let job = s.job(0.0).ok_or("job time unknown: give --job-time")?;
    let current = with_defaults(s);
    let operating = (bp.value as f64 * 2.0 / 3.0).floor() as u32;
    let plan = at_operating(&current, operating, job);
    let ctx = Context {
        settings: s,
        job,
        current: &current,
        cpu: &[],
        cpu_read_zero: &[],
        measured: None,
        doubt: None,
        runner_memory: None,
    };
    let basis = Basis {
        kind: BreakPointKind::Failure,
        break_point: bp,
        operating,
    };
    let mut rec = finish(&ctx, basis, plan)?;
    rec.notes.extend(time_budget(1.0, s, &rec));
    Ok(rec)
}

fn basis(
    d: &Diagnosis,
    given: Option<Sourced<u32>>,
) -> Result<(BreakPointKind, Sourced<u32>), NoPlan> {
    if let Some(g) = given {
        return Ok((BreakPointKind::Failure, g));
    }
    if let Some(f) = &d.failure_point {
        return Ok((
            BreakPointKind::Failure,
            Sourced::new(
                f.in_flight.round().max(1.0) as u32,
                Provenance::Measured(format!("failure: {}", f.reason)),
            ),
        ));
    }
    let k = d
        .knee
        .as_ref()
        .ok_or("no break point: no level failed its thresholds or reached the ceiling")?;
    Ok((
        BreakPointKind::Knee,
        Sourced::new(
            k.in_flight.round().max(1.0) as u32,
            Provenance::Measured(format!("knee: {}", k.reason)),
        ),
    ))
}

/// ⌊2/3 × failure point⌋; from a knee alone, the executions the deployment held at its
/// ceiling (X × S) — the failure point was not reached.
fn operating_concurrency(kind: BreakPointKind, bp: u32, d: &Diagnosis) -> u32 {
    match kind {
        BreakPointKind::Failure => (bp as f64 * 2.0 / 3.0).floor().max(1.0) as u32,
        BreakPointKind::Knee => d
            .effective_concurrency
            .map(|e| e.floor().max(1.0) as u32)
            .unwrap_or(bp),
    }
}

/// Today's settings a plan starts from: worker concurrency must be known.
fn current(s: &Settings) -> Result<Settings, NoPlan> {
    if s.worker_concurrency.is_none() {
        return Err("worker concurrency unknown: give --worker-concurrency (or --docker)".into());
    }
    Ok(with_defaults(s))
}

/// The settings with what a plan needs and they lack filled in, each saying so: n8n's
/// defaults for worker concurrency and the runner limit, one worker with one runner.
fn with_defaults(s: &Settings) -> Settings {
    let mut s = s.clone();
    let fill = |o: &mut Option<Sourced<u32>>, v: u32, why: &str| {
        o.get_or_insert_with(|| Sourced::new(v, Provenance::Assumed(why.into())));
    };
    fill(&mut s.workers, 1, "not known: one worker");
    fill(
        &mut s.worker_concurrency,
        n8n_defaults::WORKER_CONCURRENCY,
        "n8n default (not known)",
    );
    fill(
        &mut s.runner_limit,
        n8n_defaults::RUNNER_LIMIT,
        "n8n default (N8N_RUNNERS_MAX_CONCURRENCY not known)",
    );
    fill(
        &mut s.runners_per_worker,
        1,
        "not known: one runner per worker",
    );
    // A plan pairs every worker with a runner: none read is planned from one.
    if s.runners_per_worker.as_ref().is_some_and(|r| r.value == 0) {
        s.runners_per_worker = Some(Sourced::new(
            1,
            Provenance::Assumed("none read: a plan pairs one per worker".into()),
        ));
    }
    s
}

/// Worker concurrency for `operating` executions in flight over today's workers, runners
/// paired with it.
fn at_operating(current: &Settings, operating: u32, job: Job) -> Settings {
    let workers = current.worker_count();
    let plan = current.clone().propose(
        |s| &mut s.worker_concurrency,
        operating.div_ceil(workers).max(1),
        format!("{operating} in flight (2/3 of the failure point) over {workers} worker(s)"),
    );
    with_runners(plan, current, job)
}

/// From a knee: raise what caps.
fn raise(d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
    match d.capping_limit {
        Some(limit) => limits::answering(limit).raise(d, current, job),
        None => Err("no setting raises this limit".into()),
    }
}

/// What the plan is computed against.
struct Context<'a> {
    settings: &'a Settings,
    job: Job,
    /// Today's settings with what a plan needs filled in.
    current: &'a Settings,
    cpu: &'a [CpuUse],
    /// Processes whose CPU was sampled but read 0 (see `Diagnosis::cpu_read_zero`).
    cpu_read_zero: &'a [String],
    /// Capacity measured in the run.
    measured: Option<f64>,
    /// The verdict's doubt.
    doubt: Option<String>,
    /// What Code tasks use in the runners, when the run measured it.
    runner_memory: Option<&'a RunnerMemory>,
}

/// Where the plan comes from.
struct Basis {
    kind: BreakPointKind,
    break_point: Sourced<u32>,
    operating: u32,
}

/// The predicted ceiling of `plan` with every bound known, and which binds; None when no
/// bound is known.
fn predict(plan: &Settings, ctx: &Context) -> Option<(f64, crate::model::Limit)> {
    let mut bounds = Vec::new();
    if let Some(c) = limits::capacity(plan, ctx.job.overhead_s) {
        if let Some(b) = c.binding() {
            bounds.push((c.ceiling, b.limit));
        }
    }
    bounds.extend(limits::measured_bounds(ctx.cpu, ctx.current, plan));
    bounds.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))
}

fn finish(ctx: &Context, basis: Basis, plan: Settings) -> Result<Recommendation, NoPlan> {
    check_bounds(&plan)?;
    let (predicted, bound) = predict(&plan, ctx).ok_or_else(|| {
        NoPlan("the plan's settings give no bound to predict from: set the workers' concurrency (--worker-concurrency)".into())
    })?;
    if basis.kind == BreakPointKind::Knee {
        if let Some(m) = ctx.measured.filter(|m| predicted < 0.95 * m) {
            return Err(NoPlan(format!(
                "the settings this run points to would allow {predicted:.2} req/s, less than the {m:.2} measured: no plan beats what runs today"
            )));
        }
    }
    let (s, job, current) = (ctx.settings, ctx.job, ctx.current);
    let at = limits::capacity(&plan, job.overhead_s)
        .map(|c| model::predict_bound(&c, job, predicted, basis.operating.max(1)));
    let mut notes = notes(
        s,
        &plan,
        current,
        job,
        basis.kind,
        ctx.cpu.is_empty().then_some(ctx.cpu_read_zero),
        s.task_memory_mb.is_some() || ctx.runner_memory.is_some(),
    );
    for l in limits::set_kinds() {
        notes.extend(limits::of(l).notes(s, &plan));
    }
    let (was, to) = (
        current.worker_concurrency_or_default(),
        plan.worker_concurrency_or_default(),
    );
    if basis.kind == BreakPointKind::Failure && to < was {
        notes.push(format!(
            "worker concurrency {was} → {to}: 2/3 of the failure point keeps in-flight executions below where the run failed"
        ));
    }
    Ok(Recommendation {
        break_point: basis.break_point,
        break_point_kind: basis.kind,
        operating_concurrency: basis.operating,
        runner_memory_limit_mb: memory_limit(s, ctx.runner_memory, plan.runner_limit_or_default()),
        proposal: limits::proposal(&plan),
        settings: plan,
        predicted_throughput: predicted,
        predicted_bound: bound,
        cpu_measured: !ctx.cpu.is_empty(),
        predicted_response_s: at.map(|p| p.response_s).filter(|r| r.is_finite()),
        current_ceiling: limits::capacity(s, job.overhead_s).map(|c| c.ceiling),
        measured_capacity: ctx.measured,
        notes,
        doubt: ctx.doubt.clone(),
    })
}

fn check_bounds(p: &Settings) -> Result<(), NoPlan> {
    let (workers, concurrency, runners) = (
        p.worker_count(),
        p.worker_concurrency_or_default(),
        p.runners_per_worker_count(),
    );
    if workers > MAX_WORKERS
        || concurrency > MAX_WORKER_CONCURRENCY
        || runners > MAX_RUNNERS_PER_WORKER
    {
        return Err(NoPlan(format!(
            "the plan would need {} workers × concurrency {} with {} runners each — beyond what a deployment runs \
             (at most {MAX_WORKERS} workers, concurrency {MAX_WORKER_CONCURRENCY}, {MAX_RUNNERS_PER_WORKER} runners per worker): \
             check the job time and the break point",
            workers, concurrency, runners
        )));
    }
    Ok(())
}

fn memory_limit(
    s: &Settings,
    measured: Option<&RunnerMemory>,
    runner_limit: u32,
) -> Option<Sourced<u64>> {
    if let Some(m) = measured {
        let mb = memory_needed_mib(runner_limit as f64, m, MEMORY_HEADROOM) as u64;
        return Some(Sourced::new(
            mb,
            Provenance::Measured(format!(
                "{runner_limit} tasks × {:.0} MiB per task ({}) + {:.0} MiB base ({}), +{:.0} % headroom",
                m.per_task_mib.value,
                m.per_task_mib.source,
                m.base_mib.value,
                m.base_mib.source,
                (MEMORY_HEADROOM - 1.0) * 100.0
            )),
        ));
    }
    s.task_memory_mb.as_ref().map(|m| {
        let mb = (runner_limit as f64 * m.value + RUNNER_BASE_MB_ASSUMED).ceil() as u64;
        Sourced::new(
            mb,
            Provenance::Assumed(format!(
                "{runner_limit} tasks × {:.0} MiB per task ({}) + {RUNNER_BASE_MB_ASSUMED:.0} MiB base (assumed, not measured)",
                m.value, m.source
            )),
        )
    })
}

fn notes(
    s: &Settings,
    plan: &Settings,
    current: &Settings,
    job: Job,
    kind: BreakPointKind,
    no_cpu: Option<&[String]>,
    memory_known: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    if kind == BreakPointKind::Knee {
        notes.push(
            "the failure point was not reached: the plan comes from the measured capacity; sweep past the knee until thresholds fail to apply the 2/3 factor"
                .into(),
        );
    }
    match no_cpu {
        Some([]) => notes.push("upper bound: CPU was not measured (sweep with --docker or --metrics to include the CPU ceiling)".into()),
        Some(zero) => notes.push(format!(
            "upper bound: CPU was read but stayed at 0 for {} (counters that did not move, as when several roles share one process, or none exported): no CPU bound could be computed",
            zero.join(", ")
        )),
        None => {}
    }
    // What raising only worker concurrency would give.
    let only_workers = Settings {
        runner_limit: current.runner_limit.clone(),
        runners_per_worker: current.runners_per_worker.clone(),
        ..plan.clone()
    };
    let with_pair = limits::capacity(plan, job.overhead_s);
    let alone = limits::capacity(&only_workers, job.overhead_s);
    let (limit, runners) = (
        plan.runner_limit_or_default(),
        plan.runners_per_worker_count(),
    );
    let concurrency = plan.worker_concurrency_or_default();
    if let (Some(a), Some(p)) = (alone, with_pair) {
        if a.ceiling < p.ceiling * 0.99 {
            let r_now = current.runner_capacity_per_worker().unwrap_or(0);
            // A runner limit nobody read is n8n's default assumed, and said so.
            let assumed = if s.runner_limit.is_none() {
                " (assumed: n8n's default, N8N_RUNNERS_MAX_CONCURRENCY was not read — give --runner-limit)"
            } else {
                ""
            };
            notes.push(format!(
                "with the runner limit left at {r_now}{assumed} the ceiling stays {:.2} req/s ({:.0}/min): worker concurrency {concurrency} is useful only with runner capacity {} per worker",
                a.ceiling,
                a.ceiling * 60.0,
                limit * runners
            ));
        }
    }
    if s.runner_limit.is_none() && !s.is_regular() {
        notes.push(format!(
            "the runner limit was not read: the plan assumes n8n's default {} per runner; if your runners allow more, keep yours — a plan never lowers a limit it does not know (give --runner-limit, or -f/--project to read it)",
            n8n_defaults::RUNNER_LIMIT
        ));
    }
    if runners > 1 {
        notes.push(format!(
            "{runners} runners per worker, each N8N_RUNNERS_MAX_CONCURRENCY={limit}: a runner is one Node process; if the Code is I/O-bound, one runner with N8N_RUNNERS_MAX_CONCURRENCY={} holds the same",
            limit * runners
        ));
    }
    if s.is_regular() {
        notes.push(format!(
            "regular mode: worker concurrency here is N8N_CONCURRENCY_PRODUCTION_LIMIT on main ({concurrency}), runner limit main's internal runner (N8N_RUNNERS_MAX_CONCURRENCY on main, {limit}); more than one worker means queue mode (EXECUTIONS_MODE=queue, Redis)"
        ));
    } else {
        notes.push(format!(
            "add workers in pairs with their runners: each new worker needs {runners} runner(s) whose N8N_RUNNERS_TASK_BROKER_URI points at it"
        ));
    }
    if !memory_known {
        notes.push(
            "runner memory limit: tasks × per-task peak + idle base — not measured in this run (sweep with the memory profile, or give alloc_mb in the body)"
                .into(),
        );
    }
    notes
}

#[cfg(test)]
mod tests;
