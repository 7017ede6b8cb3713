//! The commands: what each subcommand does with its validated arguments. `main.rs` only parses
//! and calls [`run`].

use crate::analysis::{analyze, load_summary};
use crate::cli::{
    AuditArgs, AuditFormat, Command, DiagnoseArgs, RecommendArgs, SimCommand, SweepArgs,
};
use crate::error::{self, BadInput};
use crate::load::profile::{Overrides, Profile};
use crate::load::run::{run_sweep, Ending, SweepOptions};
use crate::model::settings::{Settings, Sourced};
use crate::observe::watch::{Endpoint, WatchedContainer};
use crate::record::dir::ResultsDir;
use crate::sim::{self, config};
use crate::topology::Topology;
use crate::util::process_env;
use crate::wire::resp::RedisUrl;
use std::time::Duration;

/// Runs one command; the exit code follows README.md "Exit codes" (0, 1, 2, 99, 130).
pub async fn run(cmd: Command) -> anyhow::Result<i32> {
    match cmd {
        Command::Demo { json } => demo(json).await,
        Command::Sweep(args) => sweep(*args).await,
        Command::Diagnose(a) => diagnose_cmd(*a).await,
        Command::Audit(a) => audit_cmd(a).await,
        Command::Exporter {
            listen,
            project,
            refresh,
            job_time,
        } => {
            let refresh = crate::util::parse_duration(&refresh)
                .map_err(|e| BadInput(format!("--refresh: {e}")))?;
            let job_time = job_time
                .map(|j| crate::util::parse_duration(&j).map(|d| d.as_secs_f64()))
                .transpose()
                .map_err(|e| BadInput(format!("--job-time: {e}")))?;
            crate::exporter::run(crate::exporter::ExporterConfig {
                listen,
                project,
                refresh: refresh.max(Duration::from_secs(1)),
                job_time,
            })
            .await?;
            Ok(error::EXIT_OK)
        }
        Command::Grafana { datasource } => {
            println!(
                "{}",
                serde_json::to_string_pretty(&crate::report::grafana::dashboard(
                    datasource.as_deref()
                ))?
            );
            Ok(error::EXIT_OK)
        }
        Command::Report { dir } => {
            let mut summary = load_summary(&dir)?;
            // Re-diagnosed with what the run recorded (its settings and host).
            let _ = analyze(&mut summary, Settings::default(), None);
            let dir = if dir.is_dir() {
                dir
            } else {
                dir.parent().map(|p| p.to_path_buf()).unwrap_or_default()
            };
            let path = crate::analysis::write_report(&dir, &summary)?;
            println!("{}", path.display());
            Ok(error::EXIT_OK)
        }
        Command::Inspect {
            project,
            files,
            json,
        } => {
            if files.is_empty() {
                inspect_cmd(project.as_deref(), json).await
            } else {
                inspect_files(&files, json)
            }
        }
        Command::Recommend(a) => recommend_cmd(a),
        Command::Sim(s) => {
            sim_command(s).await?;
            Ok(error::EXIT_OK)
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = crate::cli::Cli::command();
            clap_complete::generate(shell, &mut cmd, "n8ncap", &mut std::io::stdout());
            Ok(error::EXIT_OK)
        }
        Command::Man => {
            use clap::CommandFactory;
            match clap_mangen::Man::new(crate::cli::Cli::command()).render(&mut std::io::stdout()) {
                // `n8ncap man | head` closes the pipe early: not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(error::EXIT_OK),
            }
        }
    }
}

async fn demo(json: bool) -> anyhow::Result<i32> {
    if !json {
        let intro = crate::demo::intro();
        let width = crate::report::width::output_width();
        println!("{}\n", crate::report::width::fold(&intro, width));
    }
    let out = crate::demo::run_demo(!json).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&out.summary)?);
    } else {
        print_run(&out.summary, &out.diagnosis, &out.recommendation);
    }
    Ok(match out.ending {
        // The demo's own signal listener has the signal; SIGTERM and SIGINT both end it here.
        Ending::Interrupted => error::EXIT_INTERRUPTED,
        Ending::Completed => error::EXIT_OK,
    })
}

