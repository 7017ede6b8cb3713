//! A run's summary judged and planned for: the settings it is judged with (flags first, then
//! what the run recorded, then the mix and the body), the diagnosis, the plan and the runner's
//! memory, stored in the summary.

use crate::diagnose::{self as judge, Inputs};
use crate::model::settings::Settings;
use crate::record::{Diagnosis, Recommendation, Summary};

/// Diagnoses a summary with the given settings (flags first, then the settings the run read
/// before the load, then the request body), proposes settings, and stores both in the summary.
pub fn analyze(
    summary: &mut Summary,
    flags: Settings,
    task_request_timeout_s: Option<f64>,
) -> (Diagnosis, Result<Recommendation, crate::error::NoPlan>) {
    let mix = judge::mix::kinds(&summary.scenarios, &summary.stages).unwrap_or_default();
    let settings = flags
        .or(summary.settings.clone().unwrap_or_default())
        .or(Settings::from_mix(&mix))
        .or(Settings::from_body(summary.body.as_ref()));
    let inputs = Inputs {
        service_time: judge::ServiceTime::of(&summary.stages, &settings),
        settings,
        task_request_timeout_s,
        host: summary.host.clone().unwrap_or_default(),
        mix,
    };
    let mut d = judge::diagnose(&summary.stages, &inputs);
    d.findings.extend(crate::diagnose::failures::left_behind(
        summary.executions_left.as_ref(),
    ));
    let rec = super::recommend(&d, None);
    summary.diagnosis = Some(d.clone());
    summary.recommendation = rec.as_ref().ok().cloned();
    summary.memory_plan = super::memory::plan(&d);
    (d, rec)
}

/// Evidence judged and planned for, through one door: a Prometheus history (evidence with
/// windows) by `diagnose::history::judge_windows` — the windows' own findings, the range in
/// the verdict — and stages alone by [`analyze`]; the diagnosis and the plan stored in its
/// summary.
pub fn judged(
    ev: &mut crate::record::evidence::Evidence,
    flags: Settings,
    task_request_timeout_s: Option<f64>,
) -> (Diagnosis, Result<Recommendation, crate::error::NoPlan>) {
    if ev.windows.is_none() {
        return analyze(&mut ev.summary, flags, task_request_timeout_s);
    }
    let d = crate::diagnose::history::judge_windows(ev, &flags, task_request_timeout_s);
    let rec = super::recommend(&d, None);
    ev.summary.diagnosis = Some(d.clone());
    ev.summary.recommendation = rec.as_ref().ok().cloned();
    (d, rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::settings::{Provenance, Sourced};
    use crate::record::summary::Host;

    #[test]
    fn a_saved_run_is_diagnosed_with_the_settings_it_recorded() {
        use crate::diagnose::tests::{closed, settings};
        let mut saved = Summary::new(
            "t",
            crate::record::LoadModel::Closed,
            "http://127.0.0.1/x",
            None,
            std::time::SystemTime::now(),
        );
        saved.stages = vec![closed(0, 20, 4.7)];
        saved.settings = Some(settings(1.0, Some(10), Some(5)));
        saved.host = Some(Host {
            cores: Some(Sourced::new(2.0, Provenance::Recorded("recorded".into()))),
            shares_client_cpu: true,
            client_cores: Some(2.0),
        });
        // Written and read back as summary.json is.
        let text = serde_json::to_string(&saved).unwrap();
        let mut back: Summary = serde_json::from_str(&text).unwrap();
        let (d, rec) = analyze(&mut back, Settings::default(), None);
        assert_eq!(
            d.capping_limit,
            Some(crate::model::Limit::RunnerLimit.into())
        );
        assert_eq!(
            d.settings.runner_limit.as_ref().unwrap().source.words(),
            "test"
        );
        assert!(rec.is_ok());
        // A flag overrides what the run recorded.
        let flags = Settings {
            runner_limit: Some(Sourced::new(20, Provenance::Flag("--runner-limit".into()))),
            ..Settings::default()
        };
        let (d2, _) = analyze(&mut back, flags, None);
        assert_eq!(d2.settings.runner_limit.as_ref().unwrap().value, 20);
        // The diagnosis is stored typed and survives the round trip.
        let again: Summary = serde_json::from_str(&serde_json::to_string(&back).unwrap()).unwrap();
        assert_eq!(again.diagnosis.as_ref(), Some(&d2));
    }

    #[test]
    fn a_summary_with_an_older_diagnosis_is_read_and_diagnosed_again() {
        use crate::diagnose::tests::closed;
        let mut old = serde_json::to_value(Summary::new(
            "t",
            crate::record::LoadModel::Closed,
            "",
            Some(serde_json::json!({"sleep_ms": 1000})),
            std::time::SystemTime::now(),
        ))
        .unwrap();
        old["schema"] = "n8ncap.summary/1".into();
        old["stages"] = serde_json::to_value(vec![closed(0, 20, 4.7)]).unwrap();
        // Schema 1 wrote the diagnosis as free JSON with `load` per level.
        old["diagnosis"] =
            serde_json::json!({"capping_limit": "runner_limit", "levels": [{"load": 20.0}]});
        old["recommendation"] = serde_json::json!({"operating_concurrency": 13});
        let dir = std::env::temp_dir().join(format!("n8ncap-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(crate::record::dir::SUMMARY), old.to_string()).unwrap();
        let mut s = crate::record::dir::load_summary(&dir).unwrap();
        assert!(s.diagnosis.is_none() && s.recommendation.is_none());
        let (d, _) = analyze(&mut s, settings_10(), None);
        assert_eq!(
            d.capping_limit,
            Some(crate::model::Limit::RunnerLimit.into())
        );
        // A schema from the future is refused, naming it.
        old["schema"] = "n8ncap.summary/99".into();
        std::fs::write(dir.join(crate::record::dir::SUMMARY), old.to_string()).unwrap();
        let err = crate::record::dir::load_summary(&dir)
            .unwrap_err()
            .to_string();
        assert!(err.contains("n8ncap.summary/99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn settings_10() -> Settings {
        Settings {
            worker_concurrency: Some(Sourced::new(10, Provenance::Assumed("t".into()))),
            ..Settings::default()
        }
    }
}
