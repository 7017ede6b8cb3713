//! How each command's result looks in each format: the typed values the commands hand
//! [`super::emit`]. Adding a format: a variant of [`super::Format`], its file, and a method of
//! [`super::Rendered`] implemented here for the results that have it.

use super::{html, sarif, table, text, Format, Rendered};
use crate::record::recommendation::MemoryPlan;
use crate::record::stage::ContainerStats;
use crate::record::{Diagnosis, Recommendation, Summary};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use std::path::Path;

/// What a run's JSON holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunJson {
    /// The whole summary (`sweep`, `demo`): what summary.json holds.
    Summary,
    /// The judgement with the stages it judged (`diagnose`).
    Judgement,
}

/// A judged run: a sweep, the demo, or `diagnose` of a saved run or a k6 file.
pub struct Run<'a> {
    pub summary: &'a Summary,
    pub diagnosis: &'a Diagnosis,
    pub recommendation: &'a Result<Recommendation, crate::error::NoPlan>,
    pub json: RunJson,
    /// Where the results were written, if they were.
    pub results: Option<&'a Path>,
}

impl Serialize for Run<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.json {
            RunJson::Summary => self.summary.serialize(s),
            RunJson::Judgement => {
                let mut st = s.serialize_struct("Judgement", 4)?;
                st.serialize_field("diagnosis", self.diagnosis)?;
                st.serialize_field("recommendation", &self.recommendation.as_ref().ok())?;
                st.serialize_field("stages", &self.summary.stages)?;
                // Several k6 outputs read as this run: what was done to each.
                if self.summary.merged_from.is_empty() {
                    st.skip_field("merged_from")?;
                } else {
                    st.serialize_field("merged_from", &self.summary.merged_from)?;
                }
                st.end()
            }
        }
    }
}

impl Rendered for Run<'_> {
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json, Format::Html];

    fn table(&self) -> String {
        let mut s = text::run(self.summary, self.diagnosis, self.recommendation);
        if let Some(dir) = self.results {
            s.push_str(&format!("\nresults: {}", dir.display()));
        }
        s
    }

    fn html(&self) -> Option<String> {
        let timeline = self
            .results
            .map(|d| crate::record::timeline::read_file(&d.join(crate::record::dir::TIMELINE)))
            .unwrap_or_default();
        Some(html::render(self.summary, &timeline))
    }
}

/// One worker count of a history, judged from its own windows.
#[derive(Serialize)]
pub struct AtWorkers {
    pub workers: u32,
    /// Its measured ceiling, executions/s, when reached.
    pub ceiling_per_s: Option<f64>,
    pub capping_limit: Option<crate::model::Capping>,
    /// The count whose judgement `diagnosis` is.
    pub shown: bool,
}

/// `diagnose --prometheus`: the history read and its judgement (with several worker counts,
/// each count's, and the judgement of the one shown).
#[derive(Serialize)]
pub struct History<'a> {
    pub history: &'a crate::record::history::History,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_workers: Vec<AtWorkers>,
    pub diagnosis: &'a Diagnosis,
    pub recommendation: Option<&'a Recommendation>,
    pub stages: &'a [crate::record::StageResult],
    #[serde(skip)]
    pub why_not: Option<&'a str>,
}

impl Rendered for History<'_> {
    fn table(&self) -> String {
        let text = format!(
            "{}\n{}{}{}",
            text::history(self.history),
            counts_line(&self.by_workers),
            text::diagnosis(self.diagnosis),
            match (self.recommendation, self.why_not) {
                (Some(r), _) => text::recommendation(r),
                (None, why) => format!("No recommendation: {}", why.unwrap_or("none")),
            }
        );
        text::folded(&text)
    }
}

/// Each worker count's ceiling and limit, and which one the judgement below is.
fn counts_line(counts: &[AtWorkers]) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let each: Vec<String> = counts
        .iter()
        .map(|c| {
            let at = match (c.ceiling_per_s, c.capping_limit) {
                (Some(x), Some(l)) => format!("{x:.2}/s, {}", l.words()),
                (Some(x), None) => format!("{x:.2}/s"),
                _ => "not reached".into(),
            };
            format!(
                "{} workers: {at}{}",
                c.workers,
                if c.shown { " (judged below)" } else { "" }
            )
        })
        .collect();
    format!(
        "Worker counts, each judged from its own windows (together: scale --prometheus): {}.\n",
        each.join("; ")
    )
}

/// `inspect`: the topology with where each setting comes from; live containers with one
/// reading of their stats, files with what was read.
#[derive(Serialize)]
pub struct Inspect<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<&'a str>,
    pub topology: &'a crate::topology::Topology,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<&'a [Option<ContainerStats>]>,
    pub model_settings: crate::model::settings::Settings,
}

impl Rendered for Inspect<'_> {
    fn table(&self) -> String {
        match (self.input, self.stats) {
            (_, Some(stats)) => super::inspect::topology_table(self.topology, stats),
            (input, None) => format!(
                "{}\n{}",
                input.unwrap_or_default(),
                super::inspect::manifest_table(self.topology)
            ),
        }
    }
}

impl Rendered for crate::audit::Report {
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json, Format::Sarif];

    fn table(&self) -> String {
        table::audit_table(self)
    }

    fn sarif(&self) -> Option<serde_json::Value> {
        Some(sarif::sarif(self))
    }
}

