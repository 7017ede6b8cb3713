//! The operator's scale command: scaling the workers between the stages of a scale sweep (`sweep --workers 1,2,4 --scale-cmd
//! 'COMMAND'`): the operator's own command, `{workers}` replaced by the count, run through
//! `sh -c`; its exit status, its time and the end of its output recorded. The sweep measures
//! only after the command succeeded and the settle time passed; it returns to the count it found
//! whatever ends it.

use crate::error::BadInput;
use crate::record::scaling::ScaleStep;
use crate::util::{run_shell, Interrupt, Ran};
use std::time::Duration;

/// The placeholder the count replaces.
pub const PLACEHOLDER: &str = "{workers}";
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

    /// The command as given, `{workers}` in place.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The command for `workers`.
    pub fn for_count(&self, workers: u32) -> String {
        self.template.replace(PLACEHOLDER, &workers.to_string())
    }

    /// Runs the command for `workers` and, when it succeeded, waits the settle time. A command
    /// that cannot start, fails, outlives [`COMMAND_DEADLINE`] or is interrupted (its process
    /// group ended) is a step with its reason; an interrupt also cuts the settle time short.
    pub async fn scale_to(
        &self,
        workers: u32,
        restore: bool,
        interrupt: Option<&Interrupt>,
    ) -> ScaleStep {
        let command = self.for_count(workers);
        let Ran {
            exit_code,
            output,
            failure,
            seconds,
        } = run_shell(&command, COMMAND_DEADLINE, interrupt).await;
        if failure.is_none() && !restore {
            let stop = async {
                match interrupt {
                    Some(i) => i.clone().wait().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(self.settle) => {}
                _ = stop => {}
            }
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
        let s = ok.scale_to(3, false, None).await;
        assert_eq!(s.exit_code, Some(0));
        assert_eq!(s.output.trim(), "scaled to 3");
        assert!(s.failure.is_none());
        let bad = ScaleCommand::parse("echo no {workers} >&2; exit 7", Duration::ZERO).unwrap();
        let s = bad.scale_to(2, false, None).await;
        assert_eq!(s.exit_code, Some(7));
        assert_eq!(s.output.trim(), "no 2");
        assert!(s.failure.is_some());
    }
}
