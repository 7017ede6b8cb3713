//! The sweep: runs a profile's stages one after another with the same virtual users (closed
//! model) or an arrival scheduler (open model) — or, adaptive, the levels `adaptive::Search`
//! chooses, each ended once steady — writes `stages.jsonl` as each stage ends and
//! `summary.json` after every stage, so an interrupted run keeps what it measured.

use super::adaptive::{Batches, Decision, Search, SearchStep, Seen, StageEnd};
use super::checks::{self, run_check, Aggregation, Threshold, ThresholdResult};
use super::client::{Connection, Target};
use super::profile::{Check, LoadModel, Profile, Stage};
use super::stats::{Agg, Sample, StageRecorder};
use crate::error::BadInput;
use crate::record::dir::ResultsDir;
use crate::record::observation::Observer;
use crate::record::stage::{
    CheckResult, QueueObserved, ScenarioResult, StageResult, ThresholdMetric,
};
use crate::record::summary::ScenarioInfo;
use crate::record::Summary;
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
        ex: &super::client::Exchange,
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

/// The closed model's virtual users, kept across stages: lowering the count retires the
/// newest ones after their current request.
#[derive(Default)]
struct VirtualUsers {
    tasks: JoinSet<()>,
    flags: Vec<Arc<AtomicBool>>,
    next_id: u32,
}

