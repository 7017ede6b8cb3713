//! `n8ncap grafana`: an importable dashboard for n8n queue mode with what dashboards lack — the
//! runner limit next to worker concurrency, throughput against the theoretical ceiling, slots
//! taken vs waiting, RSS (not heap) per role. Series come from n8n's own /metrics and from
//! `n8ncap exporter`. Grafana dashboard JSON, schemaVersion 39 (Grafana 10.4/11).

use serde_json::{json, Value};

pub const SCHEMA_VERSION: u32 = 39;

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
            "expr": expr,
            "legendFormat": legend,
        })).collect::<Vec<_>>(),
    })
}

pub fn dashboard(datasource: Option<&str>) -> Value {
    let panels = vec![
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
    ];
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
        "templating": {"list": [{
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": current,
        }]},
        "panels": panels,
    })
}
