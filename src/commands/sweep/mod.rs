//! `n8ncap sweep`: staged load at a webhook, watched, judged and saved as it goes.

use crate::cli::SweepArgs;
use crate::error::{self, BadInput};
use crate::load::profile::{Overrides, Profile};
use crate::load::run::{Ending, LiveSweep, SweepOptions};
use crate::model::settings::Settings;
use crate::observe::watch::Endpoint;
use crate::record::dir::ResultsDir;
use crate::record::evidence::Source;
use crate::record::Role;
use crate::report::views::{Run, RunJson};
use crate::report::Format;
use crate::wire::resp::RedisUrl;
use std::time::Duration;

/// `sweep --workers 1,2,4`: the sweep at each worker count, scaled by `--scale-cmd` or Docker.
pub(super) mod scale;

pub(super) async fn run(a: SweepArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<Run>("sweep")?;
    let interrupt = crate::util::Interrupt::install();
    let swept = sweep_once(&a, &interrupt, format == Format::Table).await?;
    let code = match swept.ending {
        Ending::Interrupted => interrupt.exit_code(),
        Ending::Completed if !swept.summary.thresholds_passed => error::EXIT_THRESHOLD,
        Ending::Completed => error::EXIT_OK,
    };
    // What was measured is saved: a reader that closed the pipe does not change the result.
    error::EXIT_ON_CLOSED_PIPE.store(code, std::sync::atomic::Ordering::Relaxed);
    let run = Run {
        summary: &swept.summary,
        diagnosis: &swept.diagnosis,
        recommendation: &swept.recommendation,
        json: RunJson::Summary,
        results: swept.out_dir.as_deref(),
    };
    crate::report::emit(&run, format)?;
    Ok(code)
}

/// One sweep, judged and saved: what `sweep` shows, and each count of a scale sweep.
struct Swept {
    pub summary: crate::record::Summary,
    pub diagnosis: crate::record::Diagnosis,
    pub recommendation: Result<crate::record::Recommendation, crate::error::NoPlan>,
    pub ending: Ending,
    pub out_dir: Option<std::path::PathBuf>,
}

/// Checks the arguments, runs the stages (ended early by `interrupt`), judges and saves them.
async fn sweep_once(
    a: &SweepArgs,
    interrupt: &crate::util::Interrupt,
    progress: bool,
) -> anyhow::Result<Swept> {
    let flags = a.settings.settings()?;
    let task_request_timeout = a.settings.task_request_timeout()?;
    let (profile, planned) = checked_profile(a)?;
    let Watch {
        queue_metrics_interval,
        metrics,
        scrape_interval,
        redis,
    } = Watch::from_args(a)?;
    // The DSN is read and tried before any load: one that does not parse or answer is said now.
    let (dsn, held) = checked_dsn(a).await?;
    let (out_dir, out, preflight) = checked_out(a, &profile).await?;
    let (docker, docker_cores) = containers(a).await;
    let known = match &docker {
        Some(w) => flags.or(w.topology.model_settings()),
        None => flags,
    };
    let host = crate::observe::host_facts(&profile.request.url, docker_cores);
    let observer = observers(
        (metrics, redis, scrape_interval),
        docker.map(|w| (w.docker, w.containers)),
        dsn.clone(),
        out.as_ref().and_then(|o| o.timeline().ok()),
    )
    .await;
    let started = std::time::SystemTime::now();
    let profile_model = profile.model;
    announce(&profile, &planned, a);
    let opts = SweepOptions {
        profile,
        out,
        abort_on_fail: a.abort_on_fail,
        progress,
        observer,
        queue_metrics_interval,
        repeat: a.repeat,
        settings: Some(known),
        adaptive: adaptive_options(a, &profile_model)?,
        host: Some(host),
    };
    let sweep = LiveSweep {
        opts,
        interrupt: interrupt.clone().wait(),
    };
    let mut summary = sweep.evidence().await?.summary;
    let ending = match summary.interrupted {
        true => Ending::Interrupted,
        false => Ending::Completed,
    };
    summary.preflight = preflight;
    if let Some(d) = &dsn {
        summary.executions_left = Some(left_behind(d, held.as_ref(), started).await);
    }
    judged(summary, ending, out_dir, task_request_timeout)
}

