//! Glue shared by `sweep`, `demo`, `diagnose` and `recommend`: a saved summary read back, k6
//! results wrapped as a summary, and the diagnosis and recommendation attached to a summary with
//! the settings it carries (flags first, then what the run read before the load, then the
//! request body).

use crate::diagnose::{self, Inputs};
use crate::error::BadInput;
use crate::model::mix::Kind;
use crate::model::settings::{Settings, Sourced};
use crate::recommend;
use crate::record::summary::{Host, ScenarioInfo};
use crate::record::{Diagnosis, Recommendation, StageResult, Summary};
use std::path::Path;

/// Reads `summary.json` from a results directory or a path to the file itself.
pub fn load_summary(path: &Path) -> anyhow::Result<Summary> {
    let file = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let text = crate::util::read_text_file(&file, 256 << 20, "summary").map_err(|e| {
        BadInput(format!(
            "{} (give a results directory written by n8ncap sweep, or its summary.json)",
            e.0
        ))
    })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let first: Result<Summary, _> = serde_path_to_error::deserialize(de);
    let first = match first {
        Err(e) if null_number(&e) => read_with_nulls(&text).ok_or(e),
        other => other,
    };
    let summary: Summary = first.map_err(|e| {
        // The field is named by its path; the parser's message is kept without quoted values.
        let field = e.path().to_string();
        let inner = e.inner();
        let what = inner.to_string();
        let what = what.split(" at line ").next().unwrap_or("");
        BadInput(format!(
            "{}:{}:{}: not an n8ncap summary: {}{}",
            file.display(),
            inner.line(),
            inner.column(),
            if field.is_empty() || field == "." {
                String::new()
            } else {
                format!("{field}: ")
            },
            crate::wire::url::truncate(&crate::util::unquote(what), 160)
        ))
    })?;
    // A schema this build does not know (a newer n8ncap, or a hand edit) is refused, not
    // read as if it were ours: its fields may mean something else.
    let schema = summary.schema.as_str();
    let known = schema == crate::record::summary::SUMMARY_SCHEMA || schema == "n8ncap.summary/1";
    if !known {
        return Err(BadInput(format!(
            "{}: schema is {:?}: this n8ncap reads {} (and /1); a newer n8ncap wrote it, or it \
             is not an n8ncap summary",
            file.display(),
            crate::wire::url::truncate(&crate::util::escape_control(schema), 40),
            crate::record::summary::SUMMARY_SCHEMA
        ))
        .into());
    }
    for (i, st) in summary.stages.iter().enumerate() {
        st.check(&format!("stages[{i}]"))
            .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
    }
    for (i, sc) in summary.scenarios.iter().enumerate() {
        let times = [sc.job_time_s, sc.code_time_s];
        let good = (0.0..=1.0).contains(&sc.share)
            && times.iter().flatten().all(|t| {
                t.is_finite() && (0.0..=crate::util::MAX_DURATION.as_secs_f64()).contains(t)
            });
        if !good {
            return Err(BadInput(format!(
                "{}: scenarios[{i}]: share must be from 0 to 1 and job_time_s, code_time_s from 0 to 30 days",
                file.display()
            ))
            .into());
        }
    }
    if !summary.schema.starts_with("n8ncap.summary/") {
        return Err(BadInput(format!(
            "{} has schema {:?}, not {}",
            file.display(),
            summary.schema,
            crate::record::SUMMARY_SCHEMA
        ))
        .into());
    }
    Ok(summary)
}

/// serde_json writes a number that is not finite (a NaN mean) as `null`: the run wrote it, so
/// it must read back.
fn null_number(e: &serde_path_to_error::Error<serde_json::Error>) -> bool {
    let what = e.inner().to_string();
    what.starts_with("invalid type: null, expected f64")
        || what.starts_with("invalid type: null, expected u64")
        || what.starts_with("invalid type: null, expected u32")
}

/// Reads a summary whose non-finite numbers were written as `null`: each such field is read as
/// 0 (no figure, as an empty mean is), one at a time by the path the reader names.
fn read_with_nulls(text: &str) -> Option<Summary> {
    use serde_path_to_error::Segment;
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    for _ in 0..100_000 {
        let e = match serde_path_to_error::deserialize::<_, Summary>(&v) {
            Ok(s) => return Some(s),
            Err(e) if null_number(&e) => e,
            Err(_) => return None,
        };
        let mut at = &mut v;
        for seg in e.path().iter() {
            at = match seg {
                Segment::Seq { index } => at.get_mut(*index)?,
                Segment::Map { key } => at.get_mut(key.as_str())?,
                Segment::Enum { .. } | Segment::Unknown => return None,
            };
        }
        if !at.is_null() {
            return None;
        }
        *at = serde_json::Value::from(0);
    }
    None
}