impl VirtualUsers {
    fn resize(&mut self, shared: &Arc<Shared>, n: usize) {
        while self.flags.len() > n {
            if let Some(f) = self.flags.pop() {
                f.store(true, Ordering::Relaxed);
            }
        }
        while self.flags.len() < n {
            let flag = Arc::new(AtomicBool::new(false));
            self.tasks
                .spawn(closed_vu(shared.clone(), self.next_id, flag.clone()));
            self.flags.push(flag);
            self.next_id = self.next_id.wrapping_add(1);
        }
        while self.tasks.try_join_next().is_some() {}
    }
}

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
        let target_is_local = crate::wire::url::HttpUrl::parse(&profile.request.url, "URL")
            .is_ok_and(|u| u.is_loopback());
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
            inherited: 0,
        })
    }

    /// Runs stage `index` to its end (or the interrupt), records it and writes it out.
    /// `steady`: end the stage once steady (adaptive sweep), else at its duration.
    async fn run_stage(
        &mut self,
        index: usize,
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
        steady: Option<Steady>,
    ) -> anyhow::Result<(StageEnd, bool)> {
        let (stage, rep) = self.stages[index].clone();
        if self.opts.progress && !std::io::stderr().is_terminal() {
            eprintln!(
                "n8ncap: stage {}{} ({}) started",
                index + 1,
                if self.opts.adaptive.is_none() {
                    format!("/{}", self.stages.len())
                } else {
                    String::new()
                },
                stage.label()
            );
        }
        let stage_start = Instant::now();
        let cpu_start = crate::util::own_cpu_seconds();
        let host_start = crate::util::host_busy_cpu_seconds();
        let per_scenario: Vec<usize> = match self.names.len() {
            1 => Vec::new(),
            _ => self.names.iter().map(|n| n.checks.len()).collect(),
        };
        let rec = Arc::new(StageRecorder::new(
            stage_start,
            stage.warmup,
            self.check_names.len(),
            &per_scenario,
        ));
        self.shared.set_current(rec.clone());
        let mut stage_tasks: JoinSet<()> = JoinSet::new();
        match self.opts.profile.model {
            LoadModel::Closed => {
                let n = stage.ramp.map(|r| r.from).or(stage.vus).unwrap_or(1);
                self.vus.resize(&self.shared, n as usize)
            }
            LoadModel::Open => {
                stage_tasks.spawn(open_scheduler(
                    self.shared.clone(),
                    stage.clone(),
                    rec.clone(),
                    stage_start,
                ));
            }
        }
        if let Some(o) = self.opts.observer.as_mut() {
            o.begin_stage(index, stage_start + stage.warmup);
        }
        let mut end = match stage.ramp {
            Some(r) => {
                self.ramp_stage(r, (index, &stage), stage_start, interrupt)
                    .await
            }
            None => {
                self.wait_stage(index, &stage, (stage_start, &rec), interrupt, steady)
                    .await
            }
        };
        let ended = Instant::now();
        if end != StageEnd::Interrupted && !stage_tasks.is_empty() {
            // Open model: the arrivals this stage started finish and count in it, for at most
            // the request timeout (30 s at most, as k6's gracefulStop).
            let grace = self.opts.profile.timeout()?.min(Duration::from_secs(30));
            let drain = async { while stage_tasks.join_next().await.is_some() {} };
            tokio::select! {
                _ = tokio::time::timeout(grace, drain) => {}
                _ = interrupt.as_mut() => end = StageEnd::Interrupted,
            }
        }
        stage_tasks.abort_all();
        rec.close();
        let agg = rec.total(self.check_names.len());
        let scenario_aggs = rec.scenario_totals();
        let window = ended.saturating_duration_since(rec.warmup_until);
        let seen = self
            .opts
            .observer
            .as_mut()
            .map(|o| o.end_stage(stage.duration < self.opts.queue_metrics_interval));
        let mut result = stage_result(
            StageInput {
                index,
                stage: &stage,
                profile: &self.opts.profile,
                agg: &agg,
                dropped: rec.dropped(),
                window,
                partial: matches!(end, StageEnd::Interrupted),
                check_names: &self.check_names,
            },
            &self.thresholds,
            seen.as_ref().and_then(|s| s.queue.clone()),
        );
        if self.opts.profile.model == LoadModel::Open && ended > rec.warmup_until {
            if let Some(books) = rec.flow(rec.warmup_until, ended, rec.dropped()) {
                apply_flow(&mut result, &books, self.inherited);
                self.inherited = books.unanswered;
            }
        }
        result.scenarios = scenario_results(&result, &self.names, &scenario_aggs);
        result.repeat = rep;
        result.ended_by = Some(end);
        if let Some(seen) = seen {
            result.endpoints = seen.endpoints;
            result.containers = seen.containers;
            result.memory_by_role = seen.memory_by_role;
        }
        let wall = ended.saturating_duration_since(stage_start).as_secs_f64();
        if wall > 0.0 {
            result.client_cpu_percent =
                100.0 * (crate::util::own_cpu_seconds() - cpu_start).max(0.0) / wall;
            if self.target_is_local {
                if let (Some(a), Some(b)) = (host_start, crate::util::host_busy_cpu_seconds()) {
                    result.host_cpu_percent = Some(100.0 * (b - a).max(0.0) / wall);
                }
            }
        }
        if self.opts.progress && std::io::stderr().is_terminal() {
            eprint!("\r\x1b[2K");
        } else if self.opts.progress {
            // CI logs, `| tee`: one plain line per stage end instead of a progress bar.
            eprintln!(
                "n8ncap: stage {} ({}) ended: {} requests, {:.2} req/s{}",
                index + 1,
                result.label,
                result.requests,
                result.throughput_rps,
                if result.valid { "" } else { ", invalid" }
            );
        }
        if let Some(o) = self.opts.out.as_mut() {
            o.append_stage(&result)?;
        }
        let failed_thresholds = result.thresholds.iter().any(|t| !t.passed);
        self.summary.stages.push(result);
        self.totals.push(agg);
        finish_summary(&mut self.summary, &self.totals, &self.thresholds);
        if let Some(o) = self.opts.out.as_ref() {
            o.write_summary(&self.summary)?;
        }
        Ok((end, failed_thresholds))
    }

    /// Waits out the stage (or, adaptive, until it is steady), drawing the progress line once a
    /// second.
    async fn wait_stage(
        &self,
        index: usize,
        stage: &Stage,
        (stage_start, rec): (Instant, &StageRecorder),
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
        steady: Option<Steady>,
    ) -> StageEnd {
        let show_progress = self.opts.progress && std::io::stderr().is_terminal();
        let stage_end = stage_start + stage.duration;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut check = tokio::time::interval(Duration::from_millis(250));
        let n = stage.vus.unwrap_or(1);
        // One batch per round of the virtual users: each closes once N requests completed.
        let mut batches = Batches::new(n.max(1) as u64);
        let mut last = (0u64, 0u64, 0.0f64);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(stage_end.into()) => {
                    return match steady {
                        Some(st) if st.count_slots => StageEnd::SlotsCounted,
                        Some(_) => StageEnd::MaxLength { half_width: batches.relative_half_width() },
                        None => StageEnd::Duration,
                    };
                }
                _ = interrupt.as_mut() => return StageEnd::Interrupted,
                _ = check.tick(), if steady.is_some() => {
                    let Some(st) = steady else { continue };
                    let now = Instant::now();
                    if now >= st.deadline {
                        return StageEnd::Budget;
                    }
                    if now < rec.warmup_until || st.count_slots {
                        continue;
                    }
                    let p = rec.progress();
                    batches.add(n, p.0 - last.0, p.1 - last.1, p.2 - last.2);
                    last = p;
                    // Batches collect from the end of the warm-up; the stage may end once the
                    // window is long enough and the interval narrow enough.
                    let long_enough = now >= rec.warmup_until + st.min_window;
                    if let Some(hw) = batches
                        .relative_half_width()
                        .filter(|hw| long_enough && *hw < st.precision)
                    {
                        return StageEnd::Steady { half_width: hw };
                    }
                    if let (true, Some(threshold_rps)) = (long_enough, st.settle) {
                        if batches.settled(threshold_rps) {
                            return StageEnd::Settled {
                                half_width: batches.relative_half_width().unwrap_or(0.0),
                                threshold_rps,
                            };
                        }
                    }
                }
                _ = tick.tick() => {
                    if show_progress {
                        progress_line(
                            &self.shared,
                            index,
                            self.stages.len(),
                            stage,
                            self.run_start,
                            self.total_time,
                        );
                    }
                }
            }
        }
    }

    /// A ramp window: moves the virtual users linearly from `from` to `to` over the stage, ten
    /// times a second (users removed finish their request first, as k6's graceful ramp-down).
    async fn ramp_stage(
        &mut self,
        r: crate::record::stage::Ramp,
        (index, stage): (usize, &Stage),
        stage_start: Instant,
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> StageEnd {
        let total = stage.duration.as_secs_f64().max(1e-3);
        let show_progress = self.opts.progress && std::io::stderr().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut ticks = 0u64;
        loop {
            tokio::select! {
                _ = interrupt.as_mut() => return StageEnd::Interrupted,
                _ = tick.tick() => {
                    ticks += 1;
                    if show_progress && ticks % 10 == 1 {
                        let (n, run_start, total_time) = (self.stages.len(), self.run_start, self.total_time);
                        progress_line(&self.shared, index, n, stage, run_start, total_time);
                    }
                    let f = (stage_start.elapsed().as_secs_f64() / total).min(1.0);
                    let n = r.from as f64 + (r.to as f64 - r.from as f64) * f;
                    self.vus.resize(&self.shared, n.round() as usize);
                    if f >= 1.0 {
                        return StageEnd::Duration;
                    }
                }
            }
        }
    }

    /// The adaptive search: runs the level the search asks for until it stops, the budget is
    /// spent or the run is interrupted.
    async fn run_adaptive(
        &mut self,
        a: AdaptiveOptions,
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> anyhow::Result<Ending> {
        let mut search = Search::new(a.max_vus, a.to_failure);
        let deadline = Instant::now() + a.budget;
        // The profile's stages only lend their settings (stage fields such as max_vus); the
        // levels are the search's.
        let template = self.stages.first().map(|(s, _)| s.clone());
        self.stages.clear();
        self.total_time = a.budget;
        loop {
            search.counts_slots = self
                .summary
                .stages
                .iter()
                .any(|s| s.queue.as_ref().is_some_and(|q| q.samples > 0 && !q.coarse));
            let settle = search.settle_threshold();
            let (n, why, count_slots) = match search.next() {
                Decision::Run {
                    in_flight,
                    why,
                    count_slots,
                } => (in_flight, why, count_slots),
                Decision::Stop { why } => {
                    self.summary.search.push(SearchStep {
                        in_flight: None,
                        why,
                    });
                    return Ok(Ending::Completed);
                }
            };
            if Instant::now() >= deadline {
                self.summary.search.push(SearchStep {
                    in_flight: None,
                    why: format!("the budget of {:?} is spent", a.budget),
                });
                return Ok(Ending::Completed);
            }
            self.summary.search.push(SearchStep {
                in_flight: Some(n),
                why,
            });
            let warmup = Duration::try_from_secs_f64(search.warmup_s(n))
                .unwrap_or(a.max_stage)
                .min(a.max_stage);
            let mut stage = template.clone().unwrap_or(Stage {
                vus: None,
                rate: None,
                ramp_to: None,
                max_vus: None,
                duration: Duration::ZERO,
                warmup: Duration::ZERO,
                ramp: None,
            });
            stage.vus = Some(n);
            stage.ramp = None;
            stage.warmup = warmup;
            // A level that counts slots only needs the queue gauges to refresh twice.
            let counting = (2 * self.opts.queue_metrics_interval).max(Duration::from_secs(3));
            stage.duration = warmup + if count_slots { counting } else { a.max_stage };
            self.stages.push((stage, 0));
            let index = self.stages.len() - 1;
            let steady = Steady {
                // A refining level only has to say on which side of 95 % of the ceiling it
                // lies: twice the precision is enough there (a level whose interval still
                // straddles the line is at the knee, within the ±10 % the search asks).
                precision: if settle.is_some() && !count_slots {
                    (2.0 * a.precision).min(0.5)
                } else {
                    a.precision
                },
                // At least two response times (and 2 s) of steady window before judging.
                min_window: Duration::from_secs_f64((warmup.as_secs_f64() / 1.5 * 2.0).max(2.0)),
                deadline,
                settle: settle.filter(|_| !count_slots),
                count_slots,
            };
            let (end, failed) = self.run_stage(index, interrupt, Some(steady)).await?;
            if end == StageEnd::Interrupted {
                self.summary.interrupted = true;
                return Ok(Ending::Interrupted);
            }
            search
                .seen
                .push(seen(&self.summary.stages[index], n, failed));
        }
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

fn finish_summary(summary: &mut Summary, totals: &[Agg], thresholds: &[Threshold]) {
    summary.finished_at = crate::util::utc_rfc3339(SystemTime::now());
    let checks = totals.first().map(|a| a.check_passes.len()).unwrap_or(0);
    let mut all = Agg::new(checks);
    for a in totals {
        all.merge(a);
    }
    let window: f64 = summary.stages.iter().map(|s| s.window_s).sum();
    let dropped: u64 = summary.stages.iter().map(|s| s.dropped_iterations).sum();
    summary.thresholds = evaluate(thresholds, &all, window, dropped);
    summary.thresholds_passed = summary.thresholds.iter().all(|t| t.passed);
}

/// First pause after a refused connection; it doubles with each refusal in a row.
const REFUSED_BACKOFF_FIRST: Duration = Duration::from_millis(10);
/// Longest pause after refusals in a row: a target that comes up is found within this.
const REFUSED_BACKOFF_MAX: Duration = Duration::from_millis(500);

async fn closed_vu(shared: Arc<Shared>, id: u32, retired: Arc<AtomicBool>) {
    let mut conn = Connection::new();
    let mut refusals = 0u32;
    loop {
        if shared.stop.load(Ordering::Relaxed) || retired.load(Ordering::Relaxed) {
            return;
        }
        let scenario = shared.pick();
        let Some(sc) = shared.scenarios.get(scenario) else {
            return;
        };
        let started = Instant::now();
        let ex = conn.exchange(&sc.target).await;
        let refused = ex.result.is_err() && ex.new_connection;
        shared.finish(
            &shared.current(),
            (id as usize, scenario),
            &ex,
            (Duration::ZERO, started, None),
        );
        if refused {
            // A refused connection returns in microseconds: nothing listens there. Back off
            // (10 ms doubling to 0.5 s) instead of spinning a million refusals a minute; every
            // refusal still counts as a failure.
            let pause = REFUSED_BACKOFF_FIRST
                .saturating_mul(1 << refusals.min(10))
                .min(REFUSED_BACKOFF_MAX);
            refusals = refusals.saturating_add(1);
            tokio::time::sleep(pause).await;
        } else {
            refusals = 0;
        }
    }
}

/// Idle connections of the open model, reused across arrivals.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Connection>>,
}

async fn open_scheduler(
    shared: Arc<Shared>,
    stage: Stage,
    rec: Arc<StageRecorder>,
    start: Instant,
) {
    let pool = Arc::new(Pool::default());
    let permits = Arc::new(Semaphore::new(stage.max_vus.unwrap_or(1000) as usize));
    let dur = stage.duration.as_secs_f64();
    let r0 = stage.rate.unwrap_or(1.0);
    let r1 = stage.ramp_to.unwrap_or(r0);
    // Arrival k happens when the cumulative arrivals r0·t + (r1−r0)·t²/(2·dur) reach k.
    let time_of = |k: f64| -> f64 {
        let a = (r1 - r0) / (2.0 * dur);
        if a.abs() < 1e-12 {
            k / r0
        } else {
            (-r0 + (r0 * r0 + 4.0 * a * k).max(0.0).sqrt()) / (2.0 * a)
        }
    };
    let mut inflight = JoinSet::new();
    let mut k = 0u64;
    let end = start + stage.duration;
    loop {
        let t = time_of(k as f64);
        if !t.is_finite() || t >= dur {
            break;
        }
        let intended = start + Duration::from_secs_f64(t);
        let now = Instant::now();
        if now >= end {
            // Behind schedule at the stage's end (a rate the client cannot keep up): the
            // stage's arrivals are those it started; the rest were never sent, and those due
            // after the warm-up are dropped iterations, as k6 counts what it could not start.
            let cumulative = |t: f64| r0 * t + (r1 - r0) * t * t / (2.0 * dur);
            let warm = rec
                .warmup_until
                .saturating_duration_since(start)
                .as_secs_f64();
            let due = cumulative(dur).floor();
            let from = (k as f64).max(cumulative(warm.min(dur)).ceil());
            // A last arrival a timer tick late is not a generator that fell behind.
            if due - from > (0.01 * due).max(2.0) {
                rec.add_dropped((due - from) as u64);
            }
            break;
        }
        if intended > now {
            tokio::time::sleep_until(intended.into()).await;
        } else if k.is_multiple_of(64) {
            // Behind schedule: let the stage's end and Ctrl-C be heard.
            tokio::task::yield_now().await;
        }
        while inflight.try_join_next().is_some() {}
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                rec.arrived(intended);
                let sh = shared.clone();
                let pool = pool.clone();
                let rec = rec.clone();
                let scenario = shared.pick();
                inflight.spawn(async move {
                    let Some(sc) = sh.scenarios.get(scenario) else {
                        return;
                    };
                    let got = Instant::now();
                    let mut conn = pool
                        .idle
                        .lock()
                        .ok()
                        .and_then(|mut i| i.pop())
                        .unwrap_or_default();
                    let ex = conn.exchange(&sc.target).await;
                    sh.finish(
                        &rec,
                        (k as usize, scenario),
                        &ex,
                        (
                            got.saturating_duration_since(intended),
                            intended,
                            Some(intended),
                        ),
                    );
                    if ex.result.is_ok() {
                        if let Ok(mut i) = pool.idle.lock() {
                            i.push(conn);
                        }
                    }
                    drop(permit);
                });
            }
            Err(_) => {
                if Instant::now() >= rec.warmup_until {
                    rec.add_dropped(1);
                }
            }
        }
        k += 1;
    }
    // The stage's arrivals still in flight finish into this stage's recorder; the caller bounds
    // the wait (and dropping the set aborts what is left).
    while inflight.join_next().await.is_some() {}
}

