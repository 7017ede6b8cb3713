//! Runs of one deployment at several worker counts, judged together (`n8ncap scale`): the
//! ceiling at each count, what each added worker gained, the Universal Scalability Law fitted
//! to them (`model::usl`), the shared limit that bends the curve — main's intake, the host's
//! CPU, Postgres — read from the run at the highest count, and the workers a target rate needs.

use crate::error::BadInput;
use crate::model::usl;
use crate::record::scaling::{PerWorker, ScalePoint, Scaling, SharedLimit, UslFit, WorkersPlan};
use crate::record::{Diagnosis, Role};

/// A worker adds less than this share of one worker's ceiling: diminishing returns.
const DIMINISHING: f64 = 0.1;
/// Most workers a plan looks at.
const MAX_WORKERS: u32 = 1000;
/// The operating point's share of the ceiling (the 2/3 safety factor).
use crate::model::OPERATING_SHARE as OPERATING;

/// One saved run and its judgement.
pub struct Run<'a> {
    pub label: String,
    pub diagnosis: &'a Diagnosis,
}

/// Labelled judgements (a run's directory and its diagnosis) judged together.
pub fn judge_labelled(
    judged: &[(String, Diagnosis)],
    target: Option<f64>,
) -> Result<Scaling, BadInput> {
    let runs: Vec<Run> = judged
        .iter()
        .map(|(label, diagnosis)| Run {
            label: label.clone(),
            diagnosis,
        })
        .collect();
    judge_counts(&runs, target)
}

/// The runs judged together; refused when a run's worker count is not known or two runs
/// share one.
pub fn judge_counts(runs: &[Run], target: Option<f64>) -> Result<Scaling, BadInput> {
    let mut points = Vec::new();
    for r in runs {
        let w = r.diagnosis.settings.workers.as_ref().ok_or_else(|| {
            BadInput(format!(
                "{}: its worker count is not known: sweep with --project NAME or --docker (the \
                 containers are counted), or give --workers N to the sweep",
                r.label
            ))
        })?;
        points.push(ScalePoint {
            run: r.label.clone(),
            workers: w.value,
            workers_source: w.source.words(),
            ceiling: r
                .diagnosis
                .measured_ceiling
                .as_ref()
                .map(|x| [x.mean, x.low, x.high]),
            limit: r.diagnosis.capping_limit.map(|l| l.words().to_string()),
            efficiency: None,
            not_joined: not_joined(r.diagnosis, w.value),
        });
    }
    points.sort_by_key(|p| p.workers);
    if let Some(w) = points.windows(2).find(|w| w[0].workers == w[1].workers) {
        return Err(BadInput(format!(
            "{} and {} both ran {} worker(s): give one run per worker count",
            w[0].run, w[1].run, w[0].workers
        )));
    }
    efficiencies(&mut points);
    let fit = fit_of(&points);
    let top = runs
        .iter()
        .max_by_key(|r| r.diagnosis.settings.workers.as_ref().map(|w| w.value));
    let shared = top
        .map(|r| crate::limits::shared_limits(r.diagnosis))
        .unwrap_or_default();
    let verdict = verdict(&points, fit.as_ref(), &shared);
    let plan = target.map(|t| plan(t, fit.as_ref(), &shared, top.map(|r| r.diagnosis)));
    Ok(Scaling {
        points,
        fit,
        shared,
        verdict,
        plan,
    })
}

/// Whether every one of `workers` took jobs: while jobs waited in the queue every slot of every
/// worker that joined was taken, so main's gauge then reads workers × concurrency. Fewer by
/// half a worker's slots or more (the most over the run's valid levels) says some never joined
/// — a scale command that returned before its workers connected, workers on another queue or
/// Redis, or a rollout still under way.
fn not_joined(d: &Diagnosis, workers: u32) -> Option<String> {
    let c = d.settings.worker_concurrency.as_ref()?.value;
    let full = d
        .levels
        .iter()
        .filter(|l| l.valid)
        .filter_map(|l| l.slots_full)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .max_by(|a, b| a.total_cmp(b))?;
    let expected = f64::from(workers) * f64::from(c);
    if workers == 0 || c == 0 || full > expected - 0.5 * c as f64 {
        return None;
    }
    Some(format!(
        "while jobs waited, main's gauge showed at most {full:.1} slots taken, not the {expected:.0} \
         of {workers} workers × {c}: about {:.0} worker(s) took jobs (a scale command that \
         returned before its workers joined the queue, or workers on another queue)",
        (full / c as f64).round()
    ))
}

