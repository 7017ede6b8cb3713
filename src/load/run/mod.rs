//! The sweep: runs a profile's stages one after another with the same virtual users (closed
//! model) or an arrival scheduler (open model) — or, adaptive, the levels `adaptive::Search`
//! chooses, each ended once steady — writes `stages.jsonl` as each stage ends and
//! `summary.json` after every stage, so an interrupted run keeps what it measured.

mod adaptive_loop;
mod closed;
mod open;
mod preflight;
mod progress;
mod result;
mod stage;

pub use preflight::{check_targets, failure_words, preflight};

use crate::error::BadInput;
use crate::load::adaptive::{Batches, Decision, Search, SearchStep, Seen, StageEnd};
use crate::load::checks::{self, run_check, Aggregation, Threshold, ThresholdResult};
use crate::load::client::{Connection, Target};
use crate::load::profile::{Check, LoadModel, Profile, Stage};
use crate::load::stats::{Agg, Sample, StageRecorder};
use crate::record::dir::ResultsDir;
use crate::record::observation::Observer;
use crate::record::stage::{
    CheckResult, QueueObserved, ScenarioResult, StageResult, ThresholdMetric,
};
use crate::record::summary::ScenarioInfo;
use crate::record::Summary;
use closed::*;
use open::*;
use progress::*;
use result::*;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// What to run and where to write it.
pub struct SweepOptions {
    pub profile: Profile,
    /// Results directory, created by the caller before anything runs (a bad path fails at once).
    pub out: Option<ResultsDir>,
    pub abort_on_fail: bool,
    /// Live progress line on stderr (only shown when stderr is a terminal).
    pub progress: bool,
    /// Watches the system under test (n8n's metrics, containers, Redis) beside the load; its
    /// first readings (baselines) are taken by the caller before the sweep starts.
    pub observer: Option<Box<dyn Observer>>,
    /// n8n's queue-gauge refresh interval, to flag stages shorter than it.
    pub queue_metrics_interval: Duration,
    /// Run every stage this many times in a row (for confidence intervals); 1 = once.
    pub repeat: u32,
    /// Settings known before the load (flags, Docker), recorded with the run.
    pub settings: Option<crate::model::settings::Settings>,
    /// Choose the levels adaptively instead of running the profile's stages.
    pub adaptive: Option<AdaptiveOptions>,
    /// Cores of the host n8n runs on, when known, recorded with the run.
    pub host: Option<crate::record::summary::Host>,
}

impl SweepOptions {
    /// A sweep of `profile` with nothing observed, nothing written, each stage once.
    pub fn new(profile: Profile) -> SweepOptions {
        SweepOptions {
            profile,
            out: None,
            abort_on_fail: false,
            progress: false,
            observer: None,
            queue_metrics_interval: Duration::from_secs(20),
            repeat: 1,
            settings: None,
            host: None,
            adaptive: None,
        }
    }
}

/// `sweep --adaptive`: the bounds of the search and of each stage.
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveOptions {
    /// Never more in flight than this.
    pub max_vus: u32,
    /// Wall time for the whole search.
    pub budget: Duration,
    /// A stage ends once its throughput's 95 % half-width is under this share of its mean.
    pub precision: f64,
    /// A stage ends at this length (after its warm-up) whatever its precision.
    pub max_stage: Duration,
    /// Past the knee, keep raising the load until thresholds fail.
    pub to_failure: bool,
    /// The level tried right after the baseline while none is saturated (a scale sweep's
    /// previous knee scaled to this count), instead of doubling up to it.
    pub head_start: Option<u32>,
}

/// How the run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Completed,
    Interrupted,
}

/// One scenario as the virtual users send it.
struct ScenarioRun {
    target: Target,
    checks: Vec<Check>,
    /// Where its checks start in the stage's list of checks.
    check_offset: usize,
}

/// A scenario's name and its checks' names, for its figures.
#[derive(Clone)]
struct ScenarioNames {
    name: String,
    checks: Vec<String>,
}

