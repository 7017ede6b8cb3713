//! Ramps (k6's `ramping-vus`): windows measured while the virtual users move are not load
//! levels — in-flight changes under them, so neither Little's law nor a saturation test holds.
//! The diagnosis reads only held steps; this says how many windows moved, and when the ramp
//! moved too fast for any level to be read from it.

use crate::findings::{Finding, FindingId};
use crate::record::diagnosis::Level;
use crate::record::StageResult;

/// A window can stand for a level only if the users moved by less than this share across it…
const STEADY_SHARE: f64 = 0.10;
/// …and it lasted this many mean responses.
const RESPONSES_PER_WINDOW: f64 = 3.0;

pub fn findings(stages: &[StageResult], levels: &[Level], findings: &mut Vec<Finding>) {
    let windows: Vec<&StageResult> = stages.iter().filter(|s| s.ramp.is_some()).collect();
    if windows.is_empty() {
        return;
    }
    let too_fast: Vec<&&StageResult> = windows
        .iter()
        .filter(|s| {
            let Some(r) = s.ramp else { return false };
            let moved = r.from.abs_diff(r.to) as f64 / r.from.max(r.to).max(1) as f64;
            let response_s = s
                .latency
                .as_ref()
                .map(|l| l.mean_ms / 1000.0)
                .unwrap_or(0.0);
            moved > STEADY_SHARE || s.window_s < RESPONSES_PER_WINDOW * response_s
        })
        .collect();
    let slowest_response = windows
        .iter()
        .filter_map(|s| s.latency.as_ref().map(|l| l.mean_ms / 1000.0))
        .fold(0.0, f64::max);
    let hold_s = (RESPONSES_PER_WINDOW * 10.0 * slowest_response).max(30.0);
    let held = levels.iter().filter(|l| l.valid).count();
    let example = too_fast
        .first()
        .and_then(|s| s.ramp.map(|r| (r, s.window_s)))
        .map(|(r, w)| format!("e.g. {}→{} users in {w:.1} s", r.from, r.to))
        .unwrap_or_default();
    let f = if held == 0 {
        Finding::new(FindingId::RampTooFast,
            format!(
                "The ramp never held the load still: no level can be read from its {} windows",
                windows.len()
            ),
        )
        .why("While users are added, the requests in flight change under every figure: throughput and response time describe no one level.")
        .fix(format!(
            "hold each step (a stage with the same target as the one before) for at least {hold_s:.0} s, as k6 users write ramp, hold, ramp"
        ))
    } else {
        Finding::new(FindingId::RampWindows,
            format!(
                "{} windows were measured while the load moved; the diagnosis reads the {held} held steps",
                windows.len()
            ),
        )
    };
    findings.push(
        f.evidence(format!(
            "{} of {} windows moved more than {:.0} % of their users or lasted under {RESPONSES_PER_WINDOW} mean responses{}",
            too_fast.len(),
            windows.len(),
            STEADY_SHARE * 100.0,
            if example.is_empty() { String::new() } else { format!(" ({example})") }
        ))
        .figure("ramp_windows", windows.len() as f64)
        .figure("too_fast_windows", too_fast.len() as f64)
        .figure("held_steps", held as f64),
    );
}