/// The open model's throughput is what completed in the window, by completion time; what
/// arrived and did not complete in it is the backlog, reported with its growth.
fn apply_flow(st: &mut StageResult, b: &super::stats::FlowBooks, inherited: u64) {
    let w = st.window_s;
    if w <= 0.0 {
        return;
    }
    st.request_rate = b.completions as f64 / w;
    st.throughput_rps = b.good_completions as f64 / w;
    st.throughput_ci = Some(super::k6series::interval(
        &b.completion_offsets,
        (0.0, w),
        st.throughput_rps,
        b.good_completions as f64 / b.completions.max(1) as f64,
        0.0,
        0.0,
    ));
    st.flow = Some(crate::record::stage::Flow {
        inherited,
        ..crate::record::stage::Flow::of(
            w,
            (b.arrivals, b.dropped),
            b.completions,
            (b.backlog_start, b.backlog_end),
            b.late,
        )
    });
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

/// A finished stage as the search sees it.
fn seen(r: &StageResult, n: u32, failed_thresholds: bool) -> Seen {
    Seen {
        in_flight: n,
        throughput: r.throughput_rps,
        mean_response_s: r
            .latency
            .as_ref()
            .map(|l| l.mean_ms / 1000.0)
            .unwrap_or(0.0),
        waited_in_redis: r
            .queue
            .as_ref()
            .is_some_and(|q| q.samples > 0 && q.waiting_mean >= 1.0),
        failed: !r.valid || failed_thresholds,
    }
}

/// What one stage measured, before it becomes a [`StageResult`].
struct StageInput<'a> {
    index: usize,
    stage: &'a Stage,
    profile: &'a Profile,
    agg: &'a Agg,
    dropped: u64,
    window: Duration,
    partial: bool,
    check_names: &'a [String],
}

