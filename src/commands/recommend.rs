//! `n8ncap recommend`: the settings that follow a saved run's verdict (or a break point given),
//! in a deployment's dialect.

use crate::cli::RecommendArgs;
use crate::error::{self, BadInput};
use crate::model::settings::Provenance;
use crate::model::settings::Sourced;
use crate::report::views::Recommend;
use crate::report::{Dialect, Format};

/// The deployment a plan is for, from `-f` or `--project`: its names.
async fn target(a: &RecommendArgs) -> anyhow::Result<crate::record::recommendation::PlanTarget> {
    if a.files.is_empty() && a.project.is_none() {
        return Ok(Default::default());
    }
    Ok(crate::topology::plan_target(&topology(a).await?))
}

/// The deployment read from `-f` files or a running `--project`.
async fn topology(a: &RecommendArgs) -> anyhow::Result<crate::topology::Topology> {
    topology_of(&a.files, a.project.as_deref()).await
}

/// The deployment from `-f` files, else from a running compose project.
pub(super) async fn topology_of(
    files: &[std::path::PathBuf],
    project: Option<&str>,
) -> anyhow::Result<crate::topology::Topology> {
    if !files.is_empty() {
        let (services, _) = crate::topology::load_files(files)?;
        return Ok(crate::topology::Topology::build(
            services.into_iter().map(|s| s.facts).collect(),
        ));
    }
    let p = project.unwrap_or_default();
    let docker = crate::observe::docker::connect().await?;
    let found = crate::observe::docker::discover_containers(&docker, Some(p), true).await?;
    if found.is_empty() {
        return Err(crate::observe::docker::no_such_project(&docker, p)
            .await
            .into());
    }
    Ok(crate::topology::Topology::build(
        found.into_iter().map(|(_, f)| f).collect(),
    ))
}

pub(super) async fn run(a: RecommendArgs) -> anyhow::Result<i32> {
    if let Some(rate) = a.target_rate {
        return for_target_rate(&a, rate);
    }
    if matches!(
        a.format,
        crate::cli::RecommendFormat::Keda | crate::cli::RecommendFormat::Hpa
    ) {
        return autoscaler(&a).await;
    }
    let flags = a.settings.settings()?;
    if a.break_point == Some(0) {
        return Err(BadInput("--break-point must be at least 1".into()).into());
    }
    let (format, dialect) = match (a.json, a.format.dialect()) {
        (false, Some(d)) => (Format::Table, d),
        _ => (Format::Json, Dialect::Compose),
    };
    let bp = a
        .break_point
        .map(|b| Sourced::new(b, Provenance::Flag("--break-point".into())));
    let mut memory = None;
    let rec = match (&a.input, bp) {
        (Some(path), bp) => {
            let mut summary = crate::record::dir::load_summary(path)?;
            let timeout = a.settings.task_request_timeout()?;
            let (d, _) = super::analyze(&mut summary, flags, timeout);
            memory = summary.memory_plan.clone();
            crate::recommend::recommend(&d, bp)
        }
        (None, Some(bp)) => crate::recommend::from_break_point(&flags, bp),
        (None, None) => return Err(BadInput(
            "give a results directory, or --break-point with --job-time (and the current limits)"
                .into(),
        )
        .into()),
    };
    // A runner killed at its memory limit: its memory plan is the recommendation.
    if let (Err(why), None) = (&rec, &memory) {
        return Err(why.clone().into());
    }
    let target = target(&a).await?;
    let view = Recommend {
        plan: rec.as_ref().map_err(|e| e.0.as_str()),
        memory: memory.as_ref(),
        dialect,
        target: &target,
    };
    if format == Format::Table {
        eprintln!("{}", view.prose());
    }
    crate::report::emit(&view, format)?;
    Ok(error::EXIT_OK)
}

