//! The one seam evidence comes in through. Each way in is a [`Source`]: a sweep run now
//! (`load::run::LiveSweep`), k6's files (`load::k6::K6Summary`, `load::k6series::K6Series`), a
//! Prometheus history (`observe::history::Range`, and each worker count's part of one,
//! `observe::history::by_workers`), a saved run (`record::dir::SavedRun`). Each yields the same
//! [`Evidence`]: stages in a [`Summary`], with what the source knows of the settings, each with
//! its provenance. What judges them never asks where they came from: a stage says what it holds
//! (a history's windows carry n8n's slot times, `StageResult::history`).

use super::history::History;
use super::Summary;

/// What a source yields.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The stages, and what came with them: the settings the source knows (each with its
    /// provenance), the host, the body, a mix's scenarios, the files merged, whether the
    /// reading was interrupted.
    pub summary: Summary,
    /// A history's windows as the source marked them (busy, what each shows): the findings
    /// of a history's own read them.
    pub windows: Option<History>,
}

impl Evidence {
    /// Evidence that is stages alone (a run, k6's files, a saved run).
    pub fn of(summary: Summary) -> Evidence {
        Evidence {
            summary,
            windows: None,
        }
    }
}

/// A way evidence comes in. Reading is async (a sweep sends load, a history asks Prometheus);
/// an error says what was wrong with the input and what to do, as bad input does everywhere.
#[allow(async_fn_in_trait)]
pub trait Source {
    async fn evidence(self) -> anyhow::Result<Evidence>;
}
