//! What an execution costs in memory in each n8n process a run watched: a base and a slope per
//! execution held, and the memory the configured concurrency needs from them.

use super::Role;
use serde::{Deserialize, Serialize};

/// One container's memory against the executions it held, over a run's stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    pub name: String,
    pub role: Role,
    /// Its memory with nothing held, bytes (the line's value at 0).
    pub base_bytes: f64,
    /// Bytes per execution held, with its 95 % interval.
    pub per_execution_bytes: f64,
    pub per_execution_interval: [f64; 2],
    /// Stages fitted, and the most executions it held in one.
    pub stages: u32,
    pub held_max: f64,
    /// The executions it can hold as configured (a worker's concurrency, a runner's limit).
    pub at: Option<u32>,
    /// What that many need (the base and the measured slope), and the limit to set (15 % over
    /// it, in 64 MiB blocks).
    pub need_bytes: Option<f64>,
    pub recommended_limit_bytes: Option<f64>,
    /// Its memory limit today.
    pub limit_bytes: Option<u64>,
}
