//! The verdict: which limit caps throughput, from the capacity measured at the saturated levels.
//!
//! Executions in progress at the ceiling are X × S (Little's law), runner tasks running X × C.
//! Compared with the known limits: ≈ worker slots → worker concurrency; ≈ runner capacity →
//! runner limit; below both → a third limit, CPU when CPU was measured (else "unmodelled", with
//! the flags that would tell). A limit that is not known is inferred by its kind
//! (`limits::infer`, before the verdict) and marked inferred.

use super::floor;
use crate::findings::{Finding, FindingId};
use crate::limits::reading::pct;
use crate::limits::{self, Named};
use crate::model::settings::Settings;
use crate::model::{Bound, Capacity, Capping, Holds, Job};

pub use crate::limits::{Ceiling, Verdict, ABOVE, MATCH};

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
        let named = Named {
            s,
            cap,
            job,
            ceiling,
        };
        let kind = limits::answering(cap.capping);
        // Settings the measurement refutes (no runner task, yet executions completed) are
        // named, and the verdict follows what ran.
        if let Some(refuted) = kind.refuted(&named, findings) {
            return decide(&refuted, None, None, ceiling, findings);
        }
        // A bound with no server stops every execution that needs it: nothing to measure.
        if cap.binding().is_some_and(|b| b.servers <= 0.0) {
            return kind.caps(&named, findings);
        }
        // Generic over the bounds: how busy each one's servers were at the measured ceiling (an
        // execution holds a slot for the S measured, a runner task for its Code time); the
        // binding bound names the limit, both when two are level.
        let busy = |b: &Bound| {
            let demand = match b.holds {
                Holds::Execution => ceiling.s,
                Holds::Code => job.code_s,
                Holds::Measured => b.demand_s,
            };
            b.utilisation(x, demand)
        };
        let binding = cap.binding().filter(|b| b.per_s().is_finite());
        // Two bounds level: the capping limit is the pair, not the binding bound alone.
        let level = binding.is_some_and(|b| Capping::Kind(b.limit) != cap.capping);
        let u = if level {
            cap.bounds.iter().map(busy).fold(0.0, f64::max)
        } else {
            binding.map_or(0.0, busy)
        };
        if let (Some(b), true) = (binding, u >= MATCH) {
            if u > ABOVE {
                findings.push(settings_disagree(s, cap, x, u));
            }
            let v = kind.caps(&named, findings);
            return hedge(v, b.per_s(), (s, ceiling), findings);
        }
        return third_limit(s, Some(cap), ceiling, in_progress, findings);
    }
    // A limit is unknown even after inference: say what the level shows.
    if let Some(v) = limits::measured_caps(s, None, ceiling, findings) {
        return v;
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
            ceiling.first.words(),
            in_progress.round(),
            missing.join(", ")
        ),
        cpu: None,
    }
}

/// Only one of the limits is known, and the level reached it: that limit caps, whatever the
/// other is (it allowed at least what ran).
fn one_limit_reached(
    s: &Settings,
    ceiling: &Ceiling,
    findings: &mut Vec<Finding>,
) -> Option<Verdict> {
    limits::alone_kinds().iter().find_map(|l| {
        let (v, bound) = limits::of(*l).reached_alone(s, ceiling, findings)?;
        Some(hedge(v, bound, (s, ceiling), findings))
    })
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
    // The most the limit can allow (a slot is not held for the part of S outside the worker:
    // the webhook's intake and answer).
    let kind = limits::answering(limit);
    let most = kind.most(bound, ceiling);
    // A limit inferred from this very measurement equals it by construction, up to its
    // rounding to a whole number (its interval says how far): it is no reading to doubt.
    let from_this_run = kind.inferred_here(s);
    let measured = x.low.min(x.mean);
    if !from_this_run
        && most.is_finite()
        && measured > 0.0
        && most < (1.0 - floor::FLOOR_TOLERANCE) * measured
    {
        let m = floor::Observed {
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
        ceiling.first.words(),
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

/// The settings the verdict lacks: the job time, and each kind's own.
fn missing_settings(s: &Settings) -> Vec<&'static str> {
    let job = s
        .job_time
        .is_none()
        .then_some("job time (--job-time or sleep_ms in the body)");
    job.into_iter().chain(limits::unknown(s)).collect()
}

/// The measured ceiling is above what the settings allow: every reading behind the bounds is
/// in doubt.
fn settings_disagree(s: &Settings, cap: &Capacity, x: f64, u: f64) -> Finding {
    Finding::new(FindingId::SettingsDisagree,
        format!(
            "Measured ceiling {x:.2} req/s is above what the given settings allow ({:.2} req/s)",
            cap.ceiling
        ),
    )
    .evidence(format!(
        "{}: {} of the limit in use",
        limits::readings(s, cap).join(", "),
        pct(u)
    ))
    .figure("measured_per_s", x)
    .figure("model_ceiling_per_s", cap.ceiling)
    .fix("check the settings: the running containers may not have the values given (n8ncap inspect reads them)")
}

/// Below every slot limit: CPU when a site is saturated, else an unmodelled limit.
fn third_limit(
    s: &Settings,
    cap: Option<&Capacity>,
    ceiling: &Ceiling,
    in_progress: f64,
    findings: &mut Vec<Finding>,
) -> Verdict {
    if let Some(v) = limits::measured_caps(s, cap, ceiling, findings) {
        return v;
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
        ceiling.first.words(),
        cap.map(|c| c.worker_bound()).unwrap_or(f64::NAN),
        cap.map(|c| c.runner_bound()).unwrap_or(f64::NAN),
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
