//! Report: renders results for people (tables) and machines (JSON). Each format is one
//! function of the results; nothing here measures or judges.

pub mod grafana;
pub mod html;
pub mod sarif;
pub mod table;
pub mod text;
pub mod width;
