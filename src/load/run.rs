//! The sweep: runs a profile's stages one after another with the same virtual users (closed
//! model) or an arrival scheduler (open model), writes `stages.jsonl` as each stage ends and
//! `summary.json` after every stage, so an interrupted run keeps what it measured.

use super::checks::{self, run_check, Aggregation, Threshold, ThresholdResult};
use super::client::{Connection, Target};
use super::profile::{Check, LoadModel, Profile, Stage};
use super::results::{CheckResult, QueueObserved, StageResult, Summary, SUMMARY_SCHEMA};
use super::stats::{Agg, Sample, StageRecorder};
use crate::observe::watch::{Endpoint, Observer, WatchConfig, WatchedContainer};
use std::fs::File;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// What to run and where to write it.
pub struct SweepOptions {
    pub profile: Profile,
    /// Results directory; created before the first request so a bad path fails at once.
    pub out_dir: Option<PathBuf>,
    pub abort_on_fail: bool,
    /// Live progress line on stderr (only shown when stderr is a terminal).
    pub progress: bool,
    /// n8n `/metrics` endpoints to scrape (main's queue gauges give slots taken and waiting).
    pub metrics: Vec<Endpoint>,
    /// Containers to sample through the Docker API.
    pub docker: Option<(bollard::Docker, Vec<WatchedContainer>)>,
    /// How often metrics and container stats are sampled.
    pub scrape_interval: Duration,
    /// Bull's queue in Redis to sample (read-only), with its key prefix.
    pub redis: Option<(crate::observe::redis::RedisUrl, String)>,
    /// n8n's queue-gauge refresh interval, to flag stages shorter than it.
    pub queue_metrics_interval: Duration,
    /// Run every stage this many times in a row (for confidence intervals); 1 = once.
    pub repeat: u32,
}

/// How the run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Completed,
    Interrupted,
}

struct Shared {
    target: Target,
    checks: Vec<Check>,
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

    fn finish(
        &self,
        shard: usize,
        ex: &super::client::Exchange,
        blocked: Duration,
        started: Instant,
    ) {
        let now = Instant::now();
        let mut results = [false; 16];
        let n = self.checks.len().min(results.len());
        let mut json = None;
        if let Ok((status, body)) = &ex.result {
            for (i, c) in self.checks.iter().take(n).enumerate() {
                results[i] = run_check(c, *status, body, &mut json);
            }
        }
        let failed = !matches!(&ex.result, Ok((s, _)) if *s < 400) || results[..n].contains(&false);
        self.live_done.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.live_failed.fetch_add(1, Ordering::Relaxed);
        }
        if self.stop.load(Ordering::Relaxed) {
            return;
        }
        self.current().record(
            shard,
            &Sample {
                exchange: ex,
                blocked,
                latency: now - started,
                checks: &results[..n],
            },
            now,
        );
    }
}

