//! One stage of a sweep, from its start to its record: the load started (closed, open or a
//! ramp cut into windows), waited for to its end, to steady (adaptive) or to the interrupt, and
//! its result recorded and written out.

use super::*;

impl Sweep {
    /// Runs stage `index` to its end (or the interrupt), records it and writes it out.
    /// `steady`: end the stage once steady (adaptive sweep), else at its duration.
    pub(super) async fn run_stage(
        &mut self,
        index: usize,
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
        steady: Option<Steady>,
    ) -> anyhow::Result<(StageEnd, bool)> {
        let (stage, rep) = self.stages[index].clone();
        if self.opts.progress {
            stage_started(
                index,
                &stage,
                (self.opts.adaptive.is_none()).then_some(self.stages.len()),
            );
        }
        let stage_start = Instant::now();
        let clocks = Clocks::start(self.local_port);
        let rec = self.recorder(stage_start, stage.warmup);
        self.shared.set_current(rec.clone());
        let mut stage_tasks: JoinSet<()> = JoinSet::new();
        self.start_load(&stage, (&rec, stage_start), &mut stage_tasks);
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
            if drained(&mut stage_tasks, grace, interrupt).await {
                end = StageEnd::Interrupted;
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
            seen.into_stage(&mut result);
        }
        let wall = ended.saturating_duration_since(stage_start).as_secs_f64();
        clocks.into_stage(&mut result, wall, self.target_is_local);
        if self.opts.progress {
            stage_ended(index, &result);
        }
        let failed_thresholds = self.record(result, agg)?;
        Ok((end, failed_thresholds))
    }

    /// A finished stage into the summary and the results directory (`stages.jsonl` appended,
    /// `summary.json` rewritten); true when one of its thresholds failed.
    fn record(&mut self, result: StageResult, agg: Agg) -> anyhow::Result<bool> {
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
        Ok(failed_thresholds)
    }

    /// The stage's recorder: its checks, and per scenario of a mix.
    fn recorder(&self, start: Instant, warmup: Duration) -> Arc<StageRecorder> {
        let per_scenario: Vec<usize> = match self.names.len() {
            1 => Vec::new(),
            _ => self.names.iter().map(|n| n.checks.len()).collect(),
        };
        Arc::new(StageRecorder::new(
            start,
            warmup,
            self.check_names.len(),
            &per_scenario,
        ))
    }

    /// Closed model: the stage's users (the ramp's first count); open model: its scheduler.
    fn start_load(
        &mut self,
        stage: &Stage,
        (rec, start): (&Arc<StageRecorder>, Instant),
        tasks: &mut JoinSet<()>,
    ) {
        match self.opts.profile.model {
            LoadModel::Closed => {
                let n = stage.ramp.map(|r| r.from).or(stage.vus).unwrap_or(1);
                self.vus.resize(&self.shared, n as usize)
            }
            LoadModel::Open => {
                tasks.spawn(open_scheduler(
                    self.shared.clone(),
                    stage.clone(),
                    rec.clone(),
                    start,
                ));
            }
        }
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
}

/// The CPU clocks read around a stage: n8ncap's own process, the host's busy time, and on n8n's
/// own host every process (the host's CPU placed on what spent it).
struct Clocks {
    own: f64,
    host: Option<f64>,
    processes: Option<(u16, crate::load::host_cpu::Snapshot)>,
}

impl Clocks {
    fn start(local_port: Option<u16>) -> Clocks {
        Clocks {
            own: crate::util::own_cpu_seconds(),
            host: crate::util::host_busy_cpu_seconds(),
            processes: local_port.map(|port| (port, crate::load::host_cpu::snapshot())),
        }
    }

    /// The CPU spent since the start over `wall` seconds, into the stage's figures.
    fn into_stage(self, result: &mut StageResult, wall: f64, target_is_local: bool) {
        cpu_figures(result, (self.own, self.host), wall, target_is_local);
        if let Some((port, s)) = &self.processes {
            result.host_processes = crate::load::host_cpu::since(s, *port);
            result.host_placed = true;
        }
    }
}