async fn sweep(a: SweepArgs) -> anyhow::Result<i32> {
    let interrupt = crate::util::Interrupt::install();
    let flags = a.settings.settings()?;
    let task_request_timeout = a.settings.task_request_timeout()?;
    let mut profile = Profile::load(&a.profile)?;
    profile.apply(&Overrides {
        url: a.url.clone(),
        vus: a.vus.clone(),
        rates: a.rates.clone(),
        stage_duration: a.stage_duration.clone(),
        warmup: a.warmup.clone(),
        body: a.body.clone(),
        timeout: a.timeout.clone(),
        ca_cert: a.ca_cert.clone(),
        insecure: a.insecure,
    })?;
    // Everything the profile says is checked before anything is created or sent.
    let planned = profile.resolve_stages()?;
    profile.scenarios()?;
    profile.require_target()?;
    let queue_metrics_interval = match Duration::try_from_secs_f64(a.queue_metrics_interval) {
        Ok(d) if a.queue_metrics_interval > 0.0 && d <= crate::util::MAX_DURATION => d,
        _ => {
            return Err(BadInput(
                "--queue-metrics-interval must be a number of seconds above 0 (n8n's \
                 N8N_METRICS_QUEUE_METRICS_INTERVAL, 20 by default)"
                    .into(),
            )
            .into())
        }
    };
    let metrics = a
        .metrics
        .iter()
        .map(|m| Endpoint::parse(m).map_err(BadInput))
        .collect::<Result<Vec<_>, _>>()?;
    let scrape_interval = crate::util::parse_duration(&a.scrape_interval)
        .map_err(|e| BadInput(format!("--scrape-interval: {e}")))?;
    if scrape_interval < Duration::from_millis(100) {
        return Err(BadInput("--scrape-interval must be at least 100ms".into()).into());
    }
    let redis = a
        .redis
        .as_deref()
        .map(|u| RedisUrl::parse(u).map(|u| (u, a.bull_prefix.clone())))
        .transpose()?;
    let out_dir = (!a.no_out).then(|| {
        a.out.clone().unwrap_or_else(|| {
            std::path::PathBuf::from("n8ncap-results")
                .join(crate::util::utc_compact(std::time::SystemTime::now()))
        })
    });
    let out = out_dir
        .as_deref()
        .map(|d| ResultsDir::create(d, a.force))
        .transpose()?;
    let docker = if a.docker || a.project.is_some() {
        docker_watch(a.project.as_deref())
            .await
            .map_err(|e| eprintln!("n8ncap: {e:#}; the sweep runs without container data"))
            .ok()
    } else {
        None
    };
    let docker_cores = match &docker {
        Some(w) => crate::observe::docker::engine_cores(&w.docker).await,
        None => None,
    };
    let known = match &docker {
        Some(w) => flags.or(w.topology.model_settings()),
        None => flags,
    };
    let host = crate::analysis::host_facts(&profile.request.url, docker_cores);
    let observer = crate::observe::watch::observer(
        metrics,
        docker.map(|w| (w.docker, w.containers)),
        redis,
        scrape_interval,
        out.as_ref().and_then(|o| o.timeline().ok()),
    )
    .await;
    let profile_model = profile.model;
    eprintln!(
        "n8ncap: load goes to {} (profile {}: {}{})",
        crate::wire::url::redact(&profile.request.url),
        profile.name,
        if a.adaptive {
            "adaptive levels".to_string()
        } else {
            format!(
                "{} stage{}, {:.0} s",
                planned.len() * a.repeat.max(1) as usize,
                if planned.len() * a.repeat.max(1) as usize == 1 {
                    ""
                } else {
                    "s"
                },
                planned
                    .iter()
                    .map(|s| s.duration.as_secs_f64())
                    .sum::<f64>()
                    * a.repeat.max(1) as f64
            )
        },
        if profile.scenarios.is_empty() {
            String::new()
        } else {
            format!(", {} scenarios", profile.scenarios.len())
        }
    );
    let opts = SweepOptions {
        profile,
        out,
        abort_on_fail: a.abort_on_fail,
        progress: !a.json,
        observer,
        queue_metrics_interval,
        repeat: a.repeat,
        settings: Some(known),
        adaptive: adaptive_options(&a, &profile_model)?,
        host: Some(host),
    };
    let (mut summary, ending) = run_sweep(opts, interrupt.clone().wait()).await?;
    let (diagnosis, rec) = analyze(&mut summary, Settings::default(), task_request_timeout);
    if let Some(dir) = &out_dir {
        crate::record::dir::write_atomic(
            &dir.join("summary.json"),
            &serde_json::to_vec_pretty(&summary)?,
        )?;
        crate::analysis::write_report(dir, &summary)?;
    }
    let code = match ending {
        Ending::Interrupted => interrupt.exit_code(),
        Ending::Completed if !summary.thresholds_passed => error::EXIT_THRESHOLD,
        Ending::Completed => error::EXIT_OK,
    };
    // What was measured is saved: a reader that closed the pipe does not change the result.
    error::EXIT_ON_CLOSED_PIPE.store(code, std::sync::atomic::Ordering::Relaxed);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_run(&summary, &diagnosis, &rec);
        if let Some(dir) = &out_dir {
            println!("results: {}", dir.display());
        }
    }
    Ok(code)
}

