//! A plan as an operator pastes it: `recommend --format compose` is an override file that
//! docker-compose merges with the user's own, naming the user's services; the merged stack
//! audits clean; every dialect sums the runners the same way; a Kubernetes patch names the
//! containers the manifests have and pins no replicas it does not propose.

use crate::common::*;
use std::process::{Command, Stdio};

/// The reference case: failure at 120 in flight, 24 s jobs, 120 slots, runners of 10 — the plan
/// is 80 slots with 80 runner tasks per worker.
const PLAN: &[&str] = &[
    "recommend",
    "--break-point",
    "120",
    "--job-time",
    "24s",
    "--worker-concurrency",
    "120",
    "--runner-limit",
    "10",
];

fn recommend(extra: &[&str]) -> String {
    let out = Command::new(bin())
        .args(PLAN)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into()
}

fn dir() -> std::path::PathBuf {
    let d = scratch().join(format!("n8ncap-pasted-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_compose_plan_is_an_override_docker_compose_merges_and_the_audit_passes() {
    // The user's stack, with services of their own names.
    let base = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/compose/minimal-clean.yml"),
    )
    .unwrap()
    .replace("n8n-worker-runner:", "jobs-runner:")
    .replace("n8n-worker:", "jobs:")
    .replace("http://n8n-worker:5679", "http://jobs:5679");
    let d = dir();
    let base_file = d.join("docker-compose.yml");
    std::fs::write(&base_file, &base).unwrap();
    let base_path = base_file.to_str().unwrap();
    let plan = recommend(&["-f", base_path, "--format", "compose"]);
    let v: serde_json::Value = serde_saphyr::from_str(&plan).unwrap();
    let services = &v["services"];
    assert_eq!(
        services["jobs"]["command"], "worker --concurrency=80",
        "{plan}"
    );
    let runner = &services["jobs-runner"]["environment"];
    assert_eq!(runner["N8N_RUNNERS_TASK_BROKER_URI"], "http://jobs:5679");
    assert_eq!(runner["N8N_RUNNERS_MAX_CONCURRENCY"], "80", "{plan}");
    assert!(services.get("n8n-worker").is_none(), "{plan}");
    let over = d.join("override.yml");
    std::fs::write(&over, &plan).unwrap();
    let over_path = over.to_str().unwrap();
    // n8ncap's own audit of the merged files: nothing to find.
    let out = Command::new(bin())
        .args(["audit", "--json", "-f", base_path, "-f", over_path])
        .output()
        .unwrap();
    let report = json_of_success(&out);
    assert_eq!(report["findings"], serde_json::json!([]), "{report}");
    // docker-compose itself accepts the two files together.
    if have_command(
        "docker-compose",
        "version",
        "apt-get install docker-compose",
    ) {
        let out = Command::new("docker-compose")
            .args(["-f", base_path, "-f", over_path, "config", "-q"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_dialect_sums_the_runners_to_the_same_capacity() {
    let compose: serde_json::Value =
        serde_saphyr::from_str(&recommend(&["--format", "compose"])).unwrap();
    let official: serde_json::Value =
        serde_saphyr::from_str(&recommend(&["--format", "helm-official"])).unwrap();
    let community: serde_json::Value =
        serde_saphyr::from_str(&recommend(&["--format", "helm-community"])).unwrap();
    let patch: serde_json::Value =
        serde_saphyr::from_str(&recommend(&["--format", "k8s"])).unwrap();
    let of_env = |list: &serde_json::Value| -> String {
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "N8N_RUNNERS_MAX_CONCURRENCY")
            .map(|e| e["value"].as_str().unwrap().to_string())
            .unwrap()
    };
    let totals = [
        compose["services"]["n8n-worker-runner"]["environment"]["N8N_RUNNERS_MAX_CONCURRENCY"]
            .as_str()
            .unwrap()
            .to_string(),
        of_env(&official["taskRunners"]["extraEnv"]),
        community["taskRunners"]["maxConcurrency"].to_string(),
        of_env(&patch["spec"]["template"]["spec"]["containers"][1]["env"]),
    ];
    assert_eq!(totals, ["80", "80", "80", "80"].map(String::from));
}

#[test]
fn a_kubernetes_patch_names_the_manifests_containers_and_pins_no_replicas() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (manifest, runner) in [
        ("community-queue-external.yaml", "n8n-task-runners"),
        ("official-task-runners.yaml", "task-runner"),
    ] {
        let f = root.join("fixtures/k8s/rendered").join(manifest);
        let text = recommend(&["-f", f.to_str().unwrap(), "--format", "k8s"]);
        let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let containers = &v["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["name"], "n8n-worker", "{text}");
        assert_eq!(containers[1]["name"], runner, "{text}");
        // The worker count is not proposed: the patch leaves replicas to the deployment.
        assert!(v["spec"].get("replicas").is_none(), "{text}");
        assert!(!text.contains("rename"), "{text}");
    }
}
