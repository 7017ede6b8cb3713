//! Failures a run's answers do not explain themselves: failed answers that are n8n's generic
//! HTTP 500 while nothing watched (n8n's logs, Postgres) names why, and the executions a run left
//! unfinished in n8n's table (counted through a DSN at the end of a sweep).

use crate::findings::{Finding, FindingId, Severity};
use crate::limits::reading::pct;
use crate::record::StageResult;

/// HTTP ≥ 500 answers of a stage.
fn failed(st: &StageResult) -> u64 {
    st.errors
        .http_status
        .iter()
        .filter(|(s, _)| **s >= 500)
        .map(|(_, n)| n)
        .sum()
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
        .map(|st| (st, failed(st)))
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
    let since = crate::util::clock(l.since_unix);
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