/// Wraps stages read from k6 output in a summary, with the request body when given (for the
/// job time).
pub fn k6_summary(
    stages: Vec<StageResult>,
    origin: &str,
    body: Option<&str>,
) -> anyhow::Result<Summary> {
    let body = match body {
        Some(b) => Some(serde_json::from_str::<serde_json::Value>(b).map_err(|e| {
            BadInput(format!(
                "--body is not JSON ({e}): write e.g. '{{\"sleep_ms\":1000}}'"
            ))
        })?),
        None => None,
    };
    let mut s = Summary::new(
        &format!("k6: {origin}"),
        crate::record::LoadModel::Closed,
        "",
        body,
    );
    s.scenarios = k6_mix(&stages);
    s.stages = stages;
    Ok(s)
}

/// k6 scenarios that ran at once: each one's share of the requests, with its job unknown
/// (measured at 1 in flight when the run has such a level, else given by flags).
fn k6_mix(stages: &[StageResult]) -> Vec<ScenarioInfo> {
    let mut names: Vec<(String, u64)> = Vec::new();
    for c in stages.iter().flat_map(|s| s.scenarios.iter()) {
        match names.iter_mut().find(|(n, _)| *n == c.name) {
            Some(e) => e.1 += c.requests,
            None => names.push((c.name.clone(), c.requests)),
        }
    }
    let total: u64 = names.iter().map(|n| n.1).sum();
    names
        .into_iter()
        .map(|(name, n)| ScenarioInfo {
            url: format!("k6 scenario {name}"),
            name,
            method: String::new(),
            share: n as f64 / total.max(1) as f64,
            body: None,
            body_info: Default::default(),
            job_time_s: None,
            code_time_s: None,
        })
        .collect()
}

pub use crate::wire::url::is_loopback_url;

/// The host facts a sweep records: the cores of the machine n8n runs on — the Docker
/// Engine's, or this machine's when the target is on loopback — and whether n8ncap shares them.
pub fn host_facts(url: &str, docker_cores: Option<f64>) -> Host {
    let local = is_loopback_url(url);
    let cores = match docker_cores {
        Some(n) => Some(Sourced::new(n, "the Docker Engine's host (NCPU)")),
        None if local => Some(Sourced::new(
            crate::util::cores(),
            "this machine (the target is on loopback)",
        )),
        None => None,
    };
    Host {
        cores,
        shares_client_cpu: local,
        client_cores: Some(crate::util::cores()),
    }
}

/// The workflows of a mix as the model sees them: job and Code time as the profile declares
/// them, else as the body says (`sleep_ms`, `wait_ms`, `code`), else as measured — the
/// scenario's mean response at 1 in flight less n8n's typical overhead, all of it taken as
/// Code (as for one workflow whose Code time is unknown). None when a scenario's job is still
/// unknown (no level at 1 in flight) or the profile had no scenarios.
pub fn mix_kinds(scenarios: &[ScenarioInfo], stages: &[StageResult]) -> Option<Vec<Kind>> {
    if scenarios.is_empty() {
        return None;
    }
    let at_one = |name: &str| {
        stages
            .iter()
            .filter(|s| s.valid && s.vus == Some(1) && s.ramp.is_none())
            .flat_map(|s| s.scenarios.iter())
            .find(|c| c.name == name && c.requests > 0)
            .and_then(|c| c.latency.as_ref())
            .map(|l| (l.mean_ms / 1000.0 - crate::model::DEFAULT_OVERHEAD_S).max(0.0))
    };
    scenarios
        .iter()
        .map(|sc| {
            let body = Settings::from_body(sc.body.as_ref());
            let job = sc
                .job_time_s
                .or(body.job_time.as_ref().map(|j| j.value))
                .or_else(|| at_one(&sc.name))?;
            // A body's sleep_ms describes the body's job, not a declared one; "no Code node"
            // holds for any job.
            let code = sc
                .code_time_s
                .or(body
                    .code_time
                    .map(|c| c.value)
                    .filter(|c| *c == 0.0 || sc.job_time_s.is_none()))
                .unwrap_or(job)
                .min(job);
            Some(Kind {
                name: sc.name.clone(),
                share: sc.share,
                wait_s: job - code,
                code_s: code,
            })
        })
        .collect()
}

/// Diagnoses a summary with the given settings (flags first, then the settings the run read
/// before the load, then the request body), proposes settings, and stores both in the summary.
pub fn analyze(
    summary: &mut Summary,
    flags: Settings,
    task_request_timeout_s: Option<f64>,
) -> (Diagnosis, Result<Recommendation, String>) {
    let mix = mix_kinds(&summary.scenarios, &summary.stages).unwrap_or_default();
    let settings = flags
        .or(summary.settings.clone().unwrap_or_default())
        .or(Settings::from_mix(&mix))
        .or(Settings::from_body(summary.body.as_ref()));
    let inputs = Inputs {
        settings,
        task_request_timeout_s,
        host: summary.host.clone().unwrap_or_default(),
        mix,
    };
    let d = diagnose::diagnose(&summary.stages, &inputs);
    let rec = recommend::recommend(&d, None);
    summary.diagnosis = Some(d.clone());
    summary.recommendation = rec.as_ref().ok().cloned();
    summary.memory_plan = recommend::memory::plan(&d);
    (d, rec)
}

