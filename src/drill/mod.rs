//! Drills: a steady open load at a webhook while something is done to the deployment at a set
//! time, and what that cost — every request's fate, judged against what n8n was predicted to
//! do. One engine (`engine.rs`: the load, the timed action beside it, each request kept with
//! its times and outcome; `fates.rs`: the requests in flight at a moment by outcome, the load
//! second by second, when OK answers held the offered rate again), one file or folder per drill
//! behind [`Drill`], each listed once in [`DRILLS`]:
//! - `drain/` — one worker stopped the way a scale-down stops it (`n8ncap drain`);
//! - `outage/` — the queue's Redis stopped and started again (`n8ncap outage`);
//! - `postgres_restart.rs` — the executions' Postgres stopped and started again
//!   (`n8ncap postgres-restart`).
//!
//! A command parses its arguments, reads what its drill needs, builds the drill and hands it to
//! [`conduct`]; the drill acts through `actuate` and judges what the engine measured.
//! A new drill: its file here implementing [`Drill`], its line in [`DRILLS`], its results file
//! in `record::dir::DrillFile`, its record in `record/`, its arguments in `cli/` and its command
//! in `commands/`, its table in `report/`.

pub mod drain;
pub mod engine;
pub mod fates;
pub mod outage;
pub mod postgres_restart;
pub mod stop_start;

use crate::record::dir::DrillFile;
use crate::report::Format;
use crate::util::Interrupt;
use engine::{Loaded, Plan};
use std::future::Future;
use std::path::Path;
use std::time::Instant;

/// A drill as the list and its records name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// Its command, `n8ncap <name>`.
    pub name: &'static str,
    /// Its record in a results directory.
    pub file: DrillFile,
    /// What it does to the deployment, for people.
    pub action: &'static str,
    /// What an interrupt before the action leaves as it was.
    pub left_alone: &'static str,
}

/// Every drill, once.
pub const DRILLS: [Listed; 3] = [
    <drain::DrainDrill as Drill>::LISTED,
    <outage::OutageDrill as Drill>::LISTED,
    <postgres_restart::PostgresRestartDrill as Drill>::LISTED,
];

/// One drill: its timed action beside the steady load, and its judgement of what the load
/// measured.
pub trait Drill: Send + Sync + Sized {
    /// Its line in [`DRILLS`].
    const LISTED: Listed;
    /// What the action returns: what it did, with its times from the load's start.
    type Done: Send;
    /// The drill's record and verdict, printed and saved.
    type Record: serde::Serialize + Send;

    /// The load: its rate, its length, when the action starts.
    fn plan(&self) -> Plan;

    /// Read before the load: what the action will change (restart counts, n8n's counters).
    fn before(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The action, started at the plan's time beside the load; once begun it runs to its end
    /// (what it stops it starts again), an interrupt cutting short only its waits.
    fn act<'a>(
        &'a self,
        load_start: Instant,
        interrupt: &'a Interrupt,
    ) -> impl Future<Output = Self::Done> + Send + 'a;

    /// What is read after the load, and the judgement.
    fn judge(self, loaded: Loaded<Self::Done>) -> impl Future<Output = Self::Record> + Send;

    /// The exit status of a record not interrupted: the action failed or nothing could be
    /// judged (`EXIT_FAILED`), else `EXIT_OK`.
    fn status(record: &Self::Record) -> i32;

    /// The record printed in `format`.
    fn emit(record: &Self::Record, format: Format) -> anyhow::Result<()>;
}

/// Runs a drill to its end: the load with the action at its time, the judgement, the verdict
/// printed first (something was really done to the deployment: a write that fails must not
/// hide it), then saved in `out`. The exit status; an interrupt before the action returns at
/// once, having done nothing.
pub async fn conduct<D: Drill>(
    mut drill: D,
    target: &crate::load::client::Target,
    (out, format): (Option<&Path>, Format),
    interrupt: &Interrupt,
) -> anyhow::Result<i32> {
    drill.before().await;
    let plan = drill.plan();
    let load_start = Instant::now();
    let loaded = engine::run(target, &plan, drill.act(load_start, interrupt), interrupt).await;
    if loaded.stop.is_none() {
        let l = D::LISTED;
        eprintln!(
            "n8ncap {}: interrupted before the {}; {}",
            l.name, l.action, l.left_alone
        );
        return Ok(interrupt.exit_code());
    }
    let interrupted = loaded.interrupted;
    let record = drill.judge(loaded).await;
    D::emit(&record, format)?;
    if let Some(dir) = out {
        D::LISTED.file.write(dir, &record)?;
    }
    Ok(if interrupted {
        interrupt.exit_code()
    } else {
        D::status(&record)
    })
}
