//! `n8ncap sweep --workers 1,2,4 --scale-cmd 'COMMAND {workers}'` (or `--project P`): the same
//! sweep at each worker count, the workers scaled between by the operator's command
//! or, for a compose project, by n8ncap through the Docker API in worker/runner pairs (both
//! `actuate::scale`), each count's
//! run saved as `wN/` in the results directory, the runs judged together (`diagnose::scale`)
//! into its scale.json file; the deployment returned to the count it had however the sweep ends.

use super::{sweep_once, Swept};
use crate::actuate::command::{self, ScaleCommand};
use crate::actuate::docker_scale::DockerPairs;
use crate::actuate::scale::Scaler;
use crate::cli::SweepArgs;
use crate::diagnose::scale::judge_labelled;
use crate::error::{self, BadInput};
use crate::load::run::Ending;
use crate::observe::bull;
use crate::record::scaling::ScaleSweep;
use crate::report::views::ScaleSweep as View;
use crate::report::Format;
use crate::wire::resp::RedisUrl;
use std::path::{Path, PathBuf};

/// How long a scale sweep waits for the workers of a count to connect to the queue.
const JOIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What a scale sweep does, checked before the first command runs.
struct Plan {
    /// The queue's Redis (`--redis`), where workers joining are seen.
    redis: Option<RedisUrl>,
    counts: Vec<u32>,
    original: u32,
    original_source: String,
    base: PathBuf,
    per_count: Vec<SweepArgs>,
}

pub(in crate::commands) async fn run(a: SweepArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a.output.format::<View>("sweep --workers")?;
    let (plan, mut scaler) = checked(&a).await?;
    std::fs::create_dir_all(&plan.base)
        .map_err(|e| BadInput(format!("{}: cannot create it: {e}", plan.base.display())))?;
    let mut book = ScaleSweep {
        original_workers: plan.original,
        original_source: plan.original_source.clone(),
        steps: Vec::new(),
        runs: Vec::new(),
        // Until the sweep ends: a scale.json read while it runs, or left by a kill, says so.
        ended: "running (or killed before it ended)".into(),
        scaling: None,
    };
    let progress = format == Format::Table;
    let (judged, ending) = measure(&plan, &mut scaler, &mut book, &interrupt, progress).await?;
    match ending {
        Ended::Interrupted => book.ended = "interrupted".into(),
        Ended::Completed => book.ended = "completed".into(),
        Ended::Failed => {}
    }
    let original = plan.original;
    eprintln!(
        "n8ncap: returning to {original} worker(s): {}",
        scaler.describe(original)
    );
    let mut restored = scaler.scale_to(original, true, None).await;
    // A queue no join could read (another Redis or prefix, a silent server) is not read again.
    let unobservable = book
        .steps
        .iter()
        .any(|s| s.joined.is_some() && s.queue_workers.is_none());
    if restored.failure.is_none() && !unobservable {
        verify_return(&plan, &scaler, &mut restored).await;
    }
    let restore_failed = restored.failure.clone();
    book.steps.push(restored);
    if judged.len() >= 2 {
        book.scaling = judge_labelled(&judged, None).ok();
    }
    crate::report::views::write_scale_sweep(&plan.base, &book)?;
    crate::report::emit(&View(&book), format)?;
    eprintln!("results: {}", plan.base.display());
    if let Some(f) = restore_failed {
        eprintln!(
            "n8ncap: the deployment may not be at {original} workers: the return {f}; set it \
             back by hand"
        );
        return Ok(error::EXIT_FAILED);
    }
    Ok(match ending {
        Ended::Interrupted => interrupt.exit_code(),
        Ended::Failed => error::EXIT_FAILED,
        Ended::Completed => error::EXIT_OK,
    })
}

