//! `n8ncap drain`: parses and checks the arguments, finds the worker to stop and what the
//! prediction needs (the rate and job times of `--run`, the worker's shutdown timeout from the
//! Docker API), and hands the drill (`drill::drain`: the stop through `actuate::stop`, the
//! Docker API's or the operator's `--stop-cmd`) to the drill engine.

use crate::actuate::docker_stop::{self, DockerStop};
use crate::actuate::stop::Stopper;
use crate::cli::DrainArgs;
use crate::error::BadInput;
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::record::dir::DrillFile;
use std::time::Duration;

fn duration(flag: &str, v: &str) -> Result<Duration, BadInput> {
    crate::util::parse_duration(v).map_err(|e| BadInput(format!("{flag}: {e}")))
}

/// The rate and job times: the flag's, else the run's operating point; and the body the load
/// sends: `--body`, else the run's (its job times are that body's), else `{}`.
struct FromRun {
    rate: Sourced<f64>,
    p50: Option<Sourced<f64>>,
    p99: Option<Sourced<f64>>,
    body: String,
}

async fn from_run(a: &DrainArgs) -> anyhow::Result<FromRun> {
    let Some(run) = &a.run else {
        let rate = a.rate.ok_or_else(|| {
            BadInput(
                "give --rate (arrivals per second) or --run with a sweep of this deployment \
                 (its operating point, 2/3 of the measured ceiling, is the rate)"
                    .into(),
            )
        })?;
        return Ok(FromRun {
            rate: sendable(Sourced::new(rate, Provenance::Flag("--rate".into())))?,
            p50: None,
            p99: None,
            body: a.body.clone().unwrap_or_else(|| "{}".into()),
        });
    };
    let super::input::Judged {
        diagnosis: d,
        point: budget,
        summary,
    } = super::input::judged_run(run).await?;
    let shown = run.display().to_string();
    let p99 = Some(Sourced::new(
        budget.job_p99_s,
        Provenance::Measured(format!("p99 response below the ceiling in {shown}")),
    ));
    let rate = match (a.rate, &d.measured_ceiling) {
        (Some(r), _) => Sourced::new(r, Provenance::Flag("--rate".into())),
        (None, Some(c)) => Sourced::new(
            crate::model::OPERATING_SHARE * c.mean,
            Provenance::Inferred(format!(
                "2/3 of the ceiling {:.2}/s measured in {shown}",
                c.mean
            )),
        ),
        (None, None) => {
            return Err(BadInput(format!(
                "--run {shown}: the run reached no ceiling, so it has no operating point: give \
                 --rate, or a run that saturates (sweep --profile breakpoint)"
            ))
            .into())
        }
    };
    // The run's job times are its body's: with another body they are not this load's, and the
    // answers before the signal give them instead.
    let run_body = summary.body.as_ref().map(|b| b.to_string());
    let same_body = a.body.as_deref().is_none_or(|flag| {
        serde_json::from_str::<serde_json::Value>(flag)
            .is_ok_and(|f| Some(&f) == summary.body.as_ref())
    });
    Ok(FromRun {
        rate: sendable(rate)?,
        p50: d.settings.job_time.clone().filter(|_| same_body),
        p99: p99.filter(|_| same_body),
        body: a.body.clone().or(run_body).unwrap_or_else(|| "{}".into()),
    })
}

/// A rate a drain can send: above 0, at most 10 000 a second.
fn sendable(rate: Sourced<f64>) -> Result<Sourced<f64>, BadInput> {
    if rate.value.is_finite() && rate.value > 0.0 && rate.value <= 10_000.0 {
        return Ok(rate);
    }
    Err(BadInput(format!(
        "the rate {} is not one a drain can send: give --rate between 0 and 10000 per second",
        rate.value
    )))
}

/// What the judgement takes besides the load (n8n's failed count is read after it).
fn inputs(
    a: &DrainArgs,
    known: FromRun,
    t: &Times,
    (workers, graceful, bull): Worker,
    timeout: Duration,
) -> crate::drill::drain::judge::Known {
    crate::drill::drain::judge::Known {
        target: crate::wire::url::redact(&a.url),
        rate_per_s: known.rate,
        duration_s: t.total.as_secs_f64(),
        warmup_s: t.warmup.as_secs_f64(),
        workers,
        job_p50_s: known.p50,
        job_p99_s: known.p99,
        graceful_s: graceful,
        n8n_failed: None,
        lock_ms: bull.lock_ms,
        stalled_ms: bull.stalled_ms,
        timeout_s: timeout.as_secs_f64(),
        interrupted: false,
    }
}

/// A bad --out fails before any request or stop.
fn out_dir(a: &DrainArgs) -> Result<(), BadInput> {
    match &a.out {
        Some(dir) => DrillFile::Drain.claim(dir, a.force),
        None => Ok(()),
    }
}

/// The load's length, the stop's moment and the warm-up left out of "before".
struct Times {
    total: Duration,
    stop_at: Duration,
    warmup: Duration,
}

