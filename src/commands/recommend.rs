//! `n8ncap recommend`: the settings that follow a saved run's verdict (or a break point given),
//! in a deployment's dialect.

use crate::cli::RecommendArgs;
use crate::error::{self, BadInput};
use crate::model::settings::Provenance;
use crate::model::settings::Sourced;
use crate::record::dir::SavedRun;
use crate::record::evidence::Source;
use crate::report::views::Recommend;
use crate::report::{Dialect, Format};

/// The deployment a plan is for, from `-f` or `--project`: its names.
async fn target(a: &RecommendArgs) -> anyhow::Result<crate::record::recommendation::PlanTarget> {
    if a.files.is_empty() && a.project.is_none() {
        return Ok(Default::default());
    }
    Ok(crate::topology::plan_target(&topology(a).await?))
}

/// The deployment read from `-f` files or a running `--project`.
async fn topology(a: &RecommendArgs) -> anyhow::Result<crate::topology::Topology> {
    super::input::topology_of(&a.files, a.project.as_deref()).await
}

pub(super) async fn run(a: RecommendArgs) -> anyhow::Result<i32> {
    if let Some(rate) = a.target_rate {
        return for_target_rate(&a, rate).await;
    }
    if matches!(
        a.format,
        crate::cli::RecommendFormat::Keda | crate::cli::RecommendFormat::Hpa
    ) {
        return autoscaler(&a).await;
    }
    if matches!(
        a.format,
        crate::cli::RecommendFormat::PrometheusRules
            | crate::cli::RecommendFormat::PrometheusOperator
    ) {
        return alert_rules(&a).await;
    }
    settings_plan(&a).await
}

/// The flags that tune an autoscaler, refused where no autoscaler is written: they would be
/// ignored without a word.
fn autoscaler_flags(a: &RecommendArgs) -> Result<(), BadInput> {
    if a.arrivals.is_some() || a.max_wait.is_some() || a.pod_start.is_some() {
        return Err(BadInput(
            "--arrivals, --max-wait and --pod-start tune an autoscaler by replaying the arrivals: \
             use them with --format keda or hpa"
                .into(),
        ));
    }
    Ok(())
}

/// The flags that shape an autoscaler or alerting rules, refused with a settings plan.
fn stray_flags(a: &RecommendArgs) -> Result<(), BadInput> {
    autoscaler_flags(a)?;
    if !a.matchers.is_empty() || a.caller_timeout.is_some() || a.tests.is_some() {
        return Err(BadInput(
            "--match, --caller-timeout and --tests shape alerting rules: use them with --format \
             prometheus-rules or prometheus-operator"
                .into(),
        ));
    }
    Ok(())
}

/// `recommend RUN` (or `--break-point`): the settings that follow the verdict, in the
/// deployment's dialect.
async fn settings_plan(a: &RecommendArgs) -> anyhow::Result<i32> {
    stray_flags(a)?;
    let flags = a.settings.settings()?;
    if a.break_point == Some(0) {
        return Err(BadInput("--break-point must be at least 1".into()).into());
    }
    let (format, dialect) = match (a.json, a.format.dialect()) {
        (false, Some(d)) => (Format::Table, d),
        _ => (Format::Json, Dialect::Compose),
    };
    let bp = a
        .break_point
        .map(|b| Sourced::new(b, Provenance::Flag("--break-point".into())));
    let mut memory = None;
    let rec = match (&a.input, bp) {
        (Some(path), bp) => {
            let mut summary = SavedRun(path).evidence().await?.summary;
            let timeout = a.settings.task_request_timeout()?;
            let (d, _) = super::analyze(&mut summary, flags, timeout);
            memory = summary.memory_plan.clone();
            crate::recommend::recommend(&d, bp)
        }
        (None, Some(bp)) => crate::recommend::from_break_point(&flags, bp),
        (None, None) => return Err(BadInput(
            "give a results directory, or --break-point with --job-time (and the current limits)"
                .into(),
        )
        .into()),
    };
    // A runner killed at its memory limit: its memory plan is the recommendation.
    if let (Err(why), None) = (&rec, &memory) {
        return Err(why.clone().into());
    }
    let target = target(a).await?;
    let view = Recommend {
        plan: rec.as_ref().map_err(|e| e.0.as_str()),
        memory: memory.as_ref(),
        dialect,
        target: &target,
    };
    if format == Format::Table {
        eprintln!("{}", view.prose());
    }
    crate::report::emit(&view, format)?;
    Ok(error::EXIT_OK)
}