/// Each count's gain over the previous one, against one worker's ceiling per added worker.
fn efficiencies(points: &mut [ScalePoint]) {
    let Some(lambda) = points
        .iter()
        .filter(|p| p.not_joined.is_none())
        .find_map(|p| p.ceiling.map(|c| c[0] / p.workers.max(1) as f64))
    else {
        return;
    };
    for i in 1..points.len() {
        if points[i - 1].not_joined.is_some() || points[i].not_joined.is_some() {
            continue;
        }
        if let (Some(a), Some(b)) = (points[i - 1].ceiling, points[i].ceiling) {
            let added = (points[i].workers - points[i - 1].workers) as f64;
            points[i].efficiency = Some((b[0] - a[0]) / (added * lambda));
        }
    }
}

fn fit_of(points: &[ScalePoint]) -> Option<UslFit> {
    let pts: Vec<usl::Point> = points
        .iter()
        .filter(|p| p.not_joined.is_none())
        .filter_map(|p| {
            p.ceiling.map(|c| usl::Point {
                workers: p.workers,
                ceiling: c[0],
                low: c[1],
                high: c[2],
            })
        })
        .collect();
    let f = usl::fit(&pts)?;
    Some(UslFit {
        lambda_per_s: f.lambda,
        sigma: f.sigma,
        sigma_range: f.sigma_range,
        kappa: f.kappa,
        kappa_range: f.kappa_range,
        rms_error: f.rms_error,
        peak_workers: f.peak(),
        ceiling_per_s: f.ceiling(),
        diminishing_from: f.diminishing_from(DIMINISHING, MAX_WORKERS),
    })
}

