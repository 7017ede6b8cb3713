//! `n8ncap grafana`: an importable dashboard for n8n queue mode.

use crate::error;

pub(super) fn run(datasource: Option<&str>) -> anyhow::Result<i32> {
    crate::report::json::print(&crate::report::grafana::dashboard(datasource))?;
    Ok(error::EXIT_OK)
}
