//! `n8ncap diagnose --prometheus`: production history from a Prometheus-compatible API, its
//! busy windows judged like a sweep's stages, without a load test.

use crate::cli::DiagnoseArgs;
use crate::error;
use crate::report::views;

/// `diagnose --prometheus`: the range's busy windows judged like a sweep, without a load test;
/// a range where the workers changed, each count from its own windows (never pooled), the
/// judgement shown that of the most workers that reached a ceiling.
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
    let read = super::input::read(h, range.history()).await?;
    let parts = crate::observe::history::by_workers(&read, &range.flags, &range.title());
    let mut whole = crate::observe::history::evidence(read, flags.clone(), &range.title());
    let timeout_s = a.settings.task_request_timeout()?;
    // The settings are recorded with the windows, so the saved run is judged again the same way.
    let (mut d, mut rec) = crate::recommend::analyze::judged(&mut whole, flags.clone(), timeout_s);
    let mut summary = whole.summary;
    // What is saved is what the judgement shown read: a count's windows when it is one count's.
    let mut judged_windows = None;
    let mut counts = Vec::new();
    if parts.len() >= 2 {
        let each = super::input::each_count(parts, &flags).await?;
        counts = each.iter().map(count_line).collect();
        if let Some(mut at) = judged_count(each) {
            let f = at_flags(&at, &flags);
            (d, rec) = crate::recommend::analyze::judged(&mut at.evidence, f, timeout_s);
            summary = at.evidence.summary;
            judged_windows = at.evidence.windows;
            counts
                .iter_mut()
                .for_each(|c| c.shown = c.workers == at.workers);
        }
    }
    let Some(hist) = whole.windows else {
        anyhow::bail!("{}: the read gave no windows", summary.profile);
    };
    if let Some(dir) = &h.out {
        crate::record::dir::write_summary(dir, &summary)?;
        crate::record::dir::write_history(dir, judged_windows.as_ref().unwrap_or(&hist))?;
        crate::report::html::write(dir, &summary)?;
    }
    let view = views::History {
        history: &hist,
        by_workers: counts,
        diagnosis: &d,
        recommendation: rec.as_ref().ok(),
        stages: &summary.stages,
        why_not: rec.as_ref().err().map(|e| e.0.as_str()),
    };
    crate::report::emit(&view, format)?;
    Ok(error::EXIT_OK)
}

fn count_line(c: &super::input::AtCount) -> views::AtWorkers {
    views::AtWorkers {
        workers: c.workers,
        ceiling_per_s: c.diagnosis.measured_ceiling.as_ref().map(|x| x.mean),
        capping_limit: c.diagnosis.capping_limit,
        shown: false,
    }
}

/// The count whose judgement is shown: the most workers that reached a ceiling, else none.
fn judged_count(each: Vec<super::input::AtCount>) -> Option<super::input::AtCount> {
    each.into_iter()
        .filter(|c| c.diagnosis.measured_ceiling.is_some())
        .max_by_key(|c| c.workers)
}

/// The flags with the count's workers in place of any other.
fn at_flags(
    at: &super::input::AtCount,
    flags: &crate::model::settings::Settings,
) -> crate::model::settings::Settings {
    let mut f = flags.clone();
    f.workers = at
        .evidence
        .summary
        .settings
        .as_ref()
        .and_then(|s| s.workers.clone());
    f
}
