//! The `promtool test rules` file for a plan's alerts (`recommend … --tests FILE`): synthetic
//! series of n8n's main and workers at chosen shares of the measured ceiling — half the
//! operating point, past it, at 95 % with every slot taken, a growing backlog, a stalled queue,
//! a worker down, main lagging, failures, a long queue wait — and, at 20 minutes into each,
//! which alerts must fire and which must not.

use super::alerts::{num, WORKER_JOB};
use crate::error::BadInput;
use crate::model::OPERATING_SHARE;
use crate::record::alerts::*;
use std::collections::BTreeMap;

/// Minutes of samples in each case, one a minute; the alerts are read at [`EVAL`].
const SAMPLES: u32 = 30;
const EVAL: &str = "20m";

/// What one case's series hold.
#[derive(Clone)]
struct Load {
    /// Executions completed per second.
    rate: f64,
    /// Jobs waiting: the first value and its growth per minute.
    waiting: (f64, f64),
    /// Jobs active.
    active: f64,
    /// Workers up, of `of` planned.
    up: u32,
    of: u32,
    /// Main's event-loop lag p99, s.
    lag_s: f64,
    /// Failures per second.
    failed: f64,
    /// Connections the pools hold.
    pool: f64,
}

/// The figures the cases need from the plan.
pub struct Figures {
    pub ceiling: f64,
    pub workers: u32,
    pub slots: Option<u32>,
    pub wait_budget_s: f64,
    /// Postgres' usable connections, when the rules watch them.
    pub postgres_usable: Option<u32>,
}

impl Figures {
    /// The figures of `plan`, made from the diagnosis `d` of the run it was planned from.
    pub fn of(
        plan: &AlertPlan,
        d: &crate::record::Diagnosis,
        postgres_usable: Option<u32>,
    ) -> Figures {
        let workers = d.settings.workers.as_ref().map_or(1, |w| w.value.max(1));
        Figures {
            ceiling: d.measured_ceiling.as_ref().map_or(0.0, |c| c.mean),
            workers,
            slots: d
                .settings
                .worker_concurrency
                .as_ref()
                .map(|c| c.value * workers),
            postgres_usable,
            wait_budget_s: plan
                .thresholds
                .iter()
                .find(|t| t.name.starts_with("queue wait"))
                .map_or(1.0, |t| t.value),
        }
    }
}

/// The test file for `rules_file` (the path promtool reads, relative to the test file), with
/// the deployment's equality matchers as labels of every series. A matcher that is not an
/// equality, or one on `job` or `instance` (the cases set their own), cannot be met by
/// synthetic series: refused.
pub fn test_file(
    plan: &AlertPlan,
    f: &Figures,
    matchers: &[(String, String, String)],
    rules_file: &str,
) -> Result<TestFile, BadInput> {
    let mut labels = String::new();
    for (name, op, value) in matchers {
        if op != "=" || name == "job" || name == "instance" {
            return Err(BadInput(format!(
                "--tests: the matcher {name}{op}\"{value}\" cannot be met by synthetic series \
                 (only name=\"value\", and not on job or instance): write the rules without \
                 --tests, or drop that matcher"
            )));
        }
        labels.push_str(&format!(",{name}=\"{value}\""));
    }
    let x = f.ceiling;
    let quiet = Load {
        rate: 0.5 * OPERATING_SHARE * x,
        waiting: (0.0, 0.0),
        active: f.slots.map_or(1.0, |s| (f64::from(s) / 3.0).floor()),
        up: f.workers,
        of: f.workers,
        lag_s: 0.01,
        failed: 0.0,
        pool: f
            .postgres_usable
            .map_or(2.0, |u| (f64::from(u) / 4.0).floor()),
    };
    let all: Vec<&str> = plan
        .rules
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .filter_map(Rule::alert_name)
        .collect();
    let mut tests = vec![case(
        plan,
        "half of the operating point",
        &quiet,
        &labels,
        &[],
        &all,
    )];
    let cases = cases(&quiet, f);
    for (name, load, fire) in cases {
        let fire: Vec<&str> = fire.into_iter().filter(|a| all.contains(a)).collect();
        if !fire.is_empty() {
            tests.push(case(plan, name, &load, &labels, &fire, &all));
        }
    }
    Ok(TestFile {
        rule_files: vec![rules_file.to_string()],
        evaluation_interval: "1m".into(),
        tests,
    })
}

