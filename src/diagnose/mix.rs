//! A mix of workflows: which kind consumes the resource that caps throughput. The verdict
//! itself comes from the mean job (the model's mix rule); here each kind's part of the capping
//! resource is named, so "the runner limit caps" becomes "the runner limit caps, and `orders`,
//! 30 % of the executions, takes all of the runner tasks".

use crate::findings::{Finding, FindingId};
use crate::model::mix::{self, Kind, KindUse};
use crate::model::Capping;

/// Each kind's use of the capping resource, as a finding, and a sentence for the verdict.
pub fn consumption(
    kinds: &[Kind],
    overhead_s: f64,
    limit: Option<Capping>,
    findings: &mut Vec<Finding>,
) -> (Vec<KindUse>, Option<String>) {
    if kinds.len() < 2 {
        return (Vec::new(), None);
    }
    let uses = mix::uses(kinds, overhead_s);
    // Main's production limit and a missing runner are not shared out by kind of job.
    let Some((resource, part)) = limit.and_then(|l| crate::limits::answering(l).shared_as()) else {
        return (uses, None);
    };
    let mut ranked: Vec<&KindUse> = uses.iter().collect();
    ranked.sort_by(|a, b| part(b).total_cmp(&part(a)));
    let words: Vec<String> = ranked
        .iter()
        .map(|u| {
            format!(
                "{} {:.0} % ({:.0} % of the executions)",
                u.name,
                part(u) * 100.0,
                u.share * 100.0
            )
        })
        .collect();
    let top = ranked[0];
    let mean = mix::mean_job(kinds);
    let mut f = Finding::new(FindingId::MixConsumption,
        format!(
            "In this mix, {} takes {:.0} % of the {resource} with {:.0} % of the executions",
            top.name,
            part(top) * 100.0,
            top.share * 100.0
        ),
    )
    .evidence(format!("{resource} by workflow: {}", words.join("; ")))
    .evidence(format!(
        "mean job of the mix: Code time Σ w·C = {:.3} s, slot time Σ w·S = {:.3} s (overhead included)",
        mean.code_s,
        mean.job_time() + overhead_s
    ))
    .why("A mix needs runner capacity only for the share of its executions that run Code: the same settings can be runner-bound for one mix and worker-bound for another.");
    for u in &uses {
        f = f.figure(&format!("{}_share", u.name), u.share).figure(
            &format!("{}_{}", u.name, resource.replace(' ', "_")),
            part(u),
        );
    }
    findings.push(f);
    let sentence = format!(
        " In this mix {} takes {:.0} % of the {resource} with {:.0} % of the executions.",
        top.name,
        part(top) * 100.0,
        top.share * 100.0
    );
    (uses, Some(sentence))
}

/// The workflows of a mix as the model sees them: job and Code time as the profile declares
/// them, else as the body says (`sleep_ms`, `wait_ms`, `code`), else as measured — the
/// scenario's mean response at 1 in flight less n8n's typical overhead, all of it taken as
/// Code (as for one workflow whose Code time is unknown). None when a scenario's job is still
/// unknown (no level at 1 in flight) or the profile had no scenarios.
pub fn kinds(
    scenarios: &[crate::record::summary::ScenarioInfo],
    stages: &[crate::record::StageResult],
) -> Option<Vec<Kind>> {
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
            .map(|l| super::levels::job_from_response(l.mean_ms / 1000.0))
    };
    scenarios
        .iter()
        .map(|sc| {
            let body = crate::model::settings::Settings::from_body(sc.body.as_ref());
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

#[cfg(test)]
mod tests {
    use crate::record::summary::ScenarioInfo;
    use crate::record::StageResult;

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
        let got = super::kinds(
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
        assert_eq!((got[0].wait_s, got[0].code_s), (0.3, 0.0));
        // 560 ms at 1 in flight less the typical 60 ms overhead, all taken as Code.
        assert!((got[1].code_s - 0.5).abs() < 1e-9 && got[1].wait_s == 0.0);
        assert_eq!((got[2].wait_s, got[2].code_s), (2.0, 0.0));
        // Without a level at 1 in flight an unknown workflow leaves the mix unknown.
        assert!(super::kinds(&[info("measured", None, None)], &[]).is_none());
    }
}
