//! Load: drives staged load at a webhook the way k6 does (closed and open models), checks every
//! response, and aggregates per stage. It measures and does not judge: validity flags follow
//! the profile's thresholds, verdicts belong to `diagnose`.

pub mod adaptive;
pub mod arrivals;
pub mod body;
pub mod checks;
pub mod client;
pub mod host_cpu;
pub mod k6;
pub mod k6series;
pub mod profile;
pub mod run;
pub mod stats;
