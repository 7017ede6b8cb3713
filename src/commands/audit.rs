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
        if let (Some(p), true) = (a.project.as_deref(), found.is_empty()) {
            // A typo'd project audits nothing: refused, not a clean report.
            return Err(crate::error::BadInput(format!(
                "--project {}: no container of that compose project (label com.docker.compose.project); check the name with `docker compose ls -a`",
                crate::util::escape_control(p)
            ))
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
            a.upgrade,
        )
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
            a.upgrade,
        )
    };
    crate::report::emit(&report, format)?;
    Ok(if report.has_errors() {
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}