/// The pass rate of a stage's checks: passes ÷ evaluations (1 when nothing was checked but
/// something completed, 0 when nothing completed).
fn check_pass_rate(agg: &Agg) -> f64 {
    let passes: u64 = agg.check_passes.iter().sum();
    let evaluations = passes + agg.check_fails.iter().sum::<u64>();
    match (evaluations, agg.requests) {
        (0, 0) => 0.0,
        (0, _) => 1.0,
        _ => passes as f64 / evaluations as f64,
    }
}

fn check_results(names: &[String], agg: &Agg) -> Vec<CheckResult> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| CheckResult {
            name: name.clone(),
            passes: agg.check_passes.get(i).copied().unwrap_or(0),
            fails: agg.check_fails.get(i).copied().unwrap_or(0),
        })
        .collect()
}

/// Each scenario's figures: its part of the stage's throughput is the stage's throughput ×
/// its share of the good answers, so the parts add up to the whole (the closed model's
/// throughput comes from Little's law over all requests).
fn scenario_results(
    stage: &StageResult,
    names: &[ScenarioNames],
    aggs: &[Agg],
) -> Vec<ScenarioResult> {
    let good = |a: &Agg| a.ok.saturating_sub(a.errors.check_failed);
    let all_good: u64 = aggs.iter().map(good).sum();
    let all_requests: u64 = aggs.iter().map(|a| a.requests).sum();
    let rate_per_request = if stage.requests > 0 {
        stage.request_rate / stage.requests as f64
    } else {
        0.0
    };
    names
        .iter()
        .zip(aggs)
        .map(|(n, a)| ScenarioResult {
            name: n.name.clone(),
            requests: a.requests,
            ok: a.ok,
            throughput_rps: if all_good > 0 {
                stage.throughput_rps * good(a) as f64 / all_good as f64
            } else {
                0.0
            },
            request_rate: a.requests as f64 * rate_per_request,
            share: if all_requests > 0 {
                a.requests as f64 / all_requests as f64
            } else {
                0.0
            },
            latency: a.latency_summary(),
            error_rate: if a.requests > 0 {
                a.errors.http_failed() as f64 / a.requests as f64
            } else {
                0.0
            },
            errors: a.errors.clone(),
            checks: check_results(&n.checks, a),
            check_pass_rate: check_pass_rate(a),
            bytes_sent: a.bytes_sent,
            bytes_received: a.bytes_received,
        })
        .collect()
}

