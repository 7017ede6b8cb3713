//! Runs compared (`n8ncap compare A B …`): the baseline's figures, and each later run's beside
//! them, every difference judged against the runs' own intervals.

use crate::model::Capping;
use crate::record::{Estimate, LoadLevel};
use serde::{Deserialize, Serialize};

/// One run as a comparison shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBrief {
    /// Where it was read from (a results directory or its summary.json).
    pub label: String,
    pub profile: String,
    pub capping_limit: Option<Capping>,
    /// The capacity settings it ran with: (name, value and where it came from).
    pub settings: Vec<(String, String)>,
    pub ceiling: Option<Estimate>,
    /// Executions in progress at the knee (X × S), and its level's words.
    pub knee: Option<(f64, String)>,
    /// The plan that followed, in words; or why there was none.
    pub recommendation: String,
    /// Each valid level's load (in flight or arrivals/s) and throughput, for the chart.
    pub throughput: Vec<(f64, f64)>,
}

/// A figure of a later run against the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub baseline: Estimate,
    pub candidate: Estimate,
    /// (candidate − baseline) ÷ baseline, in %.
    pub change_pct: f64,
    /// The change's range from the two intervals' ends, in %.
    pub interval_pct: [f64; 2],
    /// The intervals do not overlap: a change, not noise.
    pub beyond_noise: bool,
    /// The answers each figure was read from, baseline then candidate (a level's p95): too few
    /// for a p95's interval is said with the count, never as noise unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<[u64; 2]>,
}

/// The fewest answers whose p95 has an upper order statistic: the rank 0.95 n + 1.96 √(0.0475 n)
/// stays within n from 73 answers on; below, the p95's interval is open above (the slowest
/// answer is no bound on it).
pub const P95_INTERVAL_ANSWERS: u64 = 73;

/// Latency and errors at one load level both runs measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelChange {
    pub level: LoadLevel,
    /// Whether the level passed its checks, baseline then candidate. Latency is compared only
    /// where both did (a failed level's latency is never a good latency); errors everywhere.
    #[serde(default = "both_valid")]
    pub valid: [bool; 2],
    pub p50_ms: [Option<f64>; 2],
    pub p95: Option<Change>,
    /// Error rates (0–1), baseline then candidate.
    pub error_rate: [f64; 2],
    /// Each error rate's 95 % (Wilson) interval from the requests counted.
    #[serde(default)]
    pub error_interval: [[f64; 2]; 2],
    /// The two error rates' intervals do not overlap: a change, not noise.
    #[serde(default)]
    pub error_beyond_noise: bool,
}

fn both_valid() -> [bool; 2] {
    [true, true]
}

/// A later run against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    pub run: RunBrief,
    /// Another limit caps now: "runner limit → worker concurrency", said first.
    pub verdict_changed: Option<String>,
    pub ceiling: Option<Change>,
    /// The run reached no ceiling: its highest valid level's throughput against the
    /// baseline's ceiling (a fix whose new ceiling was not reached carries more than the old).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<Change>,
    pub levels: Vec<LevelChange>,
    /// Recorded settings that differ: "runner limit 5 → 10".
    pub settings_differ: Vec<String>,
    /// The `--fail-if` thresholds this run fails, and what a gate could not judge ("cannot
    /// compare: …"), in words.
    pub failed: Vec<String>,
}

/// `n8ncap compare`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    pub baseline: RunBrief,
    pub versus: Vec<Versus>,
    /// The thresholds given (`--fail-if`), as written.
    pub fail_if: Vec<String>,
}

impl RunComparison {
    /// Some later run failed a threshold.
    pub fn failed(&self) -> bool {
        self.versus.iter().any(|v| !v.failed.is_empty())
    }
}

impl Change {
    /// Both runs' figures have an interval of some width: noise was measured.
    pub fn has_noise(&self) -> bool {
        self.baseline.high > self.baseline.low && self.candidate.high > self.candidate.low
    }

    /// "+60.2 % (55.1 to 65.3 %)" beyond noise, else "within noise (+0.8 %)".
    pub fn words(&self) -> String {
        if self.beyond_noise {
            format!(
                "{:+.1} % ({:+.1} to {:+.1} %)",
                self.change_pct, self.interval_pct[0], self.interval_pct[1]
            )
        } else if let Some([a, b]) = self
            .answers
            .filter(|n| n[0].min(n[1]) < P95_INTERVAL_ANSWERS)
        {
            format!(
                "{:+.1} % (not beyond noise: {a} and {b} answers, too few for the p95's \
                 interval; {P95_INTERVAL_ANSWERS} needed)",
                self.change_pct
            )
        } else if self.has_noise() {
            format!("within noise ({:+.1} %)", self.change_pct)
        } else {
            // An interval of no width: every answer took the same time (a p95's order
            // statistics then span nothing), or a figure was saved without one.
            format!(
                "{:+.1} % (no spread measured: noise unknown)",
                self.change_pct
            )
        }
    }
}

impl RunBrief {
    /// The ceiling with its interval, or why there is none.
    pub fn ceiling_words(&self) -> String {
        self.ceiling
            .as_ref()
            .map(|c| {
                if c.high - c.low < 0.005 {
                    format!("{:.2} (no interval)", c.mean)
                } else {
                    format!("{:.2} ({:.2}–{:.2})", c.mean, c.low, c.high)
                }
            })
            .unwrap_or_else(|| "not reached".into())
    }

    pub fn limit_words(&self) -> &'static str {
        self.capping_limit.map_or("none named", |l| l.words())
    }

    pub fn knee_words(&self) -> String {
        self.knee
            .as_ref()
            .map(|(n, at)| format!("{n:.1} in progress ({at})"))
            .unwrap_or_else(|| "—".into())
    }
}

impl LevelChange {
    /// The p95 cells: baseline, candidate and the change.
    pub fn p95_words(&self) -> [String; 3] {
        match &self.p95 {
            Some(c) => [
                format!("{:.0}", c.baseline.mean),
                format!("{:.0}", c.candidate.mean),
                c.words(),
            ],
            None => [
                "—".into(),
                "—".into(),
                match self.valid {
                    [true, false] => "not compared: failed its checks in this run".into(),
                    [false, true] => "not compared: failed its checks in the baseline".into(),
                    [false, false] => "not compared: failed its checks in both".into(),
                    [true, true] => "—".into(),
                },
            ],
        }
    }
}
