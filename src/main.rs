//! n8ncap's entry point: parses arguments and dispatches; all work lives in the library.

use clap::Parser;
use n8ncap::analysis::{analyze, load_summary, settings_from_args};
use n8ncap::cli::{Cli, Command, DiagnoseArgs, RecommendArgs, SimCommand, SweepArgs};
use n8ncap::error::{self, exit_code_for, BadInput};
use n8ncap::load::profile::{Overrides, Profile};
use n8ncap::load::run::{run_sweep, Ending, SweepOptions};
use n8ncap::model::settings::Sourced;
use n8ncap::sim::{self, config};
use n8ncap::util::process_env;
use std::time::Duration;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                error::EXIT_BAD_INPUT
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("n8ncap: cannot start the async runtime: {e}");
            std::process::exit(error::EXIT_FAILED);
        }
    };
    let code = match rt.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("n8ncap: {e:#}");
            exit_code_for(&e)
        }
    };
    // Background tasks (simulator roles, connections) must not hold the process open.
    rt.shutdown_timeout(Duration::from_millis(200));
    std::process::exit(code);
}

async fn dispatch(cmd: Command) -> anyhow::Result<i32> {
    match cmd {
        Command::Demo { json } => demo(json).await,
        Command::Sweep(args) => sweep(*args).await,
        Command::Diagnose(a) => diagnose_cmd(a),
        Command::Recommend(a) => recommend_cmd(a),
        Command::Sim(s) => {
            sim_command(s).await?;
            Ok(error::EXIT_OK)
        }
    }
}

async fn demo(json: bool) -> anyhow::Result<i32> {
    if !json {
        println!("{}\n", n8ncap::demo::intro());
    }
    let out = n8ncap::demo::run_demo(!json).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&out.summary)?);
    } else {
        println!(
            "{}",
            n8ncap::report::table::stages_table(&out.summary.stages)
        );
        println!("\n{}", n8ncap::report::text::diagnosis(&out.diagnosis));
        match &out.recommendation {
            Ok(r) => println!("{}", n8ncap::report::text::recommendation(r)),
            Err(why) => println!("No recommendation: {why}"),
        }
    }
    Ok(match out.ending {
        Ending::Interrupted => error::EXIT_INTERRUPTED,
        Ending::Completed => error::EXIT_OK,
    })
}

async fn sweep(a: SweepArgs) -> anyhow::Result<i32> {
    let flags = settings_from_args(&a.settings)?;
    let mut profile = Profile::load(&a.profile)?;
    profile.apply(&Overrides {
        url: a.url.clone(),
        vus: a.vus.clone(),
        rates: a.rates.clone(),
        stage_duration: a.stage_duration.clone(),
        warmup: a.warmup.clone(),
        body: a.body.clone(),
        timeout: a.timeout.clone(),
    })?;
    if a.queue_metrics_interval.is_nan() || a.queue_metrics_interval <= 0.0 {
        return Err(BadInput("--queue-metrics-interval must be more than 0".into()).into());
    }
    let out_dir = if a.no_out {
        None
    } else {
        Some(a.out.clone().unwrap_or_else(|| {
            std::path::PathBuf::from("n8ncap-results")
                .join(n8ncap::util::utc_compact(std::time::SystemTime::now()))
        }))
    };
    let queue_metrics_url = find_main_metrics(&a.metrics).await;
    let opts = SweepOptions {
        profile,
        out_dir: out_dir.clone(),
        abort_on_fail: a.abort_on_fail,
        progress: !a.json,
        queue_metrics_url,
        queue_metrics_interval: Duration::from_secs_f64(a.queue_metrics_interval),
        repeat: a.repeat,
    };
    let (mut summary, ending) = run_sweep(opts, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    let (diagnosis, rec) = analyze(&mut summary, flags, a.settings.task_request_timeout);
    if let Some(dir) = &out_dir {
        n8ncap::load::run::write_atomic(
            &dir.join("summary.json"),
            &serde_json::to_vec_pretty(&summary)?,
        )?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{}", n8ncap::report::table::stages_table(&summary.stages));
        println!("\n{}", n8ncap::report::text::diagnosis(&diagnosis));
        if let Ok(r) = &rec {
            println!("{}", n8ncap::report::text::recommendation(r));
        }
        if let Some(dir) = &out_dir {
            println!("results: {}", dir.display());
        }
        if !summary.thresholds_passed {
            for t in summary.thresholds.iter().filter(|t| !t.passed) {
                println!(
                    "threshold failed: {} {} (observed {})",
                    t.metric,
                    t.expr,
                    t.observed
                        .map(|v| format!("{v:.4}"))
                        .unwrap_or_else(|| "nothing".into())
                );
            }
        }
    }
    Ok(match ending {
        Ending::Interrupted => error::EXIT_INTERRUPTED,
        Ending::Completed if !summary.thresholds_passed => error::EXIT_THRESHOLD,
        Ending::Completed => error::EXIT_OK,
    })
}

fn diagnose_cmd(a: DiagnoseArgs) -> anyhow::Result<i32> {
    let flags = settings_from_args(&a.settings)?;
    let mut summary = load_summary(&a.input)?;
    let (d, rec) = analyze(&mut summary, flags, a.settings.task_request_timeout);
    if a.json {
        let out = serde_json::json!({"diagnosis": d, "recommendation": rec.ok()});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", n8ncap::report::table::stages_table(&summary.stages));
        println!("\n{}", n8ncap::report::text::diagnosis(&d));
        match rec {
            Ok(r) => println!("{}", n8ncap::report::text::recommendation(&r)),
            Err(why) => println!("No recommendation: {why}"),
        }
    }
    Ok(error::EXIT_OK)
}

fn recommend_cmd(a: RecommendArgs) -> anyhow::Result<i32> {
    let flags = settings_from_args(&a.settings)?;
    let bp = a.break_point.map(|b| Sourced::new(b, "flag --break-point"));
    if a.break_point == Some(0) {
        return Err(BadInput("--break-point must be at least 1".into()).into());
    }
    let rec = match &a.input {
        Some(path) => {
            let mut summary = load_summary(path)?;
            let (d, _) = analyze(&mut summary, flags, a.settings.task_request_timeout);
            n8ncap::recommend::recommend(
                &d.settings,
                Some(&d),
                bp,
                d.fixed_overhead_s.unwrap_or(0.0),
            )
        }
        None => {
            if bp.is_none() {
                return Err(BadInput(
                    "give a results directory, or --break-point with --job-time (and the current limits)"
                        .into(),
                )
                .into());
            }
            n8ncap::recommend::recommend(&flags, None, bp, 0.0)
        }
    };
    let rec = rec.map_err(BadInput)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rec)?);
    } else {
        println!("{}", n8ncap::report::text::recommendation(&rec));
        println!("{}", rec.compose_snippet());
    }
    Ok(error::EXIT_OK)
}

