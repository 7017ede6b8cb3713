//! A setting as the evidence says it: its value with where it came from, and whether this very
//! run inferred it.

use super::Ceiling;
use crate::model::settings::{Settings, Sourced};

/// A share as a percentage, for the evidence.
pub fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// " (where it came from)" of a known setting, for the evidence; nothing when unknown.
pub fn source_of(o: &Option<Sourced<u32>>) -> String {
    o.as_ref()
        .map(|v| format!(" ({})", v.source))
        .unwrap_or_default()
}

/// "what value (source)" of a known setting.
pub fn reading(o: &Option<Sourced<u32>>, what: &str) -> Option<String> {
    o.as_ref()
        .map(|v| format!("{what} {} ({})", v.value, v.source))
}

/// Worker concurrency's and the runner limit's readings, the known ones.
pub fn slot_and_runner_readings(s: &Settings) -> Vec<String> {
    [
        reading(&s.worker_concurrency, "worker concurrency"),
        reading(&s.runner_limit, "runner limit"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whether a setting was inferred from a measurement (it carries an interval).
pub fn inferred(o: &Option<Sourced<u32>>) -> bool {
    o.as_ref().is_some_and(|v| v.interval.is_some())
}

/// Code time C: from the settings, else all of the job (a workflow of one Code node).
pub fn code_time(s: &Settings, ceiling: &Ceiling) -> f64 {
    match (&s.code_time, &s.job_time) {
        (Some(c), _) => c.value,
        (None, Some(j)) => j.value,
        (None, None) => (ceiling.s - ceiling.overhead_s).max(0.0),
    }
}

/// An inferred limit's interval, rounded outward to whole tasks or slots: a limit is a whole
/// number, and a throughput interval of near-zero width (a long level's count) would otherwise
/// exclude the integer the estimate rounds to.
pub fn whole([lo, hi]: [f64; 2]) -> [f64; 2] {
    [lo.floor(), hi.ceil()]
}

/// What one saturated level shows of the slots and runner tasks: none when a measured kind
/// (CPU, main's intake) was saturated there — then it, not a setting, is what ran out.
pub struct AtCeiling {
    /// Throughput, executions/s.
    pub x: f64,
    /// Code time, s.
    pub code: f64,
    /// Executions in progress, X × S.
    pub in_progress: f64,
    /// Runner tasks running, X × C.
    pub tasks: f64,
}

impl AtCeiling {
    pub fn of(s: &Settings, c: &Ceiling) -> Option<AtCeiling> {
        if super::measured_saturated(s, c) {
            return None;
        }
        let x = c.x.mean;
        let code = code_time(s, c);
        Some(AtCeiling {
            x,
            code,
            in_progress: x * c.s,
            tasks: x * code,
        })
    }
}
