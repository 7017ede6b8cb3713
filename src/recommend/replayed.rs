//! The autoscalers `replay` runs over recorded arrivals: the deployed one (when it can be
//! replayed) and the one n8ncap generates, read back from its typed ScaledObject through the
//! same reader as a deployed one, tuned first when arrivals are given (`tuned.rs`).

/// An autoscaler and the shutdown window of the workers it removes, s.
pub type Windowed = (crate::model::autoscaler::Policy, f64);

/// The plan's ScaledObject as the replay runs it: the typed object the YAML is written from,
/// read through the same reader as a deployed one.
fn generated_policy(
    plan: &crate::record::autoscaler::AutoscalerPlan,
) -> anyhow::Result<crate::model::autoscaler::Policy> {
    use crate::model::autoscaler::Control;
    let object = crate::record::kube::ScaledObject::of(plan);
    let (_, _, generated) = crate::topology::k8s::scaled_object_of(&object)?;
    match generated.control {
        Some(Control::Replayable(mut p)) => {
            p.name = format!("{} (generated)", p.name);
            Ok(p)
        }
        Some(Control::NotReplayed(why)) => {
            anyhow::bail!("the generated ScaledObject cannot be replayed: {why}")
        }
        None => anyhow::bail!("the generated YAML holds no ScaledObject"),
    }
}

/// The deployed autoscaler (when it can be replayed) and the generated one, each with its
/// workers' shutdown window, and what was not replayed. With a tuning (the arrivals, the
/// workers and the longest wait allowed), the plan is first tuned by replaying candidates over
/// them (`recommend::tuned`), and what the tuning compared is said with the rest.
pub fn replayed(
    t: &crate::topology::Topology,
    plan: &mut crate::record::autoscaler::AutoscalerPlan,
    tuning: Option<super::tuned::Tuning>,
) -> anyhow::Result<(Vec<Windowed>, Vec<String>)> {
    use crate::model::autoscaler::Control;
    // What a removed worker's Code tasks have: n8n's task budget, 0.8 × the shutdown window,
    // unless the pod's grace kills it first (`model::drain::budget_s`).
    use crate::model::drain::{budget_s, StopSignal};
    let deployed_window = budget_s(
        StopSignal::Term,
        plan.target.graceful_shutdown_s.value,
        Some(plan.target.termination_grace_s.value),
    );
    let mut policies = Vec::new();
    let mut not = Vec::new();
    let deployed = t
        .workers()
        .find_map(|w| w.facts.k8s.as_ref().and_then(|k| k.autoscaler.clone()));
    if let Some(a) = deployed.as_ref().filter(|a| !a.also.is_empty()) {
        not.push(format!(
            "{} also scale the same workers as {}: two autoscalers on one Deployment fight \
             (KEDA's admission webhook refuses the second ScaledObject; two HPAs stop at \
             AmbiguousSelector) — only {} is replayed; keep one.",
            a.also.join(", "),
            a.by,
            a.by
        ));
    }
    match deployed.as_ref().and_then(|a| a.control.clone()) {
        Some(Control::Replayable(mut p)) => {
            p.name = format!("{} (deployed)", p.name);
            policies.push((p, deployed_window));
        }
        Some(Control::NotReplayed(why)) => not.push(format!(
            "{} is not replayed: {why}.",
            deployed.map(|a| a.by).unwrap_or_default()
        )),
        None => not.push(
            "The deployment has no autoscaler on its workers: only the generated one is replayed."
                .into(),
        ),
    }
    let generated_window = |plan: &crate::record::autoscaler::AutoscalerPlan| {
        budget_s(
            StopSignal::Term,
            f64::from(plan.graceful_shutdown_s.value),
            Some(f64::from(plan.termination_grace_s.value)),
        )
    };
    if let Some(tuning) = tuning {
        let before = plan.notes.len();
        let first = generated_policy(plan)?;
        // The candidates' workers stop within the generated object's shutdown window.
        let tuning = super::tuned::Tuning {
            workload: crate::model::autoscaler::Workload {
                window_s: generated_window(plan),
                ..tuning.workload
            },
            ..tuning
        };
        let deployed = policies.first().map(|(p, w)| (p, *w));
        super::tuned::tune(plan, &first, deployed, &tuning);
        not.extend(plan.notes[before..].iter().map(|n| format!("Tuning: {n}.")));
    }
    policies.push((generated_policy(plan)?, generated_window(plan)));
    Ok((policies, not))
}
