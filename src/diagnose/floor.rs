//! The floor under every verdict: a limit whose bound is below what was measured cannot be what
//! capped it. The reading behind the bound is the suspect and is named; the verdict follows the
//! measurement. Written once for every limit; `verdict::hedge` calls it.

use super::verdict::{Ceiling, Verdict};
use crate::findings::{Finding, FindingId};
use crate::model::settings::{Settings, Sourced};
use crate::model::Limit;

/// A named bound may sit this far under the low end of the measured interval before the
/// reading behind it is doubted (rounding of a slot count, a level's last few per cent).
pub const FLOOR_TOLERANCE: f64 = 0.03;

/// A limit whose bound (at its most: slots ÷ (S − overhead)) is below what was measured cannot
/// be what capped it: the reading behind
/// the bound (a stale gauge, a wrong flag, a mislabelled metric, an assumed service time) is the
/// suspect. Named in `settings-disagree` with both figures; the verdict follows the
/// measurement: a limit of about X × S executions in progress, unnamed.
pub(super) fn below_measured(
    limit: Limit,
    bound: f64,
    (s, ceiling): (&Settings, &Ceiling),
    findings: &mut Vec<Finding>,
) -> Verdict {
    let x = ceiling.x;
    let in_progress = x.mean * ceiling.s;
    let read = |o: &Option<Sourced<u32>>, what: &str| {
        o.as_ref()
            .map(|v| format!("{what} {} ({})", v.value, v.source))
    };
    let readings: Vec<String> = match limit {
        Limit::RunnerLimit => vec![read(&s.runner_limit, "runner limit")],
        Limit::WorkerConcurrency | Limit::ProductionLimit => {
            vec![read(&s.worker_concurrency, "worker concurrency")]
        }
        Limit::Both | Limit::Cpu | Limit::NoRunner => vec![
            read(&s.worker_concurrency, "worker concurrency"),
            read(&s.runner_limit, "runner limit"),
        ],
    }
    .into_iter()
    .flatten()
    .collect();
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
                ceiling.s,
                if ceiling.overhead_s > 0.0 { "overhead included" } else { "as measured" },
                ceiling.level.words()
            ))
            .figure("measured_per_s", x.mean)
            .figure("measured_low_per_s", x.low)
            .figure("named_bound_per_s", bound)
            .figure("executions_in_progress", in_progress)
            .fix("check the setting where it runs (n8ncap inspect), and that main's queue gauges refresh within the stage (N8N_METRICS_QUEUE_METRICS_INTERVAL)"),
        );
    }
    Verdict {
        limit: None,
        text: format!(
            "Throughput tops out at {} from {} on: a limit holds about {in_progress:.1} executions in progress (X × S {:.2} s). {} would allow only {bound:.2} req/s ({suspect}): that reading is stale or wrong, so no limit is named from it.",
            x.describe("req/s"),
            ceiling.level.words(),
            ceiling.s,
            capitalise(limit.words())
        ),
        cpu: None,
    }
}

pub(super) fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}
