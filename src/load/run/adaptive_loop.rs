//! The adaptive loop: the levels `adaptive::Search` chooses, each ended once its throughput
//! is steady to the precision asked.

use super::*;

impl Sweep {
    /// The adaptive search: runs the level the search asks for until it stops, the budget is
    /// spent or the run is interrupted.
    pub(super) async fn run_adaptive(
        &mut self,
        a: AdaptiveOptions,
        interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> anyhow::Result<Ending> {
        let mut search = Search::new(a.max_vus, a.to_failure);
        search.head_start = a.head_start;
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
            // A level that counts slots only needs the queue gauges to refresh twice.
            let counting = (2 * self.opts.queue_metrics_interval).max(Duration::from_secs(3));
            let held = if count_slots { counting } else { a.max_stage };
            self.stages
                .push((level_stage(template.as_ref(), n, warmup, held), 0));
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
}

/// The search's level at `n` in flight: the profile's stage settings (max_vus …) with the
/// search's users, `warmup`, then `held` seconds measured.
fn level_stage(template: Option<&Stage>, n: u32, warmup: Duration, held: Duration) -> Stage {
    let mut stage = template.cloned().unwrap_or(Stage {
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
    stage.duration = warmup + held;
    stage
}

/// Whether the queue gauges read jobs waiting behind taken slots at `n` in flight. Waiting
/// with no slot taken contradicts Little's law while completions run (a worker leaves no job
/// waiting with a free slot): the reading is stale, or a scale step's job left behind; and at 1
/// in flight its one job waits for no other.
fn waited(q: &crate::record::stage::QueueObserved, n: u32) -> bool {
    let taken = q.active_while_waiting.unwrap_or(q.active_mean);
    n > 1 && q.samples > 0 && q.waiting_mean >= 1.0 && taken >= 1.0
}

/// A finished stage as the search sees it.
pub(super) fn seen(r: &StageResult, n: u32, failed_thresholds: bool) -> Seen {
    Seen {
        in_flight: n,
        throughput: r.throughput_rps,
        mean_response_s: r
            .latency
            .as_ref()
            .map(|l| l.mean_ms / 1000.0)
            .unwrap_or(0.0),
        waited_in_redis: r.queue.as_ref().is_some_and(|q| waited(q, n)),
        stale_wait: r
            .queue
            .as_ref()
            .is_some_and(|q| q.samples > 0 && q.waiting_mean >= 1.0 && !waited(q, n)),
        failed: !r.valid || failed_thresholds,
    }
}

#[cfg(test)]
mod tests {
    use crate::record::stage::QueueObserved;

    /// The stale reading of a Docker scale sweep's baseline (1 waiting, 0 active at 1.94/s) is
    /// no wait; 2 waiting behind 10 slots taken at 12 in flight is.
    #[test]
    fn a_wait_with_no_slot_taken_is_not_believed() {
        let q = |waiting: f64, active: f64| QueueObserved {
            samples: 3,
            waiting_mean: waiting,
            active_mean: active,
            active_max: active,
            ..Default::default()
        };
        assert!(!super::waited(&q(1.0, 0.0), 1));
        assert!(!super::waited(&q(1.0, 0.0), 8));
        assert!(!super::waited(&q(1.0, 1.0), 1));
        assert!(super::waited(&q(2.0, 10.0), 12));
    }
}
