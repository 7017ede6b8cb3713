//! Diagnose: reads a run's stages and the known settings and names the limit that caps
//! throughput — worker concurrency, the runner limit, or CPU — with the numbers that prove it,
//! plus every other finding the data can show. It works from any input shape: one level (a k6
//! summary), a coarse grid, a saved results directory, closed or open model. When the data
//! cannot separate two explanations it says so instead of guessing.
//!
//! Not here: measuring (`load`, `observe`), the formulas (`model`), the settings to propose
//! (`recommend`), rendering (`report`).

pub mod compare;
pub mod cpu;
pub mod failures;
pub mod floor;
pub mod history;
pub mod levels;
pub mod lifecycle;
pub mod memory;
pub mod mix;
pub mod observed;
pub mod ramp;
pub mod regular;
pub mod replay;
pub mod scale;
pub mod validity;
pub mod verdict;

#[cfg(test)]
pub(crate) mod tests;

use crate::findings::{Finding, FindingId};
use crate::model::settings::{Settings, Sourced};
use crate::model::{self, Capacity, Job};
use crate::record::diagnosis::{
    BreakPoint, BreakPointKind, Comparison, CpuUse, CurvePoint, Diagnosis, Level,
};
use crate::record::{Estimate, StageResult};
use verdict::{Ceiling, Verdict};

/// Everything `diagnose` needs beyond the stages.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub settings: Settings,
    /// Task request timeout (s) when known; n8n's default otherwise.
    pub task_request_timeout_s: Option<f64>,
    pub host: cpu::Host,
    /// The workflows of a mix (empty for one workflow).
    pub mix: Vec<crate::model::mix::Kind>,
    /// How the stages' service time is known: given by their source ([`ServiceTime::of`]).
    pub service_time: ServiceTime,
}

/// How the stages' service time is known. Their source says it, so the diagnosis never asks
/// where the stages came from: a run chose its levels and the time follows from the one at 1 in
/// flight (or the job time given); a history's windows carry n8n's execution histogram, and the
/// time is what it measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ServiceTime {
    #[default]
    FromLevels,
    /// Measured by the source (the time when known, and the fixed overhead within it).
    Measured(Option<Sourced<f64>>, f64),
}

impl ServiceTime {
    /// The service time and n8n's overhead within it, for `levels` under `settings`.
    fn at(&self, levels: &[Level], settings: &Settings) -> (Option<Sourced<f64>>, f64) {
        match self {
            ServiceTime::FromLevels => levels::service_time(levels, settings),
            ServiceTime::Measured(s, overhead) => (s.clone(), *overhead),
        }
    }

    /// What stages say of their service time: windows of a history carry n8n's slot times, a
    /// run's levels do not.
    pub fn of(stages: &[StageResult], settings: &Settings) -> ServiceTime {
        if stages.is_empty() || stages.iter().any(|s| s.history.is_none()) {
            return ServiceTime::FromLevels;
        }
        let (s, o) = history::service_time(stages, settings)
            .map_or((None, model::DEFAULT_OVERHEAD_S), |(s, o)| (Some(s), o));
        ServiceTime::Measured(s, o)
    }
}

