//! The Grafana dashboard is valid dashboard JSON whose queries name series that exist: n8n's
//! own (real captures) or the exporter's (rendered here from a real compose file's topology and
//! read back with n8ncap's Prometheus parser).

use crate::common::*;
use n8ncap::topology::compose;
use n8ncap::topology::Topology;
use n8ncap::wire::prometheus::parse;
use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn dashboard_is_valid_and_every_query_names_a_real_series() {
    let out = Command::new(bin())
        .args(["grafana", "--datasource", "Prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["schemaVersion"], 39);
    assert!(d["title"].as_str().unwrap().contains("n8n"));
    assert_eq!(d["templating"]["list"][0]["current"]["value"], "Prometheus");
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "job", "namespace"]);
    let panels = d["panels"].as_array().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    let root = env!("CARGO_MANIFEST_DIR");
    // Series n8n exposes (real captures) and series the exporter publishes.
    let mut known = BTreeSet::new();
    for f in [
        "metrics-main-allflags-load.txt",
        "metrics-worker-allflags-load.txt",
    ] {
        let e = parse(&std::fs::read_to_string(format!("{root}/fixtures/n8n-real/{f}")).unwrap())
            .unwrap();
        known.extend(e.families.iter().map(|f| f.name.clone()));
    }
    // The clean example (it needs no secrets from the environment, unlike queue-mode/).
    let p = compose::load(&[format!("{root}/examples/compose/minimal-clean.yml").into()])
        .expect("examples/compose/minimal-clean.yml loads");
    let t = Topology::build(p.services.into_iter().map(|s| s.facts).collect());
    let exported = n8ncap::exporter::render(Some(&t), &[("n8n".into(), 1 << 20)], Some(3.0));
    let e = parse(&exported).unwrap();
    known.extend(e.families.iter().map(|f| f.name.clone()));
    let mut titles = Vec::new();
    for panel in panels {
        titles.push(panel["title"].as_str().unwrap().to_string());
        assert!(panel["gridPos"]["w"].as_u64().unwrap() > 0);
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let names: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("n8n_") || w.starts_with("n8ncap_"))
                .collect();
            assert!(!names.is_empty(), "{expr}");
            // Every series is scoped by the job and namespace variables.
            assert_eq!(
                expr.matches(r#"job=~"$job", namespace=~"$namespace""#)
                    .count(),
                names.len(),
                "{expr}"
            );
            for n in names {
                assert!(
                    known.contains(n),
                    "{expr}: {n} is not a series n8n or the exporter exposes"
                );
            }
        }
    }
    assert!(titles.iter().any(|t| t.contains("Runner capacity")));
    assert!(titles.iter().any(|t| t.contains("ceiling")));
    // The exporter's own figures for the clean example: worker 10 slots, runner 10.
    assert_eq!(e.value("n8ncap_worker_concurrency"), Some(10.0));
    assert_eq!(e.value("n8ncap_worker_runner_capacity"), Some(10.0));
    assert_eq!(
        e.value("n8ncap_theoretical_ceiling_total_per_second"),
        Some(10.0 / 3.0)
    );
}

/// `grafana --run DIR` (issue #64): the run's ceiling and operating point as threshold lines on
/// the throughput panel, and a panel of the capacity alerts' states.
#[test]
fn a_run_draws_its_ceiling_and_operating_point_and_the_alerts_panel() {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = format!("{root}/examples/runs/after");
    let out = Command::new(bin())
        .args(["grafana", "--run", &run])
        .output()
        .unwrap();
    let d = json_of_success(&out);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{run}/summary.json")).unwrap())
            .unwrap();
    let x = s["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap();
    let panels = d["panels"].as_array().unwrap();
    let throughput = panels.iter().find(|p| p["id"] == 5).unwrap();
    let steps = throughput["fieldConfig"]["defaults"]["thresholds"]["steps"]
        .as_array()
        .unwrap();
    let values: Vec<f64> = steps.iter().filter_map(|s| s["value"].as_f64()).collect();
    assert_eq!(values.len(), 2, "{steps:?}");
    assert!((values[0] - 2.0 / 3.0 * x).abs() < 1e-9 && (values[1] - x).abs() < 1e-9);
    let alerts = panels.iter().find(|p| p["id"] == 11).unwrap();
    assert!(alerts["targets"][0]["expr"]
        .as_str()
        .unwrap()
        .contains("ALERTS{alertname=~\"N8n.*\"}"));
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len());
    // A run with no ceiling draws nothing: refused, exit 2.
    let none = Command::new(bin())
        .args(["grafana", "--run", &format!("{root}/examples/runs/nowhere")])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
}
