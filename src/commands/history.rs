//! `n8ncap diagnose --prometheus`: production history from a Prometheus-compatible API, its
//! busy windows judged like a sweep's stages, without a load test.

use crate::cli::DiagnoseArgs;
use crate::error;
use crate::record::evidence::Source;
use crate::report::views;

/// `diagnose --prometheus`: the range's busy windows judged like a sweep, without a load test.
pub(super) async fn run(a: DiagnoseArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<views::History>("diagnose --prometheus")?;
    let h = &a.history;
    let mut flags = a.settings.settings()?;
    if a.docker || a.project.is_some() {
        match super::docker_watch(a.project.as_deref()).await {
            Ok(w) => flags = flags.or(w.topology.model_settings()),
            Err(e) => eprintln!("n8ncap: {e:#}; diagnosing without container settings"),
        }
    }
    let range = super::input::range(h, flags.clone())?;
    let mut ev = super::input::read(h, range.evidence()).await?;
    let timeout_s = a.settings.task_request_timeout()?;
    // The settings are recorded with the windows, so the saved run is judged again the same way.
    let (d, rec) = crate::recommend::analyze::judged(&mut ev, flags, timeout_s);
    let Some(hist) = ev.windows else {
        anyhow::bail!("{}: the read gave no windows", ev.summary.profile);
    };
    let summary = ev.summary;
    if let Some(dir) = &h.out {
        crate::record::dir::write_summary(dir, &summary)?;
        crate::record::dir::write_atomic(
            &dir.join("history.json"),
            &serde_json::to_vec_pretty(&hist)?,
        )?;
        crate::report::html::write(dir, &summary)?;
    }
    let view = views::History {
        history: &hist,
        diagnosis: &d,
        recommendation: rec.as_ref().ok(),
        stages: &summary.stages,
        why_not: rec.as_ref().err().map(|e| e.0.as_str()),
    };
    crate::report::emit(&view, format)?;
    Ok(error::EXIT_OK)
}
