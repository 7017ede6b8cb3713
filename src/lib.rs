//! n8ncap: capacity testing and diagnosis for n8n in queue mode.
//!
//! The crate is a pipeline (see docs/ARCHITECTURE.md): `load` drives staged load and measures,
//! `observe` reads what n8n and the containers report, `actuate` is the one room that changes a
//! deployment (scales, stops, restores), `model` holds the capacity formulas, `diagnose` names
//! the limit that caps throughput, `report` renders. `sim` is an n8n queue-mode stand-in the rest
//! is tested against; it depends on none of them.

pub mod actuate;
pub mod audit;
pub mod cli;
pub mod commands;
pub mod diagnose;
pub mod drill;
pub mod error;
pub mod exporter;
pub mod findings;
pub mod limits;
pub mod load;
pub mod model;
pub mod observe;
pub mod recommend;
pub mod record;
pub mod report;
pub mod sim;
pub mod topology;
pub mod util;
pub mod wire;
