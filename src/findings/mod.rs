//! Findings: what `diagnose` and `audit` report. One shape for both, so reports render them the
//! same way: an id, a severity, a one-line title, the numbers that prove it, and what to change.

mod registry;

pub use registry::{Entry, FindingId, Scope};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn word(&self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier, e.g. `runner-limit-caps` (the registry's spelling).
    pub id: FindingId,
    pub severity: Severity,
    /// One line naming what is wrong (and the service or variable, where there is one).
    pub title: String,
    /// The numbers that prove it.
    pub evidence: Vec<String>,
    /// Why it matters: one sentence with the consequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The setting to change, or what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Service or container the finding is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The evidence's numbers by name (`throughput_per_s`, `waiting`, …), for tools and tests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, f64>,
}

impl Finding {
    /// A finding at its id's default severity.
    pub fn new(id: FindingId, title: impl Into<String>) -> Finding {
        Finding {
            id,
            severity: id.severity(),
            title: title.into(),
            evidence: Vec::new(),
            why: None,
            fix: None,
            subject: None,
            figures: BTreeMap::new(),
        }
    }

    /// Records a number of the evidence; a value that is not finite is left out (JSON has no
    /// infinity).
    pub fn figure(mut self, name: &str, value: f64) -> Finding {
        if value.is_finite() {
            self.figures.insert(name.to_string(), value);
        }
        self
    }

    /// A figure by name (tests and tools read numbers, not wording).
    pub fn get(&self, name: &str) -> Option<f64> {
        self.figures.get(name).copied()
    }

    pub fn evidence(mut self, e: impl Into<String>) -> Finding {
        self.evidence.push(e.into());
        self
    }

    /// Another severity than the id's default (a case that is worse, or milder).
    pub fn with_severity(mut self, severity: Severity) -> Finding {
        self.severity = severity;
        self
    }

    pub fn why(mut self, w: impl Into<String>) -> Finding {
        self.why = Some(w.into());
        self
    }

    pub fn fix(mut self, f: impl Into<String>) -> Finding {
        self.fix = Some(f.into());
        self
    }

    pub fn subject(mut self, s: impl Into<String>) -> Finding {
        self.subject = Some(s.into());
        self
    }
}
