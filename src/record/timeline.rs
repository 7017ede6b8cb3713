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
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
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
        assert_eq!(back, vec![e.clone(), e]);
    }
}