fn stage_result(
    input: StageInput<'_>,
    thresholds: &[Threshold],
    queue: Option<QueueObserved>,
) -> StageResult {
    let StageInput {
        index,
        stage,
        profile,
        agg,
        dropped,
        window,
        partial,
        check_names,
    } = input;
    let window_s = window.as_secs_f64();
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    let http_failed = agg.errors.http_failed();
    let error_rate = if agg.requests == 0 {
        // Nothing reached the steady window (a stage interrupted in its warm-up): the share
        // that failed is the warm-up's, not 0.
        if agg.warmup_requests > 0 {
            agg.warmup_failed as f64 / agg.warmup_requests as f64
        } else {
            0.0
        }
    } else {
        http_failed as f64 / agg.requests as f64
    };
    let good = agg.ok.saturating_sub(agg.errors.check_failed);
    let stage_thresholds = evaluate(thresholds, agg, window_s, dropped);
    let invalid_reasons = invalid_reasons(thresholds, agg, (window_s, dropped));
    StageResult {
        index,
        repeat: 0,
        label: stage.label(),
        model: profile.model,
        vus: stage.vus,
        rate: stage.rate,
        ramp_to: stage.ramp_to,
        max_vus: stage.max_vus,
        duration_s: stage.duration.as_secs_f64(),
        warmup_s: stage.warmup.as_secs_f64(),
        window_s,
        partial,
        requests: agg.requests,
        ok: agg.ok,
        throughput_rps: match (profile.model, stage.vus.filter(|_| stage.ramp.is_none())) {
            // Little's law: in a closed loop N = X × R̄, exactly. Counting completions in the
            // window is quantized when jobs finish in batches (a deterministic stack finishes
            // all its slots together); N ÷ R̄ is not.
            (LoadModel::Closed, Some(n)) if agg.requests > 0 && !agg.latency.is_empty() => {
                let mean_s = agg.latency.mean() / 1e6;
                if mean_s > 0.0 {
                    n as f64 / mean_s * good as f64 / agg.requests as f64
                } else {
                    per_s(good)
                }
            }
            _ => per_s(good),
        },
        request_rate: per_s(agg.requests),
        latency: agg.latency_summary(),
        phases: agg.phases(),
        error_rate,
        errors: agg.errors.clone(),
        checks: check_results(check_names, agg),
        check_pass_rate: check_pass_rate(agg),
        dropped_iterations: dropped,
        new_connections: agg.new_connections,
        new_conns_per_request: if agg.requests == 0 {
            0.0
        } else {
            agg.new_connections as f64 / agg.requests as f64
        },
        bytes_sent: agg.bytes_sent,
        bytes_received: agg.bytes_received,
        bodies_cut: agg.bodies_cut,
        warmup_requests: agg.warmup_requests,
        client_cpu_percent: 0.0,
        host_cpu_percent: None,
        valid: invalid_reasons.is_empty(),
        invalid_reasons,
        thresholds: stage_thresholds,
        queue,
        endpoints: Vec::new(),
        containers: Vec::new(),
        memory_by_role: Vec::new(),
        ended_by: None,
        scenarios: Vec::new(),
        ramp: stage.ramp,
        flow: None,
        throughput_ci: None,
        iterations: None,
    }
}

