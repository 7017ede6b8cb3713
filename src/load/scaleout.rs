//! Scaling the workers between the stages of a scale sweep (`sweep --workers 1,2,4 --scale-cmd
//! 'COMMAND'`): the operator's own command, `{workers}` replaced by the count, run through
//! `sh -c`; its exit status, its time and the end of its output recorded. The sweep measures
//! only after the command succeeded and the settle time passed; it returns to the count it found
//! whatever ends it.

use crate::error::BadInput;
use crate::record::scaling::ScaleStep;
use std::time::{Duration, Instant};

/// The placeholder the count replaces.
pub const PLACEHOLDER: &str = "{workers}";
/// Most of a command's output kept (its end: where errors are).
const OUTPUT_KEPT: usize = 2000;
/// A scale command that has not returned after this long is stopped and counted as failed
/// (`kubectl rollout status` of a large Deployment takes minutes; nothing takes an hour).
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The operator's scale command, checked.
#[derive(Debug, Clone)]
pub struct ScaleCommand {
    template: String,
    /// Waited after the command succeeded, before the load: new workers connect to Redis and
    /// their runners to them after their container or pod reports started.
    pub settle: Duration,
}

impl ScaleCommand {
    pub fn parse(template: &str, settle: Duration) -> Result<ScaleCommand, BadInput> {
        if template.trim().is_empty() {
            return Err(BadInput(
                "--scale-cmd is empty: give the command that sets the worker count, with \
                 {workers} where the count goes, e.g. 'kubectl scale deploy/n8n-worker \
                 --replicas={workers}'"
                    .into(),
            ));
        }
        if !template.contains(PLACEHOLDER) {
            return Err(BadInput(format!(
                "--scale-cmd '{}' has no {PLACEHOLDER}: n8ncap puts each count there, e.g. \
                 'kubectl scale deploy/n8n-worker --replicas={PLACEHOLDER}'",
                crate::util::escape_control(template)
            )));
        }
        Ok(ScaleCommand {
            template: template.to_string(),
            settle,
        })
    }

    /// The command for `workers`.
    pub fn for_count(&self, workers: u32) -> String {
        self.template.replace(PLACEHOLDER, &workers.to_string())
    }

    /// Runs the command for `workers` and, when it succeeded, waits the settle time. A command
    /// that cannot start, fails or outlives [`COMMAND_DEADLINE`] is a step with its reason.
    pub async fn scale_to(&self, workers: u32, restore: bool) -> ScaleStep {
        let command = self.for_count(workers);
        let Ran {
            exit_code,
            output,
            failure,
            seconds,
        } = run_shell(&command).await;
        if failure.is_none() && !restore {
            tokio::time::sleep(self.settle).await;
        }
        ScaleStep {
            workers,
            command,
            exit_code,
            output,
            seconds,
            settle_s: if failure.is_none() && !restore {
                self.settle.as_secs_f64()
            } else {
                0.0
            },
            restore,
            failure,
            queue_workers: None,
            joined: None,
            joined_after_s: None,
        }
    }
}

/// A command run with `sh -c`: its status, the end of its output, why it failed, its time.
pub struct Ran {
    pub exit_code: Option<i32>,
    pub output: String,
    pub failure: Option<String>,
    pub seconds: f64,
}

/// Runs `command` with `sh -c` (stdin closed), bounded by [`COMMAND_DEADLINE`].
pub async fn run_shell(command: &str) -> Ran {
    let started = Instant::now();
    let run = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let (exit_code, output, failure) = match tokio::time::timeout(COMMAND_DEADLINE, run).await {
        Ok(Ok(out)) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let failure = (!out.status.success()).then(|| match out.status.code() {
                Some(c) => format!("exited with status {c}"),
                None => "was ended by a signal".to_string(),
            });
            (out.status.code(), text, failure)
        }
        Ok(Err(e)) => (None, String::new(), Some(format!("could not start: {e}"))),
        Err(_) => (
            None,
            String::new(),
            Some(format!(
                "did not return within {} min and was stopped",
                COMMAND_DEADLINE.as_secs() / 60
            )),
        ),
    };
    Ran {
        exit_code,
        output: tail(&output, OUTPUT_KEPT),
        failure,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The last `max` bytes of `text`, cut at a character boundary, control characters but line
/// breaks escaped.
fn tail(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..]
        .lines()
        .map(|l| crate::util::escape_control(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The counts of `--workers`, checked: at least two, each at least 1, no repeat; sorted up.
pub fn counts(list: &[u32]) -> Result<Vec<u32>, BadInput> {
    let mut c = list.to_vec();
    c.sort_unstable();
    if c.len() < 2 {
        return Err(BadInput(
            "a scale sweep needs at least two worker counts, e.g. --workers 1,2,4".into(),
        ));
    }
    if c[0] == 0 {
        return Err(BadInput(
            "--workers 0: a count of workers must be at least 1 (with none, nothing executes)"
                .into(),
        ));
    }
    if let Some(w) = c.windows(2).find(|w| w[0] == w[1]) {
        return Err(BadInput(format!(
            "--workers names {} twice: give each count once",
            w[0]
        )));
    }
    if c[c.len() - 1] > 1000 {
        return Err(BadInput(format!(
            "--workers {}: at most 1000 workers",
            c[c.len() - 1]
        )));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_sorted_distinct_and_positive() {
        assert_eq!(counts(&[4, 1, 2]).unwrap(), vec![1, 2, 4]);
        assert!(counts(&[2]).is_err());
        assert!(counts(&[0, 2]).is_err());
        assert!(counts(&[2, 2, 4]).is_err());
        assert!(counts(&[1, 1001]).is_err());
    }

    #[test]
    fn a_command_needs_the_placeholder() {
        assert!(ScaleCommand::parse("kubectl scale --replicas=3", Duration::ZERO).is_err());
        assert!(ScaleCommand::parse("  ", Duration::ZERO).is_err());
        let c = ScaleCommand::parse("echo {workers} {workers}", Duration::ZERO).unwrap();
        assert_eq!(c.for_count(4), "echo 4 4");
    }

    #[tokio::test]
    async fn a_step_records_status_output_and_failure() {
        let ok = ScaleCommand::parse("echo scaled to {workers}", Duration::ZERO).unwrap();
        let s = ok.scale_to(3, false).await;
        assert_eq!(s.exit_code, Some(0));
        assert_eq!(s.output.trim(), "scaled to 3");
        assert!(s.failure.is_none());
        let bad = ScaleCommand::parse("echo no {workers} >&2; exit 7", Duration::ZERO).unwrap();
        let s = bad.scale_to(2, false).await;
        assert_eq!(s.exit_code, Some(7));
        assert_eq!(s.output.trim(), "no 2");
        assert!(s.failure.is_some());
    }

    #[test]
    fn the_output_kept_is_its_end() {
        let long = format!("{}END", "é".repeat(3000));
        let t = tail(&long, 100);
        assert!(t.len() <= 100 && t.ends_with("END"));
    }
}
