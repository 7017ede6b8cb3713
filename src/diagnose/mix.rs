//! A mix of workflows: which kind consumes the resource that caps throughput. The verdict
//! itself comes from the mean job (the model's mix rule); here each kind's part of the capping
//! resource is named, so "the runner limit caps" becomes "the runner limit caps, and `orders`,
//! 30 % of the executions, takes all of the runner tasks".

use crate::findings::{Finding, FindingId};
use crate::model::mix::{self, Kind, KindUse};
use crate::model::Limit;

/// Each kind's use of the capping resource, as a finding, and a sentence for the verdict.
pub fn consumption(
    kinds: &[Kind],
    overhead_s: f64,
    limit: Option<Limit>,
    findings: &mut Vec<Finding>,
) -> (Vec<KindUse>, Option<String>) {
    if kinds.len() < 2 {
        return (Vec::new(), None);
    }
    let uses = mix::uses(kinds, overhead_s);
    let (resource, part): (&str, fn(&KindUse) -> f64) = match limit {
        Some(Limit::RunnerLimit) => ("runner tasks", |u| u.runner_share),
        Some(Limit::WorkerConcurrency | Limit::Both | Limit::Cpu) => {
            ("worker slots", |u| u.slot_share)
        }
        _ => return (uses, None),
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
