//! The operator's commands n8ncap runs (a scale sweep's `--scale-cmd`, drain's `--stop-cmd`,
//! outage's `--stop-cmd`/`--start-cmd`): each through `sh -c` in a process group of its own, its
//! output read as it comes with only its end kept, a deadline, and on a deadline, a signal or a
//! drop the whole group ended — a pipeline's or a subshell's children too, so nothing the
//! command started outlives the step that ran it and changes the deployment behind n8ncap's back.

use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Most of a command's output kept (its end: where errors are).
pub const OUTPUT_KEPT: usize = 2000;
/// After the shell returned, how long output still open (a background child holding the pipe)
/// is read before the step ends without it.
const AFTER_EXIT: Duration = Duration::from_secs(1);
/// Between SIGTERM to the group and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// A command run with `sh -c`: its status, the end of its output, why it failed, its time.
#[derive(Debug)]
pub struct Ran {
    pub exit_code: Option<i32>,
    pub output: String,
    pub failure: Option<String>,
    pub seconds: f64,
}

/// The end of a stream, at most `max` bytes, kept while it is read: memory stays bounded
/// whatever the command prints.
struct Tail {
    kept: Vec<u8>,
    max: usize,
    dropped: u64,
}

impl Tail {
    fn new(max: usize) -> Tail {
        Tail {
            kept: Vec::new(),
            max,
            dropped: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.max {
            self.dropped += (self.kept.len() + bytes.len() - self.max) as u64;
            self.kept.clear();
            self.kept
                .extend_from_slice(&bytes[bytes.len() - self.max..]);
            return;
        }
        let over = (self.kept.len() + bytes.len()).saturating_sub(self.max);
        if over > 0 {
            self.kept.drain(..over);
            self.dropped += over as u64;
        }
        self.kept.extend_from_slice(bytes);
    }
}

/// Reads `stream` to its end into `tail`.
async fn pump<R: tokio::io::AsyncRead + Unpin>(stream: Option<R>, tail: &mut Tail) {
    let Some(mut s) = stream else { return };
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = s.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.push(&buf[..n]);
    }
}

/// A process group, ended with SIGKILL when dropped unless [`Group::disarm`]ed: a step dropped
/// mid-way (a `select!` that took another arm) leaves nothing of its command running.
struct Group {
    pgid: Option<i32>,
}

impl Group {
    fn signal(&self, sig: i32) {
        #[cfg(unix)]
        if let Some(g) = self.pgid.filter(|g| *g > 1) {
            // SAFETY: kill(2) with a negative pid signals the process group `g`, which is the
            // group this command's shell leads (created with process_group(0)); no memory is
            // touched.
            unsafe {
                libc::kill(-g, sig);
            }
        }
        #[cfg(not(unix))]
        let _ = sig;
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        self.signal(libc::SIGKILL);
    }
}

/// Why a command was ended before it returned.
enum Ended {
    Deadline,
    Interrupted,
}

/// Runs `command` with `sh -c` (stdin closed) in its own process group, bounded by `deadline`
/// and, when given, by `interrupt`: either ends the whole group (SIGTERM, then SIGKILL after a
/// few seconds) and is the step's failure. A shell that returned while a child it left in the
/// background still holds the output is done: the output is read a second longer, no more.
pub async fn run_shell(
    command: &str,
    deadline: Duration,
    interrupt: Option<&super::Interrupt>,
) -> Ran {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                exit_code: None,
                output: String::new(),
                failure: Some(format!("could not start: {e}")),
                seconds: started.elapsed().as_secs_f64(),
            }
        }
    };
    let mut group = Group {
        pgid: child.id().and_then(|p| i32::try_from(p).ok()),
    };
    let (mut out, mut err) = (Tail::new(OUTPUT_KEPT), Tail::new(OUTPUT_KEPT));
    let status = {
        let read_out = pump(child.stdout.take(), &mut out);
        let read_err = pump(child.stderr.take(), &mut err);
        tokio::pin!(read_out, read_err);
        let (mut out_done, mut err_done) = (false, false);
        let stop = async {
            match interrupt {
                Some(i) => i.clone().wait().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        let limit = tokio::time::sleep(deadline);
        tokio::pin!(limit);
        let status = loop {
            tokio::select! {
                _ = &mut read_out, if !out_done => out_done = true,
                _ = &mut read_err, if !err_done => err_done = true,
                s = child.wait() => break Ok(s),
                _ = &mut limit => break Err(Ended::Deadline),
                _ = &mut stop => break Err(Ended::Interrupted),
            }
        };
        if status.is_err() {
            group.signal(libc::SIGTERM);
            if tokio::time::timeout(TERM_GRACE, child.wait())
                .await
                .is_err()
            {
                group.signal(libc::SIGKILL);
                let _ = child.wait().await;
            }
        }
        let rest = async {
            if !out_done {
                (&mut read_out).await;
            }
            if !err_done {
                (&mut read_err).await;
            }
        };
        let _ = tokio::time::timeout(AFTER_EXIT, rest).await;
        status
    };
    let (exit_code, failure) = verdict(status, deadline, &mut group);
    Ran {
        exit_code,
        output: shown(&out, &err),
        failure,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The status and the failure, if any, of a command that returned or was ended.
fn verdict(
    status: Result<std::io::Result<std::process::ExitStatus>, Ended>,
    deadline: Duration,
    group: &mut Group,
) -> (Option<i32>, Option<String>) {
    match status {
        Ok(Ok(s)) => {
            // The shell returned: what it left in the background is the operator's.
            group.disarm();
            (
                s.code(),
                (!s.success()).then(|| match s.code() {
                    Some(c) => format!("exited with status {c}"),
                    None => "was ended by a signal".to_string(),
                }),
            )
        }
        Ok(Err(e)) => (None, Some(format!("could not be waited for: {e}"))),
        Err(Ended::Deadline) => (
            None,
            Some(format!(
                "did not return within {} and was stopped (its process group ended)",
                super::format_duration(deadline)
            )),
        ),
        Err(Ended::Interrupted) => (
            None,
            Some("was interrupted: its process group was ended".to_string()),
        ),
    }
}

/// The output for people: standard output's end then standard error's, [`OUTPUT_KEPT`] bytes at
/// most, cut at a character boundary, control characters but line breaks escaped, what was
/// dropped said.
fn shown(out: &Tail, err: &Tail) -> String {
    let mut all = out.kept.clone();
    all.extend_from_slice(&err.kept);
    let dropped = out.dropped + err.dropped + all.len().saturating_sub(OUTPUT_KEPT) as u64;
    let text = String::from_utf8_lossy(&all[all.len().saturating_sub(OUTPUT_KEPT)..]).into_owned();
    let mut start = 0;
    if dropped > 0 {
        // The first bytes kept may be the end of a character cut in two.
        while start < text.len() && text[start..].starts_with('\u{FFFD}') {
            start += '\u{FFFD}'.len_utf8();
        }
    }
    let body = text[start..]
        .lines()
        .map(|l| super::escape_control(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    if dropped > 0 {
        format!("[{dropped} earlier bytes not kept]\n{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests;
