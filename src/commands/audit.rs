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
    let alerts = alerts(&a)?;
    let measured = match a.run.as_deref() {
        Some(run) => Some(measured(run).await?),
        None => None,
    };
    let opts = audit::Options {
        upgrade: a.upgrade,
        measured,
        postgres,
        alerts,
    };
    let report = if a.live {
        live(&a, &opts).await?
    } else if a.files.is_empty() && !opts.alerts.is_empty() && opts.postgres.is_none() {
        // Rules alone: the alerts against the run, no deployment read.
        let input = format!(
            "alerting rules ({} file(s)) against {}, no deployment read",
            a.rules.len(),
            a.run
                .as_deref()
                .map(|r| r.display().to_string())
                .unwrap_or_default()
        );
        audit::audit_for(Vec::new(), &Default::default(), input, &opts)
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

/// The alerting rules `--rules` names, read; they are judged against `--run`'s capacity.
fn alerts(a: &AuditArgs) -> anyhow::Result<Vec<crate::topology::alert_rules::ExistingAlert>> {
    if !a.rules.is_empty() && a.run.is_none() {
        return Err(error::BadInput(
            "--rules needs --run DIR: an alert's threshold is judged against the capacity a run measured (a sweep's results directory, or diagnose --prometheus … --out DIR)"
                .into(),
        )
        .into());
    }
    let mut alerts = Vec::new();
    for f in &a.rules {
        let (text, shown) = crate::topology::k8s::read_input(f)?;
        alerts.extend(crate::topology::alert_rules::read(
            &shown.display().to_string(),
            &text,
        )?);
    }
    Ok(alerts)
}

/// `audit --live`: the containers Docker runs (stopped ones too: a runner whose last exit was
/// an OOM kill is the finding); a project that matches none is refused, not a clean report.
async fn live(a: &AuditArgs, opts: &audit::Options) -> anyhow::Result<audit::Report> {
    let docker = crate::observe::docker::connect().await?;
    let found =
        crate::observe::docker::discover_containers(&docker, a.project.as_deref(), true).await?;
    if let (Some(p), true) = (a.project.as_deref(), found.is_empty()) {
        return Err(crate::observe::docker::no_such_project(&docker, p)
            .await
            .into());
    }
    Ok(audit::audit_for(
        found.into_iter().map(|(_, f)| f).collect(),
        &Default::default(),
        format!(
            "live: Docker{}",
            a.project
                .as_deref()
                .map(|p| format!(", project {p}"))
                .unwrap_or_default()
        ),
        opts,
    ))
}

/// What a saved run measured that the time budget needs (`recommend::operating_point`).
async fn measured(path: &std::path::Path) -> anyhow::Result<crate::model::OperatingPoint> {
    Ok(super::input::judged_run(path).await?.point)
}