/// `recommend`: the plan in a deployment's dialect, or the memory plan when a runner was killed
/// at its limit and no capacity plan can be made.
pub struct Recommend<'a> {
    pub plan: Result<&'a Recommendation, &'a str>,
    pub memory: Option<&'a MemoryPlan>,
    pub dialect: super::Dialect,
    /// The deployment the settings are for (its names), when one was read.
    pub target: &'a crate::record::recommendation::PlanTarget,
}

impl Serialize for Recommend<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.plan, self.memory) {
            (Ok(r), _) => r.serialize(s),
            (Err(_), m) => {
                let mut st = s.serialize_struct("MemoryOnly", 1)?;
                st.serialize_field("memory_plan", &m)?;
                st.end()
            }
        }
    }
}

impl Recommend<'_> {
    /// What people read beside the settings: the plan in words, the memory plan, why there is
    /// no capacity plan. `recommend` prints it on stderr, so stdout holds the settings alone
    /// (`… > values.yaml` writes a file helm, kubectl or compose accept).
    pub fn prose(&self) -> String {
        let mut out = String::new();
        match self.plan {
            Ok(rec) => {
                if let Some(m) = self.memory.filter(|m| m.oom_killed) {
                    out.push_str(&text::folded(&text::memory_plan(m)));
                    out.push('\n');
                }
                out.push_str(&text::folded(&text::recommendation(rec)));
            }
            Err(why) => {
                if let Some(m) = self.memory {
                    out.push_str(&text::folded(&text::memory_plan(m)));
                    out.push('\n');
                }
                out.push_str(&text::folded(&format!("No capacity plan: {why}")));
            }
        }
        out
    }
}

impl Rendered for Recommend<'_> {
    /// The settings in the deployment's dialect, alone.
    fn table(&self) -> String {
        match (self.plan, self.memory) {
            (Ok(rec), _) => super::dialect::settings(rec, self.dialect, self.target),
            (Err(_), Some(m)) => super::dialect::memory_plan(m, self.dialect),
            (Err(_), None) => String::new(),
        }
    }
}

/// `scale`'s result: the ceiling at each worker count, the fitted law, what stops scale-out.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Scale<'a>(pub &'a crate::record::scaling::Scaling);

impl Rendered for Scale<'_> {
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json, Format::Html];

    fn table(&self) -> String {
        super::scale::scaling_table(self.0)
    }

    fn html(&self) -> Option<String> {
        Some(super::scale::html(self.0, &self.table()))
    }
}

/// A scale sweep's result (`sweep --workers 1,2,4`): the command's steps, each count's run,
/// and the runs judged together.
#[derive(Serialize)]
#[serde(transparent)]
pub struct ScaleSweep<'a>(pub &'a crate::record::scaling::ScaleSweep);

impl Rendered for ScaleSweep<'_> {
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json, Format::Html];

    fn table(&self) -> String {
        super::scale::scale_sweep_table(self.0)
    }

    fn html(&self) -> Option<String> {
        let s = self.0.scaling.as_ref()?;
        Some(super::scale::html(s, &self.table()))
    }
}

/// `drain`'s result: the stop, the requests it held by outcome, the recovery, the prediction.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Drain<'a>(pub &'a crate::record::drain::Drain);

impl Rendered for Drain<'_> {
    fn table(&self) -> String {
        super::drain::table(self.0)
    }
}

/// `outage`'s result: the requests in flight by outcome, the processes that exited, the
/// recovery, the prediction.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Outage<'a>(pub &'a crate::record::outage::Outage);

impl Rendered for Outage<'_> {
    fn table(&self) -> String {
        super::outage::table(self.0)
    }
}

/// `postgres-restart`'s result: n8n's 503s, its return against the prediction, the requests in
/// flight by outcome, the executions left.
#[derive(Serialize)]
#[serde(transparent)]
pub struct PostgresRestart<'a>(pub &'a crate::record::postgres_restart::PostgresRestart);

impl Rendered for PostgresRestart<'_> {
    fn table(&self) -> String {
        super::postgres_restart::table(self.0)
    }
}

/// `replay`'s result: each autoscaler over the same arrivals, side by side.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Replay<'a>(pub &'a crate::record::autoscaler::ReplayRun);

impl Rendered for Replay<'_> {
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json, Format::Html];

    fn table(&self) -> String {
        super::replay::table(self.0)
    }

    fn html(&self) -> Option<String> {
        Some(super::replay::html(self.0))
    }
}

/// `compare`'s result: the runs side by side, each later one against the first.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Compare<'a>(pub &'a crate::record::comparison::RunComparison);

impl Rendered for Compare<'_> {
    const FORMATS: &'static [Format] =
        &[Format::Table, Format::Json, Format::Markdown, Format::Html];

    fn table(&self) -> String {
        super::compare::comparison_table(self.0)
    }

    fn markdown(&self) -> Option<String> {
        Some(super::markdown::comparison(self.0))
    }

    fn html(&self) -> Option<String> {
        Some(html::comparison(self.0))
    }
}

/// A scale sweep's book (scale.json) and, once two counts are judged, its page (scale.html,
/// the chart of ceiling against workers).
pub fn write_scale_sweep(
    base: &std::path::Path,
    book: &crate::record::scaling::ScaleSweep,
) -> anyhow::Result<()> {
    crate::record::dir::write_scale_sweep(base, book)?;
    if let Some(page) = ScaleSweep(book).html() {
        crate::record::dir::write_atomic(
            &base.join(crate::record::dir::SCALE_PAGE),
            page.as_bytes(),
        )?;
    }
    Ok(())
}
