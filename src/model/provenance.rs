//! Where a value came from, as a type: every [`super::settings::Sourced`] value carries one, code
//! branches on the variant (never on words), and the words a person reads are made here, once.
//!
//! In `summary.json` a value keeps its `source` words (what every earlier file holds) and adds
//! `provenance`, the variant's name; a file without it (written before the type existed) is read
//! back as [`Provenance::Recorded`], its words kept as they were.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq)]
pub enum Provenance {
    /// A command-line flag, by its name ("--runner-limit").
    Flag(String),
    /// Read from the deployment: a container, a compose file or a manifest, and where in it
    /// ("--concurrency in the command of container n8n-worker of Deployment n8n-worker").
    Deployment(String),
    /// A default: whose, and for which version when it moved ("n8n 2.x default").
    Default(String),
    /// The request body's fields ("request body (sleep_ms + wait_ms)").
    Body(String),
    /// Measured by the run, and how ("measured: mean response at 1 in flight").
    Measured(String),
    /// Inferred from a measurement: from what; the interval is the `Sourced`'s.
    Inferred(String),
    /// Assumed where nothing told, and why — said as assumed, never as a fact.
    Assumed(String),
    /// Proposed by a plan, and why ("one step of 1.5×").
    Proposed(String),
    /// Read from a results file written before provenance was typed: its words as they were.
    Recorded(String),
    /// The model's own arithmetic on figures handed to it without their provenance, and what
    /// they are ("worker slots (--concurrency)"): a bound computed outside the settings.
    Model(String),
}

/// The variant's name, as `summary.json` stores it beside the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProvenanceKind {
    Flag,
    Deployment,
    Default,
    Body,
    Measured,
    Inferred,
    Assumed,
    Proposed,
    Recorded,
    Model,
}

const FLAG: &str = "flag ";
const PROPOSED: &str = "proposed: ";

impl Provenance {
    /// The words a person reads: the only place they are made.
    pub fn words(&self) -> String {
        match self {
            Provenance::Flag(f) => format!("{FLAG}{f}"),
            Provenance::Proposed(why) => format!("{PROPOSED}{why}"),
            Provenance::Deployment(w)
            | Provenance::Default(w)
            | Provenance::Body(w)
            | Provenance::Measured(w)
            | Provenance::Inferred(w)
            | Provenance::Assumed(w)
            | Provenance::Recorded(w)
            | Provenance::Model(w) => w.clone(),
        }
    }

    pub fn kind(&self) -> ProvenanceKind {
        match self {
            Provenance::Flag(_) => ProvenanceKind::Flag,
            Provenance::Deployment(_) => ProvenanceKind::Deployment,
            Provenance::Default(_) => ProvenanceKind::Default,
            Provenance::Body(_) => ProvenanceKind::Body,
            Provenance::Measured(_) => ProvenanceKind::Measured,
            Provenance::Inferred(_) => ProvenanceKind::Inferred,
            Provenance::Assumed(_) => ProvenanceKind::Assumed,
            Provenance::Proposed(_) => ProvenanceKind::Proposed,
            Provenance::Recorded(_) => ProvenanceKind::Recorded,
            Provenance::Model(_) => ProvenanceKind::Model,
        }
    }

    /// Back from what `summary.json` holds: the words, and the variant when the file names it.
    pub fn from_saved(words: String, kind: Option<ProvenanceKind>) -> Provenance {
        let strip = |p: &str| words.strip_prefix(p).unwrap_or(&words).to_string();
        match kind {
            Some(ProvenanceKind::Flag) => Provenance::Flag(strip(FLAG)),
            Some(ProvenanceKind::Proposed) => Provenance::Proposed(strip(PROPOSED)),
            Some(ProvenanceKind::Deployment) => Provenance::Deployment(words),
            Some(ProvenanceKind::Default) => Provenance::Default(words),
            Some(ProvenanceKind::Body) => Provenance::Body(words),
            Some(ProvenanceKind::Measured) => Provenance::Measured(words),
            Some(ProvenanceKind::Inferred) => Provenance::Inferred(words),
            Some(ProvenanceKind::Assumed) => Provenance::Assumed(words),
            Some(ProvenanceKind::Model) => Provenance::Model(words),
            Some(ProvenanceKind::Recorded) | None => Provenance::Recorded(words),
        }
    }

    /// The same provenance with more words after its own (a reading's caveat).
    pub fn with_note(&self, note: &str) -> Provenance {
        let add = |w: &String| format!("{w}{note}");
        match self {
            Provenance::Flag(w) => Provenance::Flag(add(w)),
            Provenance::Deployment(w) => Provenance::Deployment(add(w)),
            Provenance::Default(w) => Provenance::Default(add(w)),
            Provenance::Body(w) => Provenance::Body(add(w)),
            Provenance::Measured(w) => Provenance::Measured(add(w)),
            Provenance::Inferred(w) => Provenance::Inferred(add(w)),
            Provenance::Assumed(w) => Provenance::Assumed(add(w)),
            Provenance::Proposed(w) => Provenance::Proposed(add(w)),
            Provenance::Recorded(w) => Provenance::Recorded(add(w)),
            Provenance::Model(w) => Provenance::Model(add(w)),
        }
    }
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_comes_back_from_its_words_and_kind() {
        let all = [
            Provenance::Flag("--runner-limit".into()),
            Provenance::Deployment("compose service n8n-worker".into()),
            Provenance::Default("n8n 2.x default".into()),
            Provenance::Body("request body (sleep_ms)".into()),
            Provenance::Measured("measured: mean response at 1 in flight".into()),
            Provenance::Inferred("inferred from the measured ceiling".into()),
            Provenance::Assumed("assumed: n8n's default".into()),
            Provenance::Proposed("one step of 1.5×".into()),
            Provenance::Recorded("flag --workers".into()),
            Provenance::Model("worker slots (--concurrency)".into()),
        ];
        for p in all {
            assert_eq!(Provenance::from_saved(p.words(), Some(p.kind())), p);
        }
        assert_eq!(
            Provenance::Flag("--workers".into()).words(),
            "flag --workers"
        );
        // A file from before the type: its words, read as recorded.
        let old = Provenance::from_saved("proposed: raise".into(), None);
        assert_eq!(old.kind(), ProvenanceKind::Recorded);
        assert_eq!(old.words(), "proposed: raise");
    }
}