/// `recommend SCALE_DIR --target-rate R`: the plan from the measured scaling of a scale sweep.
fn for_target_rate(a: &RecommendArgs, rate: f64) -> anyhow::Result<i32> {
    super::scale::check_target_rate(rate)?;
    let format = match (a.json, a.format) {
        (true, _) | (_, crate::cli::RecommendFormat::Json) => Format::Json,
        (_, crate::cli::RecommendFormat::Compose) => Format::Table,
        (_, f) => {
            return Err(BadInput(format!(
                "--target-rate prints its plan as text or --json; --format {f:?} snippets are \
                 made from one run's plan (recommend RUN --format …)"
            ))
            .into())
        }
    };
    let dir = a.input.as_deref().ok_or_else(|| {
        BadInput(
            "--target-rate plans from runs at several worker counts: give the directory of a \
             scale sweep (sweep --workers 1,2,4 --scale-cmd …)"
                .into(),
        )
    })?;
    let book = crate::record::dir::load_scale_sweep(dir)?;
    let mut judged = Vec::new();
    for run in &book.runs {
        // Each count's run beside scale.json, wherever the sweep was started from.
        let name = std::path::Path::new(run).file_name().unwrap_or_default();
        let path = dir.join(name);
        let mut summary = crate::record::dir::load_summary(&path)?;
        let (d, _) = super::analyze(
            &mut summary,
            crate::model::settings::Settings::default(),
            None,
        );
        judged.push((path.display().to_string(), d));
    }
    let result = crate::diagnose::scale::judge_labelled(&judged, Some(rate))?;
    crate::report::emit(&crate::report::views::Scale(&result), format)?;
    Ok(error::EXIT_OK)
}

/// `recommend RUN --format keda|hpa -f …`: an autoscaler for the deployment's workers from the
/// run's measured capacity, as YAML on stdout.
async fn autoscaler(a: &RecommendArgs) -> anyhow::Result<i32> {
    let words = if a.format == crate::cli::RecommendFormat::Keda {
        "keda"
    } else {
        "hpa"
    };
    let run = a.input.as_deref().ok_or_else(|| {
        BadInput(format!(
            "--format {words} makes the autoscaler from a measured capacity: give the run's \
             results directory (a sweep's, or diagnose … --out DIR)"
        ))
    })?;
    if a.files.is_empty() && a.project.is_none() {
        return Err(BadInput(format!(
            "--format {words} reads the worker Deployment, its Redis and its secrets from the \
             deployment: give -f with its manifests (or compose files), or --project"
        ))
        .into());
    }
    let t = topology(a).await?;
    let (plan, _) = plan_for(run, &t)?;
    let text = match a.format {
        crate::cli::RecommendFormat::Keda => crate::report::autoscaler::keda(&plan),
        _ => crate::report::autoscaler::hpa(&plan),
    };
    print!("{text}");
    Ok(error::EXIT_OK)
}

/// The autoscaler plan for the deployment's workers from what `run` measured, with the run's
/// diagnosis.
pub(super) fn plan_for(
    run: &std::path::Path,
    t: &crate::topology::Topology,
) -> anyhow::Result<(
    crate::record::autoscaling::AutoscalerPlan,
    crate::record::Diagnosis,
)> {
    let target = crate::topology::scale_target(t)?;
    let (budget, d) = super::audit::measured_run(run)?;
    let m = crate::recommend::autoscaler::Measured {
        diagnosis: &d,
        from: run.display().to_string(),
        job_p99_s: budget.job_p99_s,
        code_p99_s: budget.code_p99_s,
        base_per_s: base_load(run),
    };
    let plan = crate::recommend::autoscaler::plan(&m, target)?;
    Ok((plan, d))
}

/// The base load of a history's results directory: the median rate over its windows.
fn base_load(run: &std::path::Path) -> Option<f64> {
    let dir = if run.is_file() { run.parent()? } else { run };
    let text = std::fs::read_to_string(dir.join("history.json")).ok()?;
    let h: crate::record::history::History = serde_json::from_str(&text).ok()?;
    let mut rates: Vec<f64> = h
        .windows
        .iter()
        .filter(|w| w.covered_s > 0.0)
        .map(|w| w.throughput_per_s)
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    Some(rates[rates.len() / 2])
}