/// Picks, among the --metrics URLs, the one that serves n8n main's queue gauges.
async fn find_main_metrics(urls: &[String]) -> Option<String> {
    for url in urls {
        let url = url.split_once('=').map(|(_, u)| u).unwrap_or(url);
        match n8ncap::observe::scrape::scrape(url, Duration::from_secs(3)).await {
            Ok(e) if n8ncap::observe::scrape::queue_gauges(&e, "n8n_").is_some() => {
                return Some(url.to_string())
            }
            Ok(_) => {}
            Err(e) => eprintln!("n8ncap: metrics endpoint not usable yet: {e:#}"),
        }
    }
    if !urls.is_empty() {
        eprintln!(
            "n8ncap: none of the --metrics endpoints shows n8n's queue gauges \
             (set N8N_METRICS_INCLUDE_QUEUE_METRICS=true on main); slots taken and waiting stay empty"
        );
    }
    None
}

async fn sim_command(s: SimCommand) -> anyhow::Result<()> {
    let env = process_env;
    match s {
        SimCommand::Main(a) => {
            let cfg =
                config::MainConfig::from_env(&env, a.port, Duration::from_millis(a.overhead_ms))?;
            sim::run_main(cfg).await
        }
        SimCommand::Worker(a) => {
            let cfg = config::WorkerConfig::from_env(
                &env,
                a.concurrency,
                Duration::from_millis(a.overhead_ms),
            )?;
            sim::run_worker(cfg).await
        }
        SimCommand::Runner => sim::run_runner(config::RunnerConfig::from_env(&env)?).await,
        SimCommand::All(a) => {
            let w = config::WorkerConfig::from_env(&env, a.concurrency, Duration::ZERO)?;
            let port = match a.port {
                Some(p) => p,
                None => n8ncap::util::env_parse(&env, "N8N_PORT", 5678u16, "a port number")?,
            };
            let runner_limit = match a.runner_limit {
                Some(0) => return Err(BadInput("--runner-limit must be at least 1".into()).into()),
                Some(l) => l,
                None => config::runner_limit(&env)?,
            };
            let m = config::MetricsConfig::from_env(&env, true)?;
            sim::run_all(sim::StackConfig {
                port,
                workers: a.workers.max(1),
                worker_concurrency: w.concurrency,
                runners_per_worker: a.runners_per_worker,
                runner_limit,
                task_request_timeout: w.task_request_timeout,
                queue_metrics_interval: m.queue_metrics_interval,
                event_bus_metrics: m.event_bus_metrics,
                overhead: Duration::from_millis(a.overhead_ms),
            })
            .await
        }
    }
}
