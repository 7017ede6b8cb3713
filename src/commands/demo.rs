//! `n8ncap demo`: the embedded default. Starts the simulator in-process with the reference setup
//! (one worker with concurrency 15, one runner with limit 10), sweeps it with a short closed
//! load, and prints what n8ncap reports — in under a minute, with nothing else installed.

use super::analyze;
use crate::error;
use crate::load::profile::{LoadModel, Profile, RequestSpec, StageSpec};
use crate::load::run::{run_sweep, Ending, SweepOptions};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::observe::watch::Endpoint;
use crate::record::{Diagnosis, Recommendation, Role, Summary};
use crate::report::views::{Run, RunJson};
use crate::report::Format;
use crate::sim::{Stack, StackConfig};
use std::time::Duration;

pub const DEMO_WORKER_CONCURRENCY: u32 = 15;
pub const DEMO_RUNNER_LIMIT: u32 = 10;
/// Job time shortened from the reference study's 3 s so the demo ends in under a minute.
pub const DEMO_JOB_MS: u64 = 500;
pub const DEMO_STAGES: [u32; 4] = [1, 10, 20, 40];

pub(super) async fn run(output: &crate::cli::OutputArgs) -> anyhow::Result<i32> {
    let format = output.format::<Run>("demo")?;
    let json = format != Format::Table;
    if !json {
        let intro = intro();
        let width = crate::report::width::output_width();
        println!("{}\n", crate::report::width::fold(&intro, width));
    }
    let out = run_demo(!json).await?;
    let run = Run {
        summary: &out.summary,
        diagnosis: &out.diagnosis,
        recommendation: &out.recommendation,
        json: RunJson::Summary,
        results: None,
    };
    crate::report::emit(&run, format)?;
    Ok(match out.ending {
        // The demo's own signal listener has the signal; SIGTERM and SIGINT both end it here.
        Ending::Interrupted => error::EXIT_INTERRUPTED,
        Ending::Completed => error::EXIT_OK,
    })
}

pub fn demo_profile(url: &str) -> Profile {
    let mut p = Profile::parse("model: closed\nrequest: {}\nstages: [{vus: 1}]\n", "demo")
        .expect("the demo profile is valid");
    p.name = "demo".into();
    p.model = LoadModel::Closed;
    p.request = RequestSpec {
        url: url.to_string(),
        body: Some(serde_json::json!({"sleep_ms": DEMO_JOB_MS, "wait_ms": 0, "alloc_mb": 0})),
        ..p.request
    };
    p.stage_duration = "8s".into();
    p.warmup = "3s".into();
    p.stages = DEMO_STAGES
        .iter()
        .map(|v| StageSpec {
            vus: Some(*v),
            ..Default::default()
        })
        .collect();
    p
}

/// What the demo knows about the stack it started, as the model's settings.
pub fn demo_settings() -> Settings {
    let src = || Provenance::Deployment("simulator configuration".into());
    Settings {
        workers: Some(Sourced::new(1, src())),
        worker_concurrency: Some(Sourced::new(DEMO_WORKER_CONCURRENCY, src())),
        runner_limit: Some(Sourced::new(DEMO_RUNNER_LIMIT, src())),
        runners_per_worker: Some(Sourced::new(1, src())),
        ..Settings::default()
    }
}

/// The demo's results: the sweep (with diagnosis and recommendation stored in it) and both.
pub struct DemoOutcome {
    pub summary: Summary,
    pub ending: Ending,
    pub diagnosis: Diagnosis,
    pub recommendation: Result<Recommendation, crate::error::NoPlan>,
}

/// Runs the demo: simulator, sweep, diagnosis, recommendation.
pub async fn run_demo(progress: bool) -> anyhow::Result<DemoOutcome> {
    let (mut summary, ending) = run_demo_sweep(progress).await?;
    let (diagnosis, recommendation) = analyze(&mut summary, Settings::default(), None);
    Ok(DemoOutcome {
        summary,
        ending,
        diagnosis,
        recommendation,
    })
}

async fn run_demo_sweep(progress: bool) -> anyhow::Result<(Summary, Ending)> {
    let stack = Stack::start(StackConfig {
        worker_concurrency: DEMO_WORKER_CONCURRENCY,
        runner_limit: DEMO_RUNNER_LIMIT,
        queue_metrics_interval: Duration::from_secs(1),
        ..StackConfig::default()
    })
    .await?;
    let endpoints = vec![
        Endpoint {
            url: format!("{}/metrics", stack.main_url),
            role: Some(Role::Main),
        },
        Endpoint {
            url: stack.worker_metrics_urls[0].clone(),
            role: Some(Role::Worker),
        },
    ];
    let observer =
        crate::observe::watch::observer(endpoints, None, None, Duration::from_secs(1), None).await;
    let profile = demo_profile(&stack.webhook_url);
    // The simulator runs inside this process: its roles report their own CPU, so n8ncap's
    // process CPU (which contains them) must not be added to the host's again.
    let host = crate::record::summary::Host {
        shares_client_cpu: false,
        ..crate::observe::host_facts(&profile.request.url, None)
    };
    let opts = SweepOptions {
        profile,
        out: None,
        abort_on_fail: false,
        progress,
        observer,
        queue_metrics_interval: Duration::from_secs(1),
        repeat: 1,
        settings: Some(demo_settings()),
        adaptive: None,
        host: Some(host),
    };
    let out = run_sweep(opts, crate::util::Interrupt::install().wait()).await?;
    drop(stack);
    Ok(out)
}

pub fn intro() -> String {
    format!(
        "n8ncap demo — a simulated n8n in queue mode: 1 worker (concurrency {DEMO_WORKER_CONCURRENCY}) \
         and 1 task runner (N8N_RUNNERS_MAX_CONCURRENCY={DEMO_RUNNER_LIMIT}) run a webhook → Code \
         node ({DEMO_JOB_MS} ms) → respond workflow.\nLoad: {} in flight (closed model), 8 s per \
         stage, 3 s warm-up excluded.",
        DEMO_STAGES
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
