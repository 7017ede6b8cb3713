//! One worker stopped under a steady load the way a scale-down stops it (`n8ncap drain`): the
//! action through `actuate::stop` (the Docker API, started again after, or `--stop-cmd`), main's
//! failed-jobs counter read before and after, the judgement in `judge.rs` (`judge/said.rs` its
//! words) against the loss the time budget predicts (`model::drain`).

pub mod judge;

use super::engine::{Loaded, Plan, MAX_IN_FLIGHT};
use super::{Drill, Listed};
use crate::actuate::stop::Stopper;
use crate::error;
use crate::model::drain::StopSignal;
use crate::record::dir::DrillFile;
use crate::record::drain::{Drain, StopRecord};
use crate::util::Interrupt;
use std::time::{Duration, Instant};

/// The drain, ready: how the worker is stopped, what is known before the load, when.
pub struct DrainDrill {
    stopper: Stopper,
    signal: StopSignal,
    known: judge::Known,
    stop_at: Duration,
    /// main's `/metrics`, for n8n's failed-jobs counter; its value before the load.
    metrics: Option<String>,
    failed_before: Option<f64>,
}

impl DrainDrill {
    pub fn new(
        (stopper, signal): (Stopper, StopSignal),
        known: judge::Known,
        stop_at: Duration,
        metrics: Option<String>,
    ) -> DrainDrill {
        DrainDrill {
            stopper,
            signal,
            known,
            stop_at,
            metrics,
            failed_before: None,
        }
    }
}

impl Drill for DrainDrill {
    const LISTED: Listed = Listed {
        name: "drain",
        file: DrillFile::Drain,
        action: "stop",
        left_alone: "the worker was left alone",
    };
    type Done = StopRecord;
    type Record = Drain;

    fn plan(&self) -> Plan {
        Plan {
            rate_per_s: self.known.rate_per_s.value,
            duration: Duration::from_secs_f64(self.known.duration_s),
            stop_at: self.stop_at,
            max_in_flight: MAX_IN_FLIGHT,
        }
    }

    async fn before(&mut self) {
        self.failed_before = crate::observe::scrape::jobs_failed(self.metrics.as_deref()).await;
    }

    fn act<'a>(
        &'a self,
        load_start: Instant,
        interrupt: &'a Interrupt,
    ) -> impl std::future::Future<Output = StopRecord> + Send + 'a {
        self.stopper.stop(self.signal, load_start, interrupt)
    }

    async fn judge(self, loaded: Loaded<StopRecord>) -> Drain {
        let n8n_failed = crate::observe::scrape::jobs_failed(self.metrics.as_deref())
            .await
            .zip(self.failed_before)
            .filter(|(e, b)| e >= b)
            .map(|(e, b)| e - b);
        let known = judge::Known {
            n8n_failed,
            interrupted: loaded.interrupted,
            ..self.known
        };
        let stop = loaded.stop.expect("judged only after the action");
        judge::judge_drain(known, &loaded.sent, loaded.dropped, stop)
    }

    fn status(d: &Drain) -> i32 {
        if d.stop_failed.is_some() || d.unjudged.is_some() {
            error::EXIT_FAILED
        } else {
            error::EXIT_OK
        }
    }

    fn emit(d: &Drain, format: crate::report::Format) -> anyhow::Result<()> {
        crate::report::emit(&crate::report::views::Drain(d), format)
    }
}
