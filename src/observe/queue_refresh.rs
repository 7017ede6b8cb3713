//! How often n8n main refreshed its queue gauges and completion counter, as a sweep's scrapes
//! saw them: the changes, their median spacing, and what that says of one stage.

use std::time::Instant;

/// How often main's queue gauges and completion counter changed, as the scrapes saw them.
#[derive(Default)]
pub(super) struct QueueRefresh {
    pub(super) last: Option<[f64; 3]>,
    /// When they last changed, and the latest changes (a bounded list).
    pub(super) changed_at: Option<Instant>,
    pub(super) changes: std::collections::VecDeque<Instant>,
}

/// Changes kept to measure the refresh.
const REFRESH_CHANGES: usize = 64;

impl QueueRefresh {
    pub(super) fn saw(&mut self, v: [f64; 3], now: Instant) {
        if self.last.is_some_and(|l| l != v) {
            self.changed_at = Some(now);
            if self.changes.len() == REFRESH_CHANGES {
                self.changes.pop_front();
            }
            self.changes.push_back(now);
        }
        self.last = Some(v);
    }

    /// The median spacing of the changes, once there are four.
    pub(super) fn period_s(&self) -> Option<f64> {
        let mut d: Vec<f64> = self
            .changes
            .iter()
            .zip(self.changes.iter().skip(1))
            .map(|(a, b)| b.duration_since(*a).as_secs_f64())
            .collect();
        if d.len() < 4 {
            return None;
        }
        d.sort_by(f64::total_cmp);
        Some(d[d.len() / 2])
    }
}

/// What the refresh measured says of one stage: its period, and whether the stage's steady
/// window held fewer than two refreshes (the rule: a stage's gauge means are used when its
/// steady window holds two refreshes or more, and only samples taken after a refresh inside
/// the window count).
pub(super) struct RefreshSeen {
    pub(super) period_s: Option<f64>,
    pub(super) too_few: bool,
}
