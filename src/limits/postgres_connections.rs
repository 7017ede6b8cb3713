//! Postgres' connections: `max_connections` (less the reserved) against every process's pool.
//! One server for the deployment: each added worker's pool asks it for more. In one run it is
//! named by the pools (`db_pool.rs`: a pool that caps, or Postgres refusing connections, which
//! leads the verdict); across worker counts it is what stops scale-out first.

use super::Membership;
use super::{Dialect, Kind, Named, Scope, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Settings;
use crate::model::{Job, Limit};
use crate::record::diagnosis::Diagnosis;
use crate::record::scaling::SharedLimit;

pub struct PostgresConnections;

const RELIEF: &str = "give every pool its connections within Postgres' max_connections (fewer \
                      per pool, a larger max_connections, or a pooler such as PgBouncer)";

impl Kind for PostgresConnections {
    fn membership(&self) -> Membership {
        Membership {
            shared: true,
            ..Membership::default()
        }
    }

    fn scope(&self) -> Scope {
        Scope::Deployment { relief: RELIEF }
    }

    /// Reached when the top count's run was refused connections: the finding's title and its
    /// change. A pool that caps (`db-pool-caps`) is each process's own — every added worker
    /// brings one, so its bound grows with the workers and stops no scale-out — and is the
    /// database pool's (per worker), not this one.
    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        let f = d
            .findings
            .iter()
            .find(|f| f.id == FindingId::PostgresConnectionsExhausted)?;
        Some(SharedLimit {
            kind: Limit::PostgresConnections,
            // Refusals fail executions; they put no rate on the deployment.
            bound_per_s: None,
            reached: true,
            evidence: vec![f.title.clone()],
            fix: f.fix.clone().unwrap_or_else(|| RELIEF.into()),
        })
    }

    fn readings(&self, _s: &Settings) -> Vec<String> {
        Vec::new()
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    /// The pools name it in one run (`db_pool.rs`), never these settings alone.
    fn caps(&self, _n: &Named, _findings: &mut Vec<Finding>) -> Verdict {
        super::named_elsewhere("Postgres' connection limit", "the database pool")
    }

    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    fn raise(&self, _d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        Err(NoPlan(format!("Postgres' connections cap: {RELIEF}")))
    }

    /// The pools' lines are the database pool's.
    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}
