//! Postgres out of connections, from what is really there. A real n8n 2.41.1 whose pools asked
//! more than `max_connections − superuser_reserved_connections` answered its callers HTTP 500
//! `{"message":"Error in workflow"}` and HTTP 200 "…the last node did not return any data":
//! **no answer names Postgres**. The cause shows in n8n's logs ("Problem with execution N:
//! remaining connection slots are reserved … Aborting.", read through the Docker API), in
//! Postgres itself (every usable slot open, a new client refused: read through a DSN), and in
//! a body that carries Postgres' words (a proxy or another tool's answer). Any of them names
//! the cause; the verdict leads with it and its budget, and still judges the stages that
//! stayed valid. Without any, failures that are n8n's generic answers are said to be so, with
//! what to give to name their cause.

use super::reading::pct;
use crate::findings::{Finding, FindingId, Severity};
use crate::model::settings::Settings;
use crate::record::db::PostgresSampled;
use crate::record::StageResult;

/// What one stage shows of Postgres refusing connections.
#[derive(Default)]
struct Seen {
    /// Answers whose body carries Postgres' refusal.
    bodies: u64,
    /// n8n's (or Postgres') log lines naming the refusal; n8n's "Problem with execution"
    /// lines among the logs.
    lines: u64,
    problems: u64,
    /// Rounds whose own connection Postgres refused; the stage's Postgres at its limit.
    pg_refused: u32,
    pg_full: bool,
    /// Answers that failed (HTTP ≥ 500, or a broken connection) and good-status answers
    /// without the last node's data.
    failed: u64,
    no_data: u64,
}

impl Seen {
    fn of(st: &StageResult) -> Seen {
        let failed = st
            .errors
            .http_status
            .iter()
            .filter(|(s, _)| **s >= 500)
            .map(|(_, n)| n)
            .sum::<u64>();
        let mut seen = Seen {
            bodies: st.errors.db_refused,
            failed,
            no_data: st.errors.no_data,
            ..Seen::default()
        };
        if let Some(db) = &st.database {
            seen.lines = db.refusal_lines;
            // n8n's "Problem with execution" names its cause in the same line; without a
            // refusal in the stage's logs it is another problem's.
            seen.problems = if db.refusal_lines > 0 {
                db.problem_lines
            } else {
                0
            };
            if let Some(pg) = &db.postgres {
                seen.pg_refused = pg.refused;
                seen.pg_full = pg.exhausted();
            }
        }
        seen
    }

    /// Postgres is named: by its words (a body, a log line), by refusing n8ncap's own
    /// connection, or by every slot open while answers failed.
    fn names_postgres(&self) -> bool {
        self.bodies > 0
            || self.lines > 0
            || self.pg_refused > 0
            || (self.pg_full && self.failed + self.no_data > 0)
    }
}

/// The busiest Postgres reading of the run.
fn busiest(stages: &[StageResult]) -> Option<&PostgresSampled> {
    stages
        .iter()
        .filter_map(|st| st.database.as_ref()?.postgres.as_ref())
        .filter(|p| p.samples > 0)
        .max_by_key(|p| p.open_max)
}