/// The times checked (warm-up < stop < end), with the flags that would fail silently later:
/// a `--metrics` URL that cannot be read, no worker.
fn times(a: &DrainArgs) -> Result<Times, BadInput> {
    let total = duration("--duration", &a.duration)?;
    let stop_at = duration("--stop-after", &a.stop_after)?;
    let warmup = duration("--warmup", &a.warmup)?;
    if stop_at >= total || warmup >= stop_at {
        return Err(BadInput(format!(
            "--warmup ({}) < --stop-after ({}) < --duration ({}) is needed: the load must run before and after the stop",
            a.warmup, a.stop_after, a.duration
        )));
    }
    main_metrics(a)?;
    if let Some(g) = &a.grace {
        grace_s(a, g)?;
    }
    if a.workers == Some(0) {
        return Err(BadInput(
            "--workers 0: the workers sharing the load before the stop, at least 1 (the one \
             stopped among them)"
                .into(),
        ));
    }
    Ok(Times {
        total,
        stop_at,
        warmup,
    })
}

/// main's `/metrics` from `--metrics` (`URL` or `main=URL`, as `sweep` takes it): a URL that
/// cannot be read would be dropped silently later, n8n's failed count not read.
fn main_metrics(a: &DrainArgs) -> Result<Option<String>, BadInput> {
    a.metrics
        .as_deref()
        .map(|m| crate::observe::watch::main_metrics(m, "n8n's failed-executions counter"))
        .transpose()
}

/// What the Docker API read of the worker it stops: its shutdown window, the workers sharing
/// the load, its Bull lease and check interval.
struct Read {
    graceful: Option<Sourced<f64>>,
    count: Sourced<u32>,
    bull: Bull,
}

/// The stopped worker's Bull lease and stalled-check interval, ms: when n8n answers what a
/// killed worker held.
struct Bull {
    lock_ms: Sourced<f64>,
    stalled_ms: Sourced<f64>,
}

impl Bull {
    fn defaults() -> Bull {
        let d = |v: f64| {
            Sourced::new(
                v,
                Provenance::Default("n8n's default: the worker's own was not read".into()),
            )
        };
        Bull {
            lock_ms: d(crate::model::n8n_defaults::LOCK_DURATION_MS),
            stalled_ms: d(crate::model::n8n_defaults::STALLED_INTERVAL_MS),
        }
    }

    /// The worker's own lease and check interval where its settings were read.
    fn of(node: &crate::topology::Node) -> Bull {
        let mut bull = Bull::defaults();
        if let Some(t) = &node.times {
            if let Some(l) = &t.lock_duration_ms {
                bull.lock_ms = l.clone();
            }
            if let Some(st) = &t.stalled_interval_ms {
                bull.stalled_ms = st.clone();
            }
        }
        bull
    }

    /// The request timeout that lets n8n's latest answer to a killed worker's executions in.
    fn timeout(&self) -> Duration {
        let latest =
            crate::model::drain::stalled_answer_latest_s(self.lock_ms.value, self.stalled_ms.value);
        Duration::from_secs_f64((latest + 5.0).min(crate::util::MAX_DURATION.as_secs_f64()))
    }
}

/// `--grace` as Docker's stop takes it: whole seconds, at least 1 (0 is a kill at once, which
/// `--signal KILL` says), and only for a SIGTERM (a kill has no grace).
fn grace_s(a: &DrainArgs, g: &str) -> Result<i32, BadInput> {
    if a.signal == crate::cli::SignalArg::Kill {
        return Err(BadInput(format!(
            "--grace {g} with --signal KILL: a kill has no grace; drop --grace, or stop with \
             SIGTERM (the default) to give the worker {g}"
        )));
    }
    let d = duration("--grace", g)?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(BadInput(format!(
            "--grace {g}: Docker's stop waits whole seconds before SIGKILL: give 1s or more \
             (--signal KILL kills at once)"
        )));
    }
    i32::try_from(d.as_secs()).map_err(|_| BadInput(format!("--grace {g}: at most {} s", i32::MAX)))
}

/// `--stop-cmd`: the operator's command stops the worker, with none of the Docker stop's flags.
fn command_stopper(a: &DrainArgs, c: &str) -> Result<Stopper, BadInput> {
    if c.trim().is_empty() {
        return Err(BadInput("--stop-cmd is empty: give the command that stops one worker, e.g. 'kubectl delete pod n8n-worker-abc'".into()));
    }
    // The Docker API's stop reads these; a command decides for itself.
    for (flag, given) in [
        ("--grace", a.grace.is_some()),
        ("--no-restart", a.no_restart),
        ("--worker", a.worker.is_some()),
    ] {
        if given {
            return Err(BadInput(format!(
                "{flag} applies to the stop through the Docker API (--project); with \
                 --stop-cmd your command decides how the worker stops: drop {flag}"
            )));
        }
    }
    Ok(Stopper::Command(c.to_string()))
}