/// Writes `report.html` into a results directory from its summary and timeline.
pub fn write_report(dir: &Path, summary: &Summary) -> anyhow::Result<std::path::PathBuf> {
    let timeline = crate::record::timeline::read_file(&dir.join("timeline.jsonl"));
    let html = crate::report::html::render(summary, &timeline);
    let path = dir.join("report.html");
    crate::record::dir::write_atomic(&path, html.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_run_is_diagnosed_with_the_settings_it_recorded() {
        use crate::diagnose::tests::{closed, settings};
        let mut saved = Summary::new(
            "t",
            crate::record::LoadModel::Closed,
            "http://127.0.0.1/x",
            None,
        );
        saved.stages = vec![closed(0, 20, 4.7)];
        saved.settings = Some(settings(1.0, Some(10), Some(5)));
        saved.host = Some(Host {
            cores: Some(Sourced::new(2.0, "recorded")),
            shares_client_cpu: true,
            client_cores: Some(2.0),
        });
        // Written and read back as summary.json is.
        let text = serde_json::to_string(&saved).unwrap();
        let mut back: Summary = serde_json::from_str(&text).unwrap();
        let (d, rec) = analyze(&mut back, Settings::default(), None);
        assert_eq!(d.capping_limit, Some(crate::model::Limit::RunnerLimit));
        assert_eq!(d.settings.runner_limit.as_ref().unwrap().source, "test");
        assert!(rec.is_ok());
        // A flag overrides what the run recorded.
        let flags = Settings {
            runner_limit: Some(Sourced::new(20, "flag --runner-limit")),
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
        std::fs::write(dir.join("summary.json"), old.to_string()).unwrap();
        let mut s = load_summary(&dir).unwrap();
        assert!(s.diagnosis.is_none() && s.recommendation.is_none());
        let (d, _) = analyze(&mut s, settings_10(), None);
        assert_eq!(d.capping_limit, Some(crate::model::Limit::RunnerLimit));
        // A schema from the future is refused, naming it.
        old["schema"] = "n8ncap.summary/99".into();
        std::fs::write(dir.join("summary.json"), old.to_string()).unwrap();
        let err = load_summary(&dir).unwrap_err().to_string();
        assert!(err.contains("n8ncap.summary/99"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn settings_10() -> Settings {
        Settings {
            worker_concurrency: Some(Sourced::new(10, "t")),
            ..Settings::default()
        }
    }

    #[test]
    fn a_mix_takes_each_workflow_s_times_from_the_profile_the_body_or_the_first_level() {
        use crate::record::stage::{Latency, ScenarioResult};
        let info = |name: &str, body: Option<serde_json::Value>, job: Option<f64>| ScenarioInfo {
            name: name.into(),
            method: "POST".into(),
            url: "http://x/webhook/a".into(),
            share: 0.5,
            body,
            body_info: Default::default(),
            job_time_s: job,
            code_time_s: None,
        };
        let mut one = StageResult::empty(0, "1 in flight".into(), crate::record::LoadModel::Closed);
        one.vus = Some(1);
        one.scenarios = vec![ScenarioResult {
            name: "measured".into(),
            requests: 4,
            ok: 4,
            throughput_rps: 1.0,
            request_rate: 1.0,
            share: 0.5,
            latency: Some(Latency {
                mean_ms: 560.0,
                min_ms: 550.0,
                p50_ms: 560.0,
                p90_ms: 570.0,
                p95_ms: 570.0,
                p99_ms: 570.0,
                max_ms: 570.0,
            }),
            error_rate: 0.0,
            errors: Default::default(),
            checks: Vec::new(),
            check_pass_rate: 1.0,
            bytes_sent: 0,
            bytes_received: 0,
        }];
        let kinds = mix_kinds(
            &[
                info(
                    "body",
                    Some(serde_json::json!({"sleep_ms": 300, "code": false})),
                    None,
                ),
                info("measured", None, None),
                info(
                    "declared",
                    Some(serde_json::json!({"code": false})),
                    Some(2.0),
                ),
            ],
            std::slice::from_ref(&one),
        )
        .expect("every job known");
        assert_eq!((kinds[0].wait_s, kinds[0].code_s), (0.3, 0.0));
        // 560 ms at 1 in flight less the typical 60 ms overhead, all taken as Code.
        assert!((kinds[1].code_s - 0.5).abs() < 1e-9 && kinds[1].wait_s == 0.0);
        assert_eq!((kinds[2].wait_s, kinds[2].code_s), (2.0, 0.0));
        // Without a level at 1 in flight an unknown workflow leaves the mix unknown.
        assert!(mix_kinds(&[info("measured", None, None)], &[]).is_none());
    }

    #[test]
    fn loopback_targets_are_recognised() {
        assert!(is_loopback_url("http://127.0.0.1:5678/webhook/x"));
        assert!(is_loopback_url("http://localhost/x"));
        assert!(is_loopback_url("https://user:pw@[::1]:443/x"));
        assert!(!is_loopback_url("http://n8n.example:5678/x"));
        assert!(!is_loopback_url("http://10.0.0.5/x"));
    }
}
