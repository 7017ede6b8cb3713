//! The seam between the load engine and whatever watches the system under test while it runs.
//! `load` drives an [`Observer`] through this trait and imports nothing of `observe`, so a
//! sweep can be run (and tested) with a fake observer, or with none.

use super::stage::{ContainerObserved, EndpointObserved, QueueObserved, RoleMemory};
use std::time::Instant;

/// What was observed during one stage's steady window.
#[derive(Debug, Clone, Default)]
pub struct StageObservation {
    pub memory_by_role: Vec<RoleMemory>,
    pub queue: Option<QueueObserved>,
    pub endpoints: Vec<EndpointObserved>,
    pub containers: Vec<ContainerObserved>,
    /// The database's side, when container logs or a DSN were watched.
    pub database: Option<super::db::DatabaseObserved>,
}

impl StageObservation {
    /// What was watched, into the stage's result (the queue went in with its figures).
    pub fn into_stage(self, result: &mut super::StageResult) {
        result.endpoints = self.endpoints;
        result.containers = self.containers;
        result.memory_by_role = self.memory_by_role;
        result.database = self.database;
    }
}

/// Watches the system under test beside a sweep.
pub trait Observer: Send + Sync {
    /// A new stage begins; readings before `steady_from` (its warm-up) are not aggregated.
    fn begin_stage(&mut self, index: usize, steady_from: Instant);
    /// The stage ended; `coarse` says it was shorter than n8n's queue-gauge refresh.
    fn end_stage(&mut self, coarse: bool) -> StageObservation;
    /// The sweep is over.
    fn stop(&mut self);
}
