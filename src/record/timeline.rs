//! `timeline.jsonl`: every reading the observer takes, one JSON object a line, written as it is
//! taken. The same [`Event`] type writes the file and reads it back (the report draws memory
//! over time from it), so the two cannot drift apart.

use super::role::Role;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;

/// One line of the timeline. `t` is seconds since the observer started, `unix` wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Event {
    /// A stage began (its warm-up included).
    Stage { t: f64, stage: usize },
    /// One scrape of a `/metrics` endpoint.
    Metrics {
        t: f64,
        unix: f64,
        url: String,
        role: Option<Role>,
        rss_bytes: Option<f64>,
        heap_used_bytes: Option<f64>,
        external_bytes: Option<f64>,
        eventloop_lag_s: Option<f64>,
        cpu_percent: Option<f64>,
        queue_active: Option<f64>,
        queue_waiting: Option<f64>,
    },
    /// One reading of Bull's lists in Redis.
    Redis {
        t: f64,
        unix: f64,
        waiting: f64,
        active: f64,
    },
    /// One reading of a container's stats.
    Container {
        t: f64,
        unix: f64,
        name: String,
        role: Role,
        memory_bytes: u64,
        memory_limit_bytes: u64,
        cpu_percent: Option<f64>,
    },
    /// A container's lifecycle event from the Docker events stream (`oom`, `die`, `start`, …),
    /// with the stage it fell in.
    Lifecycle {
        t: f64,
        unix: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<usize>,
        name: String,
        role: Role,
        action: super::lifecycle::LifecycleAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        oom_killed: bool,
    },
    /// A source that did not answer, or answered garbage.
    Gap {
        t: f64,
        unix: f64,
        source: String,
        error: String,
        #[serde(default)]
        gone: bool,
    },
}

/// Appends events to `timeline.jsonl`. A write that fails (disk gone) stops the writing, not
/// the observing.
#[derive(Debug, Default)]
pub struct TimelineWriter {
    file: Option<File>,
}

impl TimelineWriter {
    pub fn new(file: Option<File>) -> TimelineWriter {
        TimelineWriter { file }
    }

    pub fn write(&mut self, e: &Event) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let ok = serde_json::to_vec(e).is_ok_and(|mut line| {
            line.push(b'\n');
            file.write_all(&line).is_ok()
        });
        if !ok {
            self.file = None;
        }
    }

    pub fn flush(&mut self) {
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }
}

/// Reads a timeline back; lines that are not events (a line cut by a crash) are skipped.
pub fn read(text: &str) -> Vec<Event> {
    read_bytes(text.as_bytes()).0
}

/// The most of a timeline read back (a 3-hour run at a 1 s scrape writes a few MiB).
pub const MAX_TIMELINE_BYTES: u64 = 256 << 20;

/// Each line that is an event, and how many lines were not (not UTF-8, not JSON, an unknown
/// kind): one bad byte costs its line, never the timeline.
pub fn read_bytes(bytes: &[u8]) -> (Vec<Event>, usize) {
    let mut skipped = 0;
    let events = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .filter_map(|l| {
            let e = std::str::from_utf8(l)
                .ok()
                .and_then(|t| serde_json::from_str(t).ok());
            skipped += usize::from(e.is_none());
            e
        })
        .collect();
    (events, skipped)
}

/// `timeline.jsonl` of a results directory, at most [`MAX_TIMELINE_BYTES`]; a warning on
/// stderr says what was left out. Absent: no events.
pub fn read_file(path: &std::path::Path) -> Vec<Event> {
    use std::io::Read;
    // A link (to a file outside the directory) or a FIFO is no timeline of this run.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        eprintln!("n8ncap: {} is a symbolic link: left unread", path.display());
        return Vec::new();
    }
    let Ok(f) = crate::util::open_regular_file(path, "timeline") else {
        return Vec::new();
    };
    let mut bytes = Vec::new();
    let _ = f.take(MAX_TIMELINE_BYTES + 1).read_to_end(&mut bytes);
    let cut = bytes.len() as u64 > MAX_TIMELINE_BYTES;
    if cut {
        bytes.truncate(MAX_TIMELINE_BYTES as usize);
    }
    let (events, skipped) = read_bytes(&bytes);
    if skipped > 0 || cut {
        eprintln!(
            "n8ncap: {}: {skipped} line(s) that are not events skipped{}",
            crate::util::for_terminal(&path.display().to_string()),
            if cut {
                format!("; only the first {} MiB read", MAX_TIMELINE_BYTES >> 20)
            } else {
                String::new()
            }
        );
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_with_their_kind() {
        let e = Event::Container {
            t: 1.5,
            unix: 2.0,
            name: "w".into(),
            role: Role::Runner,
            memory_bytes: 7,
            memory_limit_bytes: 0,
            cpu_percent: Some(50.0),
        };
        let line = serde_json::to_string(&e).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["kind"], "container");
        assert_eq!(v["role"], "runner");
        let back = read(&format!("{line}\n{{\"kind\":\"nonsense\"}}\n{line}"));
        assert_eq!(back, vec![e.clone(), e.clone()]);
        // A byte that is not UTF-8 costs its line only.
        let mut bytes = format!("{line}\n").into_bytes();
        bytes.extend_from_slice(b"{\"kind\":\"gap\xff\"}\n");
        bytes.extend_from_slice(line.as_bytes());
        let (events, skipped) = read_bytes(&bytes);
        assert_eq!((events, skipped), (vec![e.clone(), e], 1));
    }
}
