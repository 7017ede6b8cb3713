//! Alerts from a measured capacity: recording rules over n8n's own series (executions completed
//! and failed per second, jobs waiting and active, the queue's wait, the share of worker slots
//! taken) and alerts before the deployment reaches what was measured — the operating point (2/3
//! of the ceiling) passed, 90 % of the ceiling, the queue's wait past what a webhook's caller
//! can wait, a backlog growing at the ceiling, every slot taken at the ceiling (the measured
//! limit's signature), a stalled queue, a worker missing, main's event loop lagging, executions
//! failing. Each threshold carries the run, the figure and the factor it came from; the
//! `promtool test rules` cases say where each alert must fire and where it must not.

use crate::error::{BadInput, NoPlan};
use crate::model::OPERATING_SHARE;
use crate::record::alerts::*;
use crate::record::diagnosis::Diagnosis;
use std::collections::BTreeMap;

/// The share of the ceiling past which throughput is close to it (critical).
const NEAR_CEILING: f64 = 0.9;
/// The share of the slots counted as all of them (a gauge refreshed every 20 s lags a little).
const SLOTS_FULL: f64 = 0.95;
/// Main's event loop lagging this long delays every request it receives (its intake).
const LAG_S: f64 = 0.1;
/// How long a webhook's caller waits when nothing says (many HTTP clients' and proxies'
/// default is 30 s or 60 s: the shorter).
pub const CALLER_TIMEOUT_ASSUMED_S: f64 = 30.0;
/// The rate window: at a 60 s scrape and n8n's 20 s refresh it holds five scrapes at least.
const RATE: &str = "5m";
/// Why every `for:` is minutes, written into each alert.
const WHY_FOR: &str = "n8n refreshes its queue gauges and counters every \
    N8N_METRICS_QUEUE_METRICS_INTERVAL (20 s by default) and Prometheus scrapes every 15-60 s: \
    one refresh or one late scrape moves the figures for a minute; the rate is over 5 minutes and \
    the condition must hold for 5 or 10 minutes, so no single refresh trips it";
/// The worker targets `up` is counted over (their job label holds "worker": the charts' and
/// compose's names).
pub const WORKER_JOB: &str = r#"job=~".*worker.*""#;

/// What the rules are made from.
pub struct Basis<'a> {
    pub diagnosis: &'a Diagnosis,
    /// The run's name, for the sources.
    pub from: String,
    /// The p99 job time, s, below the ceiling.
    pub job_p99_s: f64,
    /// How long the webhook's caller waits, s, and whether it was given.
    pub caller_timeout_s: (f64, bool),
    /// Label matchers selecting the deployment's series (`--match`), checked.
    pub matchers: Vec<String>,
    /// Postgres' connection slots a non-superuser can take, as the run read them (`sweep
    /// --postgres-env`), and where.
    pub postgres_usable: Option<(u32, String)>,
}

/// A label matcher as PromQL takes it: `name="value"`, `name!="…"`, `name=~"…"`, `name!~"…"`.
pub fn check_matcher(m: &str) -> Result<(String, String, String), BadInput> {
    let bad = || {
        BadInput(format!(
            "--match {:?}: a label matcher is name=\"value\" (or !=, =~, !~ with a quoted \
             value), e.g. --match 'namespace=\"n8n\"'",
            m.chars().take(80).collect::<String>()
        ))
    };
    let m = m.trim();
    let name_end = m
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(bad)?;
    let (name, rest) = m.split_at(name_end);
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return Err(bad());
    }
    let rest = rest.trim_start();
    let op = ["=~", "!~", "!=", "="]
        .into_iter()
        .find(|o| rest.starts_with(o))
        .ok_or_else(bad)?;
    let value = rest[op.len()..].trim();
    let inner = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .ok_or_else(bad)?;
    // A quote inside must be escaped; no raw line break or control character.
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Err(bad()),
            c if c.is_control() => return Err(bad()),
            _ => {}
        }
    }
    if escaped {
        return Err(bad());
    }
    // The rules tell main from the workers by `job` (WORKER_JOB) and choose each metric by its
    // name: a matcher on either would sit beside the rules' own and select nothing, so an alert
    // on a missing worker would fire for ever.
    if matches!(name, "job" | "__name__") {
        return Err(BadInput(format!(
            "--match {name}{op}\"…\": the rules choose the metric by its name and tell main from \
             the workers by job ({WORKER_JOB}); select the deployment by another label, e.g. \
             --match 'namespace=\"n8n\"'"
        )));
    }
    if op.ends_with('~') {
        // PromQL reads the string's escapes first, then the regex (RE2, anchored).
        let pattern = inner.replace("\\\\", "\\").replace("\\\"", "\"");
        if let Err(e) = regex_syntax::Parser::new().parse(&pattern) {
            let why = match &e {
                regex_syntax::Error::Parse(e) => e.kind().to_string(),
                regex_syntax::Error::Translate(e) => e.kind().to_string(),
                _ => "a syntax error".to_string(),
            };
            return Err(BadInput(format!(
                "--match {name}{op}\"…\": not a regular expression Prometheus takes ({why}): \
                 promtool and Prometheus would refuse the rules"
            )));
        }
    }
    Ok((name.to_string(), op.to_string(), inner.to_string()))
}