/// Each case past the quiet one: its name, its load, the alerts that must fire (all others
/// must not).
fn cases(quiet: &Load, f: &Figures) -> Vec<(&'static str, Load, Vec<&'static str>)> {
    let x = f.ceiling;
    // A backlog that grows, yet whose wait stays a quarter of the budget at the reading.
    let growth = (f.wait_budget_s * 0.95 * x / 80.0).max(1e-3);
    let full = f.slots.map_or(quiet.active, f64::from);
    // At a steady rate the queue wait is waiting ÷ rate: a backlog that makes it 1.5 × the budget.
    let long_wait = (1.5 * f.wait_budget_s * quiet.rate).ceil() + 1.0;
    vec![
        (
            "past the operating point",
            Load {
                rate: 0.8 * x,
                ..quiet.clone()
            },
            vec!["N8nOperatingPointPassed"],
        ),
        (
            "at 95 % of the ceiling, every slot taken",
            Load {
                rate: 0.95 * x,
                active: full,
                ..quiet.clone()
            },
            vec![
                "N8nOperatingPointPassed",
                "N8nNearMeasuredCeiling",
                "N8nSlotsFullAtCeiling",
            ],
        ),
        (
            "a backlog growing at the ceiling",
            Load {
                rate: 0.95 * x,
                waiting: (0.0, growth),
                ..quiet.clone()
            },
            vec![
                "N8nOperatingPointPassed",
                "N8nNearMeasuredCeiling",
                "N8nBacklogGrowingAtCeiling",
            ],
        ),
        (
            "a stalled queue",
            Load {
                rate: 0.0,
                waiting: (5.0, 0.0),
                ..quiet.clone()
            },
            vec!["N8nQueueStalled", "N8nQueueWaitOverBudget"],
        ),
        (
            "a queue wait past the budget",
            Load {
                waiting: (long_wait, 0.0),
                ..quiet.clone()
            },
            vec!["N8nQueueWaitOverBudget"],
        ),
        (
            "a worker down",
            Load {
                up: f.workers - 1,
                ..quiet.clone()
            },
            vec!["N8nWorkerMissing"],
        ),
        (
            "main lagging",
            Load {
                lag_s: 0.25,
                ..quiet.clone()
            },
            vec!["N8nMainEventLoopLagging"],
        ),
        (
            "Postgres connections near the budget",
            Load {
                pool: f.postgres_usable.map_or(0.0, |u| f64::from(u).floor()),
                ..quiet.clone()
            },
            vec!["N8nPostgresConnectionsNearBudget"],
        ),
        (
            "executions failing",
            Load {
                failed: 0.1,
                ..quiet.clone()
            },
            vec!["N8nExecutionsFailing"],
        ),
    ]
}

/// One case: `load`'s series; each alert of `checked` expected at [`EVAL`], firing when in
/// `fire`, silent otherwise.
fn case(
    plan: &AlertPlan,
    name: &str,
    load: &Load,
    labels: &str,
    fire: &[&str],
    checked: &[&str],
) -> TestCase {
    let main = format!("{{job=\"n8n-main\",instance=\"main:5678\"{labels}}}");
    let per_min = |v: f64| format!("0+{}x{SAMPLES}", num(v * 60.0));
    let flat = |v: f64| format!("{}x{SAMPLES}", num(v));
    let mut input_series = vec![
        series(
            &main,
            "n8n_scaling_mode_queue_jobs_completed",
            per_min(load.rate),
        ),
        series(
            &main,
            "n8n_scaling_mode_queue_jobs_failed",
            per_min(load.failed),
        ),
        series(
            &main,
            "n8n_scaling_mode_queue_jobs_waiting",
            format!("{}+{}x{SAMPLES}", num(load.waiting.0), num(load.waiting.1)),
        ),
        series(
            &main,
            "n8n_scaling_mode_queue_jobs_active",
            flat(load.active),
        ),
        series(
            &main,
            "n8n_nodejs_eventloop_lag_p99_seconds",
            flat(load.lag_s),
        ),
        series(&main, "n8n_db_pool_connections_active", flat(load.pool)),
    ];
    // The workers' job label: one the rules' `job=~".*worker.*"` matches.
    debug_assert!(WORKER_JOB.contains("worker"));
    for i in 0..load.of.max(load.up) {
        let w = format!("{{job=\"n8n-worker\",instance=\"worker-{i}:5678\"{labels}}}");
        input_series.push(series(&w, "up", flat(if i < load.up { 1.0 } else { 0.0 })));
    }
    let alert_rule_test = checked
        .iter()
        .map(|a| AlertTest {
            eval_time: EVAL.into(),
            alertname: a.to_string(),
            exp_alerts: if fire.contains(a) {
                vec![expected(plan, a)]
            } else {
                Vec::new()
            },
        })
        .collect();
    TestCase {
        name: name.into(),
        interval: "1m".into(),
        input_series,
        alert_rule_test,
    }
}

fn series(labels: &str, metric: &str, values: String) -> InputSeries {
    InputSeries {
        series: format!("{metric}{labels}"),
        values,
    }
}

/// The alert `name` as it fires: its labels (the expressions aggregate every series away) and
/// its annotations, from the plan.
fn expected(plan: &AlertPlan, name: &str) -> ExpAlert {
    let rule = plan
        .rules
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .find(|r| r.alert_name() == Some(name));
    match rule {
        Some(Rule::Alert {
            labels,
            annotations,
            ..
        }) => ExpAlert {
            exp_labels: labels.clone(),
            exp_annotations: annotations.clone(),
        },
        _ => ExpAlert {
            exp_labels: BTreeMap::new(),
            exp_annotations: BTreeMap::new(),
        },
    }
}
