//! `n8ncap diagnose`: a saved run, a k6 summary or a k6 time series judged (Prometheus history
//! is `history.rs`).

use crate::cli::DiagnoseArgs;
use crate::error::{self, BadInput};
use crate::load::k6::K6Summary;
use crate::load::k6series::K6Series;
use crate::record::dir::SavedRun;
use crate::record::evidence::{Evidence, Source};
use crate::report::views::{Run, RunJson};

pub(super) async fn run(a: DiagnoseArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<Run>("diagnose")?;
    let mut flags = a.settings.settings()?;
    let task_request_timeout = a.settings.task_request_timeout()?;
    if a.docker || a.project.is_some() {
        match super::docker_watch(a.project.as_deref()).await {
            Ok(w) => flags = flags.or(w.topology.model_settings()),
            Err(e) => eprintln!("n8ncap: {e:#}; diagnosing without container settings"),
        }
    }
    // A bad --out fails before the input is read.
    if let Some(dir) = &a.history.out {
        super::input::out_dir(dir)?;
    }
    let mut ev = input(&a).await?;
    // What the flags and Docker said is recorded with the run, so it is judged again the same way.
    let given = flags
        .clone()
        .or(ev.summary.settings.clone().unwrap_or_default());
    let (d, rec) = crate::recommend::analyze::judged(&mut ev, flags, task_request_timeout);
    let mut summary = ev.summary;
    if let Some(dir) = &a.history.out {
        summary.settings = Some(given);
        crate::record::dir::write_summary(dir, &summary)?;
        crate::report::html::write(dir, &summary)?;
    }
    // The stages read (a k6 time series: its held steps, rates and ramp windows) with the
    // judgement, so what was judged can be checked.
    let run = Run {
        summary: &summary,
        diagnosis: &d,
        recommendation: &rec,
        json: RunJson::Judgement,
        results: None,
    };
    crate::report::emit(&run, format)?;
    Ok(error::EXIT_OK)
}

/// `--k6-warmup`: "auto" (None) or a duration.
fn k6_warmup(a: &DiagnoseArgs) -> anyhow::Result<Option<f64>> {
    Ok(match a.k6_warmup.trim() {
        "auto" => None,
        w => Some(
            crate::util::parse_duration(w)
                .map_err(|e| BadInput(format!("--k6-warmup: {e} (or \"auto\")")))?
                .as_secs_f64(),
        ),
    })
}

/// What `diagnose` reads, each a source of evidence: a saved run, a k6 summary export, or
/// k6's JSON or CSV output (one file, or the files of one distributed run).
async fn input(a: &DiagnoseArgs) -> anyhow::Result<Evidence> {
    let body = a.body.as_deref();
    match (&a.input, &a.k6_summary, a.k6_json.as_slice()) {
        (Some(p), _, _) => SavedRun(p).evidence().await,
        (None, Some(path), _) => K6Summary { path, body }.evidence().await,
        (None, None, []) => Err(BadInput(
            "give a results directory (or summary.json), --k6-summary FILE or --k6-json FILE"
                .into(),
        )
        .into()),
        (None, None, files) => {
            let warmup_s = k6_warmup(a)?;
            K6Series {
                files,
                warmup_s,
                body,
            }
            .evidence()
            .await
        }
    }
}