/// `metric{matchers}`.
fn sel(metric: &str, matchers: &[String], extra: &[&str]) -> String {
    let all: Vec<&str> = matchers
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    if all.is_empty() {
        metric.to_string()
    } else {
        format!("{metric}{{{}}}", all.join(","))
    }
}

/// A number as PromQL and the test file write it: six significant digits at least (a small
/// threshold never rounds to 0, which every completion would pass), no exponent.
pub fn num(v: f64) -> String {
    let places = if v != 0.0 && v.abs() < 1.0 {
        (6 - v.abs().log10().floor() as i32).clamp(6, 17) as usize
    } else {
        6
    };
    let s = format!("{v:.places$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn record(name: &str, expr: String) -> Rule {
    Rule::Record {
        record: name.to_string(),
        expr,
    }
}

fn alert(name: &str, expr: String, for_: &str, severity: &str, text: [String; 3]) -> Rule {
    let [summary, description, source] = text;
    Rule::Alert {
        alert: name.to_string(),
        expr,
        for_: for_.to_string(),
        labels: BTreeMap::from([("severity".to_string(), severity.to_string())]),
        annotations: BTreeMap::from([
            ("summary".to_string(), summary),
            ("description".to_string(), description),
            ("threshold_source".to_string(), source),
            ("why_for".to_string(), WHY_FOR.to_string()),
        ]),
    }
}

/// The recording rule names.
pub mod names {
    pub const COMPLETED: &str = "n8ncap:executions_completed:rate5m";
    pub const FAILED: &str = "n8ncap:executions_failed:rate5m";
    pub const WAITING: &str = "n8ncap:jobs_waiting";
    pub const ACTIVE: &str = "n8ncap:jobs_active";
    pub const WAIT_S: &str = "n8ncap:queue_wait_seconds";
    pub const SLOTS: &str = "n8ncap:worker_slots_taken:ratio";
}

/// The recording rules every alert reads, over the deployment's series.
fn records(ms: &[String]) -> Vec<Rule> {
    vec![
        record(
            names::COMPLETED,
            format!(
                "sum(rate({}[{RATE}]))",
                sel("n8n_scaling_mode_queue_jobs_completed", ms, &[])
            ),
        ),
        record(
            names::FAILED,
            format!(
                "sum(rate({}[{RATE}]))",
                sel("n8n_scaling_mode_queue_jobs_failed", ms, &[])
            ),
        ),
        record(
            names::WAITING,
            format!(
                "sum({})",
                sel("n8n_scaling_mode_queue_jobs_waiting", ms, &[])
            ),
        ),
        record(
            names::ACTIVE,
            format!(
                "sum({})",
                sel("n8n_scaling_mode_queue_jobs_active", ms, &[])
            ),
        ),
        record(
            names::WAIT_S,
            format!(
                "{} / clamp_min({}, 0.001)",
                names::WAITING,
                names::COMPLETED
            ),
        ),
    ]
}

/// The thresholds every plan has: the operating point, 90 % of the ceiling, the queue's wait
/// budget (and that budget, s).
fn thresholds(m: &Basis, x: f64, limit: &str) -> (Vec<Threshold>, f64) {
    let from = &m.from;
    let mut thresholds = vec![
        Threshold {
            name: "operating point (executions/s)".into(),
            value: OPERATING_SHARE * x,
            source: format!("2/3 × the ceiling {x:.2}/s measured in {from} ({limit} caps)"),
        },
        Threshold {
            name: "near the ceiling (executions/s)".into(),
            value: NEAR_CEILING * x,
            source: format!("90 % of the ceiling {x:.2}/s measured in {from}"),
        },
    ];
    let (timeout, given) = m.caller_timeout_s;
    let budget = (timeout - m.job_p99_s).max(1.0);
    thresholds.push(Threshold {
        name: "queue wait budget (s)".into(),
        value: budget,
        source: format!(
            "{} caller timeout {timeout:.0} s − the p99 job {:.2} s measured in {from}",
            if given {
                "the"
            } else {
                "an assumed (--caller-timeout)"
            },
            m.job_p99_s
        ),
    });
    (thresholds, budget)
}

/// The rules for what `m` measured; refused when the run reached no ceiling with a job time.
pub fn plan(m: &Basis) -> Result<AlertPlan, NoPlan> {
    let d = m.diagnosis;
    let x = d
        .measured_ceiling
        .as_ref()
        .map(|c| c.mean)
        .filter(|x| x.is_finite() && *x > 0.0);
    // A ceiling is completions counted over a run's window: under one in 30 days none was.
    let x = x.filter(|x| *x >= 1.0 / (30.0 * 86_400.0));
    let Some(x) = x else {
        return Err(NoPlan(format!(
            "{}: no measured ceiling — an alert before the ceiling needs one: sweep until a \
             level saturates (sweep --profile breakpoint), or diagnose a history with a busy \
             window",
            m.from
        )));
    };
    let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
    let concurrency = d.settings.worker_concurrency.as_ref().map(|c| c.value);
    let limit = d
        .capping_limit
        .map_or("the limit the run named", |c| c.words());
    let from = &m.from;
    let ms = &m.matchers;
    let (mut thresholds, budget) = thresholds(m, x, limit);
    let mut rules = records(ms);
    let mut notes = Vec::new();
    // Each figure was checked when read (at most 1 000 000); their product may still pass u32.
    let slots = match concurrency {
        Some(c) => Some(workers.checked_mul(c).ok_or_else(|| {
            NoPlan(format!(
                "{}: {workers} workers × concurrency {c}: more slots than any deployment has",
                m.from
            ))
        })?),
        None => None,
    };
    match slots {
        Some(n) => {
            thresholds.push(Threshold {
                name: "worker slots".into(),
                value: f64::from(n),
                source: format!("{workers} worker(s) × concurrency {} ({from})", n / workers),
            });
            rules.push(record(names::SLOTS, format!("{} / {n}", names::ACTIVE)));
        }
        None => notes.push(
            "the run does not say the workers' concurrency: no slots rule (give --concurrency)"
                .into(),
        ),
    }
    // A limit before the workers (main's intake) leaves their slots free at the ceiling: no
    // slots-full signature, and more workers are no fix.
    let before_workers = d
        .capping_limit
        .is_some_and(|c| crate::limits::answering(c).before_the_workers());
    if before_workers {
        notes.push(format!(
            "{limit} caps before the workers: their slots are not all taken at the ceiling, so no slots-full alert"
        ));
    }
    let mut alerts = alerts(m, x, budget, (slots, before_workers), workers, limit);
    match &m.postgres_usable {
        Some((usable, source)) => {
            thresholds.push(Threshold {
                name: "Postgres connections usable".into(),
                value: f64::from(*usable),
                source: source.clone(),
            });
            alerts.push(postgres_alert(m, *usable, source));
        }
        None => notes.push(
            "the run did not read Postgres (sweep --postgres-env): no alert on its connections"
                .into(),
        ),
    }
    let records = RuleGroup {
        name: "n8ncap-capacity-records".into(),
        rules,
    };
    let alerting = RuleGroup {
        name: "n8ncap-capacity-alerts".into(),
        rules: alerts,
    };
    Ok(AlertPlan {
        rules: RuleFile {
            groups: vec![records, alerting],
        },
        thresholds,
        from: from.clone(),
        notes,
    })
}

/// The pools' connections near what Postgres lets non-superusers open: past it, a new
/// connection is refused and the execution that needed it fails (n8n 2.41.1 answered HTTP 500).
fn postgres_alert(m: &Basis, usable: u32, source: &str) -> Rule {
    let ms = &m.matchers;
    let near = (NEAR_CEILING * f64::from(usable)).floor();
    alert(
        "N8nPostgresConnectionsNearBudget",
        format!(
            "sum({}) + (sum({}) or vector(0)) > {}",
            sel("n8n_db_pool_connections_active", ms, &[]),
            sel("n8n_db_pool_connections_idle", ms, &[]),
            num(near)
        ),
        "5m",
        "warning",
        [
            "n8n's database pools hold nearly every connection Postgres allows".into(),
            format!(
                "The pools' open connections (active and idle, every n8n process) are above \
                 {near:.0}, 90 % of the {usable} Postgres lets non-superusers open ({source}): \
                 one more worker's pool, or a restart's reconnections, and Postgres refuses \
                 connections — the executions that needed them fail."
            ),
            format!("0.9 × {usable} usable connections ({source})"),
        ],
    )
}

/// Every alert, in the order an operator meets them.
fn alerts(
    m: &Basis,
    x: f64,
    budget: f64,
    slots: (Option<u32>, bool),
    workers: u32,
    limit: &str,
) -> Vec<Rule> {
    let mut out = throughput_alerts(m, x, slots, limit);
    out.extend(queue_alerts(m, budget));
    out.extend(process_alerts(m, workers));
    out
}

/// Throughput against the measured ceiling: the operating point, 90 %, a backlog growing at the
/// ceiling, every slot taken at it.
/// `slots`: the workers' slots, and whether the limit sits before them (main's intake: the slots
/// are not all taken at the ceiling, and more workers are no fix).
fn throughput_alerts(
    m: &Basis,
    x: f64,
    (slots, before_workers): (Option<u32>, bool),
    limit: &str,
) -> Vec<Rule> {
    let from = &m.from;
    let op = OPERATING_SHARE * x;
    let near = NEAR_CEILING * x;
    let mut out = vec![
        passed(from, (op, x), limit, before_workers),
        alert(
            "N8nNearMeasuredCeiling",
            format!("{} > {}", names::COMPLETED, num(near)),
            "5m",
            "critical",
            [
                "n8n is within 10 % of its measured ceiling".into(),
                format!(
                    "Executions complete faster than {near:.2}/s, 90 % of the ceiling {x:.2}/s \
                     measured in {from}: past it, jobs wait in the queue and the wait grows \
                     without bound. {limit} caps: change it now."
                ),
                format!("0.9 × ceiling {x:.2}/s ({from})"),
            ],
        ),
        alert(
            "N8nBacklogGrowingAtCeiling",
            format!(
                "deriv({}[10m]) > 0 and {} > {}",
                names::WAITING,
                names::COMPLETED,
                num(near)
            ),
            "10m",
            "critical",
            [
                "the backlog grows while n8n runs at its ceiling".into(),
                format!(
                    "Jobs waiting grow while completions hold at 90 % or more of the ceiling \
                     {x:.2}/s measured in {from}: arrivals exceed what {limit} lets through."
                ),
                format!("0.9 × ceiling {x:.2}/s ({from})"),
            ],
        ),
    ];
    if let Some(n) = slots.filter(|_| !before_workers) {
        out.push(alert(
            "N8nSlotsFullAtCeiling",
            format!(
                "{} >= {SLOTS_FULL} and {} > {}",
                names::SLOTS,
                names::COMPLETED,
                num(near)
            ),
            "10m",
            "warning",
            [
                format!("every worker slot is taken at the measured ceiling ({limit})"),
                format!(
                    "The {n} slots are taken and completions hold at 90 % or more of the ceiling \
                     {x:.2}/s: the signature of {limit} measured in {from} — dashboards show \
                     this as \"busy\"; adding load only lengthens the queue."
                ),
                format!("{n} slots and 0.9 × ceiling {x:.2}/s ({from})"),
            ],
        ));
    }
    out
}

/// Completions past the operating point (2/3 of the ceiling `x`): the margin kept for bursts
/// is in use; what raises the limit that caps, or that more workers will not.
fn passed(from: &str, (op, x): (f64, f64), limit: &str, before_workers: bool) -> Rule {
    alert(
        "N8nOperatingPointPassed",
        format!("{} > {}", names::COMPLETED, num(op)),
        "10m",
        "warning",
        [
            "n8n runs past its measured operating point".into(),
            format!(
                "Executions complete faster than {op:.2}/s, 2/3 of the ceiling {x:.2}/s \
                 measured in {from}: the margin kept for bursts is being used. The limit \
                 that caps is {limit}: {}",
                if !before_workers {
                    format!(
                        "raise it as `n8ncap recommend {from}` proposes, or add workers as \
                         its scale plan says."
                    )
                } else {
                    format!(
                        "more workers will not raise it; `n8ncap recommend {from}` says \
                         what does."
                    )
                }
            ),
            format!("2/3 × ceiling {x:.2}/s ({from})"),
        ],
    )
}

/// The queue: a wait past the caller's budget, a stalled queue.
fn queue_alerts(m: &Basis, budget: f64) -> Vec<Rule> {
    let from = &m.from;
    vec![
        alert(
            "N8nQueueWaitOverBudget",
            format!(
                "{} > {} and {} > 0",
                names::WAIT_S,
                num(budget),
                names::WAITING
            ),
            "5m",
            "warning",
            [
                "jobs wait in the queue longer than a webhook's caller can afford".into(),
                format!(
                    "Waiting jobs ÷ completions per second is above {budget:.1} s: the caller's \
                     timeout less the p99 job measured in {from}. A caller that waits for the \
                     answer gives up before its execution ends."
                ),
                format!("caller timeout − p99 job {:.2} s ({from})", m.job_p99_s),
            ],
        ),
        alert(
            "N8nQueueStalled",
            format!("{} > 0 and {} == 0", names::WAITING, names::COMPLETED),
            "5m",
            "critical",
            [
                "jobs wait and none completes".into(),
                "Jobs wait in the queue and no execution completed for 5 minutes: no worker \
                 takes jobs (all down, or on another Redis or QUEUE_BULL_PREFIX)."
                    .into(),
                "any waiting job with no completion".into(),
            ],
        ),
    ]
}

/// The processes: a worker missing, main's event loop lagging, executions failing.
fn process_alerts(m: &Basis, workers: u32) -> Vec<Rule> {
    let from = &m.from;
    let ms = &m.matchers;
    vec![
        alert(
            "N8nWorkerMissing",
            format!(
                "(count({} == 1) or vector(0)) < {workers}",
                sel("up", ms, &[WORKER_JOB])
            ),
            "5m",
            "warning",
            [
                "fewer workers are up than the capacity was measured with".into(),
                format!(
                    "Fewer than {workers} worker target(s) (job label holding \"worker\") are \
                     up: the ceiling measured in {from} at {workers} worker(s) is out of reach."
                ),
                format!("{workers} worker(s) in {from}"),
            ],
        ),
        alert(
            "N8nMainEventLoopLagging",
            format!(
                "max({} and on(instance, job) {}) > {LAG_S}",
                sel("n8n_nodejs_eventloop_lag_p99_seconds", ms, &[]),
                sel("n8n_scaling_mode_queue_jobs_waiting", ms, &[])
            ),
            "5m",
            "warning",
            [
                "main's event loop lags more than 100 ms".into(),
                "Main (the process that publishes the queue gauges) lags more than 100 ms at \
                 p99: every webhook request waits that long before main reads it — its intake \
                 is near its bound. Webhook processors (n8n webhook) take the intake off main."
                    .into(),
                "100 ms of lag: main's thread about 88 % busy at n8n's CPU per execution".into(),
            ],
        ),
        alert(
            "N8nExecutionsFailing",
            format!("{} > 0", names::FAILED),
            "10m",
            "warning",
            [
                "executions fail".into(),
                "n8n's failed counter rises: executions end in error (a workflow's own error, \
                 a runner's task timeout, Postgres refusing connections)."
                    .into(),
                "any failure for 10 minutes".into(),
            ],
        ),
    ]
}

#[cfg(test)]
mod tests;

/// Postgres' usable connections as a run read them (`sweep --postgres-env`): the first stage
/// that read `max_connections`, with where; `from` names the run.
pub fn postgres_usable(summary: &crate::record::Summary, from: &str) -> Option<(u32, String)> {
    summary.stages.iter().find_map(|s| {
        let p = s.database.as_ref()?.postgres.as_ref()?;
        let u = p.usable().filter(|u| *u > 0)?;
        Some((
            u,
            format!(
                "max_connections {} − {} reserved, read by {from} during {}",
                p.max_connections, p.reserved, s.label
            ),
        ))
    })
}
