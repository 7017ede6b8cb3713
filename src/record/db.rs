//! What a run saw of the database: each process's pool (n8n's `db_pool_*` metrics) and the
//! responses Postgres' refusal failed.

use serde::{Deserialize, Serialize};

/// One process's database pool during the stage's steady window, from n8n's `db_pool_*`
/// metrics: the connections in use (Little's law at the pool: in use ÷ executions per second =
/// database seconds per execution) and the requests that waited for one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DbPoolObserved {
    /// `db_pool_connections_max`: the pool's size.
    pub max: f64,
    pub active_mean: f64,
    pub active_max: f64,
    /// `db_pool_requests_pending`.
    pub pending_mean: f64,
    pub pending_max: f64,
    /// Mean wait for a connection over the window (Δ sum ÷ Δ count of
    /// `db_pool_acquire_seconds`), when the histogram is exposed and moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_mean_s: Option<f64>,
    /// Connections acquired in the window (Δ count).
    #[serde(default)]
    pub acquires: f64,
    /// The wait for a connection 99 % of the window's acquisitions stayed under: the upper
    /// bound of the histogram's bucket that reaches 99 %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_p99_s: Option<f64>,
    /// The 99 % were reached only past the last finite bucket: the p99 is above that bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acquire_p99_above: bool,
    pub samples: u32,
    /// Readings that could not be true, left out.
    #[serde(default)]
    pub gaps: u32,
}

/// Whether a failed response's body carries Postgres' refusal of a connection.
pub fn names_db_refusal(body: &[u8]) -> bool {
    let probe = &body[..body.len().min(4096)];
    [b"too many clients".as_slice(), b"53300".as_slice()]
        .iter()
        .any(|p| probe.windows(p.len()).any(|w| w == *p))
}
