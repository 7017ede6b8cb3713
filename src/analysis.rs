//! Glue shared by `sweep`, `demo`, `diagnose` and `recommend`: settings from flags (with their
//! sources), a saved summary read back, and the diagnosis and recommendation attached to it.

use crate::cli::SettingsArgs;
use crate::diagnose::{self, Diagnosis, Inputs};
use crate::error::BadInput;
use crate::load::Summary;
use crate::model::settings::{Settings, Sourced};
use crate::recommend::{self, Recommendation};
use crate::util::parse_duration;
use std::path::Path;

pub fn settings_from_args(a: &SettingsArgs) -> anyhow::Result<Settings> {
    let secs = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<Sourced<f64>>> {
        match v {
            None => Ok(None),
            Some(t) => {
                let d = parse_duration(t).map_err(|e| BadInput(format!("--{flag}: {e}")))?;
                if d.is_zero() {
                    return Err(BadInput(format!("--{flag} must be more than 0")).into());
                }
                Ok(Some(Sourced::new(
                    d.as_secs_f64(),
                    format!("flag --{flag}"),
                )))
            }
        }
    };
    let positive = |flag: &str, v: Option<u32>| -> anyhow::Result<Option<Sourced<u32>>> {
        match v {
            Some(0) => Err(BadInput(format!("--{flag} must be at least 1")).into()),
            Some(n) => Ok(Some(Sourced::new(n, format!("flag --{flag}")))),
            None => Ok(None),
        }
    };
    let job_time = secs("job-time", &a.job_time)?;
    let code_time = secs("code-time", &a.code_time)?;
    if let (Some(j), Some(c)) = (&job_time, &code_time) {
        if c.value > j.value {
            return Err(BadInput(format!(
                "--code-time ({:.3} s) cannot exceed --job-time ({:.3} s): the Code part is inside the job",
                c.value, j.value
            ))
            .into());
        }
    }
    if !(a.task_request_timeout.is_finite() && a.task_request_timeout > 0.0) {
        return Err(BadInput("--task-request-timeout must be more than 0 seconds".into()).into());
    }
    Ok(Settings {
        workers: positive("workers", a.workers)?,
        worker_concurrency: positive("worker-concurrency", a.worker_concurrency)?,
        runner_limit: positive("runner-limit", a.runner_limit)?,
        runners_per_worker: a
            .runners_per_worker
            .map(|n| Sourced::new(n, "flag --runners-per-worker")),
        // A job time alone means a job that is all Code.
        code_time: code_time.or_else(|| {
            job_time
                .clone()
                .map(|j| Sourced::new(j.value, "flag --job-time"))
        }),
        job_time,
        task_memory_mb: None,
    })
}

/// Reads `summary.json` from a results directory or a path to the file itself.
pub fn load_summary(path: &Path) -> anyhow::Result<Summary> {
    let file = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).map_err(|e| {
        BadInput(format!(
            "cannot read {}: {e} (give a results directory written by n8ncap sweep, or its summary.json)",
            file.display()
        ))
    })?;
    let summary: Summary = serde_json::from_slice(&bytes).map_err(|e| {
        BadInput(format!(
            "{} is not an n8ncap summary: {e} (line {}, column {})",
            file.display(),
            e.line(),
            e.column()
        ))
    })?;
    if !summary.schema.starts_with("n8ncap.summary/") {
        return Err(BadInput(format!(
            "{} has schema {:?}, not n8ncap.summary/1",
            file.display(),
            summary.schema
        ))
        .into());
    }
    Ok(summary)
}

/// Wraps stages read from k6 output in a summary, with the request body when given (for the
/// job time).
pub fn k6_summary(
    stages: Vec<crate::load::StageResult>,
    origin: &str,
    body: Option<&str>,
) -> anyhow::Result<Summary> {
    let body = match body {
        Some(b) => Some(serde_json::from_str::<serde_json::Value>(b).map_err(|e| {
            BadInput(format!(
                "--body is not JSON ({e}): write e.g. '{{\"sleep_ms\":1000}}'"
            ))
        })?),
        None => None,
    };
    let now = crate::util::utc_rfc3339(std::time::SystemTime::now());
    Ok(Summary {
        schema: crate::load::results::SUMMARY_SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_at: now.clone(),
        finished_at: now,
        interrupted: false,
        aborted_by_threshold: false,
        profile: format!("k6: {origin}"),
        model: crate::load::profile::LoadModel::Closed,
        url: String::new(),
        body,
        stages,
        thresholds: Vec::new(),
        thresholds_passed: true,
        diagnosis: None,
        recommendation: None,
    })
}

/// Diagnoses a summary with the given settings (flags first, then the request body), proposes
/// settings when a break point is known, and stores both in the summary.
pub fn analyze(
    summary: &mut Summary,
    flags: Settings,
    task_request_timeout_s: f64,
) -> (Diagnosis, Result<Recommendation, String>) {
    let settings = flags.or(Settings::from_body(summary.body.as_ref()));
    let d = diagnose::diagnose(
        &summary.stages,
        &Inputs {
            settings,
            task_request_timeout_s,
        },
    );
    let rec = recommend::recommend(
        &d.settings,
        Some(&d),
        None,
        d.fixed_overhead_s.unwrap_or(0.0),
    );
    summary.diagnosis = serde_json::to_value(&d).ok();
    summary.recommendation = rec.as_ref().ok().and_then(|r| serde_json::to_value(r).ok());
    (d, rec)
}

/// Writes `report.html` into a results directory from its summary and timeline.
pub fn write_report(
    dir: &Path,
    summary: &Summary,
    d: Option<&Diagnosis>,
    r: Option<&Recommendation>,
) -> anyhow::Result<std::path::PathBuf> {
    let timeline = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap_or_default();
    let html = crate::report::html::render(
        summary,
        d,
        r,
        &crate::report::html::Timeline::parse(&timeline),
    );
    let path = dir.join("report.html");
    crate::load::run::write_atomic(&path, html.as_bytes())?;
    Ok(path)
}
