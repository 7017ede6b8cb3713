//! The observer that runs beside a sweep: every interval it scrapes each `/metrics` endpoint
//! and samples each container's stats, appends what it saw to `timeline.jsonl`, and keeps
//! per-stage aggregates (steady window only) for the stage results. A source that is down or
//! answers garbage leaves a gap, recorded and counted; the sweep goes on.
//!
//! One job per file: `argument` (the `role=URL` an endpoint is given as), `scheduler` (the
//! background task's rounds, the stages' opening and closing), `aggregate` (a stage's readings
//! into its figures), `rates` (counters into rates), `sources` (what one reading of a scrape,
//! Redis or a container becomes, and roles read from content), `lifecycle` (Docker's events).

mod aggregate;
mod argument;
pub mod discover;
mod lifecycle;
mod rates;
mod scheduler;
mod sources;
#[cfg(test)]
mod tests;

pub use argument::{main_metrics, Endpoint};
pub use scheduler::{observer, Watcher};
pub use sources::role_of;

use super::bull::queue_lengths;
use super::docker::{self, RawStats};
use super::events::{started_before, EventBooks, MAX_LIFECYCLE_EVENTS};
use super::queue_refresh::{QueueRefresh, RefreshSeen};
use super::scrape::{self, queue_gauges, queue_gauges_checked};
use crate::record::lifecycle::{LifecycleAction, LifecycleEvent};
use crate::record::observation::{Observer, StageObservation};
use crate::record::stage::{
    ContainerObserved, EndpointObserved, QueueObserved, QueueSource, RoleMemory,
};
use crate::record::timeline::{Event, TimelineWriter};
use crate::record::Role;
use crate::wire::prometheus::Exposition;
use crate::wire::resp::{Conn, RedisUrl};
use aggregate::StageAcc;
use bollard::Docker;
use sources::HashMapStats;
use std::collections::BTreeMap;
use std::fs::File;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinHandle;

/// A container to sample.
#[derive(Debug, Clone)]
pub struct WatchedContainer {
    pub id: String,
    pub name: String,
    pub role: Role,
    /// CPU limit in cores, from the container's settings.
    pub cpu_limit_cores: Option<f64>,
    /// Memory limit, from the container's settings.
    pub memory_limit_bytes: Option<u64>,
    /// Runners: the container whose broker they attach to, and their limit.
    pub attached_to: Option<String>,
    pub runner_limit: Option<u32>,
}

pub struct WatchConfig {
    pub endpoints: Vec<Endpoint>,
    /// Bull's queue in Redis, sampled directly (and its key prefix).
    pub redis: Option<(RedisUrl, String)>,
    pub docker: Option<Docker>,
    pub containers: Vec<WatchedContainer>,
    pub interval: Duration,
    pub prefix: String,
    pub timeline: Option<File>,
}

struct State {
    /// When main's queue gauges changed.
    refresh: QueueRefresh,
    /// First memory reading of each container in the run.
    baselines: BTreeMap<String, f64>,
    /// The stage under way and when it began (lifecycle events are stamped with both).
    stage: Option<(usize, Instant)>,
    /// Containers (by id) that are not running now: their last `die` not followed by a start.
    down: std::collections::BTreeSet<String>,
    /// Each container's latest memory reading of the run (a container that dies before its
    /// first reading in a stage keeps this one).
    last_memory: BTreeMap<String, f64>,
    /// Containers (by id) that started again: their next stats reading starts new counters.
    restarted: std::collections::BTreeSet<String>,
    steady_from: Option<Instant>,
    acc: StageAcc,
    timeline: TimelineWriter,
    started: Instant,
}

/// What a stage hands over when it ends: its readings, the run's baselines, the containers
/// down, their last memory, and what the refresh measured says of it.
type Closed = (
    StageAcc,
    BTreeMap<String, f64>,
    std::collections::BTreeSet<String>,
    BTreeMap<String, f64>,
    RefreshSeen,
);

impl State {
    fn close_stage(&mut self) -> Closed {
        let steady = self.steady_from.map(|f| f.elapsed().as_secs_f64());
        let period_s = self.refresh.period_s();
        let seen = RefreshSeen {
            period_s,
            too_few: matches!((steady, period_s), (Some(w), Some(p)) if w < 2.0 * p),
        };
        self.steady_from = None;
        self.stage = None;
        (
            std::mem::take(&mut self.acc),
            self.baselines.clone(),
            self.down.clone(),
            self.last_memory.clone(),
            seen,
        )
    }
}

/// A container's memory limit, the container it attaches to and its runner limit.
type ContainerSettings = (Option<u64>, Option<String>, Option<u32>);

/// What the background task reads.
struct Sources {
    endpoints: Vec<Endpoint>,
    redis: Option<(RedisUrl, String)>,
    docker: Option<Docker>,
    containers: Vec<WatchedContainer>,
    interval: Duration,
    prefix: String,
}

/// When a round of readings was taken.
struct Moment {
    now: Instant,
    t: f64,
    unix: f64,
    /// Inside a stage's steady window: aggregate, not only write to the timeline.
    steady: bool,
}

/// What turns counters into rates between rounds, and roles read from content.
struct Rates {
    roles: Vec<Option<Role>>,
    cpu: Vec<Option<(f64, Instant)>>,
    requested: Vec<Option<(f64, Instant)>>,
    stats: HashMapStats,
}
