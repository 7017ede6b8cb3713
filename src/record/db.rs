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

/// What a stage saw of the database beside the pools' metrics: n8n's own log lines naming
/// Postgres' refusal (read from the containers through the Docker API), and Postgres itself
/// (read through a DSN). n8n's answers never name Postgres: this is where its cause shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DatabaseObserved {
    /// Whether container logs were read in the stage (Docker): zero lines then means none.
    #[serde(default)]
    pub logs_read: bool,
    /// Log lines naming Postgres' refusal of a connection (53300, "too many clients",
    /// "remaining connection slots are reserved").
    #[serde(default)]
    pub refusal_lines: u64,
    /// n8n's "Problem with execution N: … Aborting." lines.
    #[serde(default)]
    pub problem_lines: u64,
    /// The containers whose logs said so, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logged_by: Vec<String>,
    /// One such line, as logged (control characters escaped, cut to 300 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// Postgres read through the DSN at every scrape, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresSampled>,
}

/// Postgres' connections over a stage, sampled with a short read-only connection each round:
/// its limit, the client connections open at most, and the rounds whose connection it refused
/// (SQLSTATE 53300: a new client was refused then, as n8n's were).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PostgresSampled {
    pub samples: u32,
    /// Rounds whose connection Postgres refused for want of a slot.
    pub refused: u32,
    /// Rounds that failed otherwise (no answer, an answer that cannot be true): gaps.
    pub gaps: u32,
    /// `max_connections` and `superuser_reserved_connections` (0 when never read).
    pub max_connections: u32,
    pub reserved: u32,
    /// Client connections open at the busiest round (n8ncap's own included).
    pub open_max: u32,
    /// The connections by application at the busiest round, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_application: Vec<(String, u32)>,
    /// Postgres' words when it refused n8ncap's connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_message: Option<String>,
}

impl PostgresSampled {
    /// The slots a non-superuser can take: `max_connections − superuser_reserved_connections`.
    pub fn usable(&self) -> Option<u32> {
        (self.max_connections > 0).then(|| self.max_connections.saturating_sub(self.reserved))
    }

    /// Every usable slot was taken at some round, or a round's connection was refused.
    pub fn exhausted(&self) -> bool {
        self.refused > 0 || self.usable().is_some_and(|u| u > 0 && self.open_max >= u)
    }
}

/// Executions of a run left unfinished in n8n's table (`execution_entity`): their final write
/// was refused, and n8n shows them running for ever.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExecutionsLeft {
    /// Counted over executions created since this time (the run's start, Unix seconds).
    pub since_unix: f64,
    /// Status `new`: written at intake, never started.
    pub new: u64,
    /// Status `running`: started, never ended.
    pub running: u64,
    /// Why they could not be counted, when they could not (the figures are 0 then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<String>,
    /// Counted over the connection opened before the load and held to its end (n8n's pools may
    /// have filled Postgres by then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

/// What a line of n8n's log says of the database: a refused connection, an execution aborted
/// for it ("Problem with execution N: … Aborting."), both, or nothing.
pub fn db_line(line: &str) -> (bool, bool) {
    let refusal = [
        "53300",
        "too many clients",
        "remaining connection slots are reserved",
    ]
    .iter()
    .any(|w| line.contains(w));
    let problem = line.contains("Problem with execution") && line.contains("Aborting");
    (refusal, problem)
}

/// Whether a good-status answer's body is n8n's "the last node did not return any data" — a
/// short JSON message: a longer body (a workflow's own data) is not it and is not scanned (this
/// runs on every good answer of the load).
pub fn names_no_data(body: &[u8]) -> bool {
    let w = b"did not return any data";
    body.len() <= NO_DATA_MAX && body.windows(w.len()).any(|x| x == w)
}

/// n8n's no-data answer is about 90 bytes.
const NO_DATA_MAX: usize = 256;
