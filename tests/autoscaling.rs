//! `recommend RUN --format keda|hpa`: the objects generated for the three charts' rendered
//! manifests (fixtures/k8s/rendered, copies of ../shared/fixtures/k8s) and a compose deployment
//! validate against KEDA's CRD (v2.20.1, kept in fixtures/keda) and Kubernetes' own
//! schemas; they read the queue's prefix, database and password reference from the deployment;
//! their target is the run's measured capacity at 2/3; and the project's audit of the
//! deployment with them applied finds nothing about autoscaling.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const RUN: &str = "examples/runs/after";

fn chart(name: &str) -> PathBuf {
    root().join("fixtures/k8s/rendered").join(name)
}

fn dir() -> PathBuf {
    let d = scratch().join(format!("n8ncap-autoscaling-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn validator() -> bool {
    have_command(
        "python3",
        "-cimport jsonschema, kubernetes_validate, yaml",
        "pip install jsonschema kubernetes-validate pyyaml",
    )
}

/// `recommend RUN --format F -f FILE…`: its stdout, or its exit code and stderr.
fn generate(format: &str, files: &[&Path]) -> Result<String, (i32, String)> {
    let mut c = Command::new(bin());
    c.current_dir(root())
        .args(["recommend", RUN, "--format", format]);
    for f in files {
        c.arg("-f").arg(f);
    }
    let out = c.output().unwrap();
    match out.status.code() {
        Some(0) => Ok(String::from_utf8(out.stdout).unwrap()),
        code => Err((
            code.unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into(),
        )),
    }
}

/// The objects of a YAML stream.
fn docs(text: &str) -> Vec<serde_json::Value> {
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
        .collect()
}

/// validate.py over `file` (the patch merged into `base`): (exit code, its JSON answer).
fn validate(file: &Path, base: Option<&Path>, merged: Option<&Path>) -> (i32, serde_json::Value) {
    let mut c = Command::new("python3");
    c.arg(root().join("fixtures/keda/validate.py"))
        .arg(root().join("fixtures/keda/v2.20.1"));
    if let Some(b) = base {
        c.arg("--base").arg(b);
    }
    if let Some(m) = merged {
        c.arg("--write-merged").arg(m);
    }
    let out = c.arg(file).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

/// The target per replica the run's own figures give: 2/3 × its ceiling per worker × its job
/// time, rounded down to a tenth.
fn expected_target() -> f64 {
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(RUN).join("summary.json")).unwrap(),
    )
    .unwrap();
    let d = &s["diagnosis"];
    let x = d["measured_ceiling"]["mean"].as_f64().unwrap();
    let st = d["service_time"]["value"].as_f64().unwrap();
    (2.0 / 3.0 * x * st * 10.0).floor() / 10.0
}

fn trigger_lists(so: &serde_json::Value) -> Vec<(String, String)> {
    so["spec"]["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["metadata"]["listName"].as_str().unwrap().to_string(),
                t["metadata"]["databaseIndex"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn generated_keda_and_hpa_objects_validate_for_the_three_charts_and_compose() {
    if !validator() {
        return;
    }
    let d = dir();
    let target = expected_target();
    assert!(target > 1.0, "{target}");
    let cases: Vec<(String, PathBuf, bool)> = [
        "official-keda-autoscaling.yaml",
        "official-task-runners.yaml",
        "community-queue-external.yaml",
        "8gears-queue.yaml",
    ]
    .iter()
    .map(|n| (n.to_string(), chart(n), true))
    .chain([(
        "compose".to_string(),
        root().join("examples/compose/minimal-clean.yml"),
        false,
    )])
    .collect();
    for (name, file, k8s) in &cases {
        for format in ["keda", "hpa"] {
            let text = generate(format, &[file]).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let out = d.join(format!("{name}.{format}.yaml"));
            std::fs::write(&out, &text).unwrap();
            let (code, v) = validate(&out, k8s.then_some(file.as_path()), None);
            assert_eq!(code, 0, "{name} {format}: {v}");
            let kinds: Vec<&str> = v["validated"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap())
                .collect();
            let first = if format == "keda" {
                "ScaledObject/n8n-worker"
            } else {
                "HorizontalPodAutoscaler/n8n-worker"
            };
            assert!(kinds.contains(&first), "{name}: {kinds:?}");
            assert!(
                kinds.contains(&"Deployment/n8n-worker"),
                "{name}: {kinds:?}"
            );
            let objects = docs(&text);
            let scaler = &objects[0];
            if format == "keda" {
                let m = &scaler["spec"]["advanced"]["scalingModifiers"];
                assert_eq!(m["formula"], "waiting + active", "{name}");
                let t: f64 = m["target"].as_str().unwrap().parse().unwrap();
                assert!((t - target).abs() < 1e-9, "{name}: {t} for {target}");
                assert_eq!(
                    trigger_lists(scaler),
                    [
                        ("bull:jobs:wait".to_string(), "0".to_string()),
                        ("bull:jobs:active".to_string(), "0".to_string())
                    ],
                    "{name}"
                );
            } else {
                let avg = scaler["spec"]["metrics"][0]["external"]["target"]["averageValue"]
                    .as_str()
                    .unwrap();
                assert_eq!(avg, format!("{}m", (target * 1000.0).round() as u64));
            }
            // Scale-down waits at least the p99 job; the grace period covers n8n's window
            // and the runner's.
            let patch = objects.last().unwrap();
            let pod = &patch["spec"]["template"]["spec"];
            let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
            let window: u64 = pod["containers"][0]["env"][0]["value"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(grace >= window + 30, "{name}: {grace} for {window}");
        }
    }
}

#[test]
fn a_custom_prefix_and_database_and_a_password_in_a_secret_are_read_from_the_deployment() {
    if !validator() {
        return;
    }
    let d = dir();
    let text = std::fs::read_to_string(chart("community-queue-external.yaml"))
        .unwrap()
        .replace(
            "  QUEUE_BULL_REDIS_DB: \"0\"",
            "  QUEUE_BULL_REDIS_DB: \"2\"\n  QUEUE_BULL_PREFIX: \"n8n-bull\"",
        );
    let file = d.join("custom.yaml");
    std::fs::write(&file, &text).unwrap();
    let out = generate("keda", &[&file]).unwrap();
    let objects = docs(&out);
    assert_eq!(
        trigger_lists(&objects[0]),
        [
            ("n8n-bull:jobs:wait".to_string(), "2".to_string()),
            ("n8n-bull:jobs:active".to_string(), "2".to_string())
        ]
    );
    // The password only as a reference to the Secret the workers read.
    for t in objects[0]["spec"]["triggers"].as_array().unwrap() {
        assert!(t["metadata"].get("password").is_none(), "{t}");
        assert_eq!(t["authenticationRef"]["name"], "n8n-worker-redis");
    }
    let auth = &objects[1];
    assert_eq!(auth["kind"], "TriggerAuthentication");
    let refs = auth["spec"]["secretTargetRef"].as_array().unwrap();
    let password = refs.iter().find(|r| r["parameter"] == "password").unwrap();
    assert_eq!(password["name"], "n8n-redis");
    assert_eq!(password["key"], "redis-password");
    let generated = d.join("custom.keda.yaml");
    std::fs::write(&generated, &out).unwrap();
    let merged = d.join("custom.merged.yaml");
    let (code, v) = validate(&generated, Some(&file), Some(&merged));
    assert_eq!(code, 0, "{v}");
    // The deployment with the objects applied: the audit finds nothing about its autoscaling
    // (before: the grace period was too short).
    let before = audit_ids(&[&file]);
    assert!(
        before.contains(&"grace-period-too-short".to_string()),
        "{before:?}"
    );
    let objects_only = d.join("custom.objects.yaml");
    let parts: Vec<&str> = out.split("\n---\n").collect();
    std::fs::write(&objects_only, parts[..parts.len() - 1].join("\n---\n")).unwrap();
    let after = audit_ids(&[&merged, &objects_only]);
    assert!(after.contains(&"worker-scaling".to_string()), "{after:?}");
    for id in [
        "autoscaler-wrong-queue",
        "autoscaler-waiting-only",
        "autoscaler-inline-password",
        "worker-autoscaled-on-cpu",
        "scale-down-before-jobs-finish",
        "shutdown-window-below-job-time",
        "grace-period-too-short",
        "autoscaler-target-far",
        "autoscaler-max-beyond-shared-bound",
        "autoscaler-without-redis-auth",
    ] {
        assert!(!after.contains(&id.to_string()), "{id}: {after:?}");
    }
}

fn audit_ids(files: &[&Path]) -> Vec<String> {
    let mut c = Command::new(bin());
    c.current_dir(root())
        .args(["audit", "--json", "--run", RUN]);
    for f in files {
        c.arg("-f").arg(f);
    }
    let out = c.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_validator_refuses_what_the_api_server_would() {
    if !validator() {
        return;
    }
    let d = dir();
    let good = generate("keda", &[&chart("8gears-queue.yaml")]).unwrap();
    for (what, bad) in [
        (
            "an unknown field",
            good.replacen("  pollingInterval:", "  pollingIntervall:", 1),
        ),
        (
            "a count that is not a number",
            good.replacen("  minReplicaCount: 1", "  minReplicaCount: \"one\"", 1),
        ),
    ] {
        assert_ne!(bad, good, "{what}");
        let f = d.join("bad.yaml");
        std::fs::write(&f, &bad).unwrap();
        let (code, v) = validate(&f, Some(&chart("8gears-queue.yaml")), None);
        assert_eq!(code, 1, "{what}: {v}");
        assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{what}: {v}");
    }
}

#[test]
fn an_inline_password_is_never_printed_and_is_named_by_the_audit() {
    let d = dir();
    // A trigger with its password written in, beside n8n's chart.
    let text = std::fs::read_to_string(chart("official-keda-autoscaling.yaml"))
        .unwrap()
        .replace(
            "        listLength: \"5\"",
            "        listLength: \"5\"\n        password: \"hunter2-not-shown\"",
        );
    let file = d.join("inline.yaml");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(bin())
        .args(["audit", "--json", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("hunter2"), "the password was printed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"autoscaler-inline-password"), "{ids:?}");
    // The chart's own trigger watches the waiting list alone.
    assert!(ids.contains(&"autoscaler-waiting-only"), "{ids:?}");
    // A compose deployment whose password is inline: the generated TriggerAuthentication
    // names a Secret to make, never the value.
    let compose = std::fs::read_to_string(root().join("examples/compose/minimal-clean.yml"))
        .unwrap()
        .replace(
            "  QUEUE_BULL_REDIS_HOST: n8n\n",
            "  QUEUE_BULL_REDIS_HOST: n8n\n  QUEUE_BULL_REDIS_PASSWORD: hunter2-not-shown\n",
        );
    assert!(compose.contains("hunter2"), "the example changed");
    let cf = d.join("docker-compose.yml");
    std::fs::write(&cf, &compose).unwrap();
    let out = generate("keda", &[&cf]).unwrap();
    assert!(!out.contains("hunter2"), "{out}");
    let objects = docs(&out);
    assert_eq!(objects[1]["kind"], "TriggerAuthentication");
    assert_eq!(
        objects[1]["spec"]["secretTargetRef"][0]["name"],
        "n8n-worker-redis"
    );
}

#[test]
fn without_a_deployment_or_a_run_it_says_what_to_give() {
    let (code, err) = generate("keda", &[]).unwrap_err();
    assert_eq!(code, 2, "{err}");
    let out = Command::new(bin())
        .args(["recommend", "--format", "keda", "-f"])
        .arg(chart("8gears-queue.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `replay` at a steady half of one worker's ceiling: n8n's own chart's ScaledObject (the
/// waiting list alone, at least 2 replicas) holds 2 workers and never scales; the generated one
/// holds what the load needs, λ × job time jobs, under its target: 1 worker. Neither lets a job
/// wait. The page draws both.
#[test]
fn replay_holds_a_steady_load_with_the_replicas_each_autoscaler_asks_for() {
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(RUN).join("summary.json")).unwrap(),
    )
    .unwrap();
    let x = s["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap();
    let csv = dir().join("steady.csv");
    std::fs::write(
        &csv,
        format!("seconds,rate\n0,{}\n599,{}\n", x / 2.0, x / 2.0),
    )
    .unwrap();
    let run = |format: &str| {
        std::process::Command::new(bin())
            .arg("replay")
            .arg(root().join(RUN))
            .arg("--arrivals")
            .arg(&csv)
            .arg("-f")
            .arg(chart("official-keda-autoscaling.yaml"))
            .args(["--format", format])
            .output()
            .unwrap()
    };
    let v = json_of_success(&run("json"));
    assert_eq!(v["seconds"], 600);
    let replays = v["replays"].as_array().unwrap();
    assert_eq!(replays.len(), 2, "{v}");
    for (r, replicas) in replays.iter().zip([2.0, 1.0]) {
        assert_eq!(r["peak_waiting"][0], 0.0, "{r}");
        assert_eq!(r["events"].as_array().unwrap().len(), 0, "{r}");
        assert_eq!(
            r["replicas_range"][0].as_f64(),
            Some(replicas),
            "{}",
            r["name"]
        );
        assert_eq!(r["replica_s"].as_f64(), Some(replicas * 600.0));
    }
    assert!(replays[0]["name"].as_str().unwrap().ends_with("(deployed)"));
    let html = String::from_utf8(run("html").stdout).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
}

/// Hardening round 5 (#61, item 4): a name Kubernetes would refuse is refused with exit 2,
/// naming the field (a compose service `n8n_worker` is no Deployment name); a prefix holding a
/// line break, a document marker and a comment reads back as itself in one ScaledObject (before:
/// the stream split, or KEDA watched another list).
#[test]
fn generated_objects_hold_any_prefix_and_refuse_names_kubernetes_refuses() {
    let d = dir();
    let clean = std::fs::read_to_string(root().join("examples/compose/minimal-clean.yml")).unwrap();
    let renamed = d.join("underscore.yml");
    std::fs::write(
        &renamed,
        clean
            .replace("  n8n-worker:\n", "  n8n_worker:\n")
            .replace("http://n8n-worker:5679", "http://n8n_worker:5679"),
    )
    .unwrap();
    let (code, err) = generate("keda", &[&renamed]).unwrap_err();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("metadata.name") && err.contains("n8n_worker"),
        "{err}"
    );
    let prefix = "a\n---\nkind: Secret\n# b\u{2028}c";
    let hostile = d.join("prefix.yml");
    std::fs::write(
        &hostile,
        clean.replace(
            "  QUEUE_BULL_REDIS_HOST: n8n\n",
            "  QUEUE_BULL_REDIS_HOST: n8n\n  QUEUE_BULL_PREFIX: \"a\\n---\\nkind: Secret\\n# b\\u2028c\"\n",
        ),
    )
    .unwrap();
    for format in ["keda", "hpa"] {
        let objects = docs(&generate(format, &[&hostile]).unwrap());
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        match format {
            "keda" => {
                assert_eq!(kinds, ["ScaledObject", "Deployment"]);
                let lists: Vec<String> = trigger_lists(&objects[0])
                    .into_iter()
                    .map(|(l, _)| l)
                    .collect();
                assert_eq!(
                    lists,
                    [
                        format!("{prefix}:jobs:wait"),
                        format!("{prefix}:jobs:active")
                    ]
                );
            }
            _ => assert_eq!(kinds, ["HorizontalPodAutoscaler", "Deployment"]),
        }
    }
}

/// Issue #66: the generated object is tuned by replaying the arrivals. On the project's own
/// example it waits no longer than n8n's chart object and spends at most 1.25× its
/// worker-hours (before: 17 s of wait and 5.0 worker-hours against 0 s and 1.0); `recommend
/// --format keda --arrivals` writes those values, each with the replay that chose it.
#[test]
fn the_generated_autoscaler_wins_its_own_replay() {
    let out = std::process::Command::new(bin())
        .current_dir(root())
        .args([
            "replay",
            RUN,
            "--arrivals",
            "examples/scale/arrivals-step.csv",
            "-f",
            "fixtures/k8s/rendered/official-keda-autoscaling.yaml",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of_success(&out);
    let r = v["replays"].as_array().unwrap();
    let (deployed, generated) = (&r[0], &r[1]);
    assert!(deployed["name"].as_str().unwrap().ends_with("(deployed)"));
    let wait = |x: &serde_json::Value| x["peak_wait_s"][0].as_f64().unwrap();
    let cost = |x: &serde_json::Value| x["replica_s"].as_f64().unwrap();
    assert!(
        wait(generated) <= wait(deployed),
        "{} {}",
        wait(generated),
        wait(deployed)
    );
    assert!(
        cost(generated) <= 1.25 * cost(deployed),
        "{} {}",
        cost(generated),
        cost(deployed)
    );
    let keda = std::process::Command::new(bin())
        .current_dir(root())
        .args([
            "recommend",
            RUN,
            "--format",
            "keda",
            "-f",
            "fixtures/k8s/rendered/official-keda-autoscaling.yaml",
            "--arrivals",
            "examples/scale/arrivals-step.csv",
        ])
        .output()
        .unwrap();
    assert_eq!(
        keda.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&keda.stderr)
    );
    let text = String::from_utf8(keda.stdout).unwrap();
    let so = &docs(&text)[0];
    assert_eq!(so["spec"]["minReplicaCount"], 2, "{text}");
    assert!(
        so["spec"]["maxReplicaCount"].as_u64().unwrap() <= 4,
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("minReplicaCount") && l.contains("replayed on")),
        "{text}"
    );
}
