//! An existing alerting setup against the capacity a run measured (`audit --rules FILE --run
//! DIR`): alerts on n8n's queue series whose threshold is far from what the deployment does.
//! A waiting-jobs alert fires only once the backlog, drained at the measured ceiling, is a wait
//! longer than a webhook's caller waits (30 s when nothing says: many clients' and proxies'
//! default); an alert on the completion rate above the measured ceiling can never fire.

use crate::findings::{Finding, FindingId, Severity};
use crate::model::OperatingPoint;
use crate::topology::alert_rules::{threshold_above, ExistingAlert};

/// How long a webhook's caller waits when nothing says, s.
const CALLER_S: f64 = 30.0;
/// How far past the budget a threshold is "far": twice it.
const FAR: f64 = 2.0;

fn far(a: &ExistingAlert, title: String) -> Finding {
    Finding::new(FindingId::AlertThresholdFar, title)
        .subject(&a.name)
        .with_severity(Severity::Warning)
        .evidence(format!("{} ({}): {}", a.name, a.origin, a.expr))
}

/// The findings for `alerts` against `m`; none without a measured ceiling.
pub fn rules(alerts: &[ExistingAlert], m: &OperatingPoint, out: &mut Vec<Finding>) {
    let Some(x) = m.ceiling_per_s.filter(|x| x.is_finite() && *x > 0.0) else {
        return;
    };
    let budget_s = (CALLER_S - m.job_p99_s).max(1.0);
    let budget_jobs = x * budget_s;
    for a in alerts {
        let Some(n) = threshold_above(&a.expr) else {
            continue;
        };
        let e = &a.expr;
        let rated = ["rate(", "irate(", "deriv(", "increase(", "delta("]
            .iter()
            .any(|f| e.contains(f));
        if e.contains("n8n_scaling_mode_queue_jobs_waiting") && !e.contains('/') && !rated {
            if n > FAR * budget_jobs {
                out.push(
                    far(a, format!(
                        "{}: fires once {n:.0} jobs wait — drained at the measured {x:.2}/s that is {:.0} s of wait, past the {budget_s:.0} s a webhook's caller can wait ({} jobs)",
                        a.name, n / x, budget_jobs.floor()
                    ))
                    .figure("threshold", n)
                    .figure("wait_budget_jobs", budget_jobs.floor())
                    .figure("ceiling_per_s", x)
                    .why(format!("Jobs waiting drain at the deployment's ceiling ({x:.2}/s in {}): a caller who waits {CALLER_S:.0} s for a webhook's answer (less the p99 job {:.2} s) has given up long before {n:.0} jobs are waiting.", m.from, m.job_p99_s))
                    .fix(format!("alert on the queue's wait (waiting ÷ completions per second) above {budget_s:.0} s, or on waiting jobs above {:.0}: `n8ncap recommend RUN --format prometheus-rules` writes both from the run", budget_jobs.floor())),
                );
            }
        } else if e.contains("n8n_scaling_mode_queue_jobs_completed")
            && (e.contains("rate(") || e.contains("irate("))
            && n > x
        {
            out.push(
                far(a, format!(
                    "{}: fires above {n:.2} executions/s, past the ceiling {x:.2}/s the deployment measured: it can never fire",
                    a.name
                ))
                .figure("threshold", n)
                .figure("ceiling_per_s", x)
                .why(format!("The run {} measured the deployment's ceiling at {x:.2}/s: the completion rate does not pass it, so the alert stays silent while the deployment is saturated.", m.from))
                .fix(format!("alert past the operating point, 2/3 × the ceiling ({:.2}/s), and near it (90 %, {:.2}/s)", x * 2.0 / 3.0, x * 0.9)),
            );
        }
    }
}