/// Why a stage's figures are not results: nothing completed, or the error and check
/// thresholds failed (k6's defaults when the profile has none).
fn invalid_reasons(
    thresholds: &[Threshold],
    agg: &Agg,
    (window_s, dropped): (f64, u64),
) -> Vec<String> {
    let mut invalid_reasons = Vec::new();
    if agg.requests == 0 {
        invalid_reasons.push("no request completed in the steady window".to_string());
    }
    let validity: Vec<Threshold> = {
        let mut v: Vec<Threshold> = thresholds
            .iter()
            .filter(|t| {
                matches!(
                    t.metric,
                    ThresholdMetric::HttpReqFailed | ThresholdMetric::Checks
                )
            })
            .cloned()
            .collect();
        if !v.iter().any(|t| t.metric == ThresholdMetric::HttpReqFailed) {
            v.extend(Threshold::parse("http_req_failed", "rate<0.05").ok());
        }
        if !v.iter().any(|t| t.metric == ThresholdMetric::Checks) && !agg.check_passes.is_empty() {
            v.extend(Threshold::parse("checks", "rate>0.99").ok());
        }
        v
    };
    if agg.requests > 0 {
        for t in evaluate(&validity, agg, window_s, dropped) {
            if !t.passed {
                invalid_reasons.push(format!(
                    "{} {} (observed {:.4})",
                    t.metric,
                    t.expr,
                    t.observed.unwrap_or(f64::NAN)
                ));
            }
        }
    }
    if agg.checks_failed_on_cut_body > 0 && !invalid_reasons.is_empty() {
        invalid_reasons.push(format!(
            "{} answers longer than the {} MiB n8ncap keeps of a body failed a check: a check on \
             a later part of the body cannot pass (check a field near the start of the answer)",
            agg.checks_failed_on_cut_body,
            super::client::KEEP_BODY / (1024 * 1024)
        ));
    }
    invalid_reasons
}

