//! What several commands read from their arguments, through the evidence seam
//! (`record::evidence::Source`) and the deployment's readers. No command: the structure test
//! lets every command call here and none call another.

use crate::error::BadInput;
use crate::record::evidence::{Evidence, Source};

/// A saved run (results directory or summary.json, a `diagnose --prometheus --out` directory
/// included), else k6's `--out json`/`--out csv` file of the deployment, read as `diagnose
/// --k6-json` reads it.
pub(super) async fn saved_run_or_k6(path: &std::path::Path) -> anyhow::Result<Evidence> {
    let saved = crate::record::dir::SavedRun(path).evidence().await;
    let is_file = path.is_file()
        && path
            .file_name()
            .is_some_and(|n| n != crate::record::dir::SUMMARY);
    match saved {
        Ok(s) => Ok(s),
        Err(e) if is_file => {
            let files = [path.to_path_buf()];
            let k6 = crate::load::k6series::K6Series {
                files: &files,
                warmup_s: None,
                body: None,
            };
            k6.evidence().await.map_err(|k6| {
                BadInput(format!(
                    "--run {}: neither a saved run ({e:#}) nor a k6 output ({k6:#}): give a results directory, its summary.json, or k6's --out json/csv file",
                    path.display()
                ))
                .into()
            })
        }
        Err(e) => Err(e),
    }
}

/// A saved run judged again with what it recorded (its settings, host and body): the summary
/// with the diagnosis and plan stored in it, the diagnosis and the plan.
pub(super) async fn rejudged(
    path: &std::path::Path,
) -> anyhow::Result<(
    crate::record::Summary,
    crate::record::Diagnosis,
    Result<crate::record::Recommendation, crate::error::NoPlan>,
)> {
    let mut summary = crate::record::dir::SavedRun(path).evidence().await?.summary;
    let (d, rec) = super::analyze(
        &mut summary,
        crate::model::settings::Settings::default(),
        None,
    );
    Ok((summary, d, rec))
}

/// A saved run (or k6 file) as read, its diagnosis and its operating point.
pub(super) struct Judged {
    pub summary: crate::record::Summary,
    pub diagnosis: crate::record::Diagnosis,
    pub point: crate::model::OperatingPoint,
}

/// A saved run (or k6 file) judged, with its operating point: the time budget, the drain's
/// rate, the autoscaler and the alerts are sized from it.
pub(super) async fn judged_run(path: &std::path::Path) -> anyhow::Result<Judged> {
    let mut summary = saved_run_or_k6(path).await?.summary;
    let (diagnosis, _) = super::analyze(
        &mut summary,
        crate::model::settings::Settings::default(),
        None,
    );
    let from = path.display().to_string();
    let point = crate::recommend::operating_point::operating_point(&summary, &diagnosis, &from)?;
    Ok(Judged {
        summary,
        diagnosis,
        point,
    })
}

/// The autoscaler plan for the deployment's workers from what `run` measured, with the run's
/// diagnosis.
pub(super) async fn autoscaler_plan(
    run: &std::path::Path,
    t: &crate::topology::Topology,
) -> anyhow::Result<(
    crate::record::autoscaler::AutoscalerPlan,
    crate::record::Diagnosis,
)> {
    let target = crate::topology::autoscaler_target(t)?;
    let Judged {
        diagnosis: d,
        point,
        ..
    } = judged_run(run).await?;
    let m = crate::recommend::autoscaler::Basis {
        diagnosis: &d,
        from: run.display().to_string(),
        job_p99_s: point.job_p99_s,
        code_p99_s: point.code_p99_s,
        base_per_s: crate::record::dir::load_history(run)
            .as_ref()
            .and_then(crate::recommend::autoscaler::base_load),
    };
    let plan = crate::recommend::autoscaler::plan(&m, target)?;
    Ok((plan, d))
}

