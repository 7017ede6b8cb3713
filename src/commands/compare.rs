//! `n8ncap compare A B …`: each run judged again with what it recorded, then every later run
//! against the first; exit 99 when a `--fail-if` threshold is passed beyond noise.

use crate::cli::CompareArgs;
use crate::diagnose::compare::{compare, FailIf, Judged};
use crate::error;
use crate::report::views::Compare;

pub(super) async fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<Compare>("compare")?;
    let fail_if = a
        .fail_if
        .iter()
        .map(|t| FailIf::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut judged = Vec::new();
    for path in &a.runs {
        let (summary, d, rec) = super::input::rejudged(path).await?;
        judged.push((path.display().to_string(), summary, d, rec));
    }
    let runs: Vec<Judged> = judged
        .iter()
        .map(|(label, summary, diagnosis, recommendation)| Judged {
            label: label.clone(),
            summary,
            diagnosis,
            recommendation,
        })
        .collect();
    let result = compare(&runs, &fail_if)?;
    crate::report::emit(&Compare(&result), format)?;
    Ok(if result.failed() {
        error::EXIT_THRESHOLD
    } else {
        error::EXIT_OK
    })
}
