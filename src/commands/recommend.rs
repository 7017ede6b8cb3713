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
    if !a.files.is_empty() {
        let (services, _) = crate::topology::load_files(&a.files)?;
        let t = crate::topology::Topology::build(services.into_iter().map(|s| s.facts).collect());
        return Ok(crate::topology::plan_target(&t));
    }
    let Some(p) = a.project.as_deref() else {
        return Ok(Default::default());
    };
    let docker = crate::observe::docker::connect().await?;
    let found = crate::observe::docker::discover_containers(&docker, Some(p), true).await?;
    if found.is_empty() {
        return Err(crate::observe::docker::no_such_project(&docker, p)
            .await
            .into());
    }
    let t = crate::topology::Topology::build(found.into_iter().map(|(_, f)| f).collect());
    Ok(crate::topology::plan_target(&t))
}

pub(super) async fn run(a: RecommendArgs) -> anyhow::Result<i32> {
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
