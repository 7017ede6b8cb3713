//! Report: renders what a command hands it, for people (tables and prose) and machines (JSON,
//! SARIF, HTML). Nothing here measures or judges.
//!
//! One seam: a command builds a typed result that implements [`Rendered`], and [`emit`] prints
//! it in the [`Format`] asked for. Each format has its file (`table.rs`/`text.rs`, `json.rs`,
//! `sarif.rs`, `html.rs`, `markdown.rs`); `views.rs` says how each command's result looks in each.

pub mod autoscaler;
pub mod compare;
pub mod dialect;
pub mod drain;
pub mod grafana;
pub mod html;
pub mod inspect;
pub mod json;
pub mod markdown;
pub mod outage;
pub mod postgres_restart;
pub mod replay;
pub mod rules;
pub mod sarif;
pub mod scale;
pub mod svg;
pub mod table;
pub mod text;
pub mod views;
pub mod width;

use crate::error::BadInput;

/// The output formats (`--format`; `--json` is `--format json`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables and prose for people, fitted to the terminal (100 columns when piped).
    Table,
    /// The typed result as JSON.
    Json,
    /// SARIF 2.1.0 (audit), for code scanning.
    Sarif,
    /// A self-contained HTML report with inline SVG charts (a run's judgement).
    Html,
    /// Markdown tables (a comparison, for a pull request).
    Markdown,
}

impl Format {
    pub fn word(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Sarif => "sarif",
            Format::Html => "html",
            Format::Markdown => "markdown",
        }
    }
}

pub use crate::model::proposal::Dialect;

/// A command's result as every format renders it. Table and JSON always; SARIF and HTML where
/// a result has them (listed in `FORMATS`).
pub trait Rendered: serde::Serialize {
    /// The formats this result has.
    const FORMATS: &'static [Format] = &[Format::Table, Format::Json];

    /// What a person reads: tables and prose, folded to the output's width.
    fn table(&self) -> String;

    fn sarif(&self) -> Option<serde_json::Value> {
        None
    }

    fn html(&self) -> Option<String> {
        None
    }

    fn markdown(&self) -> Option<String> {
        None
    }
}

/// `format` if `T` has it, else what to give instead (checked before any work is done).
pub fn check<T: Rendered>(format: Format, command: &str) -> Result<Format, BadInput> {
    if T::FORMATS.contains(&format) {
        return Ok(format);
    }
    Err(BadInput(format!(
        "{command} has no --format {}: give one of {}",
        format.word(),
        T::FORMATS
            .iter()
            .map(|f| f.word())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// Prints `value` on standard output in `format`.
pub fn emit<T: Rendered>(value: &T, format: Format) -> anyhow::Result<()> {
    let missing = || BadInput(format!("this result has no {} form", format.word()));
    match format {
        Format::Table => text::print(&value.table()),
        Format::Json => json::print(value),
        Format::Sarif => json::print(&value.sarif().ok_or_else(missing)?),
        Format::Html => text::print(&value.html().ok_or_else(missing)?),
        Format::Markdown => text::print(&value.markdown().ok_or_else(missing)?),
    }
}
