//! Observe: what n8n reports about itself while load runs (Prometheus `/metrics` of main and
//! workers), parsed without loss and reduced to the figures the diagnosis needs.
//! It measures and records; it does not judge.

pub mod bull;
pub mod docker;
pub mod history;
pub mod prometheus;
pub mod scrape;
pub mod watch;
