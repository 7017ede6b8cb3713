//! The queue's Redis stopped for a while and started again under a steady load (`n8ncap
//! outage`): the action through `actuate::outage` (`super::stop_start`), the n8n processes read
//! back after it (Docker), the judgement in `judge.rs` against n8n's
//! `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`.

pub mod judge;

use super::engine::{Loaded, Plan};
use super::stop_start::Away;
use super::{Drill, Listed};
use crate::actuate::outage::Outager;
use crate::error;
use crate::record::dir::DrillFile;
use crate::record::outage::{Outage, RedisStop};
use crate::util::Interrupt;
use std::time::{Duration, Instant};

/// The outage, ready: how Redis is stopped, when, and what is known before the load.
pub struct OutageDrill {
    away: Away,
    known: judge::Known,
}

impl OutageDrill {
    pub fn new(outager: Outager, known: judge::Known, stop_at: Duration) -> OutageDrill {
        let down_for = Duration::from_secs_f64(known.outage_s);
        OutageDrill {
            away: Away::new((outager, "Redis"), stop_at, down_for),
            known,
        }
    }
}

impl Drill for OutageDrill {
    const LISTED: Listed = Listed {
        name: "outage",
        file: DrillFile::Outage,
        action: "outage",
        left_alone: "Redis was left alone",
    };
    type Done = RedisStop;
    type Record = Outage;

    fn plan(&self) -> Plan {
        self.away.plan(self.known.rate_per_s, self.known.duration_s)
    }

    async fn before(&mut self) {
        self.away.before().await;
    }

    fn act<'a>(
        &'a self,
        load_start: Instant,
        interrupt: &'a Interrupt,
    ) -> impl std::future::Future<Output = RedisStop> + Send + 'a {
        self.away.act(load_start, interrupt)
    }

    async fn judge(self, loaded: Loaded<RedisStop>) -> Outage {
        let line_in = crate::observe::redis_log::redis_line_in;
        let processes = self.away.processes(line_in).await;
        let stop = loaded.stop.expect("judged only after the action");
        judge::judge_outage(self.known, &loaded.sent, loaded.dropped, stop, processes)
    }
    fn status(o: &Outage) -> i32 {
        // Redis not started again, or never stopped: no outage judged.
        if o.stop.started_s.is_none() || o.stop.down_s.is_none() {
            error::EXIT_FAILED
        } else {
            error::EXIT_OK
        }
    }

    fn emit(o: &Outage, format: crate::report::Format) -> anyhow::Result<()> {
        crate::report::emit(&crate::report::views::Outage(o), format)
    }
}