/// The return read back where it can be: Bull's worker clients in the queue's Redis after the
/// operator's command (`--redis`), the project's containers after n8ncap's own pairs. A count
/// other than the original is the return's failure; not observable is said in the step.
async fn verify_return(plan: &Plan, scaler: &Scaler, step: &mut crate::record::scaling::ScaleStep) {
    let n = plan.original;
    match scaler {
        Scaler::Command(_) => {
            let Some(url) = &plan.redis else { return };
            let prefix = plan
                .per_count
                .first()
                .map_or("bull", |a| a.bull_prefix.as_str());
            let seen = bull::wait_for_exactly(url, prefix, n, RETURN_LIMIT).await;
            eprintln!("n8ncap: after the return, {}", seen.words);
            if let Some(k) = seen.connected.filter(|k| *k != n) {
                step.failure = Some(format!(
                    "was read back from the queue: {k} worker(s) connected, not {n}"
                ));
            }
            step.queue_workers = seen.connected;
            step.joined_after_s = seen.after_s;
            step.joined = Some(seen.words);
        }
        Scaler::Docker(d) => match d.read_back().await {
            Ok((running, left)) => {
                step.queue_workers = Some(running);
                step.joined = Some(format!(
                    "read back through the Docker API: {running} of the project's worker(s) running{}",
                    if left.is_empty() {
                        String::new()
                    } else {
                        format!(", and still there: {}", left.join(", "))
                    }
                ));
                if running != n || !left.is_empty() {
                    step.failure = Some(format!(
                        "was read back through the Docker API: {running} original worker(s) \
                         running, not {n}{}",
                        if left.is_empty() {
                            String::new()
                        } else {
                            format!(", and {} made by the sweep remain", left.join(", "))
                        }
                    ));
                }
            }
            Err(e) => step.joined = Some(format!("the return could not be read back: {e:#}")),
        },
    }
}

/// The workers running now, for a `--scale-cmd` sweep given no `--restore-workers`: Bull's
/// worker clients in the queue's Redis (`--redis`). Without it, or when none is seen, the
/// refusal says what to pass.
async fn running_now(redis: Option<&RedisUrl>, prefix: &str) -> anyhow::Result<(u32, String)> {
    let ask = || {
        BadInput(
            "--scale-cmd changes the worker count: n8ncap returns to the count running now when \
             the sweep ends, is stopped or fails — give --restore-workers N (the workers running \
             now), or --redis URL (the queue's Redis) to have them counted"
                .into(),
        )
    };
    let Some(url) = redis else {
        return Err(ask().into());
    };
    let seen = async {
        let mut c = crate::wire::resp::Conn::open(url).await?;
        bull::workers_connected(&mut c, prefix).await
    };
    match seen.await {
        Ok(n) if n >= 1 => Ok((
            n,
            format!(
                "{n} worker process(es) connected to the queue before the sweep (Bull's worker \
                 clients in Redis' CLIENT LIST)"
            ),
        )),
        Ok(_) => Err(BadInput(format!(
            "{}: no worker is connected to the queue under --bull-prefix {prefix:?} (is --redis \
             the queue's Redis?), so the count to return to is not known: give \
             --restore-workers N",
            url.shown()
        ))
        .into()),
        Err(e) => Err(BadInput(format!(
            "{}: the workers could not be counted ({e:#}): give --restore-workers N",
            url.shown()
        ))
        .into()),
    }
}

/// How long the return waits for the queue to show the original count (a worker leaving
/// finishes its jobs first: n8n's N8N_GRACEFUL_SHUTDOWN_TIMEOUT is 30 s).
const RETURN_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Completed,
    Interrupted,
    Failed,
}

/// The sweep at each count: as given, or — with no levels given — searched with `--adaptive`:
/// the default profile's fixed levels stop below what the larger counts hold.
fn with_levels<'a>(a: &'a SweepArgs, counts: &[u32]) -> std::borrow::Cow<'a, SweepArgs> {
    // Levels given, or a profile asked for (even the default's name, given with -p).
    if a.adaptive || a.vus.is_some() || a.rates.is_some() || a.profile.is_some() {
        return std::borrow::Cow::Borrowed(a);
    }
    eprintln!(
        "n8ncap: no levels given: each count is searched with --adaptive (the default profile's \
         fixed levels would stop below what {} workers hold); give --vus or -p to sweep fixed \
         levels",
        counts.last().copied().unwrap_or(1)
    );
    let mut c = a.clone();
    c.adaptive = true;
    std::borrow::Cow::Owned(c)
}