/// Scenario indices in the order iterations take them: a smooth weighted round-robin of
/// [`SCHEDULE_LEN`] slots, so every run of that many iterations has each scenario's share to
/// the slot, without randomness.
const SCHEDULE_LEN: usize = 1000;

fn schedule(shares: &[f64]) -> Vec<u16> {
    let mut current = vec![0.0f64; shares.len()];
    (0..SCHEDULE_LEN)
        .map(|_| {
            for (c, s) in current.iter_mut().zip(shares) {
                *c += s;
            }
            let best = (0..current.len())
                .max_by(|a, b| current[*a].total_cmp(&current[*b]).then(b.cmp(a)))
                .unwrap_or(0);
            current[best] -= 1.0;
            best as u16
        })
        .collect()
}

struct Shared {
    scenarios: Vec<ScenarioRun>,
    schedule: Vec<u16>,
    next_iteration: AtomicU64,
    recorder: RwLock<Arc<StageRecorder>>,
    stop: AtomicBool,
    live_done: AtomicU64,
    live_failed: AtomicU64,
}

impl Shared {
    fn current(&self) -> Arc<StageRecorder> {
        match self.recorder.read() {
            Ok(r) => r.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The scenario the next iteration runs.
    fn pick(&self) -> usize {
        let k = self.next_iteration.fetch_add(1, Ordering::Relaxed) as usize;
        self.schedule
            .get(k % self.schedule.len().max(1))
            .map(|i| *i as usize)
            .unwrap_or(0)
    }

    fn set_current(&self, rec: Arc<StageRecorder>) {
        match self.recorder.write() {
            Ok(mut r) => *r = rec,
            Err(p) => *p.into_inner() = rec,
        }
    }

    /// Records one request into `rec`, the recorder of the stage it belongs to. `counted_at`
    /// decides warm-up or window: the completion (closed model) or the intended start (open
    /// model: a stage's arrivals are those it started, counted even when they end after it).
    fn finish(
        &self,
        rec: &StageRecorder,
        (shard, scenario): (usize, usize),
        ex: &crate::load::client::Exchange,
        (blocked, started, counted_at): (Duration, Instant, Option<Instant>),
    ) {
        let now = Instant::now();
        let Some(sc) = self.scenarios.get(scenario) else {
            return;
        };
        let mut results = [false; MAX_CHECKS];
        let n = sc.checks.len().min(results.len());
        let mut json = None;
        if let Ok((status, body)) = &ex.result {
            for (i, c) in sc.checks.iter().take(n).enumerate() {
                results[i] = run_check(c, *status, body, &mut json);
            }
        }
        let failed = !matches!(&ex.result, Ok((s, _)) if *s < 400) || results[..n].contains(&false);
        self.live_done.fetch_add(1, Ordering::Relaxed);
        if let Some(intended) = counted_at {
            rec.answered(intended, !failed);
        }
        if failed {
            self.live_failed.fetch_add(1, Ordering::Relaxed);
        }
        if self.stop.load(Ordering::Relaxed) {
            return;
        }
        rec.record(
            shard,
            (scenario, sc.check_offset),
            &Sample {
                exchange: ex,
                blocked,
                latency: now.saturating_duration_since(started),
                checks: &results[..n],
            },
            counted_at.unwrap_or(now),
        );
    }
}

const MAX_CHECKS: usize = 16;

/// The state of a sweep between stages.
struct Sweep {
    opts: SweepOptions,
    stages: Vec<(Stage, u32)>,
    thresholds: Vec<Threshold>,
    shared: Arc<Shared>,
    summary: Summary,
    totals: Vec<Agg>,
    vus: VirtualUsers,
    run_start: Instant,
    total_time: Duration,
    /// Every check of the stage, scenario by scenario.
    check_names: Vec<String>,
    /// Per scenario of a mix (one entry for a one-request profile).
    names: Vec<ScenarioNames>,
    /// The target is on loopback: this machine is n8n's host, so its busy CPU is recorded.
    target_is_local: bool,
    /// The target's port when it is on this machine: its deployment's processes are read.
    local_port: Option<u16>,
    /// Open model: arrivals of the last stage still unanswered when it was read (the drain
    /// ran out): the next stage starts with them in n8n's backlog.
    inherited: u64,
}

/// Builds each scenario's body and target (a missing file or a bad URL fails here, before any
/// load) and what the summary records of it.
async fn prepare_scenarios(
    profile: &Profile,
) -> anyhow::Result<(Vec<ScenarioRun>, Vec<ScenarioInfo>)> {
    // A scenario's own timeout is checked as the profile's is, and named by its place.
    let timeout_of = |t: &str, at: &str| -> anyhow::Result<Duration> {
        if profile.scenarios.is_empty() {
            return profile.timeout();
        }
        match crate::util::parse_duration(t) {
            Ok(d) if d >= Duration::from_millis(1) => Ok(d),
            Ok(_) => Err(BadInput(format!("{at}.timeout must be more than 0")).into()),
            Err(e) => Err(BadInput(format!("{at}.timeout: {e}")).into()),
        }
    };
    let mut runs = Vec::new();
    let mut infos = Vec::new();
    let mut offset = 0;
    for (i, sc) in profile.scenarios()?.into_iter().enumerate() {
        if sc.checks.len() > MAX_CHECKS {
            return crate::error::bad_input(format!(
                "a profile (or scenario) may have at most {MAX_CHECKS} checks"
            ));
        }
        let r = &sc.request;
        let at = match profile.scenarios.is_empty() {
            true => format!("profile {}: request", profile.name),
            false => format!("profile {}: scenarios[{i}].request", profile.name),
        };
        let body = super::body::build(&super::body::BodySource {
            json: r.body.as_ref(),
            file: r.body_file.as_deref(),
            files: &r.files,
            fields: &r.fields,
            base: &profile.base_dir,
            at: &at,
        })?;
        let mut target = Target::new(
            &r.url,
            &r.method,
            &r.headers,
            &body,
            timeout_of(&r.timeout, &at)?,
        )
        .await?;
        target.set_tls(r.ca_cert.as_deref().map(std::path::Path::new), r.insecure)?;
        infos.push(ScenarioInfo {
            name: sc.name.clone(),
            method: target.method.to_string(),
            url: target.url.clone(),
            share: sc.share,
            body: r.body.clone(),
            body_info: body.info.clone(),
            job_time_s: sc.job_time_s,
            code_time_s: sc.code_time_s,
        });
        runs.push(ScenarioRun {
            target,
            check_offset: offset,
            checks: sc.checks,
        });
        offset += runs.last().map(|r| r.checks.len()).unwrap_or(0);
    }
    Ok((runs, infos))
}

/// A sweep as a source of evidence: the stages run now, watched, ended early by `interrupt`
/// (the summary says it was interrupted; what was measured is kept).
pub struct LiveSweep<F> {
    pub opts: SweepOptions,
    pub interrupt: F,
}

impl<F: Future<Output = ()>> crate::record::evidence::Source for LiveSweep<F> {
    async fn evidence(self) -> anyhow::Result<crate::record::evidence::Evidence> {
        let (summary, _) = run_sweep(self.opts, self.interrupt).await?;
        Ok(crate::record::evidence::Evidence::of(summary))
    }
}

/// Runs the sweep. `interrupt` resolving (Ctrl-C) ends the current stage as partial.
pub async fn run_sweep(
    opts: SweepOptions,
    interrupt: impl Future<Output = ()>,
) -> anyhow::Result<(Summary, Ending)> {
    let mut sweep = Sweep::prepare(opts).await?;
    tokio::pin!(interrupt);
    if let Some(a) = sweep.opts.adaptive {
        let ending = sweep.run_adaptive(a, &mut interrupt).await?;
        return Ok((sweep.finish()?, ending));
    }
    let mut ending = Ending::Completed;
    for index in 0..sweep.stages.len() {
        let (end, failed_thresholds) = sweep.run_stage(index, &mut interrupt, None).await?;
        if let StageEnd::Interrupted = end {
            sweep.summary.interrupted = true;
            ending = Ending::Interrupted;
            break;
        }
        if sweep.opts.abort_on_fail && failed_thresholds && index + 1 < sweep.stages.len() {
            sweep.summary.aborted_by_threshold = true;
            break;
        }
    }
    Ok((sweep.finish()?, ending))
}

impl Sweep {
    async fn prepare(opts: SweepOptions) -> anyhow::Result<Sweep> {
        let profile = &opts.profile;
        let repeat = opts.repeat.max(1);
        let stages: Vec<(Stage, u32)> = profile
            .resolve_stages()?
            .into_iter()
            .flat_map(|s| (0..repeat).map(move |r| (s.clone(), r)))
            .collect();
        let thresholds = checks::parse_all(&profile.thresholds)?;
        let (runs, infos) = prepare_scenarios(profile).await?;
        let mut names = Vec::new();
        let mut check_names = Vec::new();
        for (run, info) in runs.iter().zip(&infos) {
            let checks: Vec<String> = run.checks.iter().map(Check::name).collect();
            check_names.extend(checks.iter().map(|c| match runs.len() {
                1 => c.clone(),
                _ => format!("{}: {c}", info.name),
            }));
            names.push(ScenarioNames {
                name: info.name.clone(),
                checks,
            });
        }
        let shared = Arc::new(Shared {
            schedule: schedule(&infos.iter().map(|i| i.share).collect::<Vec<_>>()),
            scenarios: runs,
            next_iteration: AtomicU64::new(0),
            recorder: RwLock::new(Arc::new(StageRecorder::new(
                Instant::now(),
                Duration::ZERO,
                check_names.len(),
                &[],
            ))),
            stop: AtomicBool::new(false),
            live_done: AtomicU64::new(0),
            live_failed: AtomicU64::new(0),
        });
        let mut summary = Summary::new(
            &profile.name,
            profile.model,
            &crate::wire::url::redact(&profile.request.url),
            profile.request.body.clone(),
            std::time::SystemTime::now(),
        );
        if !profile.scenarios.is_empty() {
            summary.url = infos
                .iter()
                .map(|i| i.url.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            if let [one] = infos.as_slice() {
                summary.body = one.body.clone();
            }
            summary.scenarios = infos;
        }
        summary.settings = opts.settings.clone();
        summary.host = opts.host.clone();
        let total_time = stages.iter().map(|(s, _)| s.duration).sum();
        let local_port = crate::wire::url::HttpUrl::parse(&profile.request.url, "URL")
            .ok()
            .filter(|u| u.is_loopback())
            .map(|u| u.port);
        let target_is_local = local_port.is_some();
        Ok(Sweep {
            opts,
            stages,
            thresholds,
            shared,
            summary,
            totals: Vec::new(),
            vus: VirtualUsers::default(),
            run_start: Instant::now(),
            total_time,
            check_names,
            names,
            target_is_local,
            local_port,
            inherited: 0,
        })
    }

    fn finish(mut self) -> anyhow::Result<Summary> {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.vus.tasks.abort_all();
        if let Some(o) = self.opts.observer.as_mut() {
            o.stop();
        }
        finish_summary(&mut self.summary, &self.totals, &self.thresholds);
        if let Some(o) = self.opts.out.as_ref() {
            o.write_summary(&self.summary)?;
        }
        Ok(self.summary)
    }
}

/// When an adaptive stage may end.
#[derive(Debug, Clone, Copy)]
struct Steady {
    precision: f64,
    min_window: Duration,
    deadline: Instant,
    /// While refining the knee: stop once the interval lies wholly on one side of this rate.
    settle: Option<f64>,
    /// A level that only counts slots: it ends at its (short) duration.
    count_slots: bool,
}
