//! Records: the plain data the pipeline's steps hand each other and write to the results
//! directory — stage results, the observation seam, timeline events, the summary with its
//! diagnosis and recommendation. This is the bottom layer `load`, `observe`, `diagnose`,
//! `recommend` and `report` all depend on; it depends only on `model` and `findings` and does
//! no measuring or judging of its own.

pub mod alerts;
pub mod autoscaler;
pub mod comparison;
pub mod db;
pub mod diagnosis;
pub mod dir;
pub mod drain;
pub mod drill;
pub mod estimate;
pub mod evidence;
pub mod history;
pub mod kube;
pub mod lifecycle;
pub mod memory;
pub mod observation;
pub mod outage;
pub mod postgres_restart;
pub mod recommendation;
pub mod role;
pub mod scaling;
pub mod stage;
mod stage_check;
pub mod summary;
pub mod timeline;

pub use diagnosis::Diagnosis;
pub use estimate::Estimate;
pub use recommendation::Recommendation;
pub use role::Role;
pub use stage::{LoadLevel, LoadModel, StageResult};
pub use summary::{Summary, SUMMARY_SCHEMA};
