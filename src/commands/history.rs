//! `n8ncap diagnose --prometheus`: production history from a Prometheus-compatible API, its
//! busy windows judged like a sweep's stages, without a load test.

use crate::cli::DiagnoseArgs;
use crate::error::{self, BadInput};
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
    let range = range(h, flags.clone())?;
    let ev = read(h, range.evidence()).await?;
    let timeout_s = a.settings.task_request_timeout()?;
    let d = crate::diagnose::history::judge(&ev, &flags, timeout_s);
    let rec = crate::recommend::recommend(&d, None);
    // The settings are recorded with the windows, so the saved run is judged again the same way.
    let (mut summary, hist) = match ev.windows {
        Some(h) => (ev.summary, h),
        None => anyhow::bail!("{}: the read gave no windows", ev.summary.profile),
    };
    summary.diagnosis = Some(d.clone());
    summary.recommendation = rec.as_ref().ok().cloned();
    if let Some(dir) = &h.out {
        crate::record::dir::write_atomic(
            &dir.join("summary.json"),
            &serde_json::to_vec_pretty(&summary)?,
        )?;
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

/// The range `h` names, checked (the API, its credentials, the times, the step, the
/// deadline), as a source of evidence judged under `flags`.
pub(super) fn range(
    h: &crate::cli::HistoryArgs,
    flags: crate::model::settings::Settings,
) -> anyhow::Result<crate::observe::history::Range> {
    use crate::observe::prometheus;
    let url = h.prometheus.as_deref().unwrap_or_default();
    let auth = prometheus::Auth::load(
        h.prometheus_token_env.as_deref(),
        h.prometheus_token_file.as_deref(),
        h.prometheus_basic_auth_env.as_deref(),
        h.prometheus_basic_auth_file.as_deref(),
    )?;
    let timeout = crate::util::parse_duration(&h.prometheus_timeout)
        .map_err(|e| BadInput(format!("--prometheus-timeout: {e}")))?;
    if timeout.is_zero() {
        return Err(BadInput("--prometheus-timeout must be above 0".into()).into());
    }
    let source = prometheus::Source::new(url, auth, h.ca_cert.as_deref(), timeout)?;
    let query = query(h)?;
    let deadline = crate::util::parse_duration(&h.deadline)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| BadInput("--deadline: give a duration above 0, e.g. 10m".into()))?;
    Ok(crate::observe::history::Range {
        source,
        query,
        deadline: (deadline, h.deadline.clone()),
        flags,
    })
}

/// `reading` (a range's evidence or its windows) with `h`'s results directory (`--out`) made
/// before (a bad one fails first) and removed again when nothing was read.
pub(super) async fn read<T>(
    h: &crate::cli::HistoryArgs,
    reading: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let made = match &h.out {
        Some(dir) => out_dir(dir)?,
        None => false,
    };
    let read = reading.await;
    if let (Err(_), Some(dir), true) = (&read, &h.out, made) {
        // Nothing was read: leave no empty results directory behind.
        let _ = std::fs::remove_dir(dir);
    }
    read
}

/// The history's results directory: refused when it holds a run's results already; true when
/// it was made here (and so may be removed again if nothing is read).
pub(super) fn out_dir(dir: &std::path::Path) -> anyhow::Result<bool> {
    if ["summary.json", "stages.jsonl", "history.json"]
        .iter()
        .any(|f| dir.join(f).exists())
    {
        return Err(BadInput(format!(
            "{} already holds the results of a run: choose another --out",
            dir.display()
        ))
        .into());
    }
    let existed = dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot create the results directory {}: {e}; choose another with --out",
            dir.display()
        )
    })?;
    crate::record::dir::refuse_links(dir)?;
    Ok(!existed)
}

/// A time that no Prometheus holds is refused, with the units it looks like: Unix seconds
/// from 2000 to a day from now.
fn plausible(flag: &str, t: f64, now: f64) -> Result<(), BadInput> {
    const Y2000: f64 = 946_684_800.0;
    if (Y2000..=now + 86_400.0).contains(&t) {
        return Ok(());
    }
    let looks = if t >= 1e17 {
        " — it looks like nanoseconds: divide by 1 000 000 000"
    } else if t >= 1e14 {
        " — it looks like microseconds: divide by 1 000 000"
    } else if t >= 1e11 {
        " — it looks like milliseconds: divide by 1 000"
    } else {
        ""
    };
    Err(BadInput(format!(
        "{flag} {t:.0} is not a plausible time (Unix seconds from 2000 to now){looks}"
    )))
}

/// The range: --since back from --end (or now), or --start to --end.
fn query(h: &crate::cli::HistoryArgs) -> Result<crate::observe::history::Query, BadInput> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let time = |flag: &str, v: &str| -> Result<f64, BadInput> {
        let v = v.trim();
        let t = v
            .parse::<f64>()
            .ok()
            .or_else(|| crate::load::k6::parse_time(v))
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| {
                BadInput(format!(
                    "{flag}: not a time — give RFC 3339 (2026-11-24T14:00:00Z) or Unix seconds"
                ))
            })?;
        plausible(flag, t, now)?;
        Ok(t)
    };
    let end = match &h.end {
        Some(e) => time("--end", e)?,
        None => now,
    };
    let start = match (&h.start, &h.since) {
        (Some(s), _) => time("--start", s)?,
        (None, Some(s)) => {
            end - crate::util::parse_duration(s)
                .map_err(|e| BadInput(format!("--since: {e}")))?
                .as_secs_f64()
        }
        (None, None) => end - 3600.0,
    };
    if start >= end {
        return Err(BadInput(format!(
            "the range is empty: --start must be before --end ({start:.0} ≥ {end:.0})"
        )));
    }
    if end - start > crate::util::MAX_DURATION.as_secs_f64() {
        return Err(BadInput(
            "the range is longer than 30 days: give a shorter --since".into(),
        ));
    }
    let step = match &h.step {
        Some(s) => {
            let d = crate::util::parse_duration(s).map_err(|e| BadInput(format!("--step: {e}")))?;
            if d.as_secs_f64() < 0.001 {
                return Err(BadInput("--step must be at least 1ms".into()));
            }
            let steps = (end - start) / d.as_secs_f64();
            if steps > crate::observe::history::MAX_TOTAL_STEPS {
                return Err(BadInput(format!(
                    "--step {s} over this range is {steps:.0} steps per series, more than the {:.0} read (30 days at 1 s): give a larger --step or a shorter range",
                    crate::observe::history::MAX_TOTAL_STEPS
                )));
            }
            Some(d.as_secs_f64())
        }
        None => None,
    };
    for m in &h.matchers {
        let ok = ["=~", "!~", "!=", "="].iter().any(|op| {
            m.split_once(op).is_some_and(|(k, v)| {
                !k.trim().is_empty()
                    && v.trim().starts_with('"')
                    && v.trim().ends_with('"')
                    && v.trim().len() >= 2
            })
        });
        if !ok || m.contains(['{', '}']) {
            return Err(BadInput(format!(
                "--match {}: write a label matcher such as 'namespace=\"n8n-prod\"' or 'job=~\"n8n.*\"'",
                crate::wire::url::truncate(&crate::util::escape_control(m), 80)
            )));
        }
    }
    let window = match &h.window {
        Some(w) => Some(
            crate::util::parse_duration(w)
                .map_err(|e| BadInput(format!("--window: {e}")))?
                .as_secs_f64()
                .max(1.0),
        ),
        None => None,
    };
    Ok(crate::observe::history::Query {
        start,
        end,
        matchers: h.matchers.clone(),
        step,
        window,
    })
}
