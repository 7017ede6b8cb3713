//! The closed model's virtual users: each sends its next request when the last one is
//! answered, kept across stages; refused connections back off instead of spinning.

use super::*;

/// The closed model's virtual users, kept across stages: lowering the count retires the
/// newest ones after their current request.
#[derive(Default)]
pub(super) struct VirtualUsers {
    pub(super) tasks: JoinSet<()>,
    pub(super) flags: Vec<Arc<AtomicBool>>,
    pub(super) next_id: u32,
}

impl VirtualUsers {
    pub(super) fn resize(&mut self, shared: &Arc<Shared>, n: usize) {
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

/// First pause after a refused connection; it doubles with each refusal in a row.
pub(super) const REFUSED_BACKOFF_FIRST: Duration = Duration::from_millis(10);

/// Longest pause after refusals in a row: a target that comes up is found within this.
pub(super) const REFUSED_BACKOFF_MAX: Duration = Duration::from_millis(500);

pub(super) async fn closed_vu(shared: Arc<Shared>, id: u32, retired: Arc<AtomicBool>) {
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
        // A request counts in the stage it was sent in: one sent before a step down and
        // answered after it belongs to the level that sent it, whose books are closed by then,
        // not to the next level's figures.
        let rec = shared.current();
        let started = Instant::now();
        let ex = conn.exchange(&sc.target).await;
        let refused = ex.result.is_err() && ex.new_connection;
        shared.finish(
            &rec,
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
