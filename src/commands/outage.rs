//! `n8ncap outage`: parses and checks the arguments, finds the Redis to stop and the n8n
//! processes to read back (`actuate::outage`: the Docker API, or the operator's commands), and
//! hands the drill (`drill::outage`) to the drill engine.

use crate::actuate::docker_outage::DockerOutage;
use crate::actuate::outage::Outager;
use crate::cli::OutageArgs;
use crate::error::BadInput;
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::dir::DrillFile;
use crate::topology::Role;
use std::time::Duration;

fn duration(flag: &str, v: &str) -> Result<Duration, BadInput> {
    crate::util::parse_duration(v).map_err(|e| BadInput(format!("{flag}: {e}")))
}

/// The project's Redis and n8n containers, and the threshold the n8n processes read.
/// n8n's Redis timeout threshold, s: `--threshold`, else the processes' own, else n8n's
/// default.
fn threshold(a: &OutageArgs, read: Option<Sourced<f64>>) -> Result<Sourced<f64>, BadInput> {
    Ok(match (&a.threshold, read) {
        (Some(v), _) => Sourced::new(
            duration("--threshold", v)?.as_secs_f64(),
            Provenance::Flag("--threshold".into()),
        ),
        (None, Some(r)) => r,
        (None, None) => Sourced::new(
            crate::model::n8n_defaults::REDIS_TIMEOUT_THRESHOLD_MS / 1000.0,
            Provenance::Assumed(
                "n8n's default QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD: the processes' own was not read"
                    .into(),
            ),
        ),
    })
}

async fn outager(a: &OutageArgs) -> anyhow::Result<(Outager, Option<Sourced<f64>>)> {
    if let (Some(stop), Some(start)) = (&a.stop_cmd, &a.start_cmd) {
        if stop.trim().is_empty() || start.trim().is_empty() {
            return Err(BadInput("--stop-cmd and --start-cmd must both be commands, e.g. 'systemctl stop redis' and 'systemctl start redis'".into()).into());
        }
        return Ok((
            Outager::Commands {
                stop: stop.clone(),
                start: start.clone(),
            },
            None,
        ));
    }
    let Some(project) = &a.project else {
        return Err(BadInput(
            "say how to stop Redis: --project P (a compose project, through the Docker API) or --stop-cmd 'COMMAND' --start-cmd 'COMMAND'".into(),
        )
        .into());
    };
    let found = super::docker_watch(Some(project)).await?;
    let nodes = &found.topology.nodes;
    let redis = super::input::chosen_dependency(
        (Role::Redis, "Redis", "--redis-container"),
        a.redis_container.as_deref(),
        project,
        nodes,
    )?;
    let n8n: Vec<&crate::topology::Node> = nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Main | Role::Worker | Role::Webhook))
        .collect();
    let threshold = n8n.iter().find_map(|n| {
        let t = n.times.as_ref()?.redis_timeout_ms.as_ref()?;
        Some(Sourced::new(t.value / 1000.0, t.source.clone()))
    });
    let outage = DockerOutage {
        container: redis.name().to_string(),
        n8n: super::input::n8n_processes(nodes),
        docker: found.docker,
    };
    Ok((Outager::Docker(Box::new(outage)), threshold))
}

/// The webhook with the body and the timeout, checked before anything is stopped.
async fn target(a: &OutageArgs) -> anyhow::Result<crate::load::client::Target> {
    let timeout = duration("--timeout", &a.timeout)?;
    if timeout.is_zero() {
        return Err(BadInput("--timeout must be above 0".into()).into());
    }
    crate::drill::engine::post_target(&a.url, &a.body, timeout).await
}

/// The arguments' times: the load, the stop, the outage; checked against each other.
struct Times {
    total: Duration,
    stop_at: Duration,
    outage: Duration,
}

fn times(a: &OutageArgs) -> Result<Times, BadInput> {
    let t = Times {
        total: duration("--duration", &a.duration)?,
        stop_at: duration("--stop-after", &a.stop_after)?,
        outage: duration("--outage", &a.outage)?,
    };
    if t.stop_at.is_zero() || t.outage.is_zero() || t.stop_at + t.outage >= t.total {
        return Err(BadInput(format!(
            "0 < --stop-after ({}) and --stop-after + --outage ({}) < --duration ({}) are needed: the load must run before, during and after the outage",
            a.stop_after, a.outage, a.duration
        )));
    }
    if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 10_000.0) {
        return Err(BadInput(format!(
            "--rate {} is not one an outage can send: give a rate between 0 and 10000 per second",
            a.rate
        )));
    }
    Ok(t)
}

pub(super) async fn run(a: OutageArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a.output.format::<crate::report::views::Outage>("outage")?;
    let t = times(&a)?;
    let target = target(&a).await?;
    crate::drill::engine::preflight(&target).await?;
    if let Some(dir) = &a.out {
        DrillFile::Outage.claim(dir, a.force)?;
    }
    let (outager, read) = outager(&a).await?;
    let threshold = threshold(&a, read)?;
    let known = crate::drill::outage::judge::Known {
        target: crate::wire::url::redact(&a.url),
        rate_per_s: a.rate,
        duration_s: t.total.as_secs_f64(),
        outage_s: t.outage.as_secs_f64(),
        threshold_s: threshold,
    };
    let drill = crate::drill::outage::OutageDrill::new(outager, known, t.stop_at);
    let out = (a.out.as_deref(), format);
    crate::drill::conduct(drill, &target, out, &interrupt).await
}