/// The sweep judged, and saved with its page when it has a results directory.
fn judged(
    mut summary: crate::record::Summary,
    ending: Ending,
    out_dir: Option<std::path::PathBuf>,
    task_request_timeout: Option<f64>,
) -> anyhow::Result<Swept> {
    let (diagnosis, rec) = super::analyze(&mut summary, Settings::default(), task_request_timeout);
    if let Some(dir) = &out_dir {
        crate::record::dir::write_summary(dir, &summary)?;
        crate::report::html::write(dir, &summary)?;
    }
    Ok(Swept {
        summary,
        diagnosis,
        recommendation: rec,
        ending,
        out_dir,
    })
}

/// The profile with the flags applied, and its stages: everything it says is checked before
/// anything is created or sent.
fn checked_profile(a: &SweepArgs) -> anyhow::Result<(Profile, Vec<crate::load::profile::Stage>)> {
    let mut profile = Profile::load(a.profile_name())?;
    profile.apply(&Overrides {
        url: a.url.clone(),
        vus: a.vus.clone(),
        rates: a.rates.clone(),
        stage_duration: a.stage_duration.clone(),
        warmup: a.warmup.clone(),
        body: a.body.clone(),
        timeout: a.timeout.clone(),
        ca_cert: a.ca_cert.clone(),
        insecure: a.insecure,
    })?;
    let planned = profile.resolve_stages()?;
    profile.scenarios()?;
    profile.require_target()?;
    Ok((profile, planned))
}

/// The containers watched (`--docker`, `--project`) and the engine's cores; a sweep goes on
/// without them when Docker cannot be read, saying so.
async fn containers(a: &SweepArgs) -> (Option<crate::commands::DockerWatch>, Option<f64>) {
    if !(a.docker || a.project.is_some()) {
        return (None, None);
    }
    let docker = super::docker_watch(a.project.as_deref())
        .await
        .map_err(|e| eprintln!("n8ncap: {e:#}; the sweep runs without container data"))
        .ok();
    let cores = match &docker {
        Some(w) => crate::observe::docker::engine_cores(&w.docker).await,
        None => None,
    };
    (docker, cores)
}

/// The thresholds and each request checked, the results directory made, then the pre-flight
/// request; a refused pre-flight leaves no directory behind.
async fn checked_out(
    a: &SweepArgs,
    profile: &Profile,
) -> anyhow::Result<(
    Option<std::path::PathBuf>,
    Option<ResultsDir>,
    Vec<crate::record::summary::Preflight>,
)> {
    crate::load::checks::parse_all(&profile.thresholds)?;
    crate::load::run::check_targets(profile).await?;
    let existed = a.out.as_deref().is_some_and(|d| d.exists());
    let (out_dir, out) = results_dir(a)?;
    if a.no_preflight {
        return Ok((out_dir, out, Vec::new()));
    }
    match crate::load::run::preflight(profile).await {
        Ok(p) => Ok((out_dir, out, p)),
        Err(e) => {
            drop(out);
            if let (Some(d), false) = (&out_dir, existed) {
                let _ = std::fs::remove_dir_all(d);
                if a.out.is_none() {
                    // n8ncap-results/ itself, when this run made it.
                    let _ = d.parent().map(std::fs::remove_dir);
                }
            }
            Err(e)
        }
    }
}

/// `--adaptive` and its bounds, checked.
fn adaptive_options(
    a: &SweepArgs,
    model: &crate::record::LoadModel,
) -> anyhow::Result<Option<crate::load::run::AdaptiveOptions>> {
    if !a.adaptive {
        return Ok(None);
    }
    if *model != crate::record::LoadModel::Closed {
        return Err(BadInput(
            "--adaptive searches in-flight levels: use a closed-model profile (not --rates)".into(),
        )
        .into());
    }
    let dur = |flag: &str, v: &str| -> anyhow::Result<Duration> {
        let d = crate::util::parse_duration(v).map_err(|e| BadInput(format!("--{flag}: {e}")))?;
        if d.is_zero() {
            return Err(BadInput(format!("--{flag} must be more than 0")).into());
        }
        Ok(d)
    };
    if !(a.precision.is_finite() && a.precision > 0.0 && a.precision < 1.0) {
        return Err(
            BadInput("--precision must be a share between 0 and 1, e.g. 0.03".into()).into(),
        );
    }
    if a.max_vus == 0 {
        return Err(BadInput("--max-vus must be at least 1".into()).into());
    }
    Ok(Some(crate::load::run::AdaptiveOptions {
        max_vus: a.max_vus,
        budget: dur("budget", &a.budget)?,
        precision: a.precision,
        max_stage: dur("max-stage", &a.max_stage)?,
        to_failure: a.to_failure,
        head_start: a.head_start,
    }))
}

