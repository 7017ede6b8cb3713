//! The progress line on standard error (a terminal only).

use super::*;

pub(super) fn progress_line(
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