pub fn diagnose(stages: &[StageResult], inputs: &Inputs) -> Diagnosis {
    let mut findings = Vec::new();
    let mut settings = inputs.settings.clone();
    let mut levels = levels::group(stages);
    let deaths = lifecycle::deaths(stages, &settings);
    lifecycle::mark_levels(&mut levels, &deaths, stages);
    let (service_time, overhead_s) = inputs.service_time.at(&levels, &settings);
    levels::mark_saturation(&mut levels, service_time.as_ref().map(|s| s.value));
    validity::findings(
        stages,
        &levels,
        inputs.task_request_timeout_s,
        &mut findings,
    );

    let measured = levels::measured_ceiling(&levels);
    let (at, cpu, cpu_read_zero) = cpu_at_ceiling(stages, &levels, measured.as_ref(), &inputs.host);
    let s_value = service_time.as_ref().map(|s| s.value);
    let ceiling = measured
        .as_ref()
        .zip(s_value)
        .map(|((x, level), s)| Ceiling::at_level(x, level, &levels, (s, overhead_s), &cpu));
    crate::limits::infer(&mut settings, &levels, ceiling.as_ref());
    crate::limits::read_run(&mut settings, stages, &levels);
    let mut capacity = crate::limits::capacity(&settings, overhead_s);
    let job = settings.job(overhead_s);
    // What caps, decided once; nothing after this changes the limit.
    let v = decide(
        (&settings, capacity.as_ref(), job),
        (ceiling.as_ref(), &levels),
        (stages, service_time.as_ref()),
        &mut findings,
    );
    unread_contention(&v, &findings, (&mut settings, &mut capacity), overhead_s);
    let led = leads(stages, &settings, &mut findings);
    let unnamed = failures::unnamed(stages, &mut findings);
    if let (Some((x, _)), Some(s_time)) = (&measured, s_value) {
        regular::queue_mode_advice(&settings, v.cpu.as_ref(), x.mean, s_time, &mut findings);
    }
    let (mix, mix_words) = mix::consumption(&inputs.mix, overhead_s, v.limit, &mut findings);
    let memory = observations(
        (
            stages,
            &levels,
            measured.as_ref().map(|(_, top)| (*top, &at[..])),
        ),
        (&cpu, v.cpu.as_ref()),
        (inputs, &settings),
        &mut findings,
    );
    let runner_memory = lifecycle::runner_memory(stages, &settings, &deaths);
    let died = deaths_first(&deaths, runner_memory.as_ref(), inputs, &mut findings);
    // What is said around it, in one place.
    let v = Said {
        died,
        led,
        unnamed,
        backlog: measured
            .as_ref()
            .and_then(|(x, l)| backlog_words(stages, l, x.mean)),
        mix: mix_words,
    }
    .around(v);
    let (comparison, curve) = curves(capacity.as_ref(), job, &v, &levels);
    let effective = measured.as_ref().zip(s_value).map(|((x, _), s)| x.mean * s);
    Diagnosis {
        capping_limit: v.limit,
        cpu_limit: v.cpu,
        verdict: v.text,
        doubt: findings
            .iter()
            .find(|f| f.id == FindingId::ModelMismatch)
            .map(|f| f.title.clone()),
        settings,
        service_time,
        fixed_overhead_s: Some(overhead_s),
        capacity: capacity.clone(),
        measured_ceiling: measured.as_ref().map(|(x, _)| x.clone()),
        effective_concurrency: effective,
        saturation_rule: levels::saturation_rule(),
        failure_point: failure_point(stages, &levels),
        knee: knee(&levels, measured.as_ref().map(|(x, _)| x.mean), effective),
        cpu_read_zero,
        // Levels a source did not choose (a history's windows): there is no next one to try.
        next_level: next_level(
            &levels,
            capacity.as_ref(),
            measured.is_some() || !levels::chosen(&levels),
        ),
        levels,
        comparison,
        curve,
        memory,
        cpu,
        findings,
        mix,
        deaths,
        runner_memory,
    }
}

/// The levels the measured ceiling pools, each process's CPU read over their stages, and —
/// when none is — the processes sampled there whose CPU read 0.
fn cpu_at_ceiling<'a>(
    stages: &[StageResult],
    levels: &'a [Level],
    measured: Option<&(Estimate, &Level)>,
    host: &cpu::Host,
) -> (Vec<&'a Level>, Vec<CpuUse>, Vec<String>) {
    let Some((x, top)) = measured else {
        return (Vec::new(), Vec::new(), Vec::new());
    };
    let at = crate::limits::at_ceiling(levels, top);
    let cpu = cpu::uses(stages, &at, x.mean, host);
    let zero = if cpu.is_empty() {
        cpu::read_zero(stages, &at)
    } else {
        Vec::new()
    };
    (at, cpu, zero)
}