/// The deployment from `-f` files, else from a running compose project.
pub(super) async fn topology_of(
    files: &[std::path::PathBuf],
    project: Option<&str>,
) -> anyhow::Result<crate::topology::Topology> {
    if !files.is_empty() {
        let (services, _) = crate::topology::load_files(files)?;
        return Ok(crate::topology::Topology::build(
            services.into_iter().map(|s| s.facts).collect(),
        ));
    }
    let p = project.unwrap_or_default();
    let docker = crate::observe::docker::connect().await?;
    let found = crate::observe::docker::discover_containers(&docker, Some(p), true).await?;
    if found.is_empty() {
        return Err(crate::observe::docker::no_such_project(&docker, p)
            .await
            .into());
    }
    Ok(crate::topology::Topology::build(
        found.into_iter().map(|(_, f)| f).collect(),
    ))
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
    let source = prometheus::Api::new(url, auth, h.ca_cert.as_deref(), timeout)?;
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
        host_cores: h.host_cores()?,
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
    if crate::record::dir::holds_results(dir) {
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

/// `--step` over a range of `span` seconds: at least 1 ms, at most the steps a read takes.
fn step(s: &str, span: f64) -> Result<f64, BadInput> {
    let d = crate::util::parse_duration(s).map_err(|e| BadInput(format!("--step: {e}")))?;
    if d.as_secs_f64() < 0.001 {
        return Err(BadInput("--step must be at least 1ms".into()));
    }
    let steps = span / d.as_secs_f64();
    if steps > crate::observe::history::MAX_TOTAL_STEPS {
        return Err(BadInput(format!(
            "--step {s} over this range is {steps:.0} steps per series, more than the {:.0} read (30 days at 1 s): give a larger --step or a shorter range",
            crate::observe::history::MAX_TOTAL_STEPS
        )));
    }
    Ok(d.as_secs_f64())
}

/// A `--match` label matcher: a label, an operator and a quoted value, no braces.
fn matcher(m: &str) -> Result<(), BadInput> {
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
    Ok(())
}

/// The range's start and end, Unix seconds: --since back from --end (or now), or --start to
/// --end, each a plausible time.
fn span(h: &crate::cli::HistoryArgs) -> Result<(f64, f64), BadInput> {
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
    Ok((start, end))
}

/// The range: --since back from --end (or now), or --start to --end.
fn query(h: &crate::cli::HistoryArgs) -> Result<crate::observe::history::Query, BadInput> {
    let (start, end) = span(h)?;
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
        Some(s) => Some(step(s, end - start)?),
        None => None,
    };
    for m in &h.matchers {
        matcher(m)?;
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

/// One worker count's part of a history, judged as a run at that count.
pub(super) struct AtCount {
    pub(super) workers: u32,
    /// Its stages with the settings they were judged with (the count among them), its windows.
    pub(super) evidence: crate::record::evidence::Evidence,
    pub(super) diagnosis: crate::record::Diagnosis,
}

/// Each count's windows through the evidence seam, judged by the one judge (its windows'
/// findings among the rest) as a run at that count.
pub(super) async fn each_count(
    parts: Vec<crate::observe::history::AtWorkers>,
    flags: &crate::model::settings::Settings,
) -> anyhow::Result<Vec<AtCount>> {
    use crate::record::evidence::Source;
    let mut counts = Vec::new();
    for part in parts {
        let workers = part.workers;
        let mut evidence = part.evidence().await?;
        // The flags, with the count the history held in place of any other.
        let mut f = flags.clone();
        f.workers = evidence
            .summary
            .settings
            .as_ref()
            .and_then(|s| s.workers.clone());
        let (diagnosis, _) = crate::recommend::analyze::judged(&mut evidence, f, None);
        counts.push(AtCount {
            workers,
            evidence,
            diagnosis,
        });
    }
    Ok(counts)
}

/// The container of `role` a drill stops in a compose project: the one `given` names (its
/// flag, `--redis-container`), else the project's only one.
pub(super) fn chosen_dependency<'a>(
    (role, word, flag): (crate::topology::Role, &str, &str),
    given: Option<&str>,
    project: &str,
    nodes: &'a [crate::topology::Node],
) -> Result<&'a crate::topology::Node, BadInput> {
    let shown = crate::util::escape_control(project);
    let found: Vec<&crate::topology::Node> = nodes.iter().filter(|n| n.role == role).collect();
    match given {
        Some(r) => found
            .iter()
            .find(|n| n.name() == r)
            .copied()
            .ok_or_else(|| {
                BadInput(format!(
                    "{flag} {}: no running {word} of that name in project {shown}",
                    crate::util::escape_control(r)
                ))
            }),
        None => match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(BadInput(format!(
                "project {shown} has no running {word} container to stop"
            ))),
            _ => Err(BadInput(format!(
                "project {shown} has several {word} containers: name one with {flag}"
            ))),
        },
    }
}

/// The n8n processes a drill reads back after it: main, workers, webhook processors.
pub(super) fn n8n_processes(
    nodes: &[crate::topology::Node],
) -> Vec<(String, crate::topology::Role)> {
    use crate::topology::Role;
    nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Main | Role::Worker | Role::Webhook))
        .map(|n| (n.name().to_string(), n.role))
        .collect()
}
