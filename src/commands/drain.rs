//! `n8ncap drain`: parses and checks the arguments, finds the worker to stop and what the
//! prediction needs (the rate and job times of `--run`, the worker's shutdown timeout from the
//! Docker API), runs the load (`load::drain`) with the stop beside it (`observe::docker_stop`
//! or the operator's `--stop-cmd`), judges (`diagnose::drain`) and reports.

use crate::cli::DrainArgs;
use crate::error::{self, BadInput};
use crate::model::provenance::Provenance;
use crate::model::settings::Sourced;
use crate::observe::docker_stop::{self, DockerStop};
use crate::record::drain::StopRecord;
use crate::report::views::Drain as View;
use std::time::{Duration, Instant};

/// Requests in flight at most: a stopped deployment's backlog beyond this is dropped, counted.
const MAX_IN_FLIGHT: usize = 2000;

fn duration(flag: &str, v: &str) -> Result<Duration, BadInput> {
    crate::util::parse_duration(v).map_err(|e| BadInput(format!("{flag}: {e}")))
}

/// The rate and job times: the flag's, else the run's operating point.
struct FromRun {
    rate: Sourced<f64>,
    p50: Option<Sourced<f64>>,
    p99: Option<Sourced<f64>>,
}

fn from_run(a: &DrainArgs) -> anyhow::Result<FromRun> {
    let Some(run) = &a.run else {
        let rate = a.rate.ok_or_else(|| {
            BadInput(
                "give --rate (arrivals per second) or --run with a sweep of this deployment \
                 (its operating point, 2/3 of the measured ceiling, is the rate)"
                    .into(),
            )
        })?;
        return Ok(FromRun {
            rate: Sourced::new(rate, Provenance::Flag("--rate".into())),
            p50: None,
            p99: None,
        });
    };
    let (budget, d) = super::audit::measured_run(run)?;
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
    Ok(FromRun {
        rate,
        p50: d.settings.job_time.clone(),
        p99,
    })
}

/// The stop, as chosen: the Docker API or the operator's command.
enum Stopper {
    Docker(
        Box<DockerStop>,
        Option<Sourced<f64>>,
        Sourced<u32>,
        Box<Bull>,
    ),
    Command(String),
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

    /// The request timeout that lets n8n's latest answer to a killed worker's executions in.
    fn timeout(&self) -> Duration {
        let latest =
            crate::model::drain::stalled_answer_latest_s(self.lock_ms.value, self.stalled_ms.value);
        Duration::from_secs_f64((latest + 5.0).min(crate::util::MAX_DURATION.as_secs_f64()))
    }
}

