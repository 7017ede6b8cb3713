//! `n8ncap postgres-restart`: parses and checks the arguments, finds the Postgres to stop and
//! the n8n processes to read back (`actuate::outage`: the Docker API, or the operator's
//! commands) with main's ping and recovery settings, and hands the drill
//! (`drill::postgres_restart`) to the drill engine.

use crate::actuate::docker_outage::DockerOutage;
use crate::actuate::outage::Outager;
use crate::cli::PostgresRestartArgs;
use crate::error::BadInput;
use crate::model::db_recovery::Recovery;
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::dir::DrillFile;
use crate::topology::Role;
use std::time::Duration;

fn duration(flag: &str, v: &str) -> Result<Duration, BadInput> {
    crate::util::parse_duration(v).map_err(|e| BadInput(format!("{flag}: {e}")))
}

/// The load's length, the stop's moment, the time down; checked against each other.
fn times(a: &PostgresRestartArgs) -> Result<(Duration, Duration, Duration), BadInput> {
    let total = duration("--duration", &a.duration)?;
    let stop_at = duration("--stop-after", &a.stop_after)?;
    let down = duration("--down", &a.down)?;
    if stop_at.is_zero() || down.is_zero() || stop_at + down >= total {
        return Err(BadInput(format!(
            "0 < --stop-after ({}) and --stop-after + --down ({}) < --duration ({}) are needed: the load must run before, during and after the restart",
            a.stop_after, a.down, a.duration
        )));
    }
    if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 10_000.0) {
        return Err(BadInput(format!(
            "--rate {} is not one a drill can send: give a rate between 0 and 10000 per second",
            a.rate
        )));
    }
    Ok((total, stop_at, down))
}

/// main's ping and recovery settings as its container sets them, each else n8n's default.
fn recovery(main: Option<&crate::topology::Node>) -> Sourced<Recovery> {
    let n8n = Recovery::N8N;
    let env = |k: &str| {
        main.and_then(|m| m.facts.env.get(k))
            .and_then(|v| crate::topology::n8n_env::number(v))
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let read = Recovery {
        ping_s: env("DB_PING_INTERVAL_SECONDS").unwrap_or(n8n.ping_s),
        max_failures: env("DB_PING_MAX_FAILURES_BEFORE_RECOVERY")
            .map_or(n8n.max_failures, |v| v.clamp(1.0, 1000.0) as u32),
        backoff_min_s: env("DB_RECOVERY_BACKOFF_MIN_MS").map_or(n8n.backoff_min_s, |v| v / 1000.0),
        backoff_max_s: env("DB_RECOVERY_BACKOFF_MAX_MS").map_or(n8n.backoff_max_s, |v| v / 1000.0),
    };
    match main {
        Some(m) if read != n8n && read.possible() => Sourced::new(
            read,
            Provenance::Deployment(format!("container {}", m.name())),
        ),
        _ => Sourced::new(
            n8n,
            Provenance::Default(
                "n8n 2.41's DB_PING_INTERVAL_SECONDS 2, DB_PING_MAX_FAILURES_BEFORE_RECOVERY 3, DB_RECOVERY_BACKOFF_MIN_MS 1000, _MAX_MS 30000"
                    .into(),
            ),
        ),
    }
}

async fn outager(a: &PostgresRestartArgs) -> anyhow::Result<(Outager, Sourced<Recovery>)> {
    if let (Some(stop), Some(start)) = (&a.stop_cmd, &a.start_cmd) {
        if stop.trim().is_empty() || start.trim().is_empty() {
            return Err(BadInput("--stop-cmd and --start-cmd must both be commands, e.g. 'pg_ctl stop -D DATA -m fast' and 'pg_ctl start -w -D DATA'".into()).into());
        }
        let (stop, start) = (stop.clone(), start.clone());
        return Ok((Outager::Commands { stop, start }, recovery(None)));
    }
    let Some(project) = &a.project else {
        return Err(BadInput(
            "say how to stop Postgres: --project P (a compose project, through the Docker API) or --stop-cmd 'COMMAND' --start-cmd 'COMMAND'".into(),
        )
        .into());
    };
    let found = super::docker_watch(Some(project)).await?;
    let nodes = &found.topology.nodes;
    let postgres = super::input::chosen_dependency(
        (Role::Postgres, "Postgres", "--postgres-container"),
        a.postgres_container.as_deref(),
        project,
        nodes,
    )?;
    let settings = recovery(nodes.iter().find(|n| n.role == Role::Main));
    let restart = DockerOutage {
        container: postgres.name().to_string(),
        n8n: super::input::n8n_processes(nodes),
        docker: found.docker,
    };
    Ok((Outager::Docker(Box::new(restart)), settings))
}

pub(super) async fn run(a: PostgresRestartArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a
        .output
        .format::<crate::report::views::PostgresRestart>("postgres-restart")?;
    let (total, stop_at, down) = times(&a)?;
    let timeout = duration("--timeout", &a.timeout)?;
    if timeout.is_zero() {
        return Err(BadInput("--timeout must be above 0".into()).into());
    }
    let dsn = crate::observe::postgres::dsn(a.postgres_env.as_deref(), a.postgres_file.as_deref())?;
    let target = crate::drill::engine::post_target(&a.url, &a.body, timeout).await?;
    crate::drill::engine::preflight(&target).await?;
    if let Some(dir) = &a.out {
        DrillFile::PostgresRestart.claim(dir, a.force)?;
    }
    let (outager, recovery) = outager(&a).await?;
    let known = crate::drill::postgres_restart::Known {
        target: crate::wire::url::redact(&a.url),
        rate_per_s: a.rate,
        duration_s: total.as_secs_f64(),
        down_for_s: down.as_secs_f64(),
        recovery,
    };
    let postgres = dsn.map(|d| (d, a.table_prefix.clone()));
    let drill = crate::drill::postgres_restart::PostgresRestartDrill::new(
        outager, known, stop_at, postgres,
    );
    let out = (a.out.as_deref(), format);
    crate::drill::conduct(drill, &target, out, &interrupt).await
}
