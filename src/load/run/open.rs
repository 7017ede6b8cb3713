//! The open model's arrival scheduler: requests start at the stage's rate whatever the
//! answers, up to `max_vus` in flight (the rest are dropped iterations, as k6 counts them).

use super::*;

/// Idle connections of the open model, reused across arrivals.
#[derive(Default)]
pub(super) struct Pool {
    idle: Mutex<Vec<Connection>>,
}

/// One arrival: a request sent on an idle connection of the pool (or a new one), recorded
/// from its intended start; the connection goes back to the pool when it answered.
async fn arrival(
    (sh, pool, rec): (Arc<Shared>, Arc<Pool>, Arc<StageRecorder>),
    (k, scenario): (u64, usize),
    intended: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
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
}

pub(super) async fn open_scheduler(
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
                let scenario = shared.pick();
                inflight.spawn(arrival(
                    (shared.clone(), pool.clone(), rec.clone()),
                    (k, scenario),
                    intended,
                    permit,
                ));
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

/// Waits for the stage's arrivals still in flight, for at most `grace`; true when the wait
/// was interrupted.
pub(super) async fn drained(
    tasks: &mut JoinSet<()>,
    grace: Duration,
    interrupt: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> bool {
    let drain = async { while tasks.join_next().await.is_some() {} };
    tokio::select! {
        _ = tokio::time::timeout(grace, drain) => false,
        _ = interrupt.as_mut() => true,
    }
}