/// `--adaptive` and its bounds, checked.
fn adaptive_options(
    a: &SweepArgs,
    model: &crate::record::LoadModel,
) -> anyhow::Result<Option<crate::load::run::AdaptiveOptions>> {
    if !a.adaptive {
        return Ok(None);
    }
    if *model != crate::record::LoadModel::Closed {
        return Err(BadInput(
            "--adaptive searches in-flight levels: use a closed-model profile (not --rates)".into(),
        )
        .into());
    }
    let dur = |flag: &str, v: &str| -> anyhow::Result<Duration> {
        let d = crate::util::parse_duration(v).map_err(|e| BadInput(format!("--{flag}: {e}")))?;
        if d.is_zero() {
            return Err(BadInput(format!("--{flag} must be more than 0")).into());
        }
        Ok(d)
    };
    if !(a.precision.is_finite() && a.precision > 0.0 && a.precision < 1.0) {
        return Err(
            BadInput("--precision must be a share between 0 and 1, e.g. 0.03".into()).into(),
        );
    }
    if a.max_vus == 0 {
        return Err(BadInput("--max-vus must be at least 1".into()).into());
    }
    Ok(Some(crate::load::run::AdaptiveOptions {
        max_vus: a.max_vus,
        budget: dur("budget", &a.budget)?,
        precision: a.precision,
        max_stage: dur("max-stage", &a.max_stage)?,
        to_failure: a.to_failure,
    }))
}

/// The stage table, the k6-style block (thresholds ✓/✗ among it), the diagnosis and the
/// recommendation (or why there is none).
fn print_run(
    summary: &crate::record::Summary,
    d: &crate::record::Diagnosis,
    rec: &Result<crate::record::Recommendation, String>,
) {
    println!(
        "{}",
        crate::util::for_terminal(&crate::report::text::run(summary, d, rec))
    );
}