/// Σ pools × processes against the usable slots, as far as they are known.
fn budget(stages: &[StageResult], s: &Settings) -> (String, Vec<(&'static str, f64)>) {
    let mut figures = Vec::new();
    let mut words = Vec::new();
    let processes = s.worker_count() + 1;
    if let Some(pool) = &s.db_pool_size {
        let asked = pool.value.saturating_mul(processes);
        figures.push(("pool_size", pool.value as f64));
        figures.push(("processes", processes as f64));
        figures.push(("connections_asked", asked as f64));
        words.push(format!(
            "DB_POSTGRESDB_POOL_SIZE {} ({}) × {processes} process(es) (main and {} worker(s)) = up to {asked} connections",
            pool.value,
            pool.source,
            s.worker_count()
        ));
    }
    if let Some(pg) = busiest(stages) {
        if let Some(usable) = pg.usable() {
            figures.push(("max_connections", pg.max_connections as f64));
            figures.push(("reserved_connections", pg.reserved as f64));
            figures.push(("usable_connections", usable as f64));
            figures.push(("open_at_most", pg.open_max as f64));
            words.push(format!(
                "Postgres allows {usable} (max_connections {} − {} reserved); {} were open at the busiest reading",
                pg.max_connections, pg.reserved, pg.open_max
            ));
        }
    }
    let text = if words.is_empty() {
        "the pools together exceed max_connections − superuser_reserved_connections".into()
    } else {
        words.join(" against ")
    };
    (text, figures)
}

/// Postgres out of connections, when anything named it: its finding first, and the words that
/// lead the verdict.
pub fn leads(stages: &[StageResult], s: &Settings, findings: &mut Vec<Finding>) -> Option<String> {
    let named: Vec<(&StageResult, Seen)> = stages
        .iter()
        .map(|st| (st, Seen::of(st)))
        .filter(|(_, seen)| seen.names_postgres())
        .collect();
    if named.is_empty() {
        return None;
    }
    let sum = |f: fn(&Seen) -> u64| named.iter().map(|(_, n)| f(n)).sum::<u64>();
    let (bodies, lines, problems) = (sum(|n| n.bodies), sum(|n| n.lines), sum(|n| n.problems));
    let (failed, no_data) = (sum(|n| n.failed), sum(|n| n.no_data));
    let pg_refused = sum(|n| n.pg_refused as u64);
    let requests: u64 = named.iter().map(|(st, _)| st.requests).sum();
    let mut how = Vec::new();
    if lines > 0 {
        how.push(format!(
            "{lines} line(s) of the logs name Postgres' refusal"
        ));
    }
    if pg_refused > 0 {
        how.push(format!(
            "Postgres refused n8ncap's own connection {pg_refused} time(s)"
        ));
    }
    if bodies > 0 {
        how.push(format!("{bodies} answer(s) carry SQLSTATE 53300"));
    }
    if how.is_empty() {
        how.push("every usable slot of Postgres was open while answers failed".into());
    }
    let (budget, budget_figures) = budget(stages, s);
    let mut f = Finding::new(
        FindingId::PostgresConnectionsExhausted,
        format!(
            "Postgres refused connections: {} of {requests} answers failed in {} stage(s) ({})",
            failed.max(bodies),
            named.len(),
            how.join("; ")
        ),
    )
    .figure("refused_responses", bodies as f64)
    .figure("failed_responses", failed as f64)
    .figure("no_data_responses", no_data as f64)
    .figure("log_refusal_lines", lines as f64)
    .figure("log_problem_lines", problems as f64)
    .figure("postgres_refused_rounds", pg_refused as f64)
    .figure("requests_in_those_stages", requests as f64);
    for (k, v) in budget_figures {
        f = f.figure(k, v);
    }
    for (st, n) in &named {
        f = f.evidence(format!(
            "stage {} ({}): {} of {} answers failed ({}), {} answered 200 without the last node's data; {} log line(s) name the refusal, {} \"Problem with execution … Aborting.\"{}",
            st.index,
            st.level().words(),
            n.failed.max(n.bodies),
            st.requests,
            pct(n.failed.max(n.bodies) as f64 / st.requests.max(1) as f64),
            n.no_data,
            n.lines,
            n.problems,
            if n.pg_refused > 0 || n.pg_full {
                format!("; Postgres at its limit ({} refusal(s) of n8ncap's connection)", n.pg_refused)
            } else {
                String::new()
            }
        ));
    }
    if let Some(example) = stages
        .iter()
        .filter_map(|st| st.database.as_ref()?.example.as_deref())
        .next()
    {
        f = f.evidence(format!("as logged: {example}"));
    }
    if let Some(pg) = busiest(stages).filter(|p| !p.by_application.is_empty()) {
        let by: Vec<String> = pg
            .by_application
            .iter()
            .take(8)
            .map(|(a, n)| format!("{} {n}", if a.is_empty() { "(unnamed)" } else { a }))
            .collect();
        f = f.evidence(format!(
            "connections by application at the busiest reading: {}",
            by.join(", ")
        ));
    }
    findings.insert(
        0,
        f.why("Each n8n process opens up to DB_POSTGRESDB_POOL_SIZE connections; past max_connections − superuser_reserved_connections Postgres refuses the next one (SQLSTATE 53300) and the execution that needed it fails — its caller gets n8n's generic HTTP 500 \"Error in workflow\" (or a 200 without the last node's data), never Postgres' words, and the execution may stay `running` in n8n's list for good.")
            .fix("keep Σ DB_POSTGRESDB_POOL_SIZE × processes (main, webhook processors, every worker at its autoscaler maximum) within max_connections − superuser_reserved_connections: lower the pools, raise max_connections, or put PgBouncer (transaction mode) in front"),
    );
    Some(format!(
        "Postgres refused connections ({} of {requests} answers failed in {} stage(s); {}): {budget}.",
        failed.max(bodies),
        named.len(),
        how.join("; ")
    ))
}

/// Share of a stage's answers that failed with HTTP ≥ 500 past which the failures want a cause.
const UNNAMED_SHARE: f64 = 0.01;

/// Failures no watched source explains: n8n's generic answers, with what would name their
/// cause. Nothing when the database was watched (logs or a DSN) or any finding already names
/// why executions failed.
pub fn unnamed(stages: &[StageResult], findings: &mut Vec<Finding>) -> Option<String> {
    let watched = stages.iter().any(|st| {
        st.database
            .as_ref()
            .is_some_and(|d| d.logs_read || d.postgres.is_some())
    });
    let explained = findings.iter().any(|f| {
        matches!(
            f.id,
            FindingId::PostgresConnectionsExhausted
                | FindingId::WorkerWithoutRunner
                | FindingId::RunnerOomKilled
                | FindingId::WorkerOomKilled
                | FindingId::MainOomKilled
                | FindingId::ContainerOomKilled
                | FindingId::ContainerExited
                | FindingId::RedisConnectionLost
                | FindingId::TimeoutSignature
        )
    });
    if watched || explained {
        return None;
    }
    let failing: Vec<(&StageResult, u64)> = stages
        .iter()
        .map(|st| (st, Seen::of(st).failed))
        .filter(|(st, n)| *n as f64 > UNNAMED_SHARE * st.requests.max(1) as f64)
        .collect();
    if failing.is_empty() {
        return None;
    }
    let failed: u64 = failing.iter().map(|(_, n)| n).sum();
    let requests: u64 = failing.iter().map(|(st, _)| st.requests).sum();
    let mut f = Finding::new(
        FindingId::FailuresWithoutCause,
        format!(
            "{failed} of {requests} answers failed with HTTP ≥ 500 in {} stage(s), and nothing watched says why",
            failing.len()
        ),
    )
    .figure("failed_responses", failed as f64)
    .figure("requests_in_those_stages", requests as f64)
    .with_severity(Severity::Warning);
    for (st, n) in &failing {
        f = f.evidence(format!(
            "stage {} ({}): {n} of {} answers failed ({})",
            st.index,
            st.level().words(),
            st.requests,
            pct(*n as f64 / st.requests.max(1) as f64)
        ));
    }
    findings.push(
        f.why("n8n answers a failed execution with a generic HTTP 500 (\"Error in workflow\"): the cause — Postgres out of connections, a runner gone, Redis lost — is only in its logs and in the services behind it.")
            .fix("sweep again with --docker (n8n's logs and containers) or --postgres-env VAR (a DSN: Postgres' connections at every scrape and the executions left running), or read n8n's logs for \"Problem with execution\""),
    );
    Some(format!(
        " {failed} answers failed with n8n's generic HTTP 500, whose cause nothing watched names: give --docker or --postgres-env to name it."
    ))
}

/// The run's executions left `new` or `running` in n8n's table (counted through a DSN at the
/// end of a sweep): a finding saying how many and how to find and close them; none when none
/// were left, or when they could not be counted (said as evidence of nothing: no finding).
pub fn left_behind(left: Option<&crate::record::db::ExecutionsLeft>) -> Option<Finding> {
    let l = left?;
    let since = crate::util::utc_rfc3339(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(l.since_unix.max(0.0)),
    );
    let find = format!("SELECT id, status, \"createdAt\" FROM execution_entity WHERE status IN ('new','running') AND \"createdAt\" >= '{since}'");
    if let Some(why) = &l.not_counted {
        return Some(
            Finding::new(
                FindingId::ExecutionsLeftRunning,
                "the run's executions left new or running could not be counted",
            )
            .evidence(why.clone())
            .why("With Postgres out of connections n8ncap's own connection may be refused too; executions whose final write was refused stay running in n8n's list.")
            .fix(format!("once Postgres has a free slot (or as a role with a reserved slot), count them: {find}"))
            .with_severity(Severity::Info),
        );
    }
    if l.new + l.running == 0 {
        return None;
    }
    Some(
        Finding::new(
            FindingId::ExecutionsLeftRunning,
            format!(
                "{} execution(s) of the run stay unfinished in n8n's table: {} running, {} new",
                l.new + l.running,
                l.running,
                l.new
            ),
        )
        .figure("running", l.running as f64)
        .figure("new", l.new as f64)
        .evidence(format!(
            "counted in execution_entity: status running or new, created since {since}"
        ))
        .why("An execution whose final write was refused (or whose worker was killed) keeps the status it had: n8n's executions list shows it running for ever, and nothing ends it.")
        .fix(format!(
            "find them with {find}; stop them in n8n's executions list, or once no worker runs them mark them: UPDATE execution_entity SET status = 'crashed', finished = false, \"stoppedAt\" = now() WHERE status IN ('new','running') AND \"createdAt\" >= '{since}'"
        ))
        .with_severity(Severity::Warning),
    )
}
