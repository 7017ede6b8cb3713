//! Every request's fate in a drill, whatever the drill did: the requests in flight at a moment
//! by how they ended, the load second by second, and when OK answers came back to the offered
//! rate. Shared by each drill's judgement.

use crate::record::drain::{InFlight, Outcome, Second, Sent};

/// OK answers per second that count as back at the offered rate.
pub const RECOVERED_SHARE: f64 = 0.9;
/// Seconds every window of which must hold that share.
pub const RECOVERY_WINDOW_S: usize = 3;

/// The requests in flight at `signal` (sent before it, not ended by it), by how they ended.
pub fn in_flight_at(sent: &[Sent], signal: f64) -> InFlight {
    let mut f = InFlight::default();
    for s in sent
        .iter()
        .filter(|s| s.sent_s < signal && s.ended_s.is_none_or(|e| e >= signal))
    {
        f.total += 1;
        let failed_at = match s.outcome {
            Outcome::Answered(c) if (200..300).contains(&c) => {
                f.finished += 1;
                None
            }
            Outcome::Answered(c) => {
                *f.failed_by_status.entry(c).or_default() += 1;
                s.ended_s
            }
            Outcome::Broken => {
                f.broken += 1;
                s.ended_s
            }
            Outcome::Unanswered => {
                f.unanswered += 1;
                None
            }
        };
        if let Some(e) = failed_at.filter(|e| e.is_finite()) {
            let after = (e - signal).max(0.0);
            f.last_failure_after_s = Some(f.last_failure_after_s.map_or(after, |l| l.max(after)));
        }
    }
    f
}

pub fn timeline(sent: &[Sent], duration_s: f64) -> Vec<Second> {
    let last = sent
        .iter()
        .filter_map(|s| s.ended_s)
        .fold(duration_s, f64::max)
        .ceil() as usize;
    let mut out: Vec<Second> = (0..=last)
        .map(|t| Second {
            t: t as u32,
            sent: 0,
            finished: 0,
            failed: 0,
        })
        .collect();
    for s in sent {
        if let Some(b) = out.get_mut(s.sent_s.max(0.0) as usize) {
            b.sent += 1;
        }
        if let Some(b) = s.ended_s.and_then(|e| out.get_mut(e.max(0.0) as usize)) {
            if s.ok() {
                b.finished += 1;
            } else {
                b.failed += 1;
            }
        }
    }
    out
}

/// The first whole second after the signal from which every window of
/// [`RECOVERY_WINDOW_S`] seconds up to `until` answered OK at [`RECOVERED_SHARE`] of the
/// offered rate; seconds from the signal.
pub fn recovery(seconds: &[Second], rate: f64, signal: f64, until: f64) -> Option<f64> {
    let w = RECOVERY_WINDOW_S;
    let end = until.floor().max(0.0) as usize;
    let holds = |t: usize| -> bool {
        let got: u32 = seconds.iter().skip(t).take(w).map(|s| s.finished).sum();
        f64::from(got) >= RECOVERED_SHARE * rate * w as f64
    };
    let first = signal.floor().max(0.0) as usize;
    if first + w > end {
        return None;
    }
    let mut candidate = None;
    for t in first..=end - w {
        match (holds(t), candidate) {
            (true, None) => candidate = Some(t),
            (false, _) => candidate = None,
            _ => {}
        }
    }
    candidate.map(|t| (t as f64 - signal).max(0.0))
}
