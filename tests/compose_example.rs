//! The README's walkthrough, end to end on the Docker Engine here: build the simulator's images
//! without a registry (examples/compose/simulated/build.sh), bring the queue-mode compose stack
//! up with a real Redis (docker-compose), then `inspect`, `audit --live`, `sweep --project`,
//! `diagnose` and `report.html` — and the verdict is the runner limit the stack was built with.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Down {
    project: String,
    file: PathBuf,
    tag: String,
}

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new("docker-compose")
            .args(["-p", &self.project, "-f"])
            .arg(&self.file)
            .args(["down", "-t", "1"])
            .output();
        for image in ["n8n", "runners", "redis"] {
            let _ = Command::new("docker")
                .args(["rmi", "-f", &format!("n8ncap-sim/{image}:{}", self.tag)])
                .output();
        }
    }
}

fn n8ncap(args: &[&str]) -> std::process::Output {
    Command::new(bin()).args(args).output().unwrap()
}

#[test]
fn the_simulated_compose_stack_walkthrough() {
    if !have_docker()
        || !have_command(
            "docker-compose",
            "version",
            "apt-get install docker-compose",
        )
        || !have_command("redis-server", "--version", "apt-get install redis-server")
    {
        return;
    }
    let id = std::process::id();
    let tag = format!("e2e{id}");
    let project = format!("n8ncap-e2e{id}");
    let file = root().join("examples/compose/simulated/docker-compose.yml");
    let _down = Down {
        project: project.clone(),
        file: file.clone(),
        tag: tag.clone(),
    };
    let build = Command::new("bash")
        .arg(root().join("examples/compose/simulated/build.sh"))
        .arg(bin())
        .env("TAG", &tag)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let port = free_port();
    let up = Command::new("docker-compose")
        .args(["-p", &project, "-f"])
        .arg(&file)
        .args(["up", "-d"])
        .env("N8N_HOST_PORT", port.to_string())
        .env("N8N_IMAGE", format!("n8ncap-sim/n8n:{tag}"))
        .env("RUNNERS_IMAGE", format!("n8ncap-sim/runners:{tag}"))
        .env("REDIS_IMAGE", format!("n8ncap-sim/redis:{tag}"))
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));

    // inspect: the roles, Redis among them, and the runner limit of 5 beside 10 slots.
    let v = run_json(&["inspect", "--project", &project, "--json"]);
    let roles: Vec<String> = v["topology"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["role"].as_str().unwrap().to_string())
        .collect();
    for r in ["main", "worker", "runner", "redis"] {
        assert!(roles.iter().any(|x| x == r), "{r} missing: {roles:?}");
    }
    assert_eq!(v["model_settings"]["worker_concurrency"]["value"], 10);
    assert_eq!(v["model_settings"]["runner_limit"]["value"], 5);

    // audit --live: the deliberate runner limit below worker concurrency, nothing else.
    let out = n8ncap(&["audit", "--live", "--project", &project, "--format", "json"]);
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["runner-limit-below-worker-concurrency"], "{a}");

    // The queue is on the Redis container, as in n8n.
    let logs = Command::new("docker-compose")
        .args(["-p", &project, "-f"])
        .arg(&file)
        .args(["logs", "--no-color", "n8n", "n8n-worker"])
        .output()
        .unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(
        logs.contains("the queue is on Redis at redis:6379"),
        "{logs}"
    );

    // sweep --project: settings from the containers, 1 s Code jobs, 2 and 8 in flight.
    let dir = std::env::temp_dir().join(format!("n8ncap-e2e-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = n8ncap(&[
        "sweep",
        "--project",
        &project,
        "--url",
        &format!("http://127.0.0.1:{port}/webhook/load"),
        "--metrics",
        &format!("main=http://127.0.0.1:{port}/metrics"),
        "--body",
        r#"{"sleep_ms":1000}"#,
        "--vus",
        "2,8",
        "--stage-duration",
        "8s",
        "--warmup",
        "2s",
        "--queue-metrics-interval",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // diagnose on the saved directory: the runner limit caps, ≈ 5 tasks ÷ 1 s.
    let d = run_json(&["diagnose", dir.to_str().unwrap(), "--json"]);
    assert_eq!(
        d["diagnosis"]["capping_limit"], "runner_limit",
        "{}",
        d["diagnosis"]["verdict"]
    );
    let x = d["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap();
    assert!((4.0..=5.2).contains(&x), "ceiling {x}");
    // The headline evidence: slots taken from n8n's own gauges at 8 in flight, all 8 of them
    // (the runner limit of 5 is invisible there).
    let level8 = d["diagnosis"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["level"]["in_flight"] == 8)
        .unwrap();
    let slots = level8["slots_taken"].as_f64().unwrap_or(0.0);
    assert!(slots > 6.0, "slots taken {slots}");
    assert!(dir.join("report.html").exists());
}