/// Findings of what was observed beside the verdict: the processes and containers, the host's
/// CPU taken by other work, an upload's memory, ramps.
fn observations(
    (stages, levels, at): (&[StageResult], &[Level], Option<cpu::AtCeiling>),
    (cpu, binding): (&[CpuUse], Option<&CpuUse>),
    (inputs, settings): (&Inputs, &Settings),
    findings: &mut Vec<Finding>,
) -> Vec<crate::record::memory::MemoryUse> {
    let regular = settings.is_regular();
    observed::findings(
        levels,
        stages,
        (cpu, binding, regular),
        &inputs.host,
        findings,
    );
    findings.extend(at.and_then(|at| cpu::other_work(stages, at, cpu, &inputs.host)));
    observed::upload_memory(stages, settings.binary_data_mode.as_ref(), findings);
    ramp::findings(stages, levels, findings);
    let memory = memory::per_execution(stages, settings);
    memory::findings(&memory, findings);
    memory
}

/// Which limit caps, decided in one pass: the bounds' verdict ([`bounds_verdict`]), a runner the
/// findings refute ([`crate::limits::no_runner`]), and a history whose jobs slowed at load with
/// their slots full ([`contended`]: a shared resource, not the slot limit it seemed).
fn decide(
    (settings, capacity, job): (&Settings, Option<&Capacity>, Option<Job>),
    (ceiling, levels): (Option<&Ceiling>, &[Level]),
    (stages, service_time): (&[StageResult], Option<&Sourced<f64>>),
    findings: &mut Vec<Finding>,
) -> Verdict {
    let v = bounds_verdict(settings, capacity, job, ceiling, levels, findings);
    let v = crate::limits::no_runner::when_no_runner_takes(v, findings);
    contended(v, stages, (service_time, settings), findings)
}

/// What a verdict says around the limit decided: containers that died, then resources that
/// refused work (Postgres' connections), the limit, failures nothing watched explains, the
/// backlog, a mix's words.
struct Said {
    died: Option<String>,
    led: Vec<String>,
    unnamed: Option<String>,
    backlog: Option<String>,
    mix: Option<String>,
}

impl Said {
    fn around(self, v: Verdict) -> Verdict {
        let mut text = self.died.unwrap_or_default();
        for lead in self.led.iter().rev() {
            text += lead;
            text += " ";
        }
        text += &v.text;
        for after in [self.unnamed, self.backlog, self.mix].into_iter().flatten() {
            text += &after;
        }
        Verdict { text, ..v }
    }
}

/// A resource that refused work (Postgres' connections): each kind's finding, first, and the
/// words that lead the verdict.
fn leads(stages: &[StageResult], settings: &Settings, findings: &mut Vec<Finding>) -> Vec<String> {
    crate::limits::set_kinds()
        .iter()
        .filter_map(|l| crate::limits::of(*l).leads(stages, settings, findings))
        .collect()
}

/// History: jobs slower at load than quietly with their slots full are a shared resource,
/// which a slot limit inferred from the quiet job time only seemed to be.
fn contended(
    v: Verdict,
    stages: &[StageResult],
    (service_time, settings): (Option<&Sourced<f64>>, &Settings),
    findings: &mut Vec<Finding>,
) -> Verdict {
    let Some(g) = history::contention::grows(stages, service_time, v.limit, settings) else {
        return v;
    };
    let Some(w) = g.words else {
        findings.push(g.finding);
        return v;
    };
    match g.host {
        Some(host) => crate::limits::host_contended(g.finding, w, host, findings),
        None => {
            findings.push(g.finding);
            Verdict {
                limit: None,
                text: format!("{w} (Read with the quiet job time: {})", v.text),
                ..v
            }
        }
    }
}

/// A history's host full at load ([`contended`]): the runner limit inferred from the ceiling
/// read the contention as a limit, so it is not kept, and the capacity is the settings' again.
fn unread_contention(
    v: &Verdict,
    findings: &[Finding],
    (settings, capacity): (&mut Settings, &mut Option<Capacity>),
    overhead_s: f64,
) {
    let inferred = settings
        .runner_limit
        .as_ref()
        .is_some_and(|r| matches!(r.source, model::settings::Provenance::Inferred(_)));
    if crate::limits::is_host_contended(v, findings) && inferred {
        settings.runner_limit = None;
        *capacity = crate::limits::capacity(settings, overhead_s);
    }
}

