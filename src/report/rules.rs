//! Prometheus rules as YAML (`recommend RUN --format prometheus-rules|prometheus-operator`):
//! the typed rules serialized, never pasted together, behind a header of comments that gives
//! each threshold's source; and the `promtool test rules` file beside them (`--tests FILE`).

use super::dialect::comment as c;
use crate::record::alerts::{AlertPlan, RuleFile, TestFile};
use serde::Serialize;
use std::fmt::Write as _;

fn header(p: &AlertPlan, what: &str) -> String {
    let mut s = format!(
        "# n8ncap: {what} from the capacity measured in {}.\n# Each threshold and its source:\n",
        c(&p.from)
    );
    for t in &p.thresholds {
        let v = format!("{:.3}", t.value);
        let v = v.trim_end_matches('0').trim_end_matches('.');
        let _ = writeln!(s, "#   {}: {v} — {}", c(&t.name), c(&t.source));
    }
    for n in &p.notes {
        let _ = writeln!(s, "# Note: {}", c(n));
    }
    s
}

fn yaml<T: Serialize>(v: &T) -> anyhow::Result<String> {
    serde_saphyr::to_string(v).map_err(|e| anyhow::anyhow!("writing YAML: {e}"))
}

/// A rules file (`rule_files:` in prometheus.yml; `promtool check rules`).
pub fn rules_file(p: &AlertPlan) -> anyhow::Result<String> {
    Ok(format!(
        "{}{}",
        header(p, "Prometheus recording and alerting rules"),
        yaml(&p.rules)?
    ))
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrometheusRule<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    spec: &'a RuleFile,
}

/// The same rules as a prometheus-operator PrometheusRule (`monitoring.coreos.com/v1`).
pub fn prometheus_rule(
    p: &AlertPlan,
    name: &str,
    namespace: Option<&str>,
) -> anyhow::Result<String> {
    let object = PrometheusRule {
        api_version: "monitoring.coreos.com/v1",
        kind: "PrometheusRule",
        metadata: Metadata { name, namespace },
        spec: &p.rules,
    };
    Ok(format!(
        "{}{}",
        header(p, "a PrometheusRule (prometheus-operator)"),
        yaml(&object)?
    ))
}

/// The `promtool test rules` file.
pub fn tests_file(t: &TestFile) -> anyhow::Result<String> {
    Ok(format!(
        "# n8ncap: where each alert must fire and where it must not; run: promtool test rules THIS_FILE\n{}",
        yaml(t)?
    ))
}
