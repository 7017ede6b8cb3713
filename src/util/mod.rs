//! Small helpers with no n8n semantics, one file per kind: durations, environment variables,
//! signals, input files, text for people, UTC time, CPU readings.

mod cpu;
mod duration;
mod env;
mod files;
mod signal;
mod text;
mod time;

pub use cpu::*;
pub use duration::*;
pub use env::*;
pub use files::*;
pub use signal::*;
pub use text::*;
pub use time::*;
