//! A bound: one resource that caps throughput, as data — which limit it is, how many servers it
//! has (slots, runner tasks, connections, cores), what part of an execution holds one, for how
//! long, and where the servers figure came from. The capacity is a set of bounds; the smallest
//! servers ÷ demand is the ceiling, and the curves come from the binding one.

use super::provenance::{Provenance, ProvenanceKind};
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

/// In JSON as a setting is: `source` (the words) and `provenance` (the variant); a file from
/// before the type is read back as [`Provenance::Recorded`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "BoundRepr", from = "BoundRepr")]
pub struct Bound {
    pub limit: Limit,
    /// Servers of the resource across the deployment.
    pub servers: f64,
    /// Seconds one execution holds a server.
    pub demand_s: f64,
    pub holds: Holds,
    /// Where the servers figure came from: the provenance of the setting it counts (the
    /// workers' slots, their runners' tasks, their pools), or the model's own where it was
    /// handed bare figures.
    pub source: Provenance,
}

#[derive(Serialize, Deserialize)]
struct BoundRepr {
    limit: Limit,
    servers: f64,
    demand_s: f64,
    holds: Holds,
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provenance: Option<ProvenanceKind>,
}

impl From<Bound> for BoundRepr {
    fn from(b: Bound) -> BoundRepr {
        BoundRepr {
            limit: b.limit,
            servers: b.servers,
            demand_s: b.demand_s,
            holds: b.holds,
            provenance: Some(b.source.kind()),
            source: b.source.words(),
        }
    }
}

impl From<BoundRepr> for Bound {
    fn from(r: BoundRepr) -> Bound {
        Bound {
            limit: r.limit,
            servers: r.servers,
            demand_s: r.demand_s,
            holds: r.holds,
            source: Provenance::from_saved(r.source, r.provenance),
        }
    }
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
