//! `n8ncap replay`: reads the arrivals (`load::arrivals`), the deployment's autoscaler
//! (`topology`), the run's capacity and the autoscaler n8ncap generates from it (`recommend`,
//! read back through the same manifest reader as the deployed one), and hands them to
//! `diagnose::replay`.

use crate::cli::ReplayArgs;
use crate::error::{self, BadInput};
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
    let t = super::input::topology_of(&a.files, a.project.as_deref()).await?;
    let (plan, d) = super::input::autoscaler_plan(&a.run, &t).await?;
    let workload = crate::recommend::autoscaler::workload(&d, pod_start);
    let max_wait = crate::util::parse_duration(&a.max_wait)
        .map_err(|e| BadInput(format!("--max-wait: {e}")))?;
    let mut plan = plan;
    let tuning = crate::recommend::tuned::Tuning {
        arrivals: &arrivals.per_s,
        from: &arrivals.from,
        workload,
        max_wait_s: max_wait.as_secs_f64(),
    };
    let (policies, not_replayed) =
        crate::recommend::replayed::replayed(&t, &mut plan, Some(tuning))?;
    let x = d.measured_ceiling.as_ref().map(|c| c.mean).unwrap_or(0.0);
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let job = workload.job_s;
    let inputs = crate::diagnose::replay::Replays {
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
    let r = crate::diagnose::replay::judge_replay(inputs);
    crate::report::emit(&View(&r), format)?;
    Ok(error::EXIT_OK)
}
