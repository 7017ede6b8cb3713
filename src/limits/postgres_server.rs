//! Postgres' server CPU: every process's pool draws on one server, so its CPU per execution
//! bounds every worker together. One for the deployment. In one run a saturated Postgres is
//! named by CPU (`cpu.rs`, with Postgres' process as its site); across worker counts it is what
//! stops scale-out.

use super::Membership;
use super::{Dialect, Kind, Named, Scope, SettingLine, Verdict};
use crate::error::NoPlan;
use crate::findings::Finding;
use crate::model::settings::Settings;
use crate::model::{Job, Limit};
use crate::record::diagnosis::Diagnosis;
use crate::record::scaling::SharedLimit;
use crate::record::Role;

pub struct PostgresServer;

const RELIEF: &str = "give Postgres more CPU (or a faster disk), prune execution data \
                      (EXECUTIONS_DATA_PRUNE, EXECUTIONS_DATA_SAVE_ON_SUCCESS=none); more \
                      workers will not help";

impl Kind for PostgresServer {
    fn membership(&self) -> Membership {
        Membership {
            shared: true,
            ..Membership::default()
        }
    }

    fn scope(&self) -> Scope {
        Scope::Deployment { relief: RELIEF }
    }

    fn shared(&self, d: &Diagnosis) -> Option<SharedLimit> {
        super::server_cpu(
            d,
            (Limit::PostgresServer, RELIEF),
            Role::Postgres,
            "every process's pool draws on it",
        )
    }

    fn server(&self) -> Option<Role> {
        Some(Role::Postgres)
    }

    fn readings(&self, _s: &Settings) -> Vec<String> {
        Vec::new()
    }

    fn inferred_here(&self, _s: &Settings) -> bool {
        false
    }

    /// A saturated Postgres caps one run as CPU's site (`cpu.rs`).
    fn caps(&self, _n: &Named, _findings: &mut Vec<Finding>) -> Verdict {
        super::named_elsewhere("Postgres' server CPU", "CPU (its site Postgres)")
    }

    fn shared_as(&self) -> Option<super::Share> {
        None
    }

    fn raise(&self, _d: &Diagnosis, _current: &Settings, _job: Job) -> Result<Settings, NoPlan> {
        Err(NoPlan(format!("Postgres' server CPU caps: {RELIEF}")))
    }

    fn lines(&self, _plan: &Settings, _dialect: Dialect) -> Vec<SettingLine> {
        Vec::new()
    }
}
