//! A range longer than [`super::MAX_STEPS`] steps per series (a month at a 15 s step) read in
//! parts: each part a whole number of windows, read and cut into windows as a range of its own,
//! then joined. Memory is bounded by one part's series, not by the month.
//!
//! Which windows a judgement can use ([`usable`]) is decided here: those with jobs waiting or at
//! half the highest throughput read so far (the busy windows are at half of the top or more,
//! and a stalled queue had jobs waiting). Each process's series are read only over them
//! (`grain`), and a window that a later part's higher top makes unusable sheds its figures, so
//! a month of idle windows costs a few numbers each.

use super::{read_within, Bounds, Query};
use crate::model::settings::Sourced;
use crate::observe::prometheus::{Api, PromError};
use crate::record::history::{History, Window};

use crate::model::WAITED_JOBS as WAITED;
/// A window under this share of the highest throughput is not busy.
const IDLE_SHARE: f64 = 0.5;

/// Reads `q` at `step` in parts of at most `most_steps` steps.
pub(super) async fn read(
    src: &Api,
    q: &Query,
    step: Sourced<f64>,
    interval: Option<f64>,
    most_steps: f64,
) -> Result<History, PromError> {
    let span = most_steps.max(10.0) * step.value;
    let parts = ((q.end - q.start) / span).ceil().max(1.0) as usize;
    let mut out: Option<History> = None;
    let mut from = q.start;
    let mut i = 0;
    while from < q.end {
        i += 1;
        // Parts are cut on window edges once the first part has said the window.
        // The first part guesses the window as one read makes it (60 s unless given, at
        // least five steps); each later part takes the window the first one used.
        let window = out.as_ref().map(|h| h.window_s).or(q.window);
        let w = window.unwrap_or(60.0).max(5.0 * step.value);
        let len = (span / w).floor().max(1.0) * w;
        let to = (from + len).min(q.end);
        eprintln!(
            "n8ncap: reading part {i} of about {parts} ({} steps per series at most)",
            most_steps
        );
        // A part holds its steps from `from` up to the next part's first, not that one.
        let last = if to < q.end { to - step.value } else { to };
        let part_q = Query {
            start: from,
            end: last,
            window,
            ..q.clone()
        };
        let bounds = Bounds {
            top: out.as_ref().map_or(0.0, top),
            ..Bounds::default()
        };
        let part = read_within(src, &part_q, (step.clone(), interval), bounds).await?;
        out = Some(match out {
            None => part,
            Some(h) => join(h, part),
        });
        if let Some(h) = out.as_mut() {
            shed(h);
        }
        from = to;
    }
    let mut h = out.unwrap_or_else(|| unreachable!("a range holds one part at least"));
    h.start = q.start;
    h.end = q.end;
    Ok(h)
}

/// `b`, the next part, added to `a`.
fn join(mut a: History, b: History) -> History {
    a.windows.extend(b.windows);
    a.gap_steps += b.gap_steps;
    let room = super::MAX_LISTED_GAPS.saturating_sub(a.gaps.len());
    a.gaps.extend(b.gaps.into_iter().take(room));
    a.resets.extend(b.resets);
    for w in b.warnings {
        if !a.warnings.contains(&w) {
            a.warnings.push(w);
        }
    }
    for p in b.processes {
        if !a
            .processes
            .iter()
            .any(|x| x.job == p.job && x.instance == p.instance)
        {
            a.processes.push(p);
        }
    }
    a.queue_refresh_s = a.queue_refresh_s.or(b.queue_refresh_s);
    if a.queue_refresh_by.is_empty() {
        a.queue_refresh_by = b.queue_refresh_by;
    }
    a.tick_half_width_s = a.tick_half_width_s.or(b.tick_half_width_s);
    a.workers_by = a.workers_by.or(b.workers_by);
    // The exporter's settings at the end of the range: the last part's.
    a.exporter = b.exporter.or(a.exporter);
    a
}

/// The highest throughput of the windows read.
fn top(h: &History) -> f64 {
    h.windows
        .iter()
        .map(|w| w.throughput_per_s)
        .fold(0.0, f64::max)
}

/// A window a judgement can use, when the highest throughput is `top`: jobs waited in it, or
/// it is at half of the top or more (see the module).
pub(super) fn usable(w: &Window, top: f64) -> bool {
    w.waiting_mean >= WAITED || w.throughput_per_s >= IDLE_SHARE * top
}

/// Drops the per-process figures of the windows no judgement can use (see the module).
fn shed(h: &mut History) {
    let top = top(h);
    for w in h.windows.iter_mut() {
        if !usable(w, top) {
            w.cpu = Vec::new();
        }
    }
}
