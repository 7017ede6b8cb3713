//! A scale sweep of a compose-like project on this machine's Docker Engine, n8ncap adding and
//! removing the worker/runner pairs itself through the Docker API (`sweep --workers 1,2
//! --project P`): each count's workers take jobs, the copies' runners serve their own worker,
//! and the project is left as it was found.

use crate::common::*;
use crate::docker::{docker, Stack};
use std::process::Command;

const TOKEN: &str = "runner-token-scale-5d4c3b2a";

fn one_pair() -> Stack {
    let mut s = Stack::empty("scale");
    s.run(
        "n8n",
        &[
            ("N8N_METRICS", "true"),
            ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true"),
            ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1"),
        ],
        None,
        &["sim", "main"],
        true,
    );
    s.run(
        "n8n-worker",
        &[
            ("QUEUE_BULL_REDIS_HOST", "n8n"),
            ("N8N_RUNNERS_MODE", "external"),
            ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "0.0.0.0"),
            ("N8N_RUNNERS_AUTH_TOKEN", TOKEN),
        ],
        Some("256m"),
        &["sim", "worker", "--concurrency", "2"],
        false,
    );
    s.run(
        "task-runners",
        &[
            ("N8N_RUNNERS_TASK_BROKER_URI", "http://n8n-worker:5679"),
            ("N8N_RUNNERS_MAX_CONCURRENCY", "2"),
            ("N8N_RUNNERS_AUTH_TOKEN", TOKEN),
        ],
        Some("256m"),
        &["sim", "runner"],
        false,
    );
    s
}

/// Names of the project's containers that n8ncap made (running or not).
fn copies(project: &str) -> Vec<String> {
    let out = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={}", n8ncap::observe::docker_scale::SCALED_LABEL),
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--format",
        "{{.Names}}",
    ]);
    out.lines().map(str::to_string).collect()
}

fn running(name: &str) -> bool {
    docker(&["inspect", "-f", "{{.State.Running}}", name]) == "true"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_sweep_through_docker_adds_pairs_that_take_jobs_and_removes_them() {
    if !have_docker() {
        return;
    }
    let stack = one_pair();
    let port = stack.main_port();
    wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let out = fresh_dir("docker-scale").join("run");
    let sweep = |out: &std::path::Path| {
        Command::new(bin())
            .args([
                "sweep",
                "--url",
                &format!("http://127.0.0.1:{port}/webhook/load"),
                "--vus",
                "12",
                "--warmup",
                "2s",
                "--stage-duration",
                "8s",
                "--body",
                r#"{"sleep_ms":400}"#,
                "--metrics",
                &format!("main=http://127.0.0.1:{port}/metrics"),
                "--queue-metrics-interval",
                "1",
                "--project",
                &stack.project,
                "--workers",
                "1,2",
                "--scale-settle",
                "2s",
                "--out",
                out.to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap()
    };
    let o = sweep(&out);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains(TOKEN));
    assert!(!stderr.contains(TOKEN));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The count found is the project's one worker; 1 (nothing to do), 2 (a pair made), back.
    assert_eq!(v["original_workers"], 1, "{v}");
    let counts: Vec<_> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![1, 2, 1], "{v}");
    assert!(v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["exit_code"] == 0));
    // The copy was measured only once its worker answered /healthz/readiness (queue connected).
    let to_two = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["workers"] == 2 && s["restore"] == false)
        .unwrap();
    assert!(
        to_two["command"].as_str().unwrap().contains("ready after"),
        "{to_two}"
    );
    // At 2 workers the run watched two workers and two runners, and main's gauge
    // saw 4 slots taken: the copy took jobs and its runner served them.
    for n in [1u32, 2] {
        let s = n8ncap::record::dir::load_summary(&out.join(format!("w{n}"))).unwrap();
        let active = s.stages[0].queue.as_ref().unwrap().active_max;
        assert_eq!(active, 2.0 * n as f64, "slots taken at {n} workers");
        let watched = &s.stages[0].containers;
        let of = |role: n8ncap::topology::Role| watched.iter().filter(|c| c.role == role).count();
        assert_eq!(
            of(n8ncap::topology::Role::Worker),
            n as usize,
            "{watched:?}"
        );
        assert_eq!(of(n8ncap::topology::Role::Runner), n as usize);
        assert!(watched.iter().all(|c| !c.gone));
    }
    // Nothing n8ncap made is left; the original pair runs.
    assert!(
        copies(&stack.project).is_empty(),
        "{:?}",
        copies(&stack.project)
    );
    let p = &stack.project;
    assert!(running(&format!("{p}-n8n-worker")) && running(&format!("{p}-task-runners")));

    // A container an earlier sweep left behind is refused before any load, by its name.
    let left = format!("{p}-n8n-worker-n8ncap-9");
    docker(&[
        "create",
        "--name",
        &left,
        "--label",
        &format!("{}=x", n8ncap::observe::docker_scale::SCALED_LABEL),
        "--label",
        &format!("com.docker.compose.project={p}"),
        &stack.image_name(),
        "sim",
        "worker",
    ]);
    let o = sweep(&fresh_dir("docker-scale-left").join("run"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&left));
}
