//! The workers' autoscaler against what a run measured (`audit --run DIR`): its target per
//! replica against the jobs one worker holds at the 2/3 operating point, and its maximum
//! against the shared bound past which workers add nothing.

use super::{finding, Ctx};
use crate::findings::{Finding, FindingId};
use crate::model::autoscaler::{Control, Metric};
use crate::model::OperatingPoint;
use crate::topology::Role;

/// A target this many times off the operating point, either way, is far.
const FAR: f64 = 2.0;

pub(super) fn rules(c: &Ctx, m: &OperatingPoint, out: &mut Vec<Finding>) {
    for n in c.n8n.iter().copied().filter(|n| n.role == Role::Worker) {
        let Some(a) = n.facts.k8s.as_ref().and_then(|k| k.autoscaler.as_ref()) else {
            continue;
        };
        if let (Some(Control::Replayable(p)), Some((per_worker, job_s))) =
            (&a.control, m.per_worker)
        {
            let holds = crate::model::OPERATING_SHARE * per_worker * job_s;
            // The jobs a trigger counts: waiting and active together, or the active alone; a
            // waiting-only or wrong list is autoscaler-waiting-only's and -wrong-queue's.
            let target = p
                .signals
                .iter()
                .find(|(metric, _)| matches!(metric, Metric::Held | Metric::Active))
                .map(|(_, t)| *t);
            if let Some(t) =
                target.filter(|t| holds > 0.0 && (*t > FAR * holds || *t * FAR < holds))
            {
                let (way, then) = if t > holds {
                    ("above", "workers are added only once each holds more than it can serve at 2/3: the backlog grows first")
                } else {
                    ("below", "workers are added while the ones there are still have room: replicas and their cost for nothing")
                };
                out.push(
                    finding(FindingId::AutoscalerTargetFar, n.name(), format!(
                        "{}: {} targets {t:.1} jobs per replica, {:.1} × {way} the {holds:.1} one worker holds at 2/3 of its measured ceiling ({per_worker:.2}/s × {job_s:.2} s, {})",
                        n.name(), a.by, if t > holds { t / holds } else { holds / t }, m.from
                    ))
                    .figure("target_per_replica", t)
                    .figure("operating_jobs_per_worker", holds)
                    .why(then)
                    .fix(format!(
                        "a target of {:.1}: Kubernetes — the ScaledObject's spec.advanced.scalingModifiers.target (or the trigger's listLength), an HPA's averageValue; n8n's chart and the community chart write no such target: apply the ScaledObject `n8ncap recommend RUN --format keda` generates",
                        (holds * 10.0).floor() / 10.0
                    )),
                );
            }
        }
        if let Some((useful, by)) = &m.useful_workers {
            if a.max > *useful {
                out.push(
                    finding(FindingId::AutoscalerMaxBeyondSharedBound, n.name(), format!(
                        "{}: {} may run {} workers, but {by} ({}): past {useful} workers none adds throughput",
                        n.name(), a.by, a.max, m.from
                    ))
                    .figure("max_replicas", f64::from(a.max))
                    .figure("useful_workers", f64::from(*useful))
                    .why("Workers past a shared bound (main's intake, the host's CPU) wait on it with the others: they cost pods and Postgres connections and raise no ceiling.")
                    .fix(format!(
                        "maxReplicaCount: {useful} — Kubernetes: the ScaledObject's spec.maxReplicaCount (an HPA's spec.maxReplicas); n8n's chart: keda.worker.maxReplicaCount; the community chart: worker.autoscaling.maxReplicas; or raise the shared bound first (webhook processors for main's intake)"
                    )),
                );
            }
        }
    }
}
