//! Small helpers with no n8n semantics, one file per kind: durations, environment variables,
//! signals, the operator's commands run in a process group of their own, input files, text for people, UTC time, CPU readings.

mod cpu;
mod duration;
mod env;
mod files;
mod shell;
mod signal;
mod text;
mod time;

pub use cpu::*;
pub use duration::*;
pub use env::*;
pub use files::*;
pub use shell::*;
pub use signal::*;
pub use text::*;
pub use time::*;
