//! Kubernetes manifests rendered from the n8n Helm charts: `audit -f` and `inspect -f` read
//! what the pods will run (envFrom, valueFrom, sidecars, autoscalers), each rule fires on its
//! fixture (the rendered task-runners example with one change), the rendered charts give the
//! findings docs/audit.md lists, and no secret value — plain or base64 — reaches any output.

use crate::common::*;
use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

fn audit_ids(file: &str) -> BTreeSet<String> {
    let out = Command::new(bin())
        .args(["audit", "-f", file, "--format", "json"])
        .current_dir(root())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{file}: {}", String::from_utf8_lossy(&out.stderr)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_rule_fixture_adds_its_rule_to_the_clean_base() {
    assert!(audit_ids("fixtures/k8s/base-clean.yaml").is_empty());
    let extra: &[(&str, &[&str])] = &[
        ("worker-scaling", &[]),
        // A wrong list is not the active list either.
        (
            "autoscaler-wrong-queue",
            &["worker-scaling", "autoscaler-waiting-only"],
        ),
        ("autoscaler-waiting-only", &["worker-scaling"]),
        ("autoscaler-inline-password", &["worker-scaling"]),
        ("autoscaler-without-redis-auth", &["worker-scaling"]),
        ("worker-autoscaled-on-cpu", &["worker-scaling"]),
        (
            // N8N_CONCURRENCY_PRODUCTION_LIMIT=50 outgrows the base's pool of 10.
            "production-limit-overrides-concurrency",
            &[
                "runner-limit-below-worker-concurrency",
                "db-pool-below-concurrency",
            ],
        ),
    ];
    let mut n = 0;
    for e in std::fs::read_dir(root().join("fixtures/k8s/rules")).unwrap() {
        let path = e.unwrap().path();
        let rule = path.file_stem().unwrap().to_string_lossy().to_string();
        let mut want = set(&[&rule]);
        if let Some((_, more)) = extra.iter().find(|(r, _)| *r == rule) {
            want.extend(set(more));
        }
        let file = format!("fixtures/k8s/rules/{rule}.yaml");
        assert_eq!(audit_ids(&file), want, "{file}");
        n += 1;
    }
    assert_eq!(n, 20);
}

#[test]
fn rendered_charts_give_the_findings_the_readme_lists() {
    for (file, ids) in [
        (
            "8gears-queue",
            &[
                "metrics-off",
                "readiness-on-healthz",
                "worker-probe-without-health-check",
                "worker-without-memory-limit",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
                "webhook-default-pool",
            ][..],
        ),
        (
            "community-queue-external",
            &[
                "runner-limit-below-worker-concurrency",
                "production-limit-overrides-concurrency",
                "metrics-off",
                "worker-without-memory-limit",
                "grace-period-too-short",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
            ],
        ),
        (
            "official-keda-autoscaling",
            &[
                "metrics-off",
                "worker-scaling",
                "autoscaler-waiting-only",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
            ],
        ),
        (
            "official-minimal",
            &[
                "metrics-off",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
            ],
        ),
        (
            "official-production-s3",
            &[
                "runner-limit-below-worker-concurrency",
                "production-limit-overrides-concurrency",
                "metrics-off",
                "worker-scaling",
                "worker-autoscaled-on-cpu",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
                "webhook-default-pool",
            ],
        ),
        (
            "official-task-runners",
            &[
                "metrics-off",
                "db-connection-budget",
                "db-pool-below-concurrency",
                "db-ping-timeout-default",
            ],
        ),
    ] {
        let got = audit_ids(&format!("fixtures/k8s/rendered/{file}.yaml"));
        assert_eq!(got, set(ids), "{file}");
    }
}

fn inspect_json(file: &str) -> serde_json::Value {
    run_json(&[
        "inspect",
        "-f",
        root().join(file).to_str().unwrap(),
        "--json",
    ])
}

