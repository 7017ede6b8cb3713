//! Prometheus rules from a measured capacity (`recommend RUN --format prometheus-rules`), as
//! typed values a YAML serializer writes — never text pasted together — and the `promtool test
//! rules` file that checks each alert fires where it must and not where it must not.

use serde::Serialize;
use std::collections::BTreeMap;

/// A rules file: what `rule_files` loads and a PrometheusRule's `spec` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleFile {
    pub groups: Vec<RuleGroup>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleGroup {
    pub name: String,
    pub rules: Vec<Rule>,
}

/// A recording or an alerting rule, as Prometheus reads them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Rule {
    Record {
        record: String,
        expr: String,
    },
    Alert {
        alert: String,
        expr: String,
        #[serde(rename = "for")]
        for_: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
}

impl Rule {
    /// The alert's name (None: a recording rule).
    pub fn alert_name(&self) -> Option<&str> {
        match self {
            Rule::Alert { alert, .. } => Some(alert),
            Rule::Record { .. } => None,
        }
    }
}

/// One constant of the rules and where it came from, for the file's header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threshold {
    pub name: String,
    pub value: f64,
    pub source: String,
}

/// The rules and the constants they hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertPlan {
    pub rules: RuleFile,
    pub thresholds: Vec<Threshold>,
    /// The run the thresholds come from.
    pub from: String,
    /// What the rules could not cover, said once each.
    pub notes: Vec<String>,
}

/// A `promtool test rules` file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestFile {
    pub rule_files: Vec<String>,
    pub evaluation_interval: String,
    pub tests: Vec<TestCase>,
}

/// Synthetic series over a stretch of time, and the alerts expected at one moment of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestCase {
    pub name: String,
    pub interval: String,
    pub input_series: Vec<InputSeries>,
    pub alert_rule_test: Vec<AlertTest>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputSeries {
    pub series: String,
    pub values: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertTest {
    pub eval_time: String,
    pub alertname: String,
    pub exp_alerts: Vec<ExpAlert>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpAlert {
    pub exp_labels: BTreeMap<String, String>,
    pub exp_annotations: BTreeMap<String, String>,
}
