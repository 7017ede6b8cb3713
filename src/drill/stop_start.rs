//! A dependency of n8n — the queue's Redis, the executions' Postgres — stopped, kept down for a
//! while and always started again, also on an error or an interrupt (`outage` and
//! `postgres-restart`'s action, through `actuate::outage`: the Docker API or the operator's
//! commands).

use super::engine::{Plan, MAX_IN_FLIGHT};
use crate::actuate::outage::Outager;
use crate::actuate::Actuator;
use crate::record::drill::StopStart;
use crate::record::outage::ProcessAfter;
use crate::util::Interrupt;
use std::time::{Duration, Instant};

/// A dependency's stop in a drill: how it is stopped, when, for how long, and the n8n
/// containers' restart counts before the load with the moment it began (Unix s).
pub struct Away {
    pub outager: Outager,
    /// Its name for people: "Redis", "Postgres".
    pub dependency: &'static str,
    pub stop_at: Duration,
    pub down_for: Duration,
    before: (Vec<i64>, i64),
}

impl Away {
    pub fn new(
        (outager, dependency): (Outager, &'static str),
        stop_at: Duration,
        down_for: Duration,
    ) -> Away {
        Away {
            outager,
            dependency,
            stop_at,
            down_for,
            before: (Vec::new(), 0),
        }
    }

    /// The steady load around it.
    pub fn plan(&self, rate_per_s: f64, duration_s: f64) -> Plan {
        Plan {
            rate_per_s,
            duration: Duration::from_secs_f64(duration_s),
            stop_at: self.stop_at,
            max_in_flight: MAX_IN_FLIGHT,
        }
    }

    /// Read before the load: the n8n containers' restart counts (Docker), and now.
    pub async fn before(&mut self) {
        let restarts = match &self.outager {
            Outager::Docker(d) => d.restarts_now().await,
            Outager::Commands { .. } => Vec::new(),
        };
        self.before = (restarts, crate::util::unix_now_s());
    }

    /// When the load began, Unix seconds (read in [`Away::before`]).
    pub fn since_unix(&self) -> i64 {
        self.before.1
    }

    /// The action: stopped, kept down, started again.
    pub async fn act(&self, load_start: Instant, interrupt: &Interrupt) -> StopStart {
        let who = (&self.outager, self.dependency);
        stop_start(who, self.down_for, load_start, interrupt).await
    }

    /// The n8n processes after the load (Docker; none through commands), with n8n's last line
    /// about the dependency that `line_in` finds in each log.
    pub async fn processes(&self, line_in: fn(&str) -> Option<String>) -> Vec<ProcessAfter> {
        match &self.outager {
            Outager::Docker(d) => d.after((&self.before.0, self.before.1), line_in).await,
            Outager::Commands { .. } => Vec::new(),
        }
    }
}

/// Stops `dependency` (its name for people: "Redis", "Postgres"), waits `wait` (cut short by
/// an interrupt), and always starts it again.
pub async fn stop_start(
    (o, dependency): (&Outager, &str),
    wait: Duration,
    load_start: Instant,
    interrupt: &Interrupt,
) -> StopStart {
    let (how, what) = (o.how(), o.what());
    let stopped_s = load_start.elapsed().as_secs_f64();
    let stopped = o.stop(interrupt).await;
    let down_s = stopped.is_ok().then(|| load_start.elapsed().as_secs_f64());
    let mut cut_short = false;
    if stopped.is_ok() {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = interrupt.clone().wait() => cut_short = true,
        }
    }
    let started = start_again((o, dependency), &what, interrupt).await;
    let started_s = started.is_ok().then(|| load_start.elapsed().as_secs_f64());
    let detail = match (stopped, started) {
        (Ok(()), Ok(())) => None,
        (Err(e), Ok(())) => Some(format!("stopping {dependency} failed: {e:#}")),
        (Ok(()), Err(e)) => Some(format!("starting {dependency} again failed: {e:#}")),
        (Err(a), Err(b)) => Some(format!(
            "stopping {dependency} failed: {a:#}; starting it: {b:#}"
        )),
    };
    StopStart {
        how,
        what,
        stopped_s,
        down_s,
        started_s,
        detail,
        cut_short,
    }
}

/// Starts it again, never cut short: an interrupt meanwhile is answered with what is still
/// running, and a second one (which exits at once) with what it leaves: it maybe down.
async fn start_again(
    (o, dependency): (&Outager, &str),
    what: &str,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    use crate::util::last_words;
    // Read before it is said: an interrupt after the words is answered, never missed.
    let already = interrupt.fired();
    eprintln!("n8ncap: starting {dependency} again ({what})");
    last_words(Some(format!(
        "n8ncap: exited while {dependency} was being started again ({what}): the start may not have finished — {dependency} may still be down; check it and start it yourself"
    )));
    let start = o.start();
    tokio::pin!(start);
    let started = tokio::select! {
        r = &mut start => r,
        _ = interrupt.clone().wait(), if !already => {
            eprintln!("n8ncap: still starting {dependency} again ({what}); a second Ctrl-C stops waiting and leaves {dependency} as the start left it");
            start.await
        }
    };
    last_words(None);
    started
}