/// Containers that died: their findings, first (stable, so severity order holds within each
/// group), and the words that open the verdict.
fn deaths_first(
    deaths: &[crate::record::diagnosis::ContainerDeath],
    runner_memory: Option<&crate::record::diagnosis::RunnerMemory>,
    inputs: &Inputs,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    lifecycle::findings(
        deaths,
        runner_memory,
        inputs.task_request_timeout_s,
        findings,
    );
    findings.sort_by_key(|f| {
        (
            std::cmp::Reverse(f.severity),
            !deaths.iter().any(|d| {
                f.subject.as_deref() == Some(d.name.as_str()) && f.id != FindingId::ContainerGone
            }),
        )
    });
    lifecycle::verdict_prefix(
        deaths,
        inputs
            .task_request_timeout_s
            .unwrap_or(model::n8n_defaults::TASK_REQUEST_TIMEOUT_S),
    )
}

/// The model's predictions at each level and its curve, bounded by the CPU site that binds.
fn curves(
    capacity: Option<&Capacity>,
    job: Option<model::Job>,
    v: &Verdict,
    levels: &[Level],
) -> (Vec<Comparison>, Vec<CurvePoint>) {
    let x_max = capacity.map(|c| {
        let cpu_cap = v
            .cpu
            .as_ref()
            .map(|u| u.bound_per_s)
            .unwrap_or(f64::INFINITY);
        c.ceiling.min(cpu_cap)
    });
    match (capacity, job, x_max) {
        (Some(cap), Some(job), Some(x_max)) if x_max > 0.0 => predictions(cap, job, x_max, levels),
        _ => (Vec::new(), Vec::new()),
    }
}

/// An open level at the ceiling: what was offered, what completed, how fast the backlog grew.
fn backlog_words(stages: &[StageResult], l: &Level, x: f64) -> Option<String> {
    let f = l
        .stages
        .iter()
        .filter_map(|i| stages.get(*i))
        .find_map(|s| s.flow)?;
    (f.offered_per_s > 1.1 * x).then(|| {
        format!(
            " Offered {:.1}/s, completed {x:.2}/s: the backlog grew {:.2}/s.",
            f.offered_per_s, f.backlog_growth_per_s
        )
    })
}

/// The verdict, or why there is none.
fn bounds_verdict(
    settings: &Settings,
    capacity: Option<&Capacity>,
    job: Option<Job>,
    ceiling: Option<&Ceiling>,
    levels: &[Level],
    findings: &mut Vec<Finding>,
) -> Verdict {
    if !levels.iter().any(|l| l.valid) {
        return Verdict {
            limit: None,
            text:
                "No valid level: nothing was measured that can be judged — fix the failures first."
                    .into(),
            cpu: None,
        };
    }
    if let Some(c) = ceiling {
        return verdict::decide(settings, capacity, job, c, findings);
    }
    if levels.iter().any(|l| l.saturated()) {
        return Verdict {
            limit: None,
            text: "Saturated, but the service time is unknown: give --job-time (or sleep_ms in the body), or include a level at 1 in flight."
                .into(),
            cpu: None,
        };
    }
    let top = levels
        .iter()
        .filter(|l| l.valid)
        .map(|l| l.level)
        .max_by(|a, b| a.magnitude().total_cmp(&b.magnitude()))
        .map(|l| l.words())
        .unwrap_or_default();
    let model = capacity
        .map(|c| {
            format!(
                " The settings put it at {:.2} req/s ({}), from about {:.0} in flight.",
                c.ceiling,
                c.capping.words(),
                c.effective_concurrency
            )
        })
        .unwrap_or_default();
    // Levels a source did not choose (a history's windows): there is no next level to try.
    let next = next_level(levels, capacity, !levels::chosen(levels))
        .map(|n| format!(" Try {n} in flight next."))
        .unwrap_or_default();
    Verdict {
        limit: None,
        text: format!(
            "No level was saturated up to {top} (mean response within {} × the service time): the ceiling was not reached.{model}{next}",
            levels::SATURATION_RATIO
        ),
        cpu: None,
    }
}

