//! `n8ncap scale RUN RUN …`: runs of one deployment at several worker counts, each judged again
//! with what it recorded, then together (`diagnose::scale`). `scale --prometheus URL`: the
//! worker counts a production history held, each judged from its windows, then together.

use crate::cli::ScaleArgs;
use crate::diagnose::scale::judge_labelled;
use crate::error::{self, BadInput};
use crate::model::settings::Settings;
use crate::report::views::Scale;

pub(super) async fn run(a: ScaleArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<Scale>("scale")?;
    if let Some(t) = a.target_rate {
        crate::cli::check_target_rate(t)?;
    }
    if a.history.prometheus.is_some() {
        return history(&a, format).await;
    }
    let mut judged = Vec::new();
    for path in &a.runs {
        let (_, d, _) = super::input::rejudged(path).await?;
        judged.push((path.display().to_string(), d));
    }
    let result = judge_labelled(&judged, a.target_rate)?;
    crate::report::emit(&Scale(&result), format)?;
    Ok(error::EXIT_OK)
}

/// `scale --prometheus`: the history read once, each worker count's windows judged as a run at
/// that count, the counts judged together. With --out, each count is saved as a run (`wN/`,
/// for `scale`, `compare` and `recommend --target-rate`) beside history.json and scale.json.
async fn history(a: &ScaleArgs, format: crate::report::Format) -> anyhow::Result<i32> {
    if let Some(dir) = &a.history.out {
        crate::record::dir::refuse_scale_results(dir)?;
    }
    let range = super::input::range(&a.history, Settings::default())?;
    let hist = super::input::read(&a.history, range.history()).await?;
    let parts = crate::observe::history::by_workers(&hist, &range.flags, &range.title());
    let counts = super::input::each_count(parts, &range.flags).await?;
    let shown = &range.source.shown;
    if counts.len() < 2 {
        let held: Vec<String> = counts.iter().map(|c| c.workers.to_string()).collect();
        return Err(BadInput(format!(
            "the history holds {} worker count(s) through whole windows ({}; counted by {}): \
             scale-out needs two at least — give a range where the workers changed (an \
             autoscaler's peak, a deploy that added workers), or sweep with --workers 1,2,4",
            counts.len(),
            if held.is_empty() {
                "none".into()
            } else {
                held.join(", ")
            },
            hist.workers_by
                .as_deref()
                .unwrap_or("nothing: no worker process was found")
        ))
        .into());
    }
    let judged: Vec<(String, crate::record::Diagnosis)> = counts
        .iter()
        .map(|c| (format!("w{}", c.workers), c.diagnosis.clone()))
        .collect();
    let result = judge_labelled(&judged, a.target_rate)?;
    if let Some(dir) = &a.history.out {
        save(dir, shown, &hist, &counts, &result)?;
    }
    crate::report::emit(&Scale(&result), format)?;
    Ok(error::EXIT_OK)
}

/// Each count as a run (its summary in a directory named w and the count), the whole history,
/// and scale.json as a scale sweep's book (no steps: nothing was scaled).
fn save(
    dir: &std::path::Path,
    shown: &str,
    hist: &crate::record::history::History,
    counts: &[super::input::AtCount],
    result: &crate::record::scaling::Scaling,
) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for c in counts {
        let sub = crate::record::dir::count_dir(dir, c.workers)?;
        std::fs::create_dir_all(&sub)?;
        let mut summary = c.evidence.summary.clone();
        summary.diagnosis = Some(c.diagnosis.clone());
        crate::record::dir::write_summary(&sub, &summary)?;
        crate::record::dir::write_history(&sub, &c.evidence.windows)?;
        runs.push(sub.display().to_string());
    }
    crate::record::dir::write_history(dir, hist)?;
    let last = hist.windows.iter().rev().find_map(|w| w.workers);
    let book = crate::record::scaling::ScaleSweep {
        original_workers: last.unwrap_or(0),
        original_source: format!(
            "Prometheus history at {shown}: the workers of its last whole window, by {}",
            hist.workers_by.as_deref().unwrap_or("?")
        ),
        steps: Vec::new(),
        runs,
        ended: "read from history".into(),
        scaling: Some(result.clone()),
    };
    crate::report::views::write_scale_sweep(dir, &book)
}
