//! SIGINT and SIGTERM: the stop signal a process waits for, and the sweep's `Interrupt`.

/// Waits for a signal that asks the process to stop — SIGINT (Ctrl-C), SIGTERM (`docker stop`,
/// Kubernetes, `timeout`) or SIGHUP (the terminal closed, an SSH session dropped) — and returns
/// the shell's exit code for it (130, 143, 129).
pub async fn stop_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let wait = |kind: SignalKind| async move {
            match signal(kind) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => crate::error::EXIT_INTERRUPTED,
            _ = wait(SignalKind::terminate()) => crate::error::EXIT_TERMINATED,
            _ = wait(SignalKind::hangup()) => crate::error::EXIT_HANGUP,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        crate::error::EXIT_INTERRUPTED
    }
}

/// The stop signals as streams registered once, so that each one is seen however soon it
/// follows the last (SIGINT, SIGTERM, SIGHUP; Ctrl-C elsewhere).
struct Stops {
    #[cfg(unix)]
    streams: Option<[tokio::signal::unix::Signal; 3]>,
}

impl Stops {
    fn new() -> Stops {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = (|| {
                Some([
                    signal(SignalKind::interrupt()).ok()?,
                    signal(SignalKind::terminate()).ok()?,
                    signal(SignalKind::hangup()).ok()?,
                ])
            })();
            Stops { streams }
        }
        #[cfg(not(unix))]
        Stops {}
    }

    /// The next stop signal's exit code (130, 143, 129).
    async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        if let Some([int, term, hup]) = self.streams.as_mut() {
            return tokio::select! {
                _ = int.recv() => crate::error::EXIT_INTERRUPTED,
                _ = term.recv() => crate::error::EXIT_TERMINATED,
                _ = hup.recv() => crate::error::EXIT_HANGUP,
            };
        }
        stop_signal().await
    }
}

/// What a second signal's immediate exit leaves undone, said before it exits.
static LAST_WORDS: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Sets (or clears) the words a second signal prints before the process exits: a step that must
/// not be cut short (Redis started again) says what an exit mid-way leaves behind.
pub fn last_words(words: Option<String>) {
    if let Ok(mut w) = LAST_WORDS.lock() {
        *w = words;
    }
}

/// The signals that end a run early: Ctrl-C (SIGINT), SIGTERM (`timeout`, `docker stop`,
/// Kubernetes) and SIGHUP (a closed terminal). Installed once, at the start of a command, so a signal that arrives while the
/// run is still being prepared is kept and ends the first stage at once.
#[derive(Clone)]
pub struct Interrupt {
    rx: tokio::sync::watch::Receiver<Option<i32>>,
}

impl Interrupt {
    /// Starts listening (needs a tokio runtime).
    pub fn install() -> Interrupt {
        let (tx, rx) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            // Listening already for the second signal while the first is answered: one sent
            // in between is not lost (on unix, streams registered once keep what arrives).
            let mut stops = Stops::new();
            let code = stops.next().await;
            let _ = tx.send(Some(code));
            // A second signal ends the process at once, as the shells' convention has it —
            // with the words of what it leaves undone, when a step set them.
            let _ = stops.next().await;
            if let Some(words) = LAST_WORDS.lock().ok().and_then(|w| w.clone()) {
                eprintln!("{words}");
            }
            std::process::exit(code);
        });
        Interrupt { rx }
    }

    /// An interrupt fired by the test through the sender, not by a signal.
    #[cfg(test)]
    pub fn by_hand() -> (Interrupt, tokio::sync::watch::Sender<Option<i32>>) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (Interrupt { rx }, tx)
    }

    /// Resolves when a signal has arrived (at once if one already did).
    pub async fn wait(mut self) {
        let _ = self.rx.wait_for(|c| c.is_some()).await;
    }

    /// Whether a signal has arrived.
    pub fn fired(&self) -> bool {
        self.rx.borrow().is_some()
    }

    /// The exit code of the signal that arrived: 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
    pub fn exit_code(&self) -> i32 {
        (*self.rx.borrow()).unwrap_or(crate::error::EXIT_INTERRUPTED)
    }
}