/// Measured against the model at each valid level, and the model's curve for charts.
fn predictions(
    cap: &Capacity,
    job: Job,
    x_max: f64,
    levels: &[Level],
) -> (Vec<Comparison>, Vec<CurvePoint>) {
    let max_n = levels
        .iter()
        .map(|l| l.in_flight.ceil() as u32)
        .max()
        .unwrap_or(1)
        .clamp(1, model::MAX_CURVE_IN_FLIGHT);
    let mva = model::predict_mva(cap, job, x_max, max_n);
    let at = |n: u32| {
        let i = n.clamp(1, max_n) as usize - 1;
        mva.get(i).map(|p| p.throughput).unwrap_or(0.0)
    };
    let comparison = levels
        .iter()
        .filter(|l| l.valid)
        .map(|l| {
            let n = (l.in_flight.round() as u32).max(1);
            let b = model::predict_bound(cap, job, x_max, n);
            Comparison {
                level: l.level,
                in_flight: l.in_flight,
                measured: l.throughput.mean,
                predicted: b.throughput,
                predicted_mva: at(n),
                predicted_response_s: b.response_s,
                predicted_waiting_for_runner: b.waiting_for_runner,
            }
        })
        .collect();
    let curve = (1..=max_n)
        .map(|n| CurvePoint {
            in_flight: n,
            bound: model::predict_bound(cap, job, x_max, n).throughput,
            mva: at(n),
        })
        .collect();
    (comparison, curve)
}

/// The failure break point: the first level whose thresholds failed (or that was invalid).
pub fn failure_point(stages: &[StageResult], levels: &[Level]) -> Option<BreakPoint> {
    levels.iter().find_map(|l| {
        let failing: Vec<&StageResult> = l
            .stages
            .iter()
            .filter_map(|i| stages.get(*i))
            .filter(|s| !s.valid || s.thresholds.iter().any(|t| !t.passed))
            .collect();
        let s = failing.first()?;
        let why = if !s.valid {
            s.invalid_reasons.join("; ")
        } else {
            s.thresholds
                .iter()
                .filter(|t| !t.passed)
                .map(|t| format!("{} {}", t.metric.name(), t.expr))
                .collect::<Vec<_>>()
                .join("; ")
        };
        Some(BreakPoint {
            kind: BreakPointKind::Failure,
            level: l.level,
            in_flight: l.in_flight,
            reason: format!("thresholds failed at {}: {why}", l.words()),
        })
    })
}

/// The saturation knee: the smallest level at the ceiling — saturated, or with throughput
/// within 5 % of the capacity; `in_flight` is where the ceiling begins (executions in progress
/// at the ceiling, X × S), which a coarse grid may not have measured.
fn knee(levels: &[Level], capacity: Option<f64>, effective: Option<f64>) -> Option<BreakPoint> {
    let x_max = capacity?;
    let l = levels
        .iter()
        .filter(|l| {
            l.saturated() || (l.valid && l.throughput.mean >= (1.0 - observed::FLAT) * x_max)
        })
        .min_by(|a, b| a.in_flight.total_cmp(&b.in_flight))?;
    let from = effective.unwrap_or(l.in_flight).min(l.in_flight);
    Some(BreakPoint {
        kind: BreakPointKind::Knee,
        level: l.level,
        in_flight: from,
        // One knee: the smallest level measured at the ceiling. X × S there is what the slots
        // and tasks hold, said as such (the plan sizes from it), not as a second knee.
        reason: format!(
            "the smallest level at the ceiling ({:.2} req/s), holding {from:.1} executions in progress (X × S)",
            l.throughput.mean
        ),
    })
}

/// When no level was saturated: the in-flight level that should reach the ceiling.
fn next_level(levels: &[Level], cap: Option<&Capacity>, saturated: bool) -> Option<u32> {
    if saturated {
        return None;
    }
    let top = levels
        .iter()
        .filter(|l| l.valid)
        .map(|l| l.in_flight)
        .fold(0.0, f64::max);
    if top <= 0.0 {
        return None;
    }
    let from_model = cap.map(|c| (c.effective_concurrency * 1.5).ceil());
    let n = from_model.unwrap_or(0.0).max(top * 2.0).min(1_000_000.0);
    Some(n as u32)
}
