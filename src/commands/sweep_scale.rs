//! `n8ncap sweep --workers 1,2,4 --scale-cmd 'COMMAND {workers}'` (or `--project P`): the same
//! sweep at each worker count, the workers scaled between by the operator's command
//! (`load::scaleout`) or, for a compose project, by n8ncap through the Docker API in
//! worker/runner pairs (`observe::docker_scale`), each count's
//! run saved as `wN/` in the results directory, the runs judged together (`diagnose::scale`)
//! into its scale.json file; the deployment returned to the count it had however the sweep ends.

use super::sweep::{sweep_once, Swept};
use crate::cli::SweepArgs;
use crate::diagnose::scale::judge_labelled;
use crate::error::{self, BadInput};
use crate::load::run::Ending;
use crate::load::scaleout::{self, ScaleCommand};
use crate::observe::bull;
use crate::observe::docker_scale::DockerPairs;
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

/// What changes the worker count between counts.
enum Scaler {
    /// The operator's command.
    Command(ScaleCommand),
    /// n8ncap itself, in the compose project's worker/runner pairs.
    Docker(Box<DockerPairs>),
}

impl Scaler {
    fn describe(&self, n: u32) -> String {
        match self {
            Scaler::Command(c) => c.for_count(n),
            Scaler::Docker(_) => format!("worker/runner pairs through the Docker API to {n}"),
        }
    }

    async fn scale_to(&mut self, n: u32, restore: bool) -> crate::record::scaling::ScaleStep {
        match self {
            Scaler::Command(c) => c.scale_to(n, restore).await,
            Scaler::Docker(d) => d.scale_to(n, restore).await,
        }
    }
}

pub(super) async fn run(a: SweepArgs) -> anyhow::Result<i32> {
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
        ended: "completed".into(),
        scaling: None,
    };
    let progress = format == Format::Table;
    let (judged, ending) = measure(&plan, &mut scaler, &mut book, &interrupt, progress).await?;
    if ending == Ended::Interrupted {
        book.ended = "interrupted".into();
    }
    let original = plan.original;
    eprintln!(
        "n8ncap: returning to {original} worker(s): {}",
        scaler.describe(original)
    );
    let restored = scaler.scale_to(original, true).await;
    let restore_failed = restored.failure.clone();
    book.steps.push(restored);
    if judged.len() >= 2 {
        book.scaling = judge_labelled(&judged, None).ok();
    }
    save(&plan.base, &book)?;
    crate::report::emit(&View(&book), format)?;
    eprintln!("results: {}", plan.base.display());
    if let Some(f) = restore_failed {
        eprintln!(
            "n8ncap: the deployment may not be at {original} workers: the command {f}; set it \
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Completed,
    Interrupted,
    Failed,
}

async fn checked(a: &SweepArgs) -> anyhow::Result<(Plan, Scaler)> {
    let counts = scaleout::counts(&a.settings.workers)?;
    let settle = crate::util::parse_duration(&a.scale_settle)
        .map_err(|e| BadInput(format!("--scale-settle: {e}")))?;
    let (scaler, original, original_source) =
        match (&a.scale_cmd, a.restore_workers, &a.project) {
            (Some(template), Some(original), _) => (
                Scaler::Command(ScaleCommand::parse(template, settle)?),
                original,
                "flag --restore-workers".to_string(),
            ),
            (None, _, Some(project)) => {
                let found = super::docker_watch(Some(project)).await?;
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
    // Every count's arguments checked before the first command runs.
    let per_count: Vec<SweepArgs> = counts.iter().map(|n| at_count(a, &base, *n)).collect();
    for c in &per_count {
        c.settings.settings()?;
        let dir = c.out.as_deref().unwrap_or(&base);
        if !a.force && dir.join("summary.json").exists() {
            return Err(BadInput(format!(
                "{} already holds a run: give another --out, or --force to overwrite it",
                dir.display()
            ))
            .into());
        }
    }
    let redis = a
        .redis
        .as_deref()
        .map(RedisUrl::parse)
        .transpose()
        .map_err(|e| BadInput(format!("--redis: {}", e.0)))?;
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
        eprintln!("n8ncap: scaling to {n} worker(s): {}", scaler.describe(*n));
        // The operator's command is stopped by a signal; n8ncap's own changes through the
        // Docker API finish (each bounded) so that the return knows every container it made.
        let mut step = match scaler {
            Scaler::Command(c) => tokio::select! {
                s = c.scale_to(*n, false) => s,
                _ = interrupt.clone().wait() => return Ok((judged, Ended::Interrupted)),
            },
            Scaler::Docker(_) => scaler.scale_to(*n, false).await,
        };
        // The operator's command may return before its workers run (`kubectl scale`): with the
        // queue's Redis, wait until they are connected to it.
        if let (Scaler::Command(_), Some(url), None) = (&*scaler, &plan.redis, &step.failure) {
            let prefix = &args.bull_prefix;
            let joined = tokio::select! {
                j = bull::wait_for_workers(url, prefix, *n, JOIN_LIMIT) => j,
                _ = interrupt.clone().wait() => return Ok((judged, Ended::Interrupted)),
            };
            eprintln!("n8ncap: {}", joined.words);
            step.queue_workers = joined.connected;
            step.joined_after_s = joined.after_s;
            step.joined = Some(joined.words);
        }
        if interrupt.fired() {
            book.steps.push(step);
            return Ok((judged, Ended::Interrupted));
        }
        let failure = step.failure.clone();
        book.steps.push(step);
        save(&plan.base, book)?;
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
                save(&plan.base, book)?;
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

/// The sweep's arguments at one count: that count as the run's worker setting, its own
/// results directory, no scaling of its own.
fn at_count(a: &SweepArgs, base: &Path, n: u32) -> SweepArgs {
    let mut c = a.clone();
    c.settings.workers = vec![n];
    c.out = Some(base.join(format!("w{n}")));
    c.scale_cmd = None;
    c
}

/// scale.json, and scale.html (the chart of ceiling against workers) once two counts are judged.
pub(super) fn save(base: &Path, book: &ScaleSweep) -> anyhow::Result<()> {
    use crate::record::dir::write_atomic;
    use crate::report::Rendered;
    write_atomic(&base.join("scale.json"), &serde_json::to_vec_pretty(book)?)?;
    if let Some(page) = crate::report::views::ScaleSweep(book).html() {
        write_atomic(&base.join("scale.html"), page.as_bytes())?;
    }
    Ok(())
}
