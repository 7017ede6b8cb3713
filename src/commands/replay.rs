//! `n8ncap replay`: reads the arrivals (`load::arrivals`), the deployment's autoscaler
//! (`topology`), the run's capacity and the autoscaler n8ncap generates from it (`recommend`,
//! read back through the same manifest reader as the deployed one), and hands them to
//! `diagnose::replay`.

use crate::cli::ReplayArgs;
use crate::error::{self, BadInput};
use crate::model::autoscale::{Control, Policy, Workload};
use crate::report::views::Replay as View;

pub(super) async fn run(a: ReplayArgs) -> anyhow::Result<i32> {
    let format = a.output.format::<View>("replay")?;
    if a.files.is_empty() && a.project.is_none() {
        return Err(BadInput(
            "replay reads the autoscaler and the workers from the deployment: give -f with its manifests (or compose files), or --project".into(),
        )
        .into());
    }
    let pod_start = crate::util::parse_duration(&a.pod_start)
        .map_err(|e| BadInput(format!("--pod-start: {e}")))?;
    let arrivals = crate::load::arrivals::read(&a.arrivals)?;
    let t = super::recommend::topology_of(&a.files, a.project.as_deref()).await?;
    let (plan, d) = super::recommend::plan_for(&a.run, &t)?;
    let (policies, not_replayed) = policies(&t, &plan)?;
    let x = d.measured_ceiling.as_ref().map(|c| c.mean).unwrap_or(0.0);
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let job = d.service_time.as_ref().map(|s| s.value).unwrap_or(0.0);
    let workload = Workload {
        per_worker_per_s: x / f64::from(workers),
        job_s: job,
        pod_start_s: pod_start.as_secs().min(u64::from(u32::MAX)) as u32,
        window_s: 0.0,
    };
    let inputs = crate::diagnose::replay::Inputs {
        arrivals_from: arrivals.from,
        arrivals: arrivals.per_s,
        arrival_gaps: arrivals.gaps,
        workload,
        workload_from: vec![
            format!(
                "one worker's ceiling {:.2}/s: {x:.2}/s measured at {workers} worker{} ({})",
                workload.per_worker_per_s,
                if workers == 1 { "" } else { "s" },
                a.run.display()
            ),
            format!("job time {job:.2} s ({})", a.run.display()),
            format!(
                "time a removed worker's Code tasks have: min(0.8 × N8N_GRACEFUL_SHUTDOWN_TIMEOUT {:.0} s, terminationGracePeriodSeconds {:.0} s) deployed (n8n's task budget); the generated patch's {:.1} s",
                plan.target.graceful_shutdown_s.value,
                plan.target.termination_grace_s.value,
                crate::model::drain::budget_s(
                    crate::model::drain::StopSignal::Term,
                    f64::from(plan.graceful_shutdown_s.value),
                    Some(f64::from(plan.termination_grace_s.value))
                )
            ),
            format!("pods serve {} s after they are asked for (--pod-start)", workload.pod_start_s),
        ],
        policies,
        not_replayed,
    };
    let r = crate::diagnose::replay::judge(inputs);
    crate::report::emit(&View(&r), format)?;
    Ok(error::EXIT_OK)
}

/// The deployed autoscaler (when it can be replayed) and the generated ScaledObject.
/// An autoscaler and the shutdown window of the workers it removes, s.
type Windowed = (Policy, f64);

/// Each with the shutdown window its workers have.
fn policies(
    t: &crate::topology::Topology,
    plan: &crate::record::autoscaling::AutoscalerPlan,
) -> anyhow::Result<(Vec<Windowed>, Vec<String>)> {
    // What a removed worker's Code tasks have: n8n's task budget, 0.8 × the shutdown window,
    // unless the pod's grace kills it first (`model::drain::budget_s`).
    use crate::model::drain::{budget_s, StopSignal};
    let deployed_window = budget_s(
        StopSignal::Term,
        plan.target.graceful_shutdown_s.value,
        Some(plan.target.termination_grace_s.value),
    );
    let generated_window = budget_s(
        StopSignal::Term,
        f64::from(plan.graceful_shutdown_s.value),
        Some(f64::from(plan.termination_grace_s.value)),
    );
    let mut policies = Vec::new();
    let mut not = Vec::new();
    let deployed = t
        .workers()
        .find_map(|w| w.facts.k8s.as_ref().and_then(|k| k.autoscaler.clone()));
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
    let text = crate::report::autoscaler::keda(plan);
    let generated = crate::topology::k8s::autoscalers("the generated ScaledObject", &text)?;
    match generated.into_iter().find_map(|(_, _, a)| a.control) {
        Some(Control::Replayable(mut p)) => {
            p.name = format!("{} (generated)", p.name);
            policies.push((p, generated_window));
        }
        Some(Control::NotReplayed(why)) => {
            anyhow::bail!("the generated ScaledObject cannot be replayed: {why}")
        }
        None => anyhow::bail!("the generated YAML holds no ScaledObject"),
    }
    Ok((policies, not))
}
