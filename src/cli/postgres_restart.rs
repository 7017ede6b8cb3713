//! `n8ncap postgres-restart`'s arguments.

use super::OutputArgs;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct PostgresRestartArgs {
    /// The webhook to load (POST).
    #[arg(long)]
    pub url: String,
    /// Arrivals per second (an open model: a webhook's callers do not wait for each other).
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: f64,
    /// The load's length (long enough for n8n's return: 15 s down comes back about 20 s after
    /// the stop, 45 s down about 67 s after it).
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// When Postgres is stopped, from the load's start.
    #[arg(long, default_value = "10s")]
    pub stop_after: String,
    /// How long Postgres stays down before it is started again.
    #[arg(long, default_value = "15s")]
    pub down: String,
    /// The compose project whose Postgres is stopped and started again through the Docker API;
    /// its n8n containers are read back afterwards (state, restarts, last line about the
    /// database) and main's ping and recovery settings read from it.
    #[arg(long, conflicts_with = "stop_cmd")]
    pub project: Option<String>,
    /// The Postgres container to stop (default: the project's one Postgres).
    #[arg(long, requires = "project")]
    pub postgres_container: Option<String>,
    /// For any other deployment: the command that stops Postgres (run with `sh -c`), e.g.
    /// 'pg_ctl stop -D DATA -m fast'.
    #[arg(long, requires = "start_cmd")]
    pub stop_cmd: Option<String>,
    /// The command that starts Postgres again and returns once it accepts connections (e.g.
    /// 'pg_ctl start -w -D DATA'): always run after --stop-cmd, also on an error or an interrupt.
    #[arg(long, requires = "stop_cmd")]
    pub start_cmd: Option<String>,
    /// Name of an environment variable holding the Postgres DSN n8n uses: the executions the
    /// run left `new` or `running` are counted once Postgres is back (read-only; the DSN is
    /// never shown).
    #[arg(long, value_name = "VAR", conflicts_with = "postgres_file")]
    pub postgres_env: Option<String>,
    /// A file whose first line is that DSN.
    #[arg(long, value_name = "FILE")]
    pub postgres_file: Option<PathBuf>,
    /// n8n's DB_TABLE_PREFIX, when its tables have one.
    #[arg(long, default_value = "")]
    pub table_prefix: String,
    /// The request body (JSON).
    #[arg(long, default_value = "{}")]
    pub body: String,
    /// How long a request waits for its answer before it counts as never answered.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Save the restart (postgres-restart.json) in this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite the postgres-restart.json an earlier drill left in --out.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}
