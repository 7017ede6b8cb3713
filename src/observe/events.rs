//! The Docker events stream as evidence: the same action again is no news, a death refuted by
//! the container's state is left out, and a run records a bounded number of events.

use super::docker;
use crate::record::lifecycle::LifecycleAction;

/// Lifecycle events recorded in a run at most: a flood (an engine replaying, a container in a
/// crash loop) is bounded, not a timeline of gigabytes.
pub(super) const MAX_LIFECYCLE_EVENTS: usize = 1000;

/// What the events stream has said of each container: whether it is down, how many events
/// were recorded, and how many its state refuted.
#[derive(Default)]
pub(super) struct EventBooks {
    down: std::collections::BTreeSet<String>,
    pub(super) recorded: usize,
    pub(super) refuted: usize,
}

impl EventBooks {
    /// True when `ev` changes what is known: a die of a container up, a start of one down
    /// (or seen first), anything else.
    pub(super) fn news(&mut self, ev: &docker::Lifecycle) -> bool {
        match ev.action {
            LifecycleAction::Die | LifecycleAction::Destroy => self.down.insert(ev.id.clone()),
            LifecycleAction::Start => {
                self.down.remove(&ev.id);
                true
            }
            _ => true,
        }
    }

    pub(super) fn undo(&mut self, ev: &docker::Lifecycle) {
        self.down.remove(&ev.id);
    }
}

/// The container started (RFC 3339 `StartedAt`) before the Unix time `unix`.
pub(super) fn started_before(started_at: Option<&str>, unix: f64) -> bool {
    started_at
        .and_then(crate::util::parse_rfc3339)
        .is_some_and(|t| unix > 0.0 && t < unix)
}
