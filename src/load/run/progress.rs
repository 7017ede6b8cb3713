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

/// A stage's start, one plain line when standard error is no terminal (CI logs, `| tee`);
/// `of`: the stages planned (None: adaptive).
pub(super) fn stage_started(index: usize, stage: &Stage, of: Option<usize>) {
    if std::io::stderr().is_terminal() {
        return;
    }
    eprintln!(
        "n8ncap: stage {}{} ({}) started",
        index + 1,
        of.map(|n| format!("/{n}")).unwrap_or_default(),
        stage.label()
    );
}

/// A stage's end: the progress line cleared on a terminal, else one plain line.
pub(super) fn stage_ended(index: usize, result: &StageResult) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
        return;
    }
    eprintln!(
        "n8ncap: stage {} ({}) ended: {} requests, {:.2} req/s{}",
        index + 1,
        result.label,
        result.requests,
        result.throughput_rps,
        if result.valid { "" } else { ", invalid" }
    );
}
