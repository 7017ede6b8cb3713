//! `n8ncap audit`: the rules over compose files, Kubernetes manifests or live containers.

use crate::audit;
use crate::cli::AuditArgs;
use crate::error;

pub(super) async fn run(a: AuditArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<audit::Report>("audit")?;
    let postgres =
        match crate::observe::postgres::dsn(a.postgres_env.as_deref(), a.postgres_file.as_deref())?
        {
            Some(dsn) => Some(crate::observe::postgres::read(&dsn).await?),
            None => None,
        };
    let opts = audit::Options {
        upgrade: a.upgrade,
        measured: a.run.as_deref().map(measured).transpose()?,
        postgres,
    };
    let report = if a.live {
        let docker = crate::observe::docker::connect().await?;
        // Stopped containers too: a runner whose last exit was an OOM kill is the finding.
        let found =
            crate::observe::docker::discover_containers(&docker, a.project.as_deref(), true)
                .await?;
        if let (Some(p), true) = (a.project.as_deref(), found.is_empty()) {
            // A typo'd project audits nothing: refused, not a clean report.
            return Err(crate::observe::docker::no_such_project(&docker, p)
                .await
                .into());
        }
        audit::audit_for(
            found.into_iter().map(|(_, f)| f).collect(),
            &Default::default(),
            format!(
                "live: Docker{}",
                a.project
                    .as_deref()
                    .map(|p| format!(", project {p}"))
                    .unwrap_or_default()
            ),
            &opts,
        )
    } else if let (true, Some(pg)) = (a.files.is_empty(), &opts.postgres) {
        // A DSN alone: the database of a deployment n8ncap cannot read (plain processes).
        let input = format!("Postgres at {}", pg.at);
        audit::audit_for(Vec::new(), &Default::default(), input, &opts)
    } else {
        let (services, input) = crate::topology::load_files(&a.files)?;
        let locations = services
            .iter()
            .map(|s| (s.facts.name.clone(), (s.file.clone(), s.line)))
            .collect();
        audit::audit_for(
            services.into_iter().map(|s| s.facts).collect(),
            &locations,
            input,
            &opts,
        )
    };
    crate::report::emit(&report, format)?;
    Ok(if report.has_errors() {
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}

/// A saved run (results directory or summary.json, a `diagnose --prometheus --out` directory
/// included), else k6's `--out json`/`--out csv` file of the deployment, read as `diagnose
/// --k6-json` reads it.
fn saved_or_k6(path: &std::path::Path) -> anyhow::Result<crate::record::Summary> {
    let saved = crate::record::dir::load_summary(path);
    let is_file = path.is_file() && path.file_name().is_some_and(|n| n != "summary.json");
    match saved {
        Ok(s) => Ok(s),
        Err(e) if is_file => match crate::load::k6series::from_json(path, None) {
            Ok(stages) => Ok(crate::load::k6::summary(
                stages,
                &path.display().to_string(),
                None,
            )?),
            Err(k6) => Err(error::BadInput(format!(
                "--run {}: neither a saved run ({e:#}) nor a k6 output ({k6:#}): give a results directory, its summary.json, or k6's --out json/csv file",
                path.display()
            ))
            .into()),
        },
        Err(e) => Err(e),
    }
}

/// What a saved run measured that the time budget needs: the longest p99 response of a valid
/// level below the ceiling (an execution's time when nothing waits), its Code part when the run
/// knows it, and the workers' worst event-loop lag.
pub(super) fn measured(path: &std::path::Path) -> anyhow::Result<audit::Measured> {
    measured_run(path).map(|(m, _)| m)
}

/// [`measured`] and the run's diagnosis, from one reading and one analysis of the run.
pub(super) fn measured_run(
    path: &std::path::Path,
) -> anyhow::Result<(audit::Measured, crate::record::Diagnosis)> {
    let mut summary = saved_or_k6(path)?;
    let (d, _) = super::analyze(
        &mut summary,
        crate::model::settings::Settings::default(),
        None,
    );
    let below: Vec<&crate::record::diagnosis::Level> = d
        .levels
        .iter()
        .filter(|l| l.valid && !l.saturated())
        .collect();
    let p99 = |l: &crate::record::diagnosis::Level| {
        l.stages
            .iter()
            .filter_map(|i| summary.stages.get(*i))
            .filter_map(|s| s.latency.as_ref().map(|l| l.p99_ms / 1000.0))
            .fold(0.0, f64::max)
    };
    let job_p99_s = below.iter().map(|l| p99(l)).fold(0.0, f64::max);
    if job_p99_s <= 0.0 || !job_p99_s.is_finite() {
        return Err(error::BadInput(format!(
            "--run {}: no valid level below the ceiling with a response time: the run cannot say how long a job takes",
            path.display()
        ))
        .into());
    }
    // The Code share of the job, from what the run knows of its Code time and job time.
    let code_p99_s = d
        .settings
        .code_time
        .as_ref()
        .zip(d.settings.job_time.as_ref())
        .filter(|(_, j)| j.value > 0.0)
        .map(|(c, j)| job_p99_s * (c.value / j.value).min(1.0));
    let worker_lag_max_s = summary
        .stages
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.role == Some(crate::record::Role::Worker) && e.samples > 0)
        .map(|e| e.eventloop_lag_max_s)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .reduce(f64::max);
    // From Prometheus history a level's response is n8n's mean execution time: the p99 is
    // longer, so the budget is checked against a figure that can only be short.
    let from = if summary.stages.iter().any(|s| s.history.is_some()) {
        format!(
            "{} (Prometheus history: n8n's mean execution time, the p99 is longer)",
            path.display()
        )
    } else {
        path.display().to_string()
    };
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let per_worker = d
        .measured_ceiling
        .as_ref()
        .map(|c| c.mean / f64::from(workers))
        .zip(d.service_time.as_ref().map(|s| s.value))
        .filter(|(x, s)| x.is_finite() && *x > 0.0 && s.is_finite() && *s > 0.0);
    let useful_workers =
        per_worker.and_then(|(x, _)| crate::recommend::autoscaler::useful_workers(&d, x));
    let m = audit::Measured {
        from,
        job_p99_s,
        code_p99_s,
        worker_lag_max_s,
        per_worker,
        useful_workers,
    };
    Ok((m, d))
}