/// Names the target before the first request, with what will be sent there.
fn announce(profile: &Profile, planned: &[crate::load::profile::Stage], a: &SweepArgs) {
    eprintln!(
        "n8ncap: load goes to {} (profile {}: {}{})",
        crate::wire::url::redact(&profile.request.url),
        profile.name,
        if a.adaptive {
            "adaptive levels".to_string()
        } else {
            format!(
                "{} stage{}, {:.0} s",
                planned.len() * a.repeat.max(1) as usize,
                if planned.len() * a.repeat.max(1) as usize == 1 {
                    ""
                } else {
                    "s"
                },
                planned
                    .iter()
                    .map(|s| s.duration.as_secs_f64())
                    .sum::<f64>()
                    * a.repeat.max(1) as f64
            )
        },
        if profile.scenarios.is_empty() {
            String::new()
        } else {
            format!(", {} scenarios", profile.scenarios.len())
        }
    );
}

/// What watches the load besides the client: n8n's metrics, Redis, and how often.
struct Watch {
    queue_metrics_interval: Duration,
    metrics: Vec<Endpoint>,
    scrape_interval: Duration,
    redis: Option<(RedisUrl, String)>,
}

impl Watch {
    fn from_args(a: &SweepArgs) -> anyhow::Result<Watch> {
        let queue_metrics_interval = match Duration::try_from_secs_f64(a.queue_metrics_interval) {
            Ok(d) if a.queue_metrics_interval > 0.0 && d <= crate::util::MAX_DURATION => d,
            _ => {
                return Err(BadInput(
                    "--queue-metrics-interval must be a number of seconds above 0 (n8n's \
                     N8N_METRICS_QUEUE_METRICS_INTERVAL, 20 by default)"
                        .into(),
                )
                .into())
            }
        };
        let metrics = a
            .metrics
            .iter()
            .map(|m| Endpoint::parse(m))
            .collect::<Result<Vec<_>, _>>()?;
        let scrape_interval = crate::util::parse_duration(&a.scrape_interval)
            .map_err(|e| BadInput(format!("--scrape-interval: {e}")))?;
        if scrape_interval < Duration::from_millis(100) {
            return Err(BadInput("--scrape-interval must be at least 100ms".into()).into());
        }
        let redis = a
            .redis
            .as_deref()
            .map(|u| RedisUrl::parse(u).map(|u| (u, a.bull_prefix.clone())))
            .transpose()?;
        Ok(Watch {
            queue_metrics_interval,
            metrics,
            scrape_interval,
            redis,
        })
    }
}

/// The results directory (`--out`, else `n8ncap-results/<UTC time>`; none with `--no-out`),
/// created before any request so a bad path fails at once.
fn results_dir(a: &SweepArgs) -> anyhow::Result<(Option<std::path::PathBuf>, Option<ResultsDir>)> {
    let out_dir = (!a.no_out).then(|| {
        a.out.clone().unwrap_or_else(|| {
            std::path::PathBuf::from("n8ncap-results")
                .join(crate::util::utc_compact(std::time::SystemTime::now()))
        })
    });
    let out = out_dir
        .as_deref()
        .map(|d| ResultsDir::create(d, a.force))
        .transpose()?;
    Ok((out_dir, out))
}

