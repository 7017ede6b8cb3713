//! `n8ncap postgres-restart`: a steady load while the executions' Postgres is stopped for a
//! while and started again, and what that cost — the calls n8n answered HTTP 503 "Database is
//! not ready!", the requests in flight at the stop by how they ended, when n8n answered OK again
//! after Postgres was back (its recovery's backoff, not the outage's length), the executions
//! left unfinished in Postgres — beside what n8n's recovery predicts (`model::db_recovery`).

use super::db::ExecutionsLeft;
use super::drain::{InFlight, Second};
use super::drill::StopStart;
use crate::model::db_recovery::Recovery;
use crate::model::settings::Sourced;
use serde::{Deserialize, Serialize};

/// What n8n's recovery predicts, over the pings' phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Seconds from Postgres back to n8n answering OK again: [earliest, latest].
    pub back_after_start_s: [f64; 2],
    /// Seconds from the stop to the recovery's first try: [earliest, latest].
    pub recovery_after_stop_s: [f64; 2],
    /// Requests in flight at the stop predicted lost: all of them (their executions' ends
    /// cannot be written; n8n 2.41.1 never answered them).
    pub in_flight_lost: u64,
}

/// An n8n process after the restart, as Docker shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbProcess {
    pub name: String,
    /// main, worker or webhook.
    pub role: crate::record::Role,
    /// It exited during the run (its exit, or a restart counted since the stop).
    pub exited: bool,
    pub running: bool,
    pub restarts: u64,
    /// n8n's last line about its database in its log ("Database connection recovered after 5
    /// attempt(s) in 15067ms"), control characters escaped.
    pub db_line: Option<String>,
}

/// A Postgres restart's record and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostgresRestart {
    /// The webhook, credentials removed.
    pub target: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    /// Seconds Postgres was asked to stay down.
    pub down_for_s: f64,
    /// n8n's ping and recovery settings, with where they came from.
    pub recovery: Sourced<Recovery>,
    pub stop: StopStart,
    /// Arrivals the load could not send (every connection busy).
    pub dropped: u64,
    /// The requests in flight when Postgres was stopped, by how they ended.
    pub in_flight: InFlight,
    /// Calls answered HTTP 503 (n8n's "Database is not ready!").
    pub not_ready: u64,
    /// Seconds from the stop to the first 503 answer.
    pub first_not_ready_after_stop_s: Option<f64>,
    /// Requests sent after Postgres was started again: with none, n8n's return was not measured.
    pub sent_after_start: u64,
    /// Seconds from Postgres started again to the first request sent after it that was
    /// answered OK (n8n's return, to within one arrival's gap); None: not within the run.
    pub back_after_start_s: Option<f64>,
    /// The return fell in the predicted interval (give or take an arrival's gap and a second);
    /// None when not measured.
    pub back_agrees: Option<bool>,
    /// Seconds from Postgres started again until OK answers held the offered rate.
    pub recovered_after_start_s: Option<f64>,
    /// Requests sent from the stop to the end: answered OK, and not.
    pub after_ok: u64,
    pub after_lost: u64,
    pub predicted: Predicted,
    /// The executions the run left `new` or `running` in n8n's table (with `--postgres`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions_left: Option<ExecutionsLeft>,
    /// The n8n processes after the run (with `--project`).
    #[serde(default)]
    pub processes: Vec<DbProcess>,
    pub verdict: String,
    pub seconds: Vec<Second>,
}