async fn stopper(a: &DrainArgs) -> anyhow::Result<Stopper> {
    if let Some(c) = &a.stop_cmd {
        if c.trim().is_empty() {
            return Err(BadInput("--stop-cmd is empty: give the command that stops one worker, e.g. 'kubectl delete pod n8n-worker-abc'".into()).into());
        }
        return Ok(Stopper::Command(c.clone()));
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
    let node =
        match &a.worker {
            Some(w) => {
                workers
                    .iter()
                    .find(|n| n.name() == w.as_str())
                    .copied()
                    .ok_or_else(|| {
                        BadInput(format!(
                "--worker {}: no running worker of that name in project {} (workers: {})",
                crate::util::escape_control(w),
                crate::util::escape_control(project),
                workers.iter().map(|n| n.name()).collect::<Vec<_>>().join(", ")
            ))
                    })?
            }
            None => *workers.first().ok_or_else(|| {
                BadInput(format!(
                    "project {} has no running worker to stop",
                    crate::util::escape_control(project)
                ))
            })?,
        };
    let count = Sourced::new(
        workers.len() as u32,
        Provenance::Deployment(format!("running workers of project {project}")),
    );
    let graceful = node
        .times
        .as_ref()
        .and_then(|t| t.graceful_shutdown_s.clone());
    let mut bull = Bull::defaults();
    if let Some(t) = &node.times {
        if let Some(l) = &t.lock_duration_ms {
            bull.lock_ms = l.clone();
        }
        if let Some(st) = &t.stalled_interval_ms {
            bull.stalled_ms = st.clone();
        }
    }
    let grace = match &a.grace {
        Some(g) => duration("--grace", g)?.as_secs() as i32,
        None => docker_stop::container_grace(&found.docker, node.name())
            .await
            .unwrap_or(docker_stop::DOCKER_DEFAULT_GRACE_S),
    };
    Ok(Stopper::Docker(
        Box::new(DockerStop {
            docker: found.docker,
            container: node.name().to_string(),
            grace_s: grace,
            restart: !a.no_restart,
            signal: a.signal.into(),
        }),
        graceful,
        count,
        Box::new(bull),
    ))
}

async fn command_stop(
    command: &str,
    signal: crate::model::drain::StopSignal,
    load_start: Instant,
) -> StopRecord {
    let signal_s = load_start.elapsed().as_secs_f64();
    let ran = crate::load::scaleout::run_shell(command).await;
    StopRecord {
        how: "command".into(),
        signal,
        what: command.to_string(),
        signal_s,
        exited_after_s: Some(ran.seconds),
        exit_code: ran.exit_code.map(i64::from),
        grace_s: None,
        held_logged: crate::observe::docker_stop::held_in_log(&ran.output),
        aborted_logged: None,
        detail: Some(match ran.failure {
            Some(f) => format!("{f}: {}", ran.output),
            None => ran.output,
        }),
        restarted_s: None,
    }
}

async fn failed_counter(metrics: Option<&str>) -> Option<f64> {
    let e = crate::observe::scrape::scrape(metrics?, Duration::from_secs(5))
        .await
        .ok()?;
    e.value("n8n_scaling_mode_queue_jobs_failed")
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// The webhook with the body and the request timeout (`--timeout`, else `default`).
async fn target(a: &DrainArgs, default: Duration) -> anyhow::Result<crate::load::client::Target> {
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
    crate::load::drain::post_target(&a.url, &a.body, timeout).await
}

/// The workers sharing the load, the stopped worker's shutdown window, its Bull settings.
type Worker = (Option<Sourced<u32>>, Option<Sourced<f64>>, Bull);

/// What is known of the worker stopped: the workers sharing the load, its shutdown window and
/// its Bull lease and check interval — read through Docker, else the flags, else n8n's defaults.
fn the_worker(a: &DrainArgs, stopper: &Stopper) -> anyhow::Result<Worker> {
    let (workers, graceful, bull) = match stopper {
        Stopper::Docker(_, g, n, b) => (
            Some(n.clone()),
            g.clone(),
            Bull {
                lock_ms: b.lock_ms.clone(),
                stalled_ms: b.stalled_ms.clone(),
            },
        ),
        Stopper::Command(_) => (
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
    let format = a.output.format::<View>("drain")?;
    let total = duration("--duration", &a.duration)?;
    let stop_at = duration("--stop-after", &a.stop_after)?;
    let warmup = duration("--warmup", &a.warmup)?;
    if stop_at >= total || warmup >= stop_at {
        return Err(BadInput(format!(
            "--warmup ({}) < --stop-after ({}) < --duration ({}) is needed: the load must run before and after the stop",
            a.warmup, a.stop_after, a.duration
        ))
        .into());
    }
    let known = from_run(&a)?;
    if !(known.rate.value.is_finite() && known.rate.value > 0.0 && known.rate.value <= 10_000.0) {
        return Err(BadInput(format!(
            "the rate {} is not one a drain can send: give --rate between 0 and 10000 per second",
            known.rate.value
        ))
        .into());
    }
    // A bad --out fails before any request or stop.
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| BadInput(format!("--out {}: cannot create it: {e}", dir.display())))?;
    }
    let stopper = stopper(&a).await?;
    let (workers, graceful, bull) = the_worker(&a, &stopper)?;
    let target = target(&a, bull.timeout()).await?;
    let failed_before = failed_counter(a.metrics.as_deref()).await;
    let plan = crate::load::drain::Plan {
        rate_per_s: known.rate.value,
        duration: total,
        stop_at,
        max_in_flight: MAX_IN_FLIGHT,
    };
    let load_start = Instant::now();
    let stop = async {
        match &stopper {
            Stopper::Docker(d, ..) => d.run(load_start).await,
            Stopper::Command(c) => command_stop(c, a.signal.into(), load_start).await,
        }
    };
    let loaded = crate::load::drain::run(&target, &plan, stop, &interrupt).await;
    let Some(stop) = loaded.stop else {
        eprintln!("n8ncap drain: interrupted before the stop; the worker was left alone");
        return Ok(interrupt.exit_code());
    };
    let n8n_failed = match (failed_before, failed_counter(a.metrics.as_deref()).await) {
        (Some(b), Some(e)) if e >= b => Some(e - b),
        _ => None,
    };
    let inputs = crate::diagnose::drain::Inputs {
        target: crate::wire::url::redact(&a.url),
        rate_per_s: known.rate,
        duration_s: total.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        workers,
        job_p50_s: known.p50,
        job_p99_s: known.p99,
        graceful_s: graceful,
        n8n_failed,
        lock_ms: bull.lock_ms,
        stalled_ms: bull.stalled_ms,
        timeout_s: target.timeout.as_secs_f64(),
    };
    let d = crate::diagnose::drain::judge(inputs, &loaded.sent, loaded.dropped, stop);
    if let Some(dir) = &a.out {
        crate::record::dir::write_atomic(&dir.join("drain.json"), &serde_json::to_vec_pretty(&d)?)?;
    }
    crate::report::emit(&View(&d), format)?;
    Ok(if loaded.interrupted {
        interrupt.exit_code()
    } else if d.stop_failed.is_some() {
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}