/// What scales the workers — the operator's command or the project's pairs through the Docker
/// API — with the count to return to and where it was read.
async fn scaler(
    a: &SweepArgs,
    settle: std::time::Duration,
    redis: Option<&RedisUrl>,
) -> anyhow::Result<(Scaler, u32, String)> {
    let chosen =
        match (&a.scale_cmd, a.restore_workers, &a.project) {
            (Some(template), Some(original), _) => (
                Scaler::Command(ScaleCommand::parse(template, settle)?),
                original,
                "flag --restore-workers".to_string(),
            ),
            (Some(template), None, _) => {
                let command = ScaleCommand::parse(template, settle)?;
                let (n, how) = running_now(redis, &a.bull_prefix).await?;
                (Scaler::Command(command), n, how)
            }
            (None, _, Some(project)) => {
                let found = crate::observe::watch::discover::watch(Some(project)).await?;
                let pairs =
                    DockerPairs::discover(found.docker, &found.topology, project, settle).await?;
                let n = pairs.original_count();
                if let Some(r) = a.restore_workers.filter(|r| *r != n) {
                    return Err(BadInput(format!(
                    "--restore-workers {r}: compose project {} runs {n} worker(s), the count a \
                     sweep through the Docker API returns to; drop --restore-workers",
                    crate::util::escape_control(project)
                ))
                    .into());
                }
                (
                    Scaler::Docker(Box::new(pairs)),
                    n,
                    "the project's running workers (Docker API)".to_string(),
                )
            }
            _ => return Err(BadInput(
                "--workers with several counts scales the workers between them: give --project P \
                 (a compose project: n8ncap adds and removes worker/runner pairs through the \
                 Docker API), or --scale-cmd 'COMMAND {workers}' and --restore-workers N (the \
                 count running now) for any other deployment"
                    .into(),
            )
            .into()),
        };
    Ok(chosen)
}

async fn checked(a: &SweepArgs) -> anyhow::Result<(Plan, Scaler)> {
    let counts = command::counts(&a.settings.workers)?;
    let searched = with_levels(a, &counts);
    let a = searched.as_ref();
    let settle = crate::util::parse_duration(&a.scale_settle)
        .map_err(|e| BadInput(format!("--scale-settle: {e}")))?;
    let redis = a
        .redis
        .as_deref()
        .map(RedisUrl::parse)
        .transpose()
        .map_err(|e| BadInput(format!("--redis: {}", e.0)))?;
    let (scaler, original, original_source) = scaler(a, settle, redis.as_ref()).await?;
    if a.no_out {
        return Err(BadInput(
            "a scale sweep saves each count's run (OUT/w1, OUT/w2, …) to judge them together: \
             drop --no-out"
                .into(),
        )
        .into());
    }
    let base = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("n8ncap-results").join(crate::util::utc_compact(std::time::SystemTime::now()))
    });
    let per_count = per_count(a, &counts, &base)?;
    Ok((
        Plan {
            redis,
            counts,
            original,
            original_source,
            base,
            per_count,
        },
        scaler,
    ))
}

/// Scales to `n` workers. The operator's command is ended by a signal, its whole process
/// group before the return runs; n8ncap's own changes through the Docker API finish (each
/// bounded) so that the return knows every container it made. The operator's command may return
/// before its workers run (`kubectl scale`): with the queue's Redis, this waits until they are
/// connected to it. None when interrupted while waiting.
async fn scale_step(
    plan: &Plan,
    scaler: &mut Scaler,
    n: u32,
    prefix: &str,
    interrupt: &crate::util::Interrupt,
) -> Option<crate::record::scaling::ScaleStep> {
    eprintln!("n8ncap: scaling to {n} worker(s): {}", scaler.describe(n));
    let mut step = scaler.scale_to(n, false, Some(interrupt)).await;
    if let (Scaler::Command(_), Some(url), None) = (&*scaler, &plan.redis, &step.failure) {
        let joined = tokio::select! {
            j = bull::wait_for_workers(url, prefix, n, JOIN_LIMIT) => j,
            _ = interrupt.clone().wait() => return None,
        };
        eprintln!("n8ncap: {}", joined.words);
        step.queue_workers = joined.connected;
        step.joined_after_s = joined.after_s;
        step.joined = Some(joined.words);
    }
    Some(step)
}

