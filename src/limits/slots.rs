//! What the slot kinds share (worker concurrency, regular mode's production limit, and both
//! levels): a slot is not held for the part of S outside the worker, and a plan raises slots one
//! step, up to where one worker's measured CPU binds, runners paired with them.

use super::Ceiling;
use crate::error::NoPlan;
use crate::model::settings::Settings;
use crate::model::Job;
use crate::record::diagnosis::Diagnosis;

/// Without a measured CPU ceiling, worker concurrency is raised one step of 1.5× (the inverse
/// of the 2/3 safety factor) and the prediction is an upper bound.
const STEP_WITHOUT_CPU: f64 = 1.5;

/// More slots, from a knee: up to where one worker's CPU binds (one step of 1.5× when CPU was
/// not measured), runners paired with them.
/// The largest raise of the slots in one plan when the CPU was measured (without it, one step
/// of [`STEP_WITHOUT_CPU`]).
const STEP_WITH_CPU: f64 = 2.0;

pub fn raise_slots(d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
    let now = current.worker_concurrency_or_default();
    let worker_cpu = super::cpu::per_role_bound(&d.cpu, crate::record::Role::Worker)
        .map(|b| b / current.worker_count() as f64);
    // A raise is one step: the CPU bound read from a run below it extrapolates the CPU per
    // execution far past any load measured (an I/O-bound job's idle worker allows thousands
    // a second), so it only stops a step short, never lengthens it.
    let step = (now as f64 * STEP_WITH_CPU).ceil() as u32;
    let (target, why) = match worker_cpu {
        Some(b) if ((b * job.service_time()).floor() as u32) < step => (
            (b * job.service_time()).floor() as u32,
            format!("slots up to where one worker's measured CPU binds ({b:.2} req/s)"),
        ),
        Some(b) => (
            step,
            format!(
                "one step of {STEP_WITH_CPU}× from {now}: one worker's measured CPU allows {b:.2} req/s, \
                 beyond it — sweep again after this step"
            ),
        ),
        None => (
            (now as f64 * STEP_WITHOUT_CPU).ceil() as u32,
            format!("one step of {STEP_WITHOUT_CPU}× from {now} (CPU not measured)"),
        ),
    };
    let plan = current
        .clone()
        .propose(|s| &mut s.worker_concurrency, target.max(now + 1), why);
    Ok(super::runner_limit::with_runners(plan, current, job))
}

/// A slot kind's most: the slots are not held for the overhead outside the worker.
pub fn slot_most(bound: f64, c: &Ceiling) -> f64 {
    bound * c.s / (c.s - c.overhead_s).max(1e-9)
}