/// The worker `--worker` names among the project's, else the first by name.
fn chosen<'a>(
    a: &DrainArgs,
    project: &str,
    workers: &[&'a crate::topology::Node],
) -> Result<&'a crate::topology::Node, BadInput> {
    let Some(w) = &a.worker else {
        return workers.first().copied().ok_or_else(|| {
            BadInput(format!(
                "project {} has no running worker to stop",
                crate::util::escape_control(project)
            ))
        });
    };
    workers
        .iter()
        .find(|n| n.name() == w.as_str())
        .copied()
        .ok_or_else(|| {
            BadInput(format!(
                "--worker {}: no running worker of that name in project {} (workers: {})",
                crate::util::escape_control(w),
                crate::util::escape_control(project),
                workers
                    .iter()
                    .map(|n| n.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

async fn stopper(a: &DrainArgs) -> anyhow::Result<(Stopper, Option<Read>)> {
    if let Some(c) = &a.stop_cmd {
        return Ok((command_stopper(a, c)?, None));
    }
    let Some(project) = &a.project else {
        return Err(BadInput(
            "say how to stop a worker: --project P (a compose project, through the Docker API) or --stop-cmd 'COMMAND'".into(),
        )
        .into());
    };
    let found = super::docker_watch(Some(project)).await?;
    let mut workers: Vec<&crate::topology::Node> = found.topology.workers().collect();
    workers.sort_by(|x, y| x.name().cmp(y.name()));
    let node = chosen(a, project, &workers)?;
    let count = Sourced::new(
        workers.len() as u32,
        Provenance::Deployment(format!("running workers of project {project}")),
    );
    let graceful = node
        .times
        .as_ref()
        .and_then(|t| t.graceful_shutdown_s.clone());
    let bull = Bull::of(node);
    let grace = match &a.grace {
        Some(g) => grace_s(a, g)?,
        None => docker_stop::container_grace(&found.docker, node.name())
            .await
            .unwrap_or(docker_stop::DOCKER_DEFAULT_GRACE_S),
    };
    let stop = DockerStop {
        docker: found.docker,
        container: node.name().to_string(),
        grace_s: grace,
        restart: !a.no_restart,
        signal: a.signal.into(),
    };
    let read = Read {
        graceful,
        count,
        bull,
    };
    Ok((Stopper::Docker(Box::new(stop)), Some(read)))
}

/// The webhook with the body and the request timeout (`--timeout`, else `default`).
async fn target(
    a: &DrainArgs,
    body: &str,
    default: Duration,
) -> anyhow::Result<crate::load::client::Target> {
    let timeout = match &a.timeout {
        Some(t) => duration("--timeout", t)?,
        None => default,
    };
    if timeout.is_zero() {
        return Err(BadInput(
            "--timeout must be above 0: each request needs time for its answer".into(),
        )
        .into());
    }
    crate::drill::engine::post_target(&a.url, body, timeout).await
}

/// The workers sharing the load, the stopped worker's shutdown window, its Bull settings.
type Worker = (Option<Sourced<u32>>, Option<Sourced<f64>>, Bull);

/// What is known of the worker stopped: the workers sharing the load, its shutdown window and
/// its Bull lease and check interval — read through Docker, else the flags, else n8n's defaults.
fn the_worker(a: &DrainArgs, read: Option<Read>) -> anyhow::Result<Worker> {
    let (workers, graceful, bull) = match read {
        Some(r) => (Some(r.count), r.graceful, r.bull),
        None => (
            a.workers
                .map(|n| Sourced::new(n, Provenance::Flag("--workers".into()))),
            None,
            Bull::defaults(),
        ),
    };
    let graceful = match &a.shutdown_timeout {
        Some(t) => Some(Sourced::new(
            duration("--shutdown-timeout", t)?.as_secs_f64(),
            Provenance::Flag("--shutdown-timeout".into()),
        )),
        None => graceful.or(Some(Sourced::new(
            crate::model::n8n_defaults::GRACEFUL_SHUTDOWN_S,
            Provenance::Assumed(
                "n8n's default N8N_GRACEFUL_SHUTDOWN_TIMEOUT: the worker's own was not read".into(),
            ),
        ))),
    };
    Ok((workers, graceful, bull))
}

pub(super) async fn run(a: DrainArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a.output.format::<crate::report::views::Drain>("drain")?;
    let t = times(&a)?;
    let known = from_run(&a).await?;
    out_dir(&a)?;
    let (stopper, read) = stopper(&a).await?;
    let (workers, graceful, bull) = the_worker(&a, read)?;
    let target = target(&a, &known.body, bull.timeout()).await?;
    crate::drill::engine::preflight(&target).await?;
    let metrics = main_metrics(&a)?;
    let inputs = inputs(&a, known, &t, (workers, graceful, bull), target.timeout);
    let drill = crate::drill::drain::DrainDrill::new(
        (stopper, a.signal.into()),
        inputs,
        t.stop_at,
        metrics,
    );
    let out = (a.out.as_deref(), format);
    crate::drill::conduct(drill, &target, out, &interrupt).await
}