fn verdict(points: &[ScalePoint], fit: Option<&UslFit>, shared: &[SharedLimit]) -> String {
    let mut text = String::new();
    for p in points {
        if let Some(why) = &p.not_joined {
            text.push_str(&format!(
                "At {} workers not every worker was seen taking jobs — {why} — so its ceiling is \
                 left out of the fit: wait until the new workers take jobs (for Kubernetes, \
                 `kubectl rollout status` in the scale command, or a longer --scale-settle) and \
                 sweep that count again. ",
                p.workers
            ));
        }
    }
    let measured: Vec<&ScalePoint> = points
        .iter()
        .filter(|p| p.ceiling.is_some() && p.not_joined.is_none())
        .collect();
    let [.., a, b] = measured.as_slice() else {
        text.push_str(
            "Ceilings at two worker counts at least are needed to say how throughput grows \
             with workers: sweep each count until its ceiling is reached.",
        );
        return text;
    };
    let (xa, xb) = (
        a.ceiling.map_or(0.0, |c| c[0]),
        b.ceiling.map_or(0.0, |c| c[0]),
    );
    let linear = fit.map_or(0.0, |f| f.lambda_per_s) * b.workers as f64;
    text.push_str(&format!(
        "From {} to {} workers the ceiling went from {xa:.1} to {xb:.1}/s ({:.0} % of what {} \
         workers at one worker's ceiling would give, {linear:.1}/s).",
        a.workers,
        b.workers,
        100.0 * xb / linear.max(f64::MIN_POSITIVE),
        b.workers
    ));
    match shared.iter().find(|s| s.reached) {
        Some(s) => text.push_str(&format!(
            " {} stops it: {}; {}.",
            s.words(),
            s.evidence.join("; "),
            s.fix
        )),
        None => {
            text.push_str(&format!(
                " No shared limit was reached up to {} workers.",
                b.workers
            ));
            match shared
                .iter()
                .filter_map(|s| s.bound_per_s.map(|v| (s, v)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
            {
                Some((s, v)) => text.push_str(&format!(
                    " The next: {} at {v:.1}/s ({}).",
                    s.words(),
                    s.evidence.join("; ")
                )),
                None => text.push_str(
                    " Main's CPU was not measured: sweep with --metrics main=URL (or --docker) \
                     to see the intake's bound before adding workers.",
                ),
            }
        }
    }
    text
}

fn plan(
    target: f64,
    fit: Option<&UslFit>,
    shared: &[SharedLimit],
    top: Option<&Diagnosis>,
) -> WorkersPlan {
    let needed = target / OPERATING;
    let mut p = WorkersPlan {
        target_per_s: target,
        needed_ceiling_per_s: needed,
        workers: None,
        predicted_ceiling_per_s: None,
        note: String::new(),
        per_worker: per_worker(top),
        webhook_processors: None,
        workers_after_change: None,
        postgres_connections: None,
    };
    let cap = shared
        .iter()
        .filter_map(|s| s.bound_per_s.map(|v| (s, v)))
        .min_by(|x, y| x.1.total_cmp(&y.1));
    if let Some((s, v)) = cap.filter(|(_, v)| *v < needed) {
        p.note = format!(
            "{} caps at {v:.1}/s, under the {needed:.1}/s a {target:.1}/s operating point needs: {}",
            s.words(),
            s.fix
        );
        if crate::limits::of(s.kind).before_the_workers() {
            // A webhook processor swept beside main: its own measured bound, else main's.
            let processor = top.and_then(|d| {
                d.cpu
                    .iter()
                    .filter(|u| u.is_process_of(Role::Webhook))
                    .map(|u| u.bound_per_s)
                    .min_by(f64::total_cmp)
            });
            beyond_main(&mut p, (v, processor), fit);
        }
        return p;
    }
    let Some(f) = fit else {
        p.note = "no fit: ceilings at two worker counts at least are needed".into();
        return p;
    };
    let law = f.law();
    match law.workers_for(needed, MAX_WORKERS) {
        Some(n) => {
            p.workers = Some(n);
            p.predicted_ceiling_per_s = Some(law.at(n as f64));
            p.postgres_connections = Some(connections(n + 1, p.per_worker.db_pool_size));
            p.note = format!(
                "{n} workers, each with its runners, at the settings of these runs: the fitted \
                 ceiling there is {:.1}/s, so {target:.1}/s runs at 2/3 of it",
                law.at(n as f64)
            );
        }
        None => {
            p.note = format!(
                "no worker count reaches {needed:.1}/s on the fitted curve (it tops out at {}): \
                 the shared limit must move first",
                f.ceiling_per_s
                    .map_or("no figure".into(), |c| format!("{c:.1}/s"))
            );
        }
    }
    p
}

/// Main's intake below the ceiling needed: the webhook processors that take production
/// webhooks off it — each at a webhook processor's measured CPU per execution when one was
/// swept, else at main's (n8n 2.41.1: a processor spent 11.1 ms per execution where main had
/// spent 12.6, and main fell to about 1 ms once they took the webhooks) — then the workers at
/// one worker's measured ceiling each.
fn beyond_main(
    p: &mut WorkersPlan,
    (main_bound, processor_bound): (f64, Option<f64>),
    fit: Option<&UslFit>,
) {
    let needed = p.needed_ceiling_per_s;
    let (each, whose) = match processor_bound.filter(|b| b.is_finite() && *b > 0.0) {
        Some(b) => (b, "a webhook processor's measured CPU per execution"),
        None => (
            main_bound,
            "main's CPU per execution; n8n 2.41.1's processors measured about the same, 11.1 ms against 12.6",
        ),
    };
    let processors = (needed / each).ceil().max(1.0) as u32;
    p.webhook_processors = Some(processors);
    let Some(lambda) = fit.map(|f| f.lambda_per_s).filter(|l| *l > 0.0) else {
        return;
    };
    let wanted = (needed / lambda).ceil().max(1.0);
    if wanted > f64::from(MAX_WORKERS) || processors > MAX_WORKERS {
        // Not a plan: the most n8ncap plans for falls short, and says by how much.
        p.note.push_str(&format!(
            ". Past main's intake, {needed:.1}/s would take {wanted:.0} workers at one worker's \
             measured {lambda:.2}/s and {processors} webhook processors ({each:.1}/s each): n8ncap \
             plans up to {MAX_WORKERS} of each, which reach {:.1}/s — short of the target: split \
             the load over several n8n instances, or make each execution cheaper first",
            f64::from(MAX_WORKERS) * lambda.min(each)
        ));
        return;
    }
    let n = wanted as u32;
    p.workers_after_change = Some(n);
    p.postgres_connections = Some(connections(n + 1 + processors, p.per_worker.db_pool_size));
    p.note.push_str(&format!(
        ". With {processors} webhook processor{} ({each:.1}/s each at {whose}), {n} workers at \
         one worker's measured {lambda:.2}/s reach {:.1}/s — assumed linear once the intake is \
         no longer shared: sweep again to confirm",
        if processors == 1 { "" } else { "s" },
        n as f64 * lambda
    ));
}

/// Postgres connections `processes` pools of `pool` hold, held at u32's maximum (a pool of 4e9
/// read from a saved run must not wrap to a small number).
fn connections(processes: u32, pool: u32) -> u32 {
    processes.saturating_mul(pool)
}

/// The settings every planned worker keeps: those of the run at the highest count.
fn per_worker(top: Option<&Diagnosis>) -> PerWorker {
    let s = top.map(|d| &d.settings);
    let v = |x: Option<&Option<crate::model::settings::Sourced<u32>>>| {
        x.and_then(|o| o.as_ref()).map(|v| v.value)
    };
    let pool = s.and_then(|s| s.db_pool_size.as_ref());
    PerWorker {
        worker_concurrency: v(s.map(|s| &s.worker_concurrency)),
        runners: v(s.map(|s| &s.runners_per_worker)),
        runner_limit: v(s.map(|s| &s.runner_limit)),
        db_pool_size: pool.map_or(crate::model::n8n_defaults::DB_POOL_SIZE, |p| p.value),
        db_pool_source: pool.map_or("n8n's default".into(), |p| p.source.words()),
    }
}

#[cfg(test)]
mod tests;