/// `recommend SCALE_DIR --target-rate R`: the plan from the measured scaling of a scale sweep.
async fn for_target_rate(a: &RecommendArgs, rate: f64) -> anyhow::Result<i32> {
    crate::cli::check_target_rate(rate)?;
    stray_flags(a)?;
    let format = match (a.json, a.format) {
        (true, _) | (_, crate::cli::RecommendFormat::Json) => Format::Json,
        (_, crate::cli::RecommendFormat::Compose) => Format::Table,
        (_, f) => {
            return Err(BadInput(format!(
                "--target-rate prints its plan as text or --json; --format {f:?} snippets are \
                 made from one run's plan (recommend RUN --format …)"
            ))
            .into())
        }
    };
    let dir = a.input.as_deref().ok_or_else(|| {
        BadInput(
            "--target-rate plans from runs at several worker counts: give the directory of a \
             scale sweep (sweep --workers 1,2,4 --scale-cmd …)"
                .into(),
        )
    })?;
    let book = crate::record::dir::load_scale_sweep(dir)?;
    let mut judged = Vec::new();
    for run in &book.runs {
        // Each count's run beside scale.json, wherever the sweep was started from.
        let name = std::path::Path::new(run).file_name().unwrap_or_default();
        let path = dir.join(name);
        let (_, d, _) = super::input::rejudged(&path).await?;
        judged.push((path.display().to_string(), d));
    }
    let result = crate::diagnose::scale::judge_labelled(&judged, Some(rate))?;
    crate::report::emit(&crate::report::views::Scale(&result), format)?;
    Ok(error::EXIT_OK)
}

/// `recommend RUN --format keda|hpa -f …`: an autoscaler for the deployment's workers from the
/// run's measured capacity, as YAML on stdout.
async fn autoscaler(a: &RecommendArgs) -> anyhow::Result<i32> {
    let words = if a.format == crate::cli::RecommendFormat::Keda {
        "keda"
    } else {
        "hpa"
    };
    let run = a.input.as_deref().ok_or_else(|| {
        BadInput(format!(
            "--format {words} makes the autoscaler from a measured capacity: give the run's \
             results directory (a sweep's, or diagnose … --out DIR)"
        ))
    })?;
    if a.files.is_empty() && a.project.is_none() {
        return Err(BadInput(format!(
            "--format {words} reads the worker Deployment, its Redis and its secrets from the \
             deployment: give -f with its manifests (or compose files), or --project"
        ))
        .into());
    }
    let t = topology(a).await?;
    let (mut plan, d) = super::input::autoscaler_plan(run, &t).await?;
    tune(a, &t, &mut plan, &d)?;
    let text = match a.format {
        crate::cli::RecommendFormat::Keda => crate::report::autoscaler::keda(&plan),
        _ => crate::report::autoscaler::hpa(&plan),
    };
    print!("{text}");
    Ok(error::EXIT_OK)
}

/// `recommend RUN --format prometheus-rules|prometheus-operator`: alerts before the measured
/// capacity as YAML on stdout, and with `--tests FILE` the `promtool test rules` file.
async fn alert_rules(a: &RecommendArgs) -> anyhow::Result<i32> {
    use crate::recommend::{alert_cases, alerts};
    let run = a.input.as_deref().ok_or_else(|| {
        BadInput(
            "alerting rules come from a measured capacity: give the run's results directory (a \
             sweep's, or diagnose … --out DIR)"
                .into(),
        )
    })?;
    if a.tests.is_some() && a.format == crate::cli::RecommendFormat::PrometheusOperator {
        return Err(BadInput(
            "--tests writes promtool's cases, and promtool reads a rules file, not a \
             PrometheusRule: write them with --format prometheus-rules (the same groups)"
                .into(),
        )
        .into());
    }
    autoscaler_flags(a)?;
    let mut checked = Vec::new();
    for m in &a.matchers {
        checked.push(alerts::check_matcher(m)?);
    }
    let caller = caller_timeout(a)?;
    let judged = super::input::judged_run(run).await?;
    caller_outlasts(caller, judged.point.job_p99_s, run)?;
    let d = &judged.diagnosis;
    let from = run.display().to_string();
    let m = alerts::Basis {
        diagnosis: d,
        job_p99_s: judged.point.job_p99_s,
        caller_timeout_s: caller,
        matchers: a.matchers.iter().map(|m| m.trim().to_string()).collect(),
        postgres_usable: alerts::postgres_usable(&judged.summary, &from),
        from,
    };
    let plan = alerts::plan(&m)?;
    let namespace = if a.files.is_empty() && a.project.is_none() {
        None
    } else {
        topology(a)
            .await?
            .workers()
            .find_map(|w| w.facts.k8s.as_ref().and_then(|k| k.namespace.clone()))
    };
    let text = match a.format {
        crate::cli::RecommendFormat::PrometheusOperator => {
            crate::report::rules::prometheus_rule(&plan, "n8n-capacity", namespace.as_deref())?
        }
        _ => crate::report::rules::rules_file(&plan)?,
    };
    if let Some(file) = &a.tests {
        let usable = m.postgres_usable.as_ref().map(|(u, _)| *u);
        let figures = alert_cases::Figures::of(&plan, d, usable);
        write_cases(file, &plan, &figures, &checked)?;
    }
    print!("{text}");
    Ok(error::EXIT_OK)
}

