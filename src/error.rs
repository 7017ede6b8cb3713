//! Exit codes and the error kinds that choose them.
//!
//! README.md ("Exit codes") fixes the codes: 0 ok, 99 a threshold failed (as k6), 1 an audit error or a run that
//! could not complete, 2 bad usage or bad input, 130 interrupted (Ctrl-C, as shells do), 143 terminated (SIGTERM).

use std::fmt;

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_THRESHOLD: i32 = 99;
pub const EXIT_INTERRUPTED: i32 = 130;
/// SIGTERM (128 + 15), as shells report it.
pub const EXIT_TERMINATED: i32 = 143;
/// SIGHUP (the terminal closed): 128 + 1, as shells report it.
pub const EXIT_HANGUP: i32 = 129;

/// The exit code when standard output turns out to be a closed pipe (`| head -1`): the
/// command's own result when it is known before it prints (a sweep's 0/99 once it has saved
/// what it measured), else 0 — quietly, as `man` and other Unix tools do.
pub static EXIT_ON_CLOSED_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Installs the panic hook that turns "failed printing to stdout: Broken pipe" into a quiet
/// exit with [`EXIT_ON_CLOSED_PIPE`]; every other panic keeps the default report.
pub fn exit_quietly_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.contains("Broken pipe") {
            std::process::exit(EXIT_ON_CLOSED_PIPE.load(std::sync::atomic::Ordering::Relaxed));
        }
        default(info);
    }));
}

/// A refusal's text, shown as it is: each kind below is one of these with its own exit code.
macro_rules! refusal {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name(pub String);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::error::Error for $name {}

        /// The refusal's text.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name(text)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name(text.to_string())
            }
        }
    };
}

refusal!(
    /// Input the user can fix: a bad flag value, a malformed file, an invalid variable.
    /// Maps to exit code 2.
    BadInput
);
refusal!(
    /// No plan can be made from what was measured (no valid level, nothing saturated, a plan
    /// beyond any deployment): the reason says what to measure or give. Exit code 2 from
    /// `recommend`; a sweep or a diagnosis prints it and goes on.
    NoPlan
);
refusal!(
    /// Runs that cannot be compared (another load model, body or mix). Exit code 2.
    Incomparable
);
refusal!(
    /// A reading from outside that cannot be parsed or cannot be true (a scrape line, a gauge,
    /// a counter): never an exit, it becomes a counted gap with this reason.
    Implausible
);

/// Shorthand for returning a [`BadInput`] error from a function that returns `anyhow::Result`.
pub fn bad_input<T>(msg: impl Into<String>) -> anyhow::Result<T> {
    Err(BadInput(msg.into()).into())
}

/// The exit code an error maps to.
pub fn exit_code_for(err: &anyhow::Error) -> i32 {
    let refused = |e: &(dyn std::error::Error + 'static)| {
        e.downcast_ref::<BadInput>().is_some()
            || e.downcast_ref::<NoPlan>().is_some()
            || e.downcast_ref::<Incomparable>().is_some()
    };
    if err.chain().any(refused) {
        EXIT_BAD_INPUT
    } else {
        EXIT_FAILED
    }
}
