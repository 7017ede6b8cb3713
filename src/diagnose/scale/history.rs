//! A production history judged at each worker count it held (an autoscaler's replicas, a
//! deploy that added workers): the windows of one count are judged together, as a run at that
//! count, from their saturated periods; a window where workers came or went belongs to none.
//! The runs then go through the same fit and verdict as a scale sweep's.

use crate::model::settings::Settings;
use crate::record::evidence::Evidence;
use crate::record::Diagnosis;

/// One worker count's part of the history, judged.
pub struct AtCount {
    pub workers: u32,
    /// The part's evidence: its stages with the settings they were judged with (the count
    /// among them), and its windows.
    pub evidence: Evidence,
    pub diagnosis: Diagnosis,
}

/// Each count's evidence (`observe::history::by_workers`) judged as a run at that count.
pub fn judge_each_count(
    parts: Vec<(u32, Evidence)>,
    flags: &Settings,
    timeout_s: Option<f64>,
) -> Vec<AtCount> {
    parts
        .into_iter()
        .map(|(workers, evidence)| {
            let mut f = flags.clone();
            f.workers = evidence
                .summary
                .settings
                .as_ref()
                .and_then(|s| s.workers.clone());
            let diagnosis = super::super::history::judge_windows(&evidence, &f, timeout_s);
            AtCount {
                workers,
                evidence,
                diagnosis,
            }
        })
        .collect()
}
