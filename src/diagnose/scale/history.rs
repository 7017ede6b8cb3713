//! A production history judged at each worker count it held (an autoscaler's replicas, a
//! deploy that added workers): the windows of one count are judged together, as a run at that
//! count, from their saturated periods; a window where workers came or went belongs to none.
//! The runs then go through the same fit and verdict as a scale sweep's.

use crate::model::settings::{Provenance, Settings, Sourced};
use crate::record::history::History;
use crate::record::{Diagnosis, StageResult};

/// One worker count's part of the history, judged.
pub struct AtCount {
    pub workers: u32,
    /// The part of the history at this count (its windows only).
    pub history: History,
    /// The settings it was judged with (the count among them), for a saved run.
    pub settings: Settings,
    pub diagnosis: Diagnosis,
    pub stages: Vec<StageResult>,
}

/// The counts the history's windows held, fewest first, each with its windows.
pub fn split(h: &History) -> Vec<(u32, History)> {
    let mut counts: Vec<u32> = h.windows.iter().filter_map(|w| w.workers).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .map(|n| (n, h.with_windows(|w| w.workers == Some(n))))
        .collect()
}

/// Each count's windows judged as a run at that count: the flags, with the count read from
/// the history in place of any other.
pub fn judge(h: &History, flags: &Settings, timeout_s: Option<f64>) -> Vec<AtCount> {
    let by = h.workers_by.clone().unwrap_or_default();
    split(h)
        .into_iter()
        .map(|(n, mut part)| {
            let mut f = flags.clone();
            f.workers = Some(Sourced::new(
                n,
                Provenance::Measured(format!(
                    "Prometheus: {n} worker(s) by {by} through {} window(s)",
                    part.windows.len()
                )),
            ));
            let settings = super::super::history::known(f.clone(), &part);
            let (diagnosis, stages) = super::super::history::judge(&mut part, f, timeout_s);
            AtCount {
                workers: n,
                history: part,
                settings,
                diagnosis,
                stages,
            }
        })
        .collect()
}