/// The run's executions left `new` or `running` in n8n's table: counted once what was in flight
/// had its answer; a Postgres still out of connections is tried again for a few seconds, a
/// silent one is not, and the whole count stops at [`LEFT_WITHIN`] or at Ctrl-C, said as not
/// counted (what the sweep measured is kept either way).
async fn left_behind(
    dsn: &str,
    held: Option<&crate::observe::postgres::Held>,
    started: std::time::SystemTime,
) -> crate::record::db::ExecutionsLeft {
    let since = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let not_counted = |why: String| crate::record::db::ExecutionsLeft {
        since_unix: since,
        not_counted: Some(why),
        ..Default::default()
    };
    let count = async {
        if let Some(h) = held {
            if let Some(Ok(l)) = h.executions_left(since, "").await {
                if l.not_counted.is_none() {
                    return l;
                }
            }
        }
        let mut last = None;
        for attempt in 0..4 {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            match crate::observe::postgres::executions_left(dsn, since, "").await {
                Ok(l) if l.not_counted.is_none() => return l,
                Ok(l) => last = Some(l),
                // Silent, not refusing: asking again only waits again.
                Err(e) => return not_counted(e.0),
            }
        }
        last.unwrap_or_default()
    };
    eprintln!(
        "n8ncap: counting the executions left in Postgres (at most {} s; Ctrl-C skips it)",
        LEFT_WITHIN.as_secs()
    );
    tokio::select! {
        l = tokio::time::timeout(LEFT_WITHIN, count) => l.unwrap_or_else(|_| not_counted(format!(
            "Postgres did not finish the count within {} s", LEFT_WITHIN.as_secs()
        ))),
        _ = tokio::signal::ctrl_c() => not_counted("skipped at Ctrl-C".into()),
    }
}

/// The most the count of executions left may take at the end of a sweep.
const LEFT_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// The sweep's observers: n8n's metrics, Redis and the containers, and beside them the
/// database — the logs of n8n's processes and Postgres' containers, whose lines name what n8n's
/// answers do not, and Postgres itself through the DSN.
async fn observers(
    (metrics, redis, interval): (Vec<Endpoint>, Option<(RedisUrl, String)>, Duration),
    docker: Option<(
        bollard::Docker,
        Vec<crate::observe::watch::WatchedContainer>,
    )>,
    dsn: Option<String>,
    timeline: Option<std::fs::File>,
) -> Option<Box<dyn crate::record::observation::Observer>> {
    let logged = docker.as_ref().map(|(d, containers)| {
        let n8n = [Role::Main, Role::Worker, Role::Webhook, Role::Postgres];
        let list = containers.iter().filter(|c| n8n.contains(&c.role));
        (
            d.clone(),
            list.map(|c| (c.id.clone(), c.name.clone())).collect(),
        )
    });
    let observer =
        crate::observe::watch::observer(metrics, docker, redis, interval, timeline).await;
    crate::observe::db_watch::wrap(
        observer,
        crate::observe::db_watch::DbSources {
            docker: logged,
            dsn,
            interval,
        },
    )
}

/// The DSN of `--postgres-env`/`--postgres-file`, read once: one that does not parse or answer
/// is bad input before any load (a Postgres out of connections is not: that is what is watched).
/// The DSN read and tried, and the connection held from now to the count of executions left at
/// the end, which n8n's full pools would refuse a new one (none when Postgres refuses it now).
async fn checked_dsn(
    a: &SweepArgs,
) -> Result<(Option<String>, Option<crate::observe::postgres::Held>), BadInput> {
    let dsn = crate::observe::postgres::dsn(a.postgres_env.as_deref(), a.postgres_file.as_deref())?;
    let Some(d) = &dsn else {
        return Ok((None, None));
    };
    crate::observe::postgres::read(d).await?;
    let held = crate::observe::postgres::hold(d).await;
    Ok((dsn, held))
}

#[cfg(test)]
mod tests {
    /// A Postgres that accepts and goes silent at the end of a sweep is asked once (it was asked
    /// four times, about 46 s with no word), and the count says it was not made.
    #[tokio::test]
    async fn a_silent_postgres_is_asked_once_for_the_executions_left() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(s);
            }
        });
        let dsn = format!("host=127.0.0.1 port={port} user=n8n dbname=n8n password=s3cr3t");
        let left = super::left_behind(&dsn, None, std::time::SystemTime::now()).await;
        let why = left.not_counted.expect("not counted");
        assert!(!why.contains("s3cr3t"), "{why}");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!((left.new, left.running), (0, 0));
    }
}
