//! `n8ncap grafana`: an importable dashboard for n8n queue mode with what dashboards lack — the
//! runner limit next to worker concurrency, throughput against the theoretical ceiling, slots
//! taken vs waiting, RSS (not heap) per role. Series come from n8n's own /metrics and from
//! `n8ncap exporter`. Grafana dashboard JSON, schemaVersion 39 (Grafana 10.4/11).

use serde_json::{json, Value};

pub const SCHEMA_VERSION: u32 = 39;

/// The label matchers every series is scoped by: two deployments in one Prometheus (two scrape
/// jobs, or two namespaces) are never summed together. "All" is `.*`, which also matches a
/// series without the label.
const SCOPE: &str = r#"job=~"$job", namespace=~"$namespace""#;

/// `expr` with [`SCOPE`] added to every n8n and n8ncap series in it.
pub fn scoped(expr: &str) -> String {
    let b = expr.as_bytes();
    let mut out = String::with_capacity(expr.len() + 64);
    let mut i = 0;
    while i < b.len() {
        let starts = (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && (expr[i..].starts_with("n8n_") || expr[i..].starts_with("n8ncap_"));
        if !starts {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        let end = expr[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(b.len(), |e| i + e);
        out.push_str(&expr[i..end]);
        match b.get(end) {
            Some(b'{') if b.get(end + 1) == Some(&b'}') => {
                out.push('{');
                out.push_str(SCOPE);
                i = end + 1;
            }
            Some(b'{') => {
                out.push('{');
                out.push_str(SCOPE);
                out.push_str(", ");
                i = end + 1;
            }
            _ => {
                out.push('{');
                out.push_str(SCOPE);
                out.push('}');
                i = end;
            }
        }
    }
    out
}

fn panel(
    id: u32,
    title: &str,
    kind: &str,
    grid: (u32, u32, u32, u32),
    targets: &[(&str, &str)],
    unit: &str,
) -> Value {
    json!({
        "id": id,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": grid.0, "y": grid.1, "w": grid.2, "h": grid.3},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": targets.iter().enumerate().map(|(i, (expr, legend))| json!({
            "refId": ((b'A' + i as u8) as char).to_string(),
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "expr": scoped(expr),
            "legendFormat": legend,
        })).collect::<Vec<_>>(),
    })
}

/// A query variable over a label's values, multi-select with "All" = `.*`.
fn label_variable(name: &str, label: &str, query: &str) -> Value {
    json!({
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "definition": query,
        "refresh": 2,
        "includeAll": true,
        "multi": true,
        "allValue": ".*",
        "current": {"selected": true, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    })
}

/// What a run measured, for the dashboard's lines.
pub struct CeilingLines {
    /// Executions/s at the ceiling.
    pub ceiling: f64,
    /// The run, for the descriptions.
    pub from: String,
}

/// The measured ceiling and the operating point (2/3 of it) as threshold lines on the
/// throughput panel, and a panel of the capacity alerts' states (Prometheus' `ALERTS` of the
/// rules `recommend RUN --format prometheus-rules` writes).
fn measured_lines(panels: &mut Vec<Value>, m: &CeilingLines) {
    let op = crate::model::OPERATING_SHARE * m.ceiling;
    if let Some(p) = panels.iter_mut().find(|p| p["id"] == 5) {
        p["fieldConfig"]["defaults"]["thresholds"] = json!({
            "mode": "absolute",
            "steps": [
                {"color": "green", "value": null},
                {"color": "orange", "value": op},
                {"color": "red", "value": m.ceiling},
            ],
        });
        p["fieldConfig"]["defaults"]["custom"] = json!({"thresholdsStyle": {"mode": "line"}});
        p["description"] = json!(format!(
            "Lines: the operating point {op:.2}/s (2/3 of the ceiling, orange) and the ceiling \
             {:.2}/s (red) measured in {}.",
            m.ceiling, m.from
        ));
    }
    panels.push(json!({
        "id": 11,
        "type": "table",
        "title": "Capacity alerts (n8ncap rules)",
        "description": "The alerts of `n8ncap recommend RUN --format prometheus-rules` and their state, from Prometheus' ALERTS series: load the rules into Prometheus for this panel to show them.",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": 0, "y": 26, "w": 24, "h": 6},
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {},
        "targets": [{
            "refId": "A",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "expr": "count by (alertname, alertstate, severity) (ALERTS{alertname=~\"N8n.*\"})",
            "legendFormat": "{{alertname}} {{alertstate}}",
            "instant": true,
        }],
    }));
}

pub fn dashboard(datasource: Option<&str>, measured: Option<&CeilingLines>) -> Value {
    let mut panels = capacity_panels();
    panels.extend(series_panels());
    if let Some(m) = measured {
        measured_lines(&mut panels, m);
    }
    // The ceiling needs the job time, which only the operator knows: say so where it shows.
    for p in panels.iter_mut() {
        if p["id"] == 4 || p["id"] == 5 {
            p["description"] = json!(
                "The ceiling series exists only when `n8ncap exporter` runs with --job-time \
                 (the time a job holds its slot): min(runner capacity, worker concurrency) ÷ \
                 job time. Without it this panel shows no ceiling."
            );
        }
    }
    let current = match datasource {
        Some(n) => json!({"text": n, "value": n}),
        None => json!({}),
    };
    json!({
        "title": "n8n queue mode — capacity (n8ncap)",
        "uid": "n8ncap-queue-mode",
        "description": "Worker slots, runner limits and the throughput ceiling n8n's own metrics do not show. Needs n8n's /metrics (N8N_METRICS, N8N_METRICS_INCLUDE_QUEUE_METRICS) and `n8ncap exporter`.",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": true,
        "tags": ["n8n", "queue mode", "n8ncap"],
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {
                "name": "datasource",
                "label": "Prometheus",
                "type": "datasource",
                "query": "prometheus",
                "current": current,
            },
            label_variable("job", "Scrape job", "label_values(up, job)"),
            label_variable("namespace", "Namespace", "label_values(up{job=~\"$job\"}, namespace)"),
        ]},
        "panels": panels,
    })
}

/// The first row: the capacity settings and the ceiling, as single figures.
fn capacity_panels() -> Vec<Value> {
    vec![
        panel(
            1,
            "Worker concurrency (slots)",
            "stat",
            (0, 0, 6, 4),
            &[("sum(n8ncap_worker_concurrency)", "slots")],
            "none",
        ),
        panel(
            2,
            "Runner capacity (Σ N8N_RUNNERS_MAX_CONCURRENCY attached)",
            "stat",
            (6, 0, 6, 4),
            &[("sum(n8ncap_worker_runner_capacity)", "runner tasks")],
            "none",
        ),
        panel(
            3,
            "Effective concurrency min(runner, worker)",
            "stat",
            (12, 0, 6, 4),
            &[("sum(n8ncap_worker_effective_concurrency)", "effective")],
            "none",
        ),
        panel(
            4,
            "Theoretical ceiling",
            "stat",
            (18, 0, 6, 4),
            &[("n8ncap_theoretical_ceiling_total_per_second", "jobs/s")],
            "reqps",
        ),
    ]
}

/// Throughput against the ceiling, slots against waiting, runner limits, memory, lag.
fn series_panels() -> Vec<Value> {
    vec![
        panel(
            5,
            "Throughput against the ceiling",
            "timeseries",
            (0, 4, 12, 8),
            &[
                (
                    "sum(rate(n8n_scaling_mode_queue_jobs_completed[1m]))",
                    "completed/s",
                ),
                (
                    "n8ncap_theoretical_ceiling_total_per_second",
                    "ceiling min(runner, worker) ÷ job time",
                ),
            ],
            "reqps",
        ),
        panel(
            6,
            "Slots taken vs waiting (slots taken ≠ Code tasks running)",
            "timeseries",
            (12, 4, 12, 8),
            &[
                ("sum(n8n_scaling_mode_queue_jobs_active)", "slots taken"),
                (
                    "sum(n8n_scaling_mode_queue_jobs_waiting)",
                    "waiting in Redis",
                ),
                (
                    "sum(n8ncap_worker_effective_concurrency)",
                    "effective concurrency",
                ),
            ],
            "none",
        ),
        panel(
            7,
            "Runner limit per runner",
            "timeseries",
            (0, 12, 12, 8),
            &[("n8ncap_runner_limit", "{{container}} → {{attached_to}}")],
            "none",
        ),
        panel(
            8,
            "RSS per role (not heap: Code-node Buffers live outside it)",
            "timeseries",
            (12, 12, 12, 8),
            &[
                (
                    "sum by (role) (n8ncap_container_memory_bytes)",
                    "{{role}} (docker)",
                ),
                ("n8n_process_resident_memory_bytes", "RSS {{instance}}"),
                ("n8n_nodejs_heap_size_used_bytes", "heap {{instance}}"),
            ],
            "bytes",
        ),
        panel(
            9,
            "Memory limits",
            "table",
            (0, 20, 12, 6),
            &[("n8ncap_memory_limit_bytes", "{{container}}")],
            "bytes",
        ),
        panel(
            10,
            "Event-loop lag",
            "timeseries",
            (12, 20, 12, 6),
            &[("n8n_nodejs_eventloop_lag_seconds", "{{instance}}")],
            "s",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::scoped;

    #[test]
    fn every_series_is_scoped() {
        let j = r#"job=~"$job", namespace=~"$namespace""#;
        assert_eq!(
            scoped("sum(n8ncap_worker_concurrency)"),
            format!("sum(n8ncap_worker_concurrency{{{j}}})")
        );
        assert_eq!(
            scoped("rate(n8n_process_cpu_seconds_total[1m])"),
            format!("rate(n8n_process_cpu_seconds_total{{{j}}}[1m])")
        );
        assert_eq!(
            scoped(r#"n8ncap_runner_limit{attached_to!=""} / on() n8n_x{}"#),
            format!(r#"n8ncap_runner_limit{{{j}, attached_to!=""}} / on() n8n_x{{{j}}}"#)
        );
        assert_eq!(scoped("sum by (instance) (up)"), "sum by (instance) (up)");
    }
}
