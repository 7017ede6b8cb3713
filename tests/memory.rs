//! Memory per execution on the simulator's compose stack (the project's images, a real Redis,
//! Docker's stats): a Code task that allocates and touches 40 MiB lands in the runner's
//! container, so a sweep at 1, 3 and 6 in flight must measure about 40 MiB per execution in the
//! runner (within 20 %), and the need at the runner's limit from it. 40 MiB is above glibc's
//! largest mmap threshold (32 MiB): each allocation is returned to the system when its task
//! ends, as a Node runner's Buffer is collected.

use crate::common::compose::SimStacks;
use crate::common::*;
use std::process::Command;

fn compose_file(tag: &str, port: u16) -> String {
    format!(
        r#"x-n8n-env: &n8n-env
  EXECUTIONS_MODE: queue
  QUEUE_BULL_REDIS_HOST: redis
  N8N_RUNNERS_MODE: external
  N8N_RUNNERS_AUTH_TOKEN: memory-not-a-secret
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0
  N8N_METRICS: "true"
  N8N_METRICS_INCLUDE_QUEUE_METRICS: "true"
  N8N_METRICS_QUEUE_METRICS_INTERVAL: "1"
  SIM_MAIN_CPU_MS: "0"
  SIM_WORKER_CPU_MS: "0"
  SIM_RUNNER_CPU_MS: "0"
services:
  redis:
    image: n8ncap-sim/redis:{tag}
  n8n:
    image: n8ncap-sim/n8n:{tag}
    depends_on: [redis]
    ports:
      - "127.0.0.1:{port}:5678"
    environment:
      <<: *n8n-env
  n8n-worker:
    image: n8ncap-sim/n8n:{tag}
    command: worker --concurrency=10
    depends_on: [redis]
    environment:
      <<: *n8n-env
  n8n-worker-runner:
    image: n8ncap-sim/runners:{tag}
    mem_limit: 320m
    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_AUTH_TOKEN: memory-not-a-secret
      N8N_RUNNERS_MAX_CONCURRENCY: "10"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 100 s): a compose project, Docker's stats"]
async fn a_sweep_measures_the_runner_s_memory_per_execution() {
    if !have_docker()
        || !have_command(
            "docker-compose",
            "version",
            "apt-get install docker-compose",
        )
    {
        return;
    }
    let id = std::process::id();
    let tag = format!("mem{id}");
    let dir = scratch().join(format!("n8ncap-memory-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (project, file, port) = (
        format!("n8ncap-mem{id}"),
        dir.join("stack.yml"),
        free_port(),
    );
    std::fs::write(&file, compose_file(&tag, port)).unwrap();
    let profile = dir.join("memory.yaml");
    std::fs::write(
        &profile,
        "name: memory-slope\nmodel: closed\nrequest:\n  method: POST\n  headers: {content-type: application/json}\n  body: {sleep_ms: 3000, alloc_mb: 40}\n  timeout: 60s\nstage_duration: 13s\nwarmup: 3500ms\nstages:\n  - vus: 1\n  - vus: 3\n  - vus: 6\n",
    )
    .unwrap();
    let mut stacks = SimStacks::build(&tag);
    stacks.up(&project, &file);
    let url = format!("http://127.0.0.1:{port}/webhook/load");
    wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let out = dir.join("run");
    let run = Command::new(bin())
        .args(["sweep", "--profile"])
        .arg(&profile)
        .args(["--url", &url, "--project", &project, "--out"])
        .arg(&out)
        .args([
            "--metrics",
            &format!("main=http://127.0.0.1:{port}/metrics"),
        ])
        .output()
        .unwrap();
    assert!(
        matches!(run.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let memory = summary["diagnosis"]["memory"]
        .as_array()
        .unwrap_or_else(|| panic!("no memory fit: {}", summary["diagnosis"]));
    let runner = memory
        .iter()
        .find(|m| m["role"] == "runner")
        .unwrap_or_else(|| panic!("{memory:?}"));
    let per = runner["per_execution_bytes"].as_f64().unwrap() / 1024.0 / 1024.0;
    eprintln!("runner: {per:.1} MiB per execution: {runner}");
    assert!(
        (per - 40.0).abs() <= 0.2 * 40.0,
        "{per:.1} MiB per execution: {runner}"
    );
    assert_eq!(runner["at"], 10, "{runner}");
    // At its limit of 10 tasks it needs about 400 MiB over its base: above its 320 MiB limit.
    let need = runner["need_bytes"].as_f64().unwrap();
    assert!(need > 10.0 * 0.8 * 40.0 * 1024.0 * 1024.0, "{runner}");
    let findings: Vec<&str> = summary["diagnosis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(
        findings.contains(&"memory-limit-below-need"),
        "{findings:?}"
    );
    // The worker holds none of it.
    if let Some(w) = memory.iter().find(|m| m["role"] == "worker") {
        let per = w["per_execution_bytes"].as_f64().unwrap() / 1024.0 / 1024.0;
        assert!(per < 4.0, "the worker grew {per:.1} MiB per execution: {w}");
    }
}
