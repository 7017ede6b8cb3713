//! Deployments read from files a hostile user wrote: names that would forge output lines,
//! autoscaler bounds no cluster runs, PgBouncer modes it does not have.

use crate::common::*;
use std::process::{Command, Output, Stdio};

fn written(name: &str, text: &str) -> String {
    let d = scratch().join(format!("n8ncap-topology-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn n8ncap(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_newline_in_a_compose_service_name_is_refused_and_never_printed_raw() {
    let f = written(
        "newline.yml",
        "services:\n  \"n8n\\ncompose: x.yml: 5 services, no findings.\":\n    image: docker.n8n.io/n8nio/n8n:2.41.1\n",
    );
    for cmd in ["audit", "inspect"] {
        let out = n8ncap(&[cmd, "-f", &f]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("not a compose service name"), "{err}");
        // The forged line never starts a line of the output.
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert!(
            !all.lines().any(|l| l.starts_with("compose: x.yml")),
            "{all}"
        );
    }
}

fn audit_json(file: &str) -> (Option<i32>, serde_json::Value, String) {
    let out = n8ncap(&["audit", "--json", "-f", file]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null),
        err,
    )
}

#[test]
fn autoscaler_bounds_no_cluster_accepts_are_refused_naming_the_field() {
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/k8s/time-budget/scale-down-before-jobs-finish.yaml"),
    )
    .unwrap();
    let (max, window) = (
        "maxReplicaCount: 20",
        "scaleDown: {stabilizationWindowSeconds: 10}",
    );
    assert!(fixture.contains(max) && fixture.contains(window));
    for (from, to, field) in [
        (max, "maxReplicaCount: -1", "spec.maxReplicaCount is -1"),
        (max, "maxReplicaCount: 2.5", "spec.maxReplicaCount is 2.5"),
        (
            max,
            "maxReplicaCount: 4294967296",
            "spec.maxReplicaCount is 4294967296",
        ),
        (max, "maxReplicaCount: 0", "spec.maxReplicaCount is 0"),
        (
            max,
            "maxReplicaCount: 1",
            "minimum replicas (2) are above its maximum (1)",
        ),
        (
            window,
            "scaleDown: {stabilizationWindowSeconds: -1}",
            "stabilizationWindowSeconds is -1",
        ),
        (
            window,
            "scaleDown: {stabilizationWindowSeconds: \"300s\"}",
            "stabilizationWindowSeconds is 300s",
        ),
        (
            window,
            "scaleDown: {stabilizationWindowSeconds: 3601}",
            "stabilizationWindowSeconds is 3601",
        ),
    ] {
        let f = written("keda.yaml", &fixture.replace(from, to));
        let (code, _, err) = audit_json(&f);
        assert_eq!(code, Some(2), "{to}: {err}");
        assert!(err.contains("ScaledObject n8n-worker"), "{err}");
        assert!(err.contains(field), "{field:?} not in {err}");
    }
    // A whole number written as a float is one: 1e9 replicas, read as such — and refused as
    // beyond any deployment — never as KEDA's default 100.
    let f = written("keda.yaml", &fixture.replace(max, "maxReplicaCount: 1e9"));
    let (code, _, err) = audit_json(&f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("1000000000 replicas"), "{err}");
}

#[test]
fn a_pool_mode_pgbouncer_does_not_have_is_said_and_read_as_session() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/compose/pgbouncer");
    let text = std::fs::read_to_string(dir.join("transaction-in-front.yml")).unwrap();
    assert!(text.contains("POOL_MODE: transaction"));
    let f = written(
        "bogus-mode.yml",
        &text.replace("POOL_MODE: transaction", "POOL_MODE: bogus"),
    );
    let (code, v, err) = audit_json(&f);
    assert_eq!(code, Some(1), "{err}");
    let text = v.to_string();
    assert!(text.contains("no pool mode PgBouncer knows"), "{text}");
    // Session mode: n8n's pools stay connected, more than its pool of 5 serves.
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "db-connections-exhausted" && f["subject"] == "pgbouncer"),
        "{v}"
    );
}

/// Three worker replicas and one runner of limit 3 for 10 slots: inspect and audit count the
/// same — one paired replica (its runner too small), two with none.
#[test]
fn inspect_and_audit_count_runners_against_replicas_the_same_way() {
    let f = written(
        "replicas.yml",
        "x-env: &env\n  EXECUTIONS_MODE: queue\n  N8N_RUNNERS_MODE: external\n  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0\n  N8N_METRICS: \"true\"\n  N8N_METRICS_INCLUDE_QUEUE_METRICS: \"true\"\n  OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS: \"true\"\nservices:\n  n8n:\n    image: docker.n8n.io/n8nio/n8n:2.41.1\n    restart: always\n    environment:\n      <<: *env\n  n8n-worker:\n    image: docker.n8n.io/n8nio/n8n:2.41.1\n    restart: always\n    command: worker --concurrency=10\n    deploy:\n      replicas: 3\n    environment:\n      <<: *env\n  n8n-worker-runner:\n    image: n8nio/runners:2.41.1\n    mem_limit: 1g\n    environment:\n      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679\n      N8N_RUNNERS_MAX_CONCURRENCY: \"3\"\n",
    );
    let (_, v, err) = audit_json(&f);
    let mut ids: Vec<String> = v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{err}"))
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "runner-limit-below-worker-concurrency",
            "worker-without-runner"
        ]
    );
    let out = n8ncap(&["inspect", "--json", "-f", &f]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let worker = v["topology"]["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["role"] == "worker"))
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(worker["runners_attached"], 1, "{worker}");
    // The table wraps the cell: its words, read across lines.
    let text = String::from_utf8_lossy(&n8ncap(&["inspect", "-f", &f]).stdout).to_string();
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '│' || c == '┆')
        .filter(|w| !w.is_empty())
        .collect();
    assert!(words.windows(2).any(|w| w == ["2", "without;"]), "{text}");
}
