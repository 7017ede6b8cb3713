//! The floor under every verdict: a limit whose bound is below what was measured cannot be what
//! capped it. The reading behind the bound is the suspect and is named; the verdict follows the
//! measurement. Written once for every limit; `verdict::hedge` calls it.

use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::Capping;
use crate::record::Estimate;

/// A named bound may sit this far under the low end of the measured interval before the
/// reading behind it is doubted (rounding of a slot count, a level's last few per cent).
pub const FLOOR_TOLERANCE: f64 = 0.03;

/// A limit whose bound (at its most: slots ÷ (S − overhead)) is below what was measured cannot
/// be what capped it: the reading behind
/// the bound (a stale gauge, a wrong flag, a mislabelled metric, an assumed service time) is the
/// suspect. Named in `settings-disagree` with both figures; the verdict follows the
/// measurement: a limit of about X × S executions in progress, unnamed.
/// What was measured at the ceiling: the throughput, the service time S and n8n's overhead in
/// it, and the level's words.
pub struct Observed<'a> {
    pub x: &'a Estimate,
    pub s: f64,
    pub overhead_s: f64,
    pub at: String,
}

/// The verdict's words when `limit`'s bound (at its most) is below the measurement; the
/// finding naming the reading behind it is pushed.
pub(super) fn below_measured(
    limit: Capping,
    bound: f64,
    (s, m): (&Settings, &Observed),
    findings: &mut Vec<Finding>,
) -> String {
    let x = m.x;
    let in_progress = x.mean * m.s;
    let readings = crate::limits::answering(limit).readings(s);
    let suspect = if readings.is_empty() {
        "the settings read".to_string()
    } else {
        readings.join(", ")
    };
    if !findings.iter().any(|f| f.id == FindingId::SettingsDisagree) {
        findings.push(
            Finding::new(
                FindingId::SettingsDisagree,
                format!(
                    "Measured {:.2} req/s is above the {bound:.2} req/s that {} allows: the reading behind it is stale or wrong",
                    x.mean,
                    limit.words()
                ),
            )
            .evidence(format!(
                "{suspect}; S {:.2} s ({}); {in_progress:.1} executions in progress (X × S) at {}",
                m.s,
                if m.overhead_s > 0.0 { "overhead included" } else { "as measured" },
                m.at
            ))
            .figure("measured_per_s", x.mean)
            .figure("measured_low_per_s", x.low)
            .figure("named_bound_per_s", bound)
            .figure("executions_in_progress", in_progress)
            .fix("check the setting where it runs (n8ncap inspect), and that main's queue gauges refresh within the stage (N8N_METRICS_QUEUE_METRICS_INTERVAL)"),
        );
    }
    format!(
            "Throughput tops out at {} from {} on: a limit holds about {in_progress:.1} executions in progress (X × S {:.2} s). {} would allow only {bound:.2} req/s ({suspect}): that reading is stale or wrong, so no limit is named from it.",
            x.describe("req/s"),
            m.at,
            m.s,
            capitalise(limit.words())
    )
}

pub(super) fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}