/// Evaluates thresholds on an aggregate over `window_s` seconds.
fn evaluate(
    thresholds: &[Threshold],
    agg: &Agg,
    window_s: f64,
    dropped: u64,
) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|t| {
            let observed = observe_metric(t, agg, window_s, dropped);
            ThresholdResult {
                metric: t.metric,
                expr: t.expr.clone(),
                observed,
                passed: observed.map(|v| t.passes(v)).unwrap_or(false),
            }
        })
        .collect()
}

fn observe_metric(t: &Threshold, agg: &Agg, window_s: f64, dropped: u64) -> Option<f64> {
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    use ThresholdMetric as M;
    match (t.metric, t.agg) {
        (M::HttpReqFailed, Aggregation::Rate) => {
            (agg.requests > 0).then(|| agg.errors.http_failed() as f64 / agg.requests as f64)
        }
        (M::Checks, Aggregation::Rate) => {
            let p: u64 = agg.check_passes.iter().sum();
            let f: u64 = agg.check_fails.iter().sum();
            (p + f > 0).then(|| p as f64 / (p + f) as f64)
        }
        (M::HttpReqDuration, a) => {
            let h = &agg.latency;
            if h.is_empty() {
                return None;
            }
            let ms = |v: u64| v as f64 / 1000.0;
            Some(match a {
                Aggregation::Percentile(q) => ms(h.value_at_quantile(q / 100.0)),
                Aggregation::Avg => h.mean() / 1000.0,
                Aggregation::Max => ms(h.max()),
                Aggregation::Min => ms(h.min()),
                Aggregation::Med => ms(h.value_at_quantile(0.5)),
                _ => return None,
            })
        }
        (M::HttpReqs, Aggregation::Count) => Some(agg.requests as f64),
        (M::HttpReqs, Aggregation::Rate) => Some(per_s(agg.requests)),
        (M::DroppedIterations, Aggregation::Count) => Some(dropped as f64),
        (M::DroppedIterations, Aggregation::Rate) => Some(per_s(dropped)),
        _ => None,
    }
}

fn progress_line(
    shared: &Shared,
    index: usize,
    stages: usize,
    stage: &Stage,
    run_start: Instant,
    total: Duration,
) {
    static LAST: Mutex<(u64, Option<Instant>)> = Mutex::new((0, None));
    let done = shared.live_done.load(Ordering::Relaxed);
    let failed = shared.live_failed.load(Ordering::Relaxed);
    let now = Instant::now();
    let rate = match LAST.lock() {
        Ok(mut last) => {
            let r = match last.1 {
                Some(t) => (done - last.0.min(done)) as f64 / (now - t).as_secs_f64().max(1e-3),
                None => 0.0,
            };
            *last = (done, Some(now));
            r
        }
        Err(_) => 0.0,
    };
    let eta = total.saturating_sub(run_start.elapsed());
    eprint!(
        "\r\x1b[2Kstage {}/{} · {} · {:.1} req/s · {} failed · ETA {}",
        index + 1,
        stages,
        stage.label(),
        rate,
        failed,
        crate::util::format_duration(Duration::from_secs(eta.as_secs()))
    );
    let _ = std::io::stderr().flush();
}