fn node<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["topology"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["facts"]["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[test]
fn inspect_reads_what_the_pods_run_with_sources() {
    // The community chart: worker.concurrency renders both --concurrency and the production
    // limit; the runner's settings come through a ConfigMap by envFrom; runners are sidecars.
    let v = inspect_json("fixtures/k8s/rendered/community-queue-external.yaml");
    let w = node(&v, "n8n-worker");
    assert_eq!(w["role"], "worker");
    assert_eq!(w["worker_concurrency"]["value"], 10);
    assert!(w["worker_concurrency"]["source"]
        .as_str()
        .unwrap()
        .contains("N8N_CONCURRENCY_PRODUCTION_LIMIT overrides --concurrency"));
    assert_eq!(w["facts"]["replicas"], 2);
    let r = node(&v, "n8n-worker/n8n-task-runners");
    assert_eq!(r["role"], "runner");
    assert_eq!(r["attached_to"], "n8n-worker");
    assert_eq!(r["runner_limit"]["value"], 5);
    assert_eq!(
        r["runner_limit"]["source"],
        "ConfigMap n8n-task-runners-configmap key N8N_RUNNERS_MAX_CONCURRENCY via envFrom"
    );
    assert_eq!(r["facts"]["k8s"]["sidecar"], true);
    assert_eq!(v["model_settings"]["runner_limit"]["value"], 5);
    assert_eq!(v["model_settings"]["workers"]["value"], 2);
    // KEDA: 2–20 pods from the ScaledObject on bull:jobs:wait.
    let v = inspect_json("fixtures/k8s/rendered/official-keda-autoscaling.yaml");
    let a = &node(&v, "n8n-worker")["facts"]["k8s"]["autoscaler"];
    assert_eq!((a["min"].as_u64(), a["max"].as_u64()), (Some(2), Some(20)));
    assert_eq!(a["triggers"][0]["list_name"], "bull:jobs:wait");
    // The table fits the settings and numbers its sources.
    let out = Command::new(bin())
        .args([
            "inspect",
            "-f",
            "fixtures/k8s/rendered/official-task-runners.yaml",
        ])
        // Wide enough that no cell folds: this checks what the table says, not its layout.
        .env("COLUMNS", "200")
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("capacity 10 per pod"), "{text}");
    assert!(
        text.contains("[1] ConfigMap n8n key N8N_RUNNERS_MODE via valueFrom"),
        "{text}"
    );
}

#[test]
fn a_sidecar_reaches_its_broker_on_localhost() {
    // 127.0.0.1 as the broker's listen address is right for a sidecar: no finding.
    let base = std::fs::read_to_string(root().join("fixtures/k8s/base-clean.yaml")).unwrap();
    let text = base.replace(
        "N8N_RUNNERS_BROKER_LISTEN_ADDRESS: \"0.0.0.0\"",
        "N8N_RUNNERS_BROKER_LISTEN_ADDRESS: \"127.0.0.1\"",
    );
    assert_ne!(text, base);
    let d = fresh_dir("k8s");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("local.yaml");
    std::fs::write(&f, text).unwrap();
    assert!(audit_ids(f.to_str().unwrap()).is_empty());
}

#[test]
fn helm_template_pipes_into_audit_with_file_and_line() {
    let text =
        std::fs::read(root().join("fixtures/k8s/rules/grace-period-too-short.yaml")).unwrap();
    let mut child = Command::new(bin())
        .args(["audit", "-f", "-", "--format", "sarif"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "warnings only");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ruleId"], "grace-period-too-short");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "<stdin>");
    // The worker's container line in the rendered file.
    let line = loc["region"]["startLine"].as_u64().unwrap() as usize;
    let at = String::from_utf8_lossy(&text)
        .lines()
        .nth(line - 1)
        .unwrap()
        .to_string();
    assert!(at.contains("name: n8n-worker"), "line {line}: {at}");
}

#[test]
fn no_secret_value_reaches_any_output() {
    // A Secret with a plain and a base64 value, and a secret-looking variable set inline.
    let base = std::fs::read_to_string(root().join("fixtures/k8s/base-clean.yaml")).unwrap();
    let planted = format!(
        "{base}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: n8n-planted}}\n\
         stringData: {{N8N_ENCRYPTION_KEY: planted-plain-77}}\n\
         data: {{DB_POSTGRESDB_PASSWORD: cGxhbnRlZC1iNjQtODg=}}\n"
    )
    .replace(
        "            - name: N8N_METRICS\n              value: \"true\"\n",
        "            - name: N8N_METRICS\n              value: \"true\"\n\
         \x20           - name: N8N_RUNNERS_AUTH_TOKEN\n              value: planted-inline-99\n\
         \x20           - name: EXTRA\n              valueFrom:\n                secretKeyRef: {name: n8n-planted, key: N8N_ENCRYPTION_KEY}\n",
    );
    assert!(planted.contains("planted-inline-99"));
    let d = fresh_dir("k8s-secret");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("planted.yaml");
    std::fs::write(&f, &planted).unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["audit", "-f", f],
        vec!["audit", "-f", f, "--format", "json"],
        vec!["audit", "-f", f, "--format", "sarif"],
        vec!["inspect", "-f", f],
        vec!["inspect", "-f", f, "--json"],
    ] {
        let out = Command::new(bin()).args(&args).output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in [
            "planted-plain-77",
            "cGxhbnRlZC1iNjQtODg=",
            "planted-b64-88",
            "planted-inline-99",
        ] {
            assert!(!all.contains(secret), "{args:?} shows {secret}");
        }
    }
    // The inline token differs from the runners' secret reference: the audit says so by name.
    assert!(audit_ids(f).contains("runner-token-mismatch"));
}

#[test]
fn bad_manifests_are_refused_with_file_and_line() {
    let d = fresh_dir("k8s-bad");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("bad.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: [\n",
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["audit", "-f", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:7"), "{err}");
}

#[test]
fn recommendations_print_as_chart_values_and_a_patch() {
    let args = [
        "recommend",
        "--break-point",
        "120",
        "--job-time",
        "24s",
        "--worker-concurrency",
        "120",
        "--runner-limit",
        "10",
        "--format",
    ];
    let yaml_of = |format: &str| -> serde_json::Value {
        let mut all = args.to_vec();
        all.push(format);
        let out = Command::new(bin()).args(&all).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        // stdout holds the settings alone (the plan in words goes to stderr): `> values.yaml`
        // writes a file the chart accepts.
        assert!(String::from_utf8_lossy(&out.stderr).contains("Recommendation:"));
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{format}: {e}\n{text}"))
    };
    // 2/3 of 120 in flight: 80 slots on one worker, a runner capacity of 80 beside them.
    let v = yaml_of("helm-official");
    assert_eq!(v["queueMode"]["workerConcurrency"], 80);
    // The worker count is not proposed (one worker assumed): not written, so not pinned.
    assert!(v["queueMode"].get("workerReplicaCount").is_none());
    assert_eq!(v["taskRunners"]["enabled"], true);
    assert_eq!(
        v["taskRunners"]["extraEnv"][0]["name"],
        "N8N_RUNNERS_MAX_CONCURRENCY"
    );
    assert_eq!(v["taskRunners"]["extraEnv"][0]["value"], "80");
    let v = yaml_of("helm-community");
    assert_eq!(v["worker"]["concurrency"], 80);
    assert_eq!(v["taskRunners"]["maxConcurrency"], 80);
    let v = yaml_of("k8s");
    let containers = &v["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["args"][1], "--concurrency=80");
    assert_eq!(containers[1]["env"][1]["value"], "80");
}

#[test]
fn eight_gears_worker_autoscaling_without_an_hpa_runs_one_worker() {
    // With worker.autoscaling.enabled the 8gears chart leaves `replicas:` out of the worker
    // Deployment and renders no HorizontalPodAutoscaler for it: this is that render.
    let text =
        std::fs::read_to_string(root().join("fixtures/k8s/rendered/8gears-queue.yaml")).unwrap();
    let at = text.find("  name: n8n-worker\n").unwrap();
    let i = at + text[at..].find("  replicas: 2\n").unwrap();
    let autoscaled = format!("{}{}", &text[..i], &text[i + "  replicas: 2\n".len()..]);
    let d = fresh_dir("k8s-8g");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("8gears-autoscaling.yaml");
    std::fs::write(&f, autoscaled).unwrap();
    let ids = audit_ids(f.to_str().unwrap());
    assert!(ids.contains("worker-replicas-unset"), "{ids:?}");
    assert!(!audit_ids("fixtures/k8s/rendered/8gears-queue.yaml").contains("worker-replicas-unset"));
    let v = inspect_json(f.to_str().unwrap());
    assert_eq!(v["model_settings"]["workers"]["value"], 1);
}

#[test]
fn tables_fit_a_100_column_terminal() {
    for args in [
        [
            "inspect",
            "-f",
            "fixtures/k8s/rendered/community-queue-external.yaml",
        ],
        [
            "audit",
            "-f",
            "fixtures/k8s/rendered/official-production-s3.yaml",
        ],
        ["audit", "-f", "fixtures/k8s/rendered/8gears-queue.yaml"],
        [
            "inspect",
            "-f",
            "fixtures/k8s/rendered/official-production-s3.yaml",
        ],
    ] {
        let out = Command::new(bin())
            .args(args)
            .env("COLUMNS", "100")
            .current_dir(root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 100, "{args:?}: {widest} columns\n{text}");
        assert!(text.lines().count() > 5);
        assert!(!text.contains("{}"), "{text}");
    }
}

/// An audit at 80 and 100 columns: no line wider than the terminal, each rule's why said once
/// (metrics-off names two workloads here), every finding's message whole on its lines.
#[test]
fn an_audit_says_each_rules_why_once_and_fits_80_and_100_columns() {
    for cols in [80usize, 100] {
        let out = Command::new(bin())
            .args([
                "audit",
                "-f",
                "fixtures/k8s/rendered/official-production-s3.yaml",
            ])
            .env("COLUMNS", cols.to_string())
            .current_dir(root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= cols, "{cols}: {widest}\n{text}");
        assert_eq!(text.matches("metrics-off (").count(), 1, "{text}");
        assert_eq!(text.matches("why: Without metrics").count(), 1, "{text}");
        let whys = text.matches("  why: ").count();
        let rules = text
            .lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with("):"))
            .count();
        assert!(whys <= rules, "{text}");
    }
}

/// The clean base with its worker Deployment turned into a KEDA ScaledJob (the same pod as its
/// Job template) on the waiting list alone: the audit reads the ScaledJob's pods as workers and
/// its triggers as an autoscaler's. An HPA whose metric source carries `user:password@` is
/// named, the password never shown.
#[test]
fn a_scaled_job_is_read_as_an_autoscaler_and_a_metric_source_password_is_named() {
    let base = std::fs::read_to_string(root().join("fixtures/k8s/base-clean.yaml")).unwrap();
    let start = base
        .find("# Source: n8n/templates/deployment-worker.yaml")
        .unwrap();
    let end = start + base[start..].find("\n---").unwrap();
    let worker = &base[start..end];
    let t = worker.find("\n  template:\n").unwrap();
    let template: String = worker[t + 1..]
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect();
    let job = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledJob\nmetadata:\n  name: n8n-worker\n  namespace: n8n\nspec:\n  jobTargetRef:\n{template}  minReplicaCount: 0\n  maxReplicaCount: 8\n  triggers:\n    - type: redis\n      metadata:\n        address: \"redis:6379\"\n        listName: \"bull:jobs:wait\"\n        listLength: \"5\"\n"
    );
    let text = format!("{}{job}{}", &base[..start], &base[end..]);
    let dir = scratch().join(format!("n8ncap-k8s-scaledjob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scaledjob.yaml");
    std::fs::write(&file, &text).unwrap();
    let ids = audit_ids(file.to_str().unwrap());
    assert!(ids.contains("autoscaler-waiting-only"), "{ids:?}");
    assert!(ids.contains("worker-scaling"), "{ids:?}");

    let hpa = "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: n8n-worker\n  namespace: n8n\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: n8n-worker\n  minReplicas: 1\n  maxReplicas: 6\n  metrics:\n    - type: External\n      external:\n        metric:\n          name: n8n_queue_jobs_held\n          selector:\n            matchLabels:\n              source: \"redis://queue:hpa-secret-7f3e@redis:6379/0\"\n        target:\n          type: AverageValue\n          averageValue: \"4\"\n";
    let file = dir.join("hpa.yaml");
    std::fs::write(&file, format!("{base}{hpa}")).unwrap();
    let out = Command::new(bin())
        .args(["audit", "-f", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("hpa-secret-7f3e"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hpa-secret-7f3e"));
    let ids = audit_ids(file.to_str().unwrap());
    assert!(ids.contains("autoscaler-inline-password"), "{ids:?}");
}