/// Each count in turn: scaled to, then swept; stops at a failed command or sweep, or a signal.
async fn measure(
    plan: &Plan,
    scaler: &mut Scaler,
    book: &mut ScaleSweep,
    interrupt: &crate::util::Interrupt,
    progress: bool,
) -> anyhow::Result<(Vec<(String, crate::record::Diagnosis)>, Ended)> {
    let mut judged = Vec::new();
    for (n, args) in plan.counts.iter().zip(&plan.per_count) {
        let Some(step) = scale_step(plan, scaler, *n, &args.bull_prefix, interrupt).await else {
            return Ok((judged, Ended::Interrupted));
        };
        if interrupt.fired() {
            book.steps.push(step);
            return Ok((judged, Ended::Interrupted));
        }
        let failure = step.failure.clone();
        book.steps.push(step);
        crate::report::views::write_scale_sweep(&plan.base, book)?;
        if let Some(f) = failure {
            book.ended = format!("stopped: the scale command to {n} workers {f}");
            return Ok((judged, Ended::Failed));
        }
        let mut args = args.clone();
        if args.adaptive {
            args.head_start = head_start(judged.last().map(|(_, d)| d), *n);
        }
        match sweep_once(&args, interrupt, progress).await {
            Ok(Swept {
                diagnosis,
                ending,
                out_dir,
                ..
            }) => {
                let label = out_dir.unwrap_or_default().display().to_string();
                book.runs.push(label.clone());
                judged.push((label, diagnosis));
                crate::report::views::write_scale_sweep(&plan.base, book)?;
                if ending == Ending::Interrupted {
                    return Ok((judged, Ended::Interrupted));
                }
            }
            Err(e) => {
                eprintln!("n8ncap: {e:#}");
                book.ended = format!("stopped: the sweep at {n} workers failed: {e:#}");
                return Ok((judged, Ended::Failed));
            }
        }
    }
    Ok((judged, Ended::Completed))
}

/// Where the adaptive search at `n` workers starts after its baseline: the previous count's
/// knee scaled to `n` workers, and half again so that the level is past the ceiling if the
/// workers scale linearly (the search then brackets the knee from above by Little's law).
fn head_start(previous: Option<&crate::record::Diagnosis>, n: u32) -> Option<u32> {
    let d = previous?;
    let before = d.settings.workers.as_ref()?.value;
    let knee = d.knee.as_ref()?.in_flight;
    if before == 0 || !knee.is_finite() || knee < 1.0 {
        return None;
    }
    Some((1.5 * knee * f64::from(n) / f64::from(before)).ceil() as u32)
}

/// Every count's arguments, checked before the first command runs.
fn per_count(a: &SweepArgs, counts: &[u32], base: &Path) -> anyhow::Result<Vec<SweepArgs>> {
    let per_count: Vec<SweepArgs> = counts
        .iter()
        .map(|n| at_count(a, base, *n))
        .collect::<anyhow::Result<_>>()?;
    for c in &per_count {
        c.settings.settings()?;
        let dir = c.out.as_deref().unwrap_or(base);
        if !a.force && dir.join(crate::record::dir::SUMMARY).exists() {
            return Err(BadInput(format!(
                "{} already holds a run: give another --out, or --force to overwrite it",
                dir.display()
            ))
            .into());
        }
    }
    Ok(per_count)
}

/// The sweep's arguments at one count: that count as the run's worker setting, its own
/// results directory, no scaling of its own.
fn at_count(a: &SweepArgs, base: &Path, n: u32) -> anyhow::Result<SweepArgs> {
    let mut c = a.clone();
    c.settings.workers = vec![n];
    c.out = Some(crate::record::dir::count_dir(base, n)?);
    c.scale_cmd = None;
    Ok(c)
}
