//! `n8ncap grafana`: an importable dashboard for n8n queue mode; with `--run`, the run's
//! measured ceiling and operating point drawn on it, and the capacity alerts' states.

use crate::error;

pub(super) async fn run(
    datasource: Option<&str>,
    run: Option<&std::path::Path>,
) -> anyhow::Result<i32> {
    let measured = match run {
        Some(path) => {
            let (_, d, _) = super::input::rejudged(path).await?;
            let ceiling = d.measured_ceiling.as_ref().map(|c| c.mean).ok_or_else(|| {
                crate::error::BadInput(format!(
                    "--run {}: the run reached no ceiling, so there is no line to draw: give a \
                     run that saturates (sweep --profile breakpoint)",
                    path.display()
                ))
            })?;
            Some(crate::report::grafana::CeilingLines {
                ceiling,
                from: path.display().to_string(),
            })
        }
        None => None,
    };
    crate::report::json::print(&crate::report::grafana::dashboard(
        datasource,
        measured.as_ref(),
    ))?;
    Ok(error::EXIT_OK)
}
