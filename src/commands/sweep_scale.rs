//! `n8ncap sweep --workers 1,2,4 --scale-cmd 'COMMAND {workers}'`: the same sweep at each worker
//! count, the workers scaled between by the operator's command (`load::scaleout`), each count's
//! run saved as `wN/` in the results directory, the runs judged together (`diagnose::scale`)
//! into its scale.json file; the deployment returned to the count it had however the sweep ends.

use super::sweep::{sweep_once, Swept};
use crate::cli::SweepArgs;
use crate::diagnose::scale::judge_labelled;
use crate::error::{self, BadInput};
use crate::load::run::Ending;
use crate::load::scaleout::{self, ScaleCommand};
use crate::record::scaling::ScaleSweep;
use crate::report::views::ScaleSweep as View;
use crate::report::Format;
use std::path::{Path, PathBuf};

/// What a scale sweep does, checked before the first command runs.
struct Plan {
    counts: Vec<u32>,
    cmd: ScaleCommand,
    original: u32,
    base: PathBuf,
    per_count: Vec<SweepArgs>,
}

pub(super) async fn run(a: SweepArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let format = a.output.format::<View>("sweep --workers")?;
    let plan = checked(&a)?;
    std::fs::create_dir_all(&plan.base)
        .map_err(|e| BadInput(format!("{}: cannot create it: {e}", plan.base.display())))?;
    let mut book = ScaleSweep {
        original_workers: plan.original,
        original_source: "flag --restore-workers".into(),
        steps: Vec::new(),
        runs: Vec::new(),
        ended: "completed".into(),
        scaling: None,
    };
    let (judged, ending) = measure(&plan, &mut book, &interrupt, format == Format::Table).await?;
    if ending == Ended::Interrupted {
        book.ended = "interrupted".into();
    }
    let original = plan.original;
    eprintln!(
        "n8ncap: returning to {original} worker(s): {}",
        plan.cmd.for_count(original)
    );
    let restored = plan.cmd.scale_to(original, true).await;
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

fn checked(a: &SweepArgs) -> anyhow::Result<Plan> {
    let counts = scaleout::counts(&a.settings.workers)?;
    let (Some(template), Some(original)) = (&a.scale_cmd, a.restore_workers) else {
        return Err(BadInput(
            "--workers with several counts scales the workers between them: give --scale-cmd \
             'COMMAND {workers}' and --restore-workers N (the count running now). n8ncap does \
             not scale a compose project itself yet; for one, a command that starts worker and \
             runner pairs, each runner's N8N_RUNNERS_TASK_BROKER_URI at its own worker"
                .into(),
        )
        .into());
    };
    let settle = crate::util::parse_duration(&a.scale_settle)
        .map_err(|e| BadInput(format!("--scale-settle: {e}")))?;
    let cmd = ScaleCommand::parse(template, settle)?;
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
    Ok(Plan {
        counts,
        cmd,
        original,
        base,
        per_count,
    })
}

/// Each count in turn: scaled to, then swept; stops at a failed command or sweep, or a signal.
async fn measure(
    plan: &Plan,
    book: &mut ScaleSweep,
    interrupt: &crate::util::Interrupt,
    progress: bool,
) -> anyhow::Result<(Vec<(String, crate::record::Diagnosis)>, Ended)> {
    let mut judged = Vec::new();
    for (n, args) in plan.counts.iter().zip(&plan.per_count) {
        eprintln!(
            "n8ncap: scaling to {n} worker(s): {}",
            plan.cmd.for_count(*n)
        );
        let step = tokio::select! {
            s = plan.cmd.scale_to(*n, false) => s,
            _ = interrupt.clone().wait() => return Ok((judged, Ended::Interrupted)),
        };
        let failure = step.failure.clone();
        book.steps.push(step);
        save(&plan.base, book)?;
        if let Some(f) = failure {
            book.ended = format!("stopped: the scale command to {n} workers {f}");
            return Ok((judged, Ended::Failed));
        }
        match sweep_once(args, interrupt, progress).await {
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

/// The sweep's arguments at one count: that count as the run's worker setting, its own
/// results directory, no scaling of its own.
fn at_count(a: &SweepArgs, base: &Path, n: u32) -> SweepArgs {
    let mut c = a.clone();
    c.settings.workers = vec![n];
    c.out = Some(base.join(format!("w{n}")));
    c.scale_cmd = None;
    c
}

fn save(base: &Path, book: &ScaleSweep) -> anyhow::Result<()> {
    crate::record::dir::write_atomic(&base.join("scale.json"), &serde_json::to_vec_pretty(book)?)?;
    Ok(())
}
