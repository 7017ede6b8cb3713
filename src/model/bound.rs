//! A bound: one resource that caps throughput, as data — which limit it is, how many servers it
//! has (slots, runner tasks, connections, cores), what part of an execution holds one, for how
//! long, and where the servers figure came from. The capacity is a set of bounds; the smallest
//! servers ÷ demand is the ceiling, and the curves come from the binding one.

use super::Limit;
use serde::{Deserialize, Serialize};

/// What part of an execution holds one of a bound's servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holds {
    /// The whole execution as a worker runs it (a slot: its service time S).
    Execution,
    /// Its Code work only (a runner task: the Code time C).
    Code,
    /// A part measured for this bound itself (a database connection: the pool's occupancy ÷
    /// throughput): its `demand_s` is that measurement.
    Measured,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub limit: Limit,
    /// Servers of the resource across the deployment.
    pub servers: f64,
    /// Seconds one execution holds a server.
    pub demand_s: f64,
    pub holds: Holds,
    /// Where the servers figure came from.
    pub source: String,
}

impl Bound {
    /// Executions per second the bound allows: servers ÷ demand (unbounded when an execution
    /// does not use it, none when it has no server).
    pub fn per_s(&self) -> f64 {
        if self.servers <= 0.0 {
            0.0
        } else if self.demand_s > 0.0 {
            self.servers / self.demand_s
        } else {
            f64::INFINITY
        }
    }

    /// The share of its servers busy at `x` executions/s, each holding one for `demand_s` (the
    /// demand measured, where it differs from the model's).
    pub fn utilisation(&self, x: f64, demand_s: f64) -> f64 {
        x * demand_s / self.servers.max(1.0)
    }
}

/// The binding bound of a set: the one that allows the fewest executions per second.
pub fn binding(bounds: &[Bound]) -> Option<&Bound> {
    bounds.iter().min_by(|a, b| a.per_s().total_cmp(&b.per_s()))
}
