//! `n8ncap audit`: the rules over compose files, Kubernetes manifests or live containers.

use crate::audit;
use crate::cli::AuditArgs;
use crate::error;

pub(super) async fn run(a: AuditArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<audit::Report>("audit")?;
    let report = if a.live {
        let docker = crate::observe::docker::connect().await?;
        // Stopped containers too: a runner whose last exit was an OOM kill is the finding.
        let found =
            crate::observe::docker::discover_containers(&docker, a.project.as_deref(), true)
                .await?;
        audit::audit(
            found.into_iter().map(|(_, f)| f).collect(),
            &Default::default(),
            format!(
                "live: Docker{}",
                a.project
                    .as_deref()
                    .map(|p| format!(", project {p}"))
                    .unwrap_or_default()
            ),
        )
    } else {
        let (services, input) = crate::topology::load_files(&a.files)?;
        let locations = services
            .iter()
            .map(|s| (s.facts.name.clone(), (s.file.clone(), s.line)))
            .collect();
        audit::audit(
            services.into_iter().map(|s| s.facts).collect(),
            &locations,
            input,
        )
    };
    crate::report::emit(&report, format)?;
    Ok(if report.has_errors() {
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}