/// `--tests FILE`: promtool's cases for the rules, which it reads from the file named beside.
fn write_cases(
    file: &std::path::Path,
    plan: &crate::record::alerts::AlertPlan,
    figures: &crate::recommend::alert_cases::Figures,
    matchers: &[(String, String, String)],
) -> anyhow::Result<()> {
    let rules_name = rules_beside(file)?;
    let tests = crate::recommend::alert_cases::test_file(plan, figures, matchers, &rules_name)?;
    crate::record::dir::write_atomic(file, crate::report::rules::tests_file(&tests)?.as_bytes())?;
    eprintln!(
        "n8ncap: {} reads the rules from {rules_name} beside it: save them there (> \
         {rules_name}), then promtool test rules {}",
        file.display(),
        file.display()
    );
    Ok(())
}

/// `--arrivals` (with `--max-wait`, `--pod-start`): the autoscaler's minimum, target and maximum
/// chosen by replaying them; without arrivals the run alone sizes it, and the tuning flags are
/// refused rather than ignored.
fn tune(
    a: &RecommendArgs,
    t: &crate::topology::Topology,
    plan: &mut crate::record::autoscaler::AutoscalerPlan,
    d: &crate::record::Diagnosis,
) -> anyhow::Result<()> {
    match &a.arrivals {
        Some(file) => {
            let dur = |flag: &str, v: &str| {
                crate::util::parse_duration(v).map_err(|e| BadInput(format!("{flag}: {e}")))
            };
            let arrivals = crate::load::arrivals::read(file)?;
            let pod_start = a.pod_start.as_deref().unwrap_or("30s");
            let w = crate::recommend::autoscaler::workload(d, dur("--pod-start", pod_start)?);
            let tuning = crate::recommend::tuned::Tuning {
                arrivals: &arrivals.per_s,
                from: &arrivals.from,
                workload: w,
                max_wait_s: dur("--max-wait", a.max_wait.as_deref().unwrap_or("5s"))?.as_secs_f64(),
            };
            let (_, said) = crate::recommend::replayed::replayed(t, plan, Some(tuning))?;
            for s in said.iter().filter(|s| s.starts_with("Tuning")) {
                eprintln!("n8ncap: {s}");
            }
        }
        None if a.max_wait.is_some() || a.pod_start.is_some() => {
            return Err(BadInput(
                "--max-wait and --pod-start tune the object by replaying --arrivals: give \
                 --arrivals FILE, or drop them"
                    .into(),
            )
            .into())
        }
        None => plan.notes.push(
            "sized from the run alone: --arrivals FILE (a history, a k6 output or a CSV) tunes \
             the minimum, target and maximum by replaying them"
                .into(),
        ),
    }
    Ok(())
}

/// A caller's wait that was given must outlast the run's p99 job: below it the queue's wait
/// budget is nothing (the rules would take 1 s for it without a word).
fn caller_outlasts(
    caller: (f64, bool),
    job_p99_s: f64,
    run: &std::path::Path,
) -> Result<(), BadInput> {
    if caller.1 && caller.0 <= job_p99_s {
        return Err(BadInput(format!(
            "--caller-timeout {:.1} s is not above the p99 job ({job_p99_s:.2} s in {}): the \
             caller gives up before the slowest jobs end, whatever the queue; give the caller's \
             real wait",
            caller.0,
            run.display()
        )));
    }
    Ok(())
}

/// `--caller-timeout`: what the caller of the webhook waits (s), and whether it was given.
fn caller_timeout(a: &RecommendArgs) -> Result<(f64, bool), BadInput> {
    use crate::recommend::alerts;
    Ok(match &a.caller_timeout {
        Some(t) => {
            let d = crate::util::parse_duration(t)
                .map_err(|e| BadInput(format!("--caller-timeout: {e}")))?;
            if d.is_zero() {
                return Err(BadInput("--caller-timeout must be above 0".into()));
            }
            (d.as_secs_f64(), true)
        }
        None => (alerts::CALLER_TIMEOUT_ASSUMED_S, false),
    })
}

/// The rules file a test file at `tests` reads: its name without `.test` (alerts.test.yml →
/// alerts.yml), else with `rules-` before it.
fn rules_beside(tests: &std::path::Path) -> Result<String, BadInput> {
    let name = tests
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| BadInput(format!("--tests {}: give a file name", tests.display())))?;
    Ok(match name.replacen(".test.", ".", 1) {
        r if r != name => r,
        _ => format!("rules-{name}"),
    })
}