async fn inspect_cmd(project: Option<&str>, json: bool) -> anyhow::Result<i32> {
    use crate::observe::docker;
    let DockerWatch {
        docker: d,
        containers: watched,
        topology,
    } = docker_watch(project).await?;
    let first =
        futures_util::future::join_all(watched.iter().map(|c| docker::stats_once(&d, &c.id))).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second =
        futures_util::future::join_all(watched.iter().map(|c| docker::stats_once(&d, &c.id))).await;
    let stats: Vec<Option<docker::ContainerStats>> = first
        .iter()
        .zip(second.iter())
        .map(|(a, b)| match (a, b) {
            (Ok(a), Ok(b)) => Some(docker::ContainerStats {
                memory_bytes: b.memory_bytes,
                cpu_percent: docker::cpu_percent(a, b),
            }),
            (_, Ok(b)) => Some(docker::ContainerStats {
                memory_bytes: b.memory_bytes,
                cpu_percent: None,
            }),
            _ => None,
        })
        .collect();
    if json {
        let out = serde_json::json!({
            "topology": topology,
            "stats": stats,
            "model_settings": topology.model_settings(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{}",
            crate::util::for_terminal(&crate::report::table::topology_table(&topology, &stats))
        );
    }
    Ok(error::EXIT_OK)
}

/// `inspect -f`: the topology a compose file or a Kubernetes manifest describes, with where
/// each setting comes from.
fn inspect_files(files: &[std::path::PathBuf], json: bool) -> anyhow::Result<i32> {
    let (services, input) = crate::audit::load_files(files)?;
    let topology =
        crate::topology::Topology::build(services.into_iter().map(|s| s.facts).collect());
    if json {
        let out = serde_json::json!({
            "input": input,
            "topology": topology,
            "model_settings": topology.model_settings(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", crate::util::for_terminal(&input.to_string()));
        println!(
            "{}",
            crate::util::for_terminal(&crate::report::table::manifest_table(&topology))
        );
    }
    Ok(error::EXIT_OK)
}

/// `sim n8n` plays the n8n command line in a compose stack: when QUEUE_BULL_REDIS_HOST names a
/// real Redis (it answers PING), the queue lives there under Bull's keys, as in n8n; when it
/// names the simulator's main (the stacks without a Redis service), main serves the queue. The
/// Redis may start after this container: an unreachable host is retried for 20 s. Each
/// decision is logged with the address.
async fn sim_n8n_redis(
    env: &dyn Fn(&str) -> Option<String>,
    role: &str,
) -> anyhow::Result<Option<RedisUrl>> {
    use crate::wire::resp::{probe, Probe};
    let Some(host) = env("QUEUE_BULL_REDIS_HOST").filter(|h| !h.trim().is_empty()) else {
        return Ok(None);
    };
    let port: u16 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_PORT", 6379, "a port number")?;
    let db: u32 = crate::util::env_parse(env, "QUEUE_BULL_REDIS_DB", 0, "a database number")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut said = false;
    loop {
        match probe(&host, port).await {
            Probe::Redis => {
                eprintln!(
                    "n8ncap sim n8n {role}: the queue is on Redis at {host}:{port} (db {db}, Bull's keys)"
                );
                return Ok(Some(RedisUrl::new(
                    &host,
                    port,
                    env("QUEUE_BULL_REDIS_PASSWORD"),
                    db,
                )));
            }
            Probe::NotRedis => {
                eprintln!(
                    "n8ncap sim n8n {role}: {host}:{port} is not a Redis (no PONG): the queue is \
                     the simulator's own, served by main"
                );
                return Ok(None);
            }
            Probe::Unreachable if role == "main" && crate::wire::resp::is_own_host(&host).await => {
                eprintln!(
                    "n8ncap sim n8n main: QUEUE_BULL_REDIS_HOST {host} is this container: main \
                     serves the simulator's queue on port {port}"
                );
                return Ok(None);
            }
            Probe::Unreachable | Probe::Silent if std::time::Instant::now() >= deadline => {
                eprintln!(
                    "n8ncap sim n8n {role}: nothing answers at {host}:{port} after 20 s: the \
                     queue is the simulator's own{}",
                    if role == "main" {
                        ", served here"
                    } else {
                        "; retrying main's queue"
                    }
                );
                return Ok(None);
            }
            Probe::Unreachable | Probe::Silent => {
                if !said {
                    eprintln!(
                        "n8ncap sim n8n {role}: waiting for QUEUE_BULL_REDIS_HOST {host}:{port} \
                         to answer"
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

async fn audit_cmd(a: AuditArgs) -> anyhow::Result<i32> {
    use crate::audit;
    let report = if a.live {
        let docker = crate::observe::docker::connect().await?;
        // Stopped containers too: a runner whose last exit was an OOM kill is the finding.
        let found =
            crate::observe::docker::discover_containers(&docker, a.project.as_deref(), true)
                .await?;
        audit::audit(
            found.into_iter().map(|(_, f)| f).collect(),
            &Default::default(),
            format!(
                "live: Docker{}",
                a.project
                    .as_deref()
                    .map(|p| format!(", project {p}"))
                    .unwrap_or_default()
            ),
        )
    } else {
        let (services, input) = audit::load_files(&a.files)?;
        let locations = services
            .iter()
            .map(|s| (s.facts.name.clone(), (s.file.clone(), s.line)))
            .collect();
        audit::audit(
            services.into_iter().map(|s| s.facts).collect(),
            &locations,
            input,
        )
    };
    match a.format {
        AuditFormat::Table => println!(
            "{}",
            crate::util::for_terminal(&crate::report::table::audit_table(&report))
        ),
        AuditFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        AuditFormat::Sarif => println!(
            "{}",
            serde_json::to_string_pretty(&crate::report::sarif::sarif(&report))?
        ),
    }
    Ok(if report.has_errors() {
        error::EXIT_FAILED
    } else {
        error::EXIT_OK
    })
}

async fn diagnose_cmd(a: DiagnoseArgs) -> anyhow::Result<i32> {
    if a.history.prometheus.is_some() {
        return history_cmd(a).await;
    }
    let mut flags = a.settings.settings()?;
    let task_request_timeout = a.settings.task_request_timeout()?;
    if a.docker || a.project.is_some() {
        match docker_watch(a.project.as_deref()).await {
            Ok(w) => flags = flags.or(w.topology.model_settings()),
            Err(e) => eprintln!("n8ncap: {e:#}; diagnosing without container settings"),
        }
    }
    let mut summary = diagnose_input(&a)?;
    let (d, rec) = analyze(&mut summary, flags, task_request_timeout);
    if a.json {
        // The stages read (a k6 time series: its held steps, rates and ramp windows) with the
        // judgement, so what was judged can be checked.
        let out = serde_json::json!({
            "diagnosis": d,
            "recommendation": rec.ok(),
            "stages": summary.stages,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_run(&summary, &d, &rec);
    }
    Ok(error::EXIT_OK)
}

/// What `diagnose` reads: a saved run, a k6 summary export, or k6's JSON output.
fn diagnose_input(a: &DiagnoseArgs) -> anyhow::Result<crate::record::Summary> {
    match (&a.input, &a.k6_summary, &a.k6_json) {
        (Some(p), _, _) => load_summary(p),
        (None, Some(k), _) => crate::analysis::k6_summary(
            crate::load::k6::from_summary(k)?,
            &k.display().to_string(),
            a.body.as_deref(),
        ),
        (None, None, Some(k)) => {
            let warm = match a.k6_warmup.trim() {
                "auto" => None,
                w => Some(
                    crate::util::parse_duration(w)
                        .map_err(|e| BadInput(format!("--k6-warmup: {e} (or \"auto\")")))?
                        .as_secs_f64(),
                ),
            };
            crate::analysis::k6_summary(
                crate::load::k6::from_json(k, warm)?,
                &k.display().to_string(),
                a.body.as_deref(),
            )
        }
        (None, None, None) => Err(BadInput(
            "give a results directory (or summary.json), --k6-summary FILE or --k6-json FILE"
                .into(),
        )
        .into()),
    }
}

fn recommend_cmd(a: RecommendArgs) -> anyhow::Result<i32> {
    let flags = a.settings.settings()?;
    if a.break_point == Some(0) {
        return Err(BadInput("--break-point must be at least 1".into()).into());
    }
    let bp = a.break_point.map(|b| Sourced::new(b, "flag --break-point"));
    let mut memory = None;
    let rec = match (&a.input, bp) {
        (Some(path), bp) => {
            let mut summary = load_summary(path)?;
            let timeout = a.settings.task_request_timeout()?;
            let (d, _) = analyze(&mut summary, flags, timeout);
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
    use crate::report::text;
    let rec = match (rec, &memory) {
        (Ok(r), _) => r,
        // A runner killed at its memory limit: its memory plan is the recommendation.
        (Err(why), Some(m)) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({"memory_plan": m}))?
                );
            } else {
                println!("{}", for_width(&text::memory_plan(m)));
                println!("{}", text::memory_plan_snippet(m, a.format));
                println!("{}", for_width(&format!("No capacity plan: {why}")));
            }
            return Ok(error::EXIT_OK);
        }
        (Err(why), None) => return Err(BadInput(why).into()),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rec)?);
    } else {
        use crate::cli::RecommendFormat;
        if let Some(m) = memory.as_ref().filter(|m| m.oom_killed) {
            println!("{}", for_width(&text::memory_plan(m)));
        }
        println!("{}", for_width(&text::recommendation(&rec)));
        println!(
            "{}",
            match a.format {
                RecommendFormat::Compose => text::compose_snippet(&rec),
                RecommendFormat::HelmOfficial => text::helm_official_values(&rec),
                RecommendFormat::HelmCommunity => text::helm_community_values(&rec),
                RecommendFormat::K8s => text::k8s_worker_patch(&rec),
            }
        );
    }
    Ok(error::EXIT_OK)
}

/// The Docker side of a sweep: the client, the containers to sample, the topology.
struct DockerWatch {
    docker: bollard::Docker,
    containers: Vec<WatchedContainer>,
    topology: Topology,
}

/// Discovers the containers to watch and their topology.
async fn docker_watch(project: Option<&str>) -> anyhow::Result<DockerWatch> {
    let docker = crate::observe::docker::connect().await?;
    let found = crate::observe::docker::discover(&docker, project).await?;
    if found.is_empty() {
        anyhow::bail!(
            "no running containers{} found",
            project
                .map(|p| format!(" in compose project {p}"))
                .unwrap_or_default()
        );
    }
    let ids: Vec<String> = found.iter().map(|(id, _)| id.clone()).collect();
    let topology = Topology::build(found.into_iter().map(|(_, f)| f).collect());
    let watched = topology
        .nodes
        .iter()
        .zip(ids)
        .map(|(n, id)| WatchedContainer {
            id,
            name: n.facts.name.clone(),
            role: n.role,
            cpu_limit_cores: n.facts.cpu_limit_cores,
            memory_limit_bytes: n.facts.memory_limit_bytes,
            attached_to: n.attached_to.clone(),
            runner_limit: n.runner_limit.as_ref().map(|l| l.value),
        })
        .collect();
    Ok(DockerWatch {
        docker,
        containers: watched,
        topology,
    })
}

async fn sim_command(s: SimCommand) -> anyhow::Result<()> {
    let env = process_env;
    match s {
        SimCommand::Main(a) => {
            let mut cfg =
                config::MainConfig::from_env(&env, a.port, Duration::from_millis(a.overhead_ms))?;
            cfg.redis = a.redis.as_deref().map(RedisUrl::parse).transpose()?;
            cfg.cpu = Duration::from_millis(a.cpu_ms);
            for w in &a.workflows {
                cfg.workflows.add(w)?;
            }
            sim::run_main(cfg).await
        }
        SimCommand::Worker(a) => {
            let mut cfg = config::WorkerConfig::from_env(
                &env,
                a.concurrency,
                Duration::from_millis(a.overhead_ms),
            )?;
            cfg.redis = a.redis.as_deref().map(RedisUrl::parse).transpose()?;
            cfg.cpu = Duration::from_millis(a.cpu_ms);
            sim::run_worker(cfg).await
        }
        SimCommand::Runner => sim::run_runner(config::RunnerConfig::from_env(&env)?).await,
        // While it still waits for its Redis, `docker stop` ends it at once too.
        SimCommand::N8n { args } => tokio::select! {
            r = sim_n8n(args) => r,
            _ = crate::util::stop_signal() => Ok(()),
        },
        SimCommand::All(a) => {
            let w = config::WorkerConfig::from_env(&env, a.concurrency, Duration::ZERO)?;
            let port = match a.port {
                Some(p) => p,
                None => crate::util::env_parse(&env, "N8N_PORT", 5678u16, "a port number")?,
            };
            let runner_limit = match a.runner_limit {
                Some(0) => return Err(BadInput("--runner-limit must be at least 1".into()).into()),
                Some(l) => l,
                None => config::runner_limit(&env)?,
            };
            let m = config::MetricsConfig::from_env(&env, true)?;
            let mut workflows = config::Workflows::default();
            for w in &a.workflows {
                workflows.add(w)?;
            }
            let listen = crate::util::env_parse(
                &env,
                "N8N_LISTEN_ADDRESS",
                std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                "an IP address",
            )?;
            sim::run_all(sim::StackConfig {
                listen,
                port,
                workers: a.workers.max(1),
                worker_concurrency: w.concurrency,
                runners_per_worker: a.runners_per_worker,
                runner_limit,
                task_request_timeout: w.task_request_timeout,
                queue_metrics_interval: m.queue_metrics_interval,
                event_bus_metrics: m.event_bus_metrics,
                overhead: Duration::from_millis(a.overhead_ms),
                worker_cpu: Duration::from_millis(a.cpu_ms),
                main_cpu: Duration::from_millis(a.main_cpu_ms),
                redis: a.redis.as_deref().map(RedisUrl::parse).transpose()?,
                workflows,
                regular: a.executions_mode == crate::cli::ExecutionsModeArg::Regular,
                production_limit: config::production_limit(&env)?,
            })
            .await
        }
    }
}

/// `sim n8n ARGS`: plays the n8n command line (main, or `worker`), its Redis found first.
async fn sim_n8n(args: Vec<String>) -> anyhow::Result<()> {
    let env = process_env;
    let overhead = Duration::from_millis(20);
    match args.first().map(String::as_str) {
        Some("worker") => {
            let conc = match crate::topology::concurrency_flag(&args) {
                Some(Ok(c)) => Some(c),
                Some(Err(bad)) => {
                    return Err(BadInput(format!("--concurrency {bad:?} is not a number")).into())
                }
                None => None,
            };
            let mut cfg = config::WorkerConfig::from_env(&env, conc, overhead)?;
            cfg.redis = sim_n8n_redis(&env, "worker").await?;
            sim::run_worker(cfg).await
        }
        None | Some("start") | Some("webhook") => {
            let mut cfg = config::MainConfig::from_env(&env, None, overhead)?;
            // Regular mode has no queue: nothing to wait for.
            if cfg.regular.is_none() {
                cfg.redis = sim_n8n_redis(&env, "main").await?;
            }
            sim::run_main(cfg).await
        }
        Some(other) => Err(BadInput(format!(
            "sim n8n: {other:?} is not an n8n command the simulator plays (worker, webhook, start)"
        ))
        .into()),
    }
}

/// `diagnose --prometheus`: the range's busy windows judged like a sweep, without a load test.
async fn history_cmd(a: DiagnoseArgs) -> anyhow::Result<i32> {
    use crate::observe::{history, prometheus};
    let h = &a.history;
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
    let src = prometheus::Source::new(url, auth, h.ca_cert.as_deref(), timeout)?;
    let q = history_query(h)?;
    let mut flags = a.settings.settings()?;
    if a.docker || a.project.is_some() {
        match docker_watch(a.project.as_deref()).await {
            Ok(w) => flags = flags.or(w.topology.model_settings()),
            Err(e) => eprintln!("n8ncap: {e:#}; diagnosing without container settings"),
        }
    }
    // A bad --out fails before the read, not after it.
    let made = match &h.out {
        Some(dir) => history_out(dir)?,
        None => false,
    };
    let mut hist = match history::read(&src, &q).await {
        Ok(h) => h,
        Err(e) => {
            // Nothing was read: leave no empty results directory behind.
            if let (Some(dir), true) = (&h.out, made) {
                let _ = std::fs::remove_dir(dir);
            }
            anyhow::bail!("reading {}: {e}", src.shown);
        }
    };
    let timeout_s = a.settings.task_request_timeout()?;
    // Recorded with the windows, so the saved run is judged again with the same settings.
    let known = flags.clone().or(crate::diagnose::history::settings(&hist));
    let (d, stages) = crate::diagnose::history::judge(&mut hist, flags, timeout_s);
    let rec = crate::recommend::recommend(&d, None);
    let mut summary = crate::record::Summary::new(
        &format!("prometheus: {}", src.shown),
        crate::record::LoadModel::Open,
        "",
        None,
    );
    summary.stages = stages;
    summary.settings = Some(known);
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
        crate::analysis::write_report(dir, &summary)?;
    }
    if a.json {
        // Written as it is serialized: a week of windows never becomes a JSON tree in memory.
        #[derive(serde::Serialize)]
        struct Out<'a> {
            history: &'a crate::record::history::History,
            diagnosis: &'a crate::record::Diagnosis,
            recommendation: Option<&'a crate::record::Recommendation>,
            stages: &'a [crate::record::StageResult],
        }
        let out = Out {
            history: &hist,
            diagnosis: &d,
            recommendation: rec.as_ref().ok(),
            stages: &summary.stages,
        };
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        let written = serde_json::to_writer_pretty(&mut w, &out)
            .map_err(std::io::Error::from)
            .and_then(|()| {
                use std::io::Write as _;
                writeln!(w)?;
                w.flush()
            });
        match written {
            // A reader that closed the pipe (`| head`) is no failure.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other?,
        }
    } else {
        let text = format!(
            "{}\n{}{}",
            crate::report::text::history(&hist),
            crate::report::text::diagnosis(&d),
            match &rec {
                Ok(r) => crate::report::text::recommendation(r),
                Err(why) => format!("No recommendation: {why}"),
            }
        );
        let folded =
            crate::report::width::fold(text.trim_end(), crate::report::width::output_width());
        println!("{}", crate::util::for_terminal(&folded));
    }
    Ok(error::EXIT_OK)
}

/// Prose for the terminal: folded to its width (100 columns when piped), control characters
/// escaped.
fn for_width(text: &str) -> String {
    let folded = crate::report::width::fold(text.trim_end(), crate::report::width::output_width());
    crate::util::for_terminal(&folded).into_owned()
}

/// The history's results directory: refused when it holds a run's results already; true when
/// it was made here (and so may be removed again if nothing is read).
fn history_out(dir: &std::path::Path) -> anyhow::Result<bool> {
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
    Ok(!existed)
}

/// The range: --since back from --end (or now), or --start to --end.
fn history_query(h: &crate::cli::HistoryArgs) -> Result<crate::observe::history::Query, BadInput> {
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
