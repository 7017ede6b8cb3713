//! `n8ncap outage`: parses and checks the arguments, finds the Redis to stop and the n8n
//! processes to read back (`actuate::outage`: the Docker API, or the operator's commands), runs
//! the load (`load::drain`) with the outage beside it — Redis always started again, also on an
//! error or an interrupt — judges (`diagnose::outage`) and reports.

use crate::actuate::docker_outage::DockerOutage;
use crate::actuate::outage::Outager;
use crate::actuate::Actuator;
use crate::cli::OutageArgs;
use crate::diagnose::outage::judge_outage;
use crate::error::{self, BadInput};
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::dir::DrillFile;
use crate::record::outage::RedisStop;
use crate::report::views::Outage as View;
use crate::topology::Role;
use std::time::{Duration, Instant};

/// Requests in flight at most: a stopped deployment's backlog beyond this is dropped, counted.
const MAX_IN_FLIGHT: usize = 2000;

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

/// The Redis container `--redis-container` names, else the project's only one.
fn chosen_redis<'a>(
    a: &OutageArgs,
    project: &str,
    redis: &[&'a crate::topology::Node],
) -> Result<&'a crate::topology::Node, BadInput> {
    let shown = crate::util::escape_control(project);
    match &a.redis_container {
        Some(r) => redis
            .iter()
            .find(|n| n.name() == r.as_str())
            .copied()
            .ok_or_else(|| {
                BadInput(format!(
                    "--redis-container {}: no running Redis of that name in project {shown}",
                    crate::util::escape_control(r)
                ))
            }),
        None => match redis {
            [one] => Ok(*one),
            [] => Err(BadInput(format!(
                "project {shown} has no running Redis container to stop"
            ))),
            _ => Err(BadInput(format!(
                "project {shown} has several Redis containers: name one with --redis-container"
            ))),
        },
    }
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
    let redis: Vec<&crate::topology::Node> = found
        .topology
        .nodes
        .iter()
        .filter(|n| n.role == Role::Redis)
        .collect();
    let redis = chosen_redis(a, project, &redis)?;
    let n8n: Vec<&crate::topology::Node> = found
        .topology
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Main | Role::Worker | Role::Webhook))
        .collect();
    let threshold = n8n.iter().find_map(|n| {
        let t = n.times.as_ref()?.redis_timeout_ms.as_ref()?;
        Some(Sourced::new(t.value / 1000.0, t.source.clone()))
    });
    let outage = DockerOutage {
        redis: redis.name().to_string(),
        n8n: n8n
            .iter()
            .map(|n| (n.name().to_string(), n.role.word().to_string()))
            .collect(),
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
    crate::load::drain::post_target(&a.url, &a.body, timeout).await
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

/// Stops Redis, waits the outage (cut short by an interrupt), and always starts it again.
async fn outage(
    o: &Outager,
    wait: Duration,
    load_start: Instant,
    interrupt: &crate::util::Interrupt,
) -> RedisStop {
    let (how, what) = (o.how().to_string(), o.what());
    let stopped_s = load_start.elapsed().as_secs_f64();
    let stopped = o.stop(interrupt).await;
    let down_s = stopped.is_ok().then(|| load_start.elapsed().as_secs_f64());
    let mut cut_short = false;
    if stopped.is_ok() {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = interrupt.clone().wait() => cut_short = true,
        }
    }
    let started = start_again(o, &what, interrupt).await;
    let started_s = started.is_ok().then(|| load_start.elapsed().as_secs_f64());
    let detail = match (stopped, started) {
        (Ok(()), Ok(())) => None,
        (Err(e), Ok(())) => Some(format!("stopping Redis failed: {e:#}")),
        (Ok(()), Err(e)) => Some(format!("starting Redis again failed: {e:#}")),
        (Err(a), Err(b)) => Some(format!("stopping Redis failed: {a:#}; starting it: {b:#}")),
    };
    RedisStop {
        how,
        what,
        stopped_s,
        down_s,
        started_s,
        detail,
        cut_short,
    }
}

/// Starts Redis again, never cut short: an interrupt meanwhile is answered with what is still
/// running, and a second one (which exits at once) with what it leaves: Redis maybe down.
async fn start_again(
    o: &Outager,
    what: &str,
    interrupt: &crate::util::Interrupt,
) -> anyhow::Result<()> {
    use crate::util::last_words;
    // Read before it is said: an interrupt after the words is answered, never missed.
    let already = interrupt.fired();
    eprintln!("n8ncap: starting Redis again ({what})");
    last_words(Some(format!(
        "n8ncap: exited while Redis was being started again ({what}): the start may not have finished — Redis may still be down; check it and start it yourself"
    )));
    let start = o.start();
    tokio::pin!(start);
    let started = tokio::select! {
        r = &mut start => r,
        _ = interrupt.clone().wait(), if !already => {
            eprintln!("n8ncap: still starting Redis again ({what}); a second Ctrl-C stops waiting and leaves Redis as the start left it");
            start.await
        }
    };
    last_words(None);
    started
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub(super) async fn run(a: OutageArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a.output.format::<View>("outage")?;
    let t = times(&a)?;
    let target = target(&a).await?;
    crate::load::drain::preflight(&target).await?;
    if let Some(dir) = &a.out {
        DrillFile::Outage.claim(dir, a.force)?;
    }
    let (outager, read) = outager(&a).await?;
    let threshold = threshold(&a, read)?;
    let before = match &outager {
        Outager::Docker(d) => d.restarts_now().await,
        Outager::Commands { .. } => Vec::new(),
    };
    let since = unix_now();
    let plan = crate::load::drain::Plan {
        rate_per_s: a.rate,
        duration: t.total,
        stop_at: t.stop_at,
        max_in_flight: MAX_IN_FLIGHT,
    };
    let load_start = Instant::now();
    let stop = outage(&outager, t.outage, load_start, &interrupt);
    let loaded = crate::load::drain::run(&target, &plan, stop, &interrupt).await;
    let Some(stop) = loaded.stop else {
        eprintln!("n8ncap outage: interrupted before the outage; Redis was left alone");
        return Ok(interrupt.exit_code());
    };
    let processes = match &outager {
        Outager::Docker(d) => d.after(&before, since).await,
        Outager::Commands { .. } => Vec::new(),
    };
    let inputs = crate::diagnose::outage::Known {
        target: crate::wire::url::redact(&a.url),
        rate_per_s: a.rate,
        duration_s: t.total.as_secs_f64(),
        outage_s: t.outage.as_secs_f64(),
        threshold_s: threshold,
    };
    let o = judge_outage(inputs, &loaded.sent, loaded.dropped, stop, processes);
    // The verdict first: Redis was really stopped, and a write that fails must not hide it.
    crate::report::emit(&View(&o), format)?;
    if let Some(dir) = &a.out {
        DrillFile::Outage.write(dir, &o)?;
    }
    Ok(if loaded.interrupted {
        interrupt.exit_code()
    } else if o.stop.started_s.is_none() || o.stop.down_s.is_none() {
        // Redis not started again, or never stopped: no outage judged.
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}