/// Runs the sweep. `interrupt` resolving (Ctrl-C) ends the current stage as partial.
pub async fn run_sweep(
    opts: SweepOptions,
    interrupt: impl Future<Output = ()>,
) -> anyhow::Result<(Summary, Ending)> {
    let profile = &opts.profile;
    let repeat = opts.repeat.max(1);
    let stages: Vec<(Stage, u32)> = profile
        .resolve_stages()?
        .into_iter()
        .flat_map(|s| (0..repeat).map(move |r| (s.clone(), r)))
        .collect();
    let thresholds = checks::parse_all(&profile.thresholds)?;
    if profile.checks.len() > 16 {
        return crate::error::bad_input("a profile may have at most 16 checks");
    }
    let timeout = profile.timeout()?;
    let mut target = Target::new(
        &profile.request.url,
        &profile.request.method,
        &profile.request.headers,
        profile.request.body.as_ref(),
        timeout,
    )
    .await?;
    target.set_tls(
        profile.request.ca_cert.as_deref().map(std::path::Path::new),
        profile.request.insecure,
    )?;
    let mut out = match &opts.out_dir {
        Some(dir) => Some(ResultsDir::create(dir)?),
        None => None,
    };
    let mut observer = (!opts.metrics.is_empty() || opts.docker.is_some() || opts.redis.is_some())
        .then(|| {
            let (docker, containers) = match &opts.docker {
                Some((d, c)) => (Some(d.clone()), c.clone()),
                None => (None, Vec::new()),
            };
            Observer::start(WatchConfig {
                endpoints: opts.metrics.clone(),
                redis: opts.redis.clone(),
                docker,
                containers,
                interval: opts.scrape_interval,
                prefix: "n8n_".into(),
                timeline: out.as_ref().and_then(|o| o.timeline().ok()),
            })
        });
    // The first readings (container baselines) are taken before any load.
    if let Some(o) = observer.as_mut() {
        o.first_round(Duration::from_secs(5)).await;
    }
    let started_at = SystemTime::now();
    let shared = Arc::new(Shared {
        target,
        checks: profile.checks.clone(),
        recorder: RwLock::new(Arc::new(StageRecorder::new(
            Instant::now(),
            Duration::ZERO,
            profile.checks.len(),
        ))),
        stop: AtomicBool::new(false),
        live_done: AtomicU64::new(0),
        live_failed: AtomicU64::new(0),
    });
    let mut summary = Summary {
        schema: SUMMARY_SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_at: crate::util::utc_rfc3339(started_at),
        finished_at: String::new(),
        interrupted: false,
        aborted_by_threshold: false,
        profile: profile.name.clone(),
        model: profile.model,
        url: profile.request.url.clone(),
        body: profile.request.body.clone(),
        stages: Vec::new(),
        thresholds: Vec::new(),
        thresholds_passed: true,
        diagnosis: None,
        recommendation: None,
    };
    let mut vus: JoinSet<()> = JoinSet::new();
    // One retire flag per live virtual user; lowering the count retires the newest ones after
    // their current request.
    let mut vu_flags: Vec<Arc<AtomicBool>> = Vec::new();
    let mut next_vu_id: u32 = 0;
    let mut totals: Vec<Agg> = Vec::new();
    let show_progress = opts.progress && std::io::stderr().is_terminal();
    let total_time: Duration = stages.iter().map(|(s, _)| s.duration).sum();
    let run_start = Instant::now();
    tokio::pin!(interrupt);
    let mut ending = Ending::Completed;

    for (index, (stage, rep)) in stages.iter().enumerate() {
        let stage_start = Instant::now();
        let cpu_start = crate::util::own_cpu_seconds();
        let rec = Arc::new(StageRecorder::new(
            stage_start,
            stage.warmup,
            shared.checks.len(),
        ));
        match shared.recorder.write() {
            Ok(mut r) => *r = rec.clone(),
            Err(p) => *p.into_inner() = rec.clone(),
        }
        let mut stage_tasks: JoinSet<()> = JoinSet::new();
        match profile.model {
            LoadModel::Closed => {
                let n = stage.vus.unwrap_or(1) as usize;
                while vu_flags.len() > n {
                    if let Some(f) = vu_flags.pop() {
                        f.store(true, Ordering::Relaxed);
                    }
                }
                while vu_flags.len() < n {
                    let flag = Arc::new(AtomicBool::new(false));
                    vus.spawn(closed_vu(shared.clone(), next_vu_id, flag.clone()));
                    vu_flags.push(flag);
                    next_vu_id = next_vu_id.wrapping_add(1);
                }
                while vus.try_join_next().is_some() {}
            }
            LoadModel::Open => {
                let sh = shared.clone();
                let st = stage.clone();
                let r = rec.clone();
                stage_tasks.spawn(open_scheduler(sh, st, r, stage_start));
            }
        }
        if let Some(o) = &observer {
            o.begin_stage(index, stage_start + stage.warmup);
        }
        let stage_end = stage_start + stage.duration;
        let mut partial = false;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(stage_end.into()) => break,
                _ = &mut interrupt => { partial = true; ending = Ending::Interrupted; break; }
                _ = tick.tick() => {
                    if show_progress {
                        progress_line(&shared, index, stages.len(), stage, run_start, total_time);
                    }
                }
            }
        }
        stage_tasks.abort_all();
        let ended = Instant::now();
        let agg = rec.total(shared.checks.len());
        let window = ended.saturating_duration_since(rec.warmup_until);
        let seen = observer
            .as_ref()
            .map(|o| o.end_stage(stage.duration < opts.queue_metrics_interval));
        let queue = seen.as_ref().and_then(|s| s.queue.clone());
        let mut result = stage_result(
            index,
            stage,
            profile,
            &agg,
            rec.dropped(),
            window,
            partial,
            &thresholds,
            queue,
        );
        result.repeat = *rep;
        if let Some(seen) = seen {
            result.endpoints = seen.endpoints;
            result.containers = seen.containers;
            result.memory_by_role = seen.memory_by_role;
        }
        let wall = ended.saturating_duration_since(stage_start).as_secs_f64();
        if wall > 0.0 {
            result.client_cpu_percent =
                100.0 * (crate::util::own_cpu_seconds() - cpu_start).max(0.0) / wall;
        }
        if show_progress {
            eprint!("\r\x1b[2K");
        }
        if let Some(o) = out.as_mut() {
            o.append_stage(&result)?;
        }
        let failed_thresholds = result.thresholds.iter().any(|t| !t.passed);
        summary.stages.push(result);
        totals.push(agg);
        finish_summary(&mut summary, &totals, &thresholds);
        if let Some(o) = out.as_mut() {
            o.write_summary(&summary)?;
        }
        if ending == Ending::Interrupted {
            summary.interrupted = true;
            break;
        }
        if opts.abort_on_fail && failed_thresholds && index + 1 < stages.len() {
            summary.aborted_by_threshold = true;
            break;
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    vus.abort_all();
    if let Some(o) = observer {
        o.stop();
    }
    finish_summary(&mut summary, &totals, &thresholds);
    if let Some(o) = out.as_mut() {
        o.write_summary(&summary)?;
    }
    Ok((summary, ending))
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

async fn closed_vu(shared: Arc<Shared>, id: u32, retired: Arc<AtomicBool>) {
    let mut conn = Connection::new();
    loop {
        if shared.stop.load(Ordering::Relaxed) || retired.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let ex = conn.exchange(&shared.target).await;
        let refused = ex.result.is_err() && ex.new_connection;
        shared.finish(id as usize, &ex, Duration::ZERO, started);
        if refused {
            // A refused connection returns in microseconds; yield so one user cannot starve
            // the runtime. The failures still count at full speed, as k6 would count them.
            tokio::task::yield_now().await;
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
    loop {
        let t = time_of(k as f64);
        if !t.is_finite() || t >= dur {
            break;
        }
        let intended = start + Duration::from_secs_f64(t);
        if intended > Instant::now() {
            tokio::time::sleep_until(intended.into()).await;
        }
        while inflight.try_join_next().is_some() {}
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let sh = shared.clone();
                let pool = pool.clone();
                inflight.spawn(async move {
                    let got = Instant::now();
                    let mut conn = pool
                        .idle
                        .lock()
                        .ok()
                        .and_then(|mut i| i.pop())
                        .unwrap_or_default();
                    let ex = conn.exchange(&sh.target).await;
                    sh.finish(
                        k as usize,
                        &ex,
                        got.saturating_duration_since(intended),
                        intended,
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
    // Arrivals of this stage still in flight finish (and count) during the next stage's warm-up.
    inflight.detach_all();
}

#[allow(clippy::too_many_arguments)]
fn stage_result(
    index: usize,
    stage: &Stage,
    profile: &Profile,
    agg: &Agg,
    dropped: u64,
    window: Duration,
    partial: bool,
    thresholds: &[Threshold],
    queue: Option<QueueObserved>,
) -> StageResult {
    let window_s = window.as_secs_f64();
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    let evaluations: u64 =
        agg.check_passes.iter().sum::<u64>() + agg.check_fails.iter().sum::<u64>();
    let check_pass_rate = if evaluations == 0 {
        if agg.requests == 0 {
            0.0
        } else {
            1.0
        }
    } else {
        agg.check_passes.iter().sum::<u64>() as f64 / evaluations as f64
    };
    let http_failed = agg.errors.http_failed();
    let error_rate = if agg.requests == 0 {
        0.0
    } else {
        http_failed as f64 / agg.requests as f64
    };
    let good = agg.ok.saturating_sub(agg.errors.check_failed);
    let stage_thresholds = evaluate(thresholds, agg, window_s, dropped);
    let mut invalid_reasons = Vec::new();
    if agg.requests == 0 {
        invalid_reasons.push("no request completed in the steady window".to_string());
    }
    // Validity comes from the error and check thresholds (defaults when the profile has none).
    let validity: Vec<Threshold> = {
        let mut v: Vec<Threshold> = thresholds
            .iter()
            .filter(|t| t.metric == "http_req_failed" || t.metric == "checks")
            .cloned()
            .collect();
        if !v.iter().any(|t| t.metric == "http_req_failed") {
            v.extend(Threshold::parse("http_req_failed", "rate<0.05").ok());
        }
        if !v.iter().any(|t| t.metric == "checks") && !profile.checks.is_empty() {
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
        throughput_rps: match (profile.model, stage.vus) {
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
        checks: profile
            .checks
            .iter()
            .enumerate()
            .map(|(i, c)| CheckResult {
                name: c.name(),
                passes: agg.check_passes[i],
                fails: agg.check_fails[i],
            })
            .collect(),
        check_pass_rate,
        dropped_iterations: dropped,
        new_connections: agg.new_connections,
        new_conns_per_request: if agg.requests == 0 {
            0.0
        } else {
            agg.new_connections as f64 / agg.requests as f64
        },
        bytes_sent: agg.bytes_sent,
        bytes_received: agg.bytes_received,
        warmup_requests: agg.warmup_requests,
        client_cpu_percent: 0.0,
        valid: invalid_reasons.is_empty(),
        invalid_reasons,
        thresholds: stage_thresholds,
        queue,
        endpoints: Vec::new(),
        containers: Vec::new(),
        memory_by_role: Vec::new(),
    }
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
                metric: t.metric.clone(),
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
    match (t.metric.as_str(), t.agg) {
        ("http_req_failed", Aggregation::Rate) => {
            (agg.requests > 0).then(|| agg.errors.http_failed() as f64 / agg.requests as f64)
        }
        ("checks", Aggregation::Rate) => {
            let p: u64 = agg.check_passes.iter().sum();
            let f: u64 = agg.check_fails.iter().sum();
            (p + f > 0).then(|| p as f64 / (p + f) as f64)
        }
        ("http_req_duration", a) => {
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
        ("http_reqs", Aggregation::Count) => Some(agg.requests as f64),
        ("http_reqs", Aggregation::Rate) => Some(per_s(agg.requests)),
        ("dropped_iterations", Aggregation::Count) => Some(dropped as f64),
        ("dropped_iterations", Aggregation::Rate) => Some(per_s(dropped)),
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

/// The results directory: `stages.jsonl` appended and flushed per stage, `summary.json`
/// rewritten (atomically) after each stage.
pub struct ResultsDir {
    pub path: PathBuf,
    stages: File,
}

impl ResultsDir {
    pub fn create(dir: &Path) -> anyhow::Result<ResultsDir> {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the results directory {}: {e}; choose another with --out",
                dir.display()
            )
        })?;
        let stages_path = dir.join("stages.jsonl");
        let stages = File::create(&stages_path).map_err(|e| {
            anyhow::anyhow!(
                "cannot write {}: {e}; choose another --out",
                stages_path.display()
            )
        })?;
        Ok(ResultsDir {
            path: dir.to_path_buf(),
            stages,
        })
    }

    pub fn timeline(&self) -> anyhow::Result<File> {
        let p = self.path.join("timeline.jsonl");
        File::create(&p).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
    }

    pub fn append_stage(&mut self, s: &StageResult) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(s)?;
        line.push(b'\n');
        self.stages.write_all(&line)?;
        self.stages.flush()?;
        Ok(())
    }

    pub fn write_summary(&self, s: &Summary) -> anyhow::Result<()> {
        write_atomic(
            &self.path.join("summary.json"),
            &serde_json::to_vec_pretty(s)?,
        )
    }
}

/// Writes a file through a temporary name so a reader never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}
