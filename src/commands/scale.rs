//! `n8ncap scale RUN RUN …`: runs of one deployment at several worker counts, each judged again
//! with what it recorded, then together (`diagnose::scale`).

use crate::cli::ScaleArgs;
use crate::diagnose::scale::judge_labelled;
use crate::error::{self, BadInput};
use crate::model::settings::Settings;
use crate::report::views::Scale;

pub(super) fn run(a: ScaleArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<Scale>("scale")?;
    if let Some(t) = a.target_rate {
        check_target_rate(t)?;
    }
    let mut judged = Vec::new();
    for path in &a.runs {
        let mut summary = crate::record::dir::load_summary(path)?;
        let (d, _) = super::analyze(&mut summary, Settings::default(), None);
        judged.push((path.display().to_string(), d));
    }
    let result = judge_labelled(&judged, a.target_rate)?;
    crate::report::emit(&Scale(&result), format)?;
    Ok(error::EXIT_OK)
}

/// A target rate checked: executions per second above 0, within what any deployment runs.
pub(super) fn check_target_rate(t: f64) -> Result<(), BadInput> {
    if t.is_finite() && t > 0.0 && t <= 1e7 {
        return Ok(());
    }
    Err(BadInput(format!(
        "--target-rate {t}: give executions per second above 0 (at most 10 000 000), e.g. 200"
    )))
}
