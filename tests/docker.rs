//! Against this machine's real Docker Engine: an image built locally from the simulator's
//! binary, a compose-like stack (main, two workers, runners with different limits and memory
//! limits) started as containers, inspected, and swept while its memory is watched.
//! Skips with a printed reason when the Docker socket is absent.

use crate::common::*;
use std::process::Command;
use std::time::Duration;

const SECRET_KEY: &str = "enc-key-9f8e7d6c5b4a";
const SECRET_DB: &str = "db-pass-1a2b3c4d5e6f";
const SECRET_TOKEN: &str = "runner-token-77aa88bb99cc";

fn docker_available() -> bool {
    have_docker()
}

pub(crate) fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) struct Stack {
    pub(crate) project: String,
    names: Vec<String>,
    network: String,
    image: String,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("docker").args(["rm", "-f", n]).output();
        }
        // And whatever else carries the project's label (containers n8ncap made).
        let filter = format!("label=com.docker.compose.project={}", self.project);
        if let Ok(o) = Command::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output()
        {
            for id in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
        let _ = Command::new("docker")
            .args(["network", "rm", &self.network])
            .output();
        let _ = Command::new("docker")
            .args(["rmi", "-f", &self.image])
            .output();
    }
}

impl Stack {
    /// An image of this build and a network of its own, no container yet.
    pub(crate) fn empty(tag: &str) -> Stack {
        let project = format!("n8ncap{tag}{}", std::process::id());
        let image = format!("n8ncap-{tag}:{}", std::process::id());
        build_image(&image, &["/n8ncap"]);
        let network = format!("{project}-net");
        docker(&["network", "create", &network]);
        Stack {
            project,
            names: Vec::new(),
            network,
            image,
        }
    }

    pub(crate) fn run(
        &mut self,
        service: &str,
        env: &[(&str, &str)],
        mem: Option<&str>,
        args: &[&str],
        publish: bool,
    ) {
        let name = format!("{}-{service}", self.project);
        let mut cmd: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            "--name".into(),
            name.clone(),
            "--network".into(),
            self.network.clone(),
            "--network-alias".into(),
            service.into(),
            "--label".into(),
            format!("com.docker.compose.project={}", self.project),
            "--label".into(),
            format!("com.docker.compose.service={service}"),
        ];
        if let Some(m) = mem {
            cmd.push("--memory".into());
            cmd.push(m.into());
        }
        if publish {
            cmd.push("-p".into());
            cmd.push("127.0.0.1::5678".into());
        }
        // Main's intake and the workers' executions cost no CPU unless the test gives them (the
        // simulator's defaults are n8n 2.41.1's 13 and 50 ms, burnt for real): a later `-e` of
        // the same name wins.
        cmd.push("-e".into());
        cmd.push("SIM_MAIN_CPU_MS=0".into());
        cmd.push("-e".into());
        cmd.push("SIM_WORKER_CPU_MS=0".into());
        cmd.push("-e".into());
        cmd.push("SIM_RUNNER_CPU_MS=0".into());
        for (k, v) in env {
            cmd.push("-e".into());
            cmd.push(format!("{k}={v}"));
        }
        cmd.push(self.image.clone());
        cmd.extend(args.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
        docker(&refs);
        self.names.push(name);
    }

    fn start() -> Stack {
        let mut s = Stack::empty("t");
        s.run(
            "n8n",
            &[
                ("N8N_METRICS", "true"),
                ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true"),
                ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1"),
                ("N8N_ENCRYPTION_KEY", SECRET_KEY),
            ],
            None,
            &["sim", "main"],
            true,
        );
        let worker_env = |extra: &[(&'static str, &'static str)]| {
            let mut v = vec![
                ("QUEUE_BULL_REDIS_HOST", "n8n"),
                ("N8N_RUNNERS_MODE", "external"),
                ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "0.0.0.0"),
                ("N8N_RUNNERS_AUTH_TOKEN", SECRET_TOKEN),
                ("N8N_ENCRYPTION_KEY", SECRET_KEY),
                ("DB_POSTGRESDB_PASSWORD", SECRET_DB),
                ("N8N_METRICS", "true"),
            ];
            v.extend_from_slice(extra);
            v
        };
        s.run(
            "n8n-worker-1",
            &worker_env(&[("N8N_RUNNERS_MAX_CONCURRENCY", "2")]),
            Some("256m"),
            &["sim", "worker", "--concurrency", "10"],
            false,
        );
        s.run(
            "n8n-worker-2",
            &worker_env(&[("N8N_CONCURRENCY_PRODUCTION_LIMIT", "4")]),
            Some("256m"),
            &["sim", "worker", "--concurrency", "10"],
            false,
        );
        s.run(
            "runner-1",
            &[
                ("N8N_RUNNERS_TASK_BROKER_URI", "http://n8n-worker-1:5679"),
                ("N8N_RUNNERS_MAX_CONCURRENCY", "5"),
                ("N8N_RUNNERS_AUTH_TOKEN", SECRET_TOKEN),
            ],
            Some("768m"),
            &["sim", "runner"],
            false,
        );
        s.run(
            "runner-2",
            &[
                ("N8N_RUNNERS_TASK_BROKER_URI", "http://n8n-worker-2:5679"),
                ("N8N_RUNNERS_MAX_CONCURRENCY", "3"),
                ("N8N_RUNNERS_AUTH_TOKEN", SECRET_TOKEN),
            ],
            None,
            &["sim", "runner"],
            false,
        );
        s
    }

    pub(crate) fn image_name(&self) -> String {
        self.image.clone()
    }

    pub(crate) fn main_port(&self) -> String {
        let out = docker(&["port", &format!("{}-n8n", self.project), "5678/tcp"]);
        out.lines()
            .next()
            .and_then(|l| l.rsplit(':').next())
            .unwrap()
            .to_string()
    }
}

fn assert_no_secret(what: &str, text: &str) {
    for s in [SECRET_KEY, SECRET_DB, SECRET_TOKEN] {
        assert!(!text.contains(s), "{what} contains a secret value");
    }
}

#[test]
#[ignore = "stack tier (≈ 36 s): Docker containers"]
fn inspect_and_sweep_a_stack_of_real_containers() {
    if !docker_available() {
        return;
    }
    let stack = Stack::start();
    let port = stack.main_port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    std::thread::sleep(Duration::from_secs(2));

    // inspect: roles, settings with sources, pairing, limits — and no secret anywhere.
    let out = Command::new(bin())
        .args(["inspect", "--project", &stack.project, "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_no_secret("inspect --json", &stdout);
    assert_no_secret("inspect stderr", &stderr);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let nodes = v["topology"]["nodes"].as_array().unwrap();
    let node = |svc: &str| {
        nodes
            .iter()
            .find(|n| n["facts"]["service"] == svc)
            .unwrap_or_else(|| panic!("{svc} not found"))
    };
    assert_eq!(node("n8n")["role"], "main");
    let w1 = node("n8n-worker-1");
    assert_eq!(w1["role"], "worker");
    assert_eq!(w1["worker_concurrency"]["value"], 10);
    assert!(w1["worker_concurrency"]["source"]
        .as_str()
        .unwrap()
        .contains("--concurrency"));
    assert_eq!(w1["runner_capacity"], 5);
    assert!(w1["notes"]
        .to_string()
        .contains("no effect in external mode"));
    let w2 = node("n8n-worker-2");
    assert_eq!(w2["worker_concurrency"]["value"], 4);
    assert!(w2["worker_concurrency"]["source"]
        .as_str()
        .unwrap()
        .contains("PRODUCTION_LIMIT"));
    assert_eq!(w2["runner_capacity"], 3);
    let r1 = node("runner-1");
    assert_eq!(r1["role"], "runner");
    assert_eq!(r1["runner_limit"]["value"], 5);
    assert_eq!(r1["attached_to"], format!("{}-n8n-worker-1", stack.project));
    assert_eq!(r1["facts"]["memory_limit_bytes"], 768u64 * 1024 * 1024);
    assert!(node("runner-2")["facts"]["memory_limit_bytes"].is_null());
    assert!(w1["facts"]["env_names"]
        .to_string()
        .contains("N8N_ENCRYPTION_KEY"));
    // --wide: the note whole on one line, whatever the terminal's width folds.
    let table = Command::new(bin())
        .args(["inspect", "--project", &stack.project, "--wide"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert_no_secret("inspect table", &table);
    assert!(table.contains("no memory limit on this runner"), "{table}");

    // A memory sweep: 4 in flight, 64 MiB each, 3 s jobs. The runners' memory must rise by
    // about 4 × 64 MiB, the workers' not. The steady window (10.5 s) holds several Docker
    // readings even when the engine is slow to answer (busy starting other tests' containers,
    // a stats call can take over 3 s: a 4.5 s window once held none).
    let dir = fresh_dir("docker");
    let out = Command::new(bin())
        .args([
            "sweep",
            "--profile",
            "memory",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "4",
            "--stage-duration",
            "14s",
            "--warmup",
            "3500ms",
            "--body",
            r#"{"sleep_ms":3000,"alloc_mb":64}"#,
            "--metrics",
            &format!("main=http://127.0.0.1:{port}/metrics"),
            "--project",
            &stack.project,
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for f in ["summary.json", "stages.jsonl", "timeline.jsonl"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert_no_secret(f, &text);
    }
    assert_no_secret("sweep output", &stdout);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    // All runners together at one reading, against their readings before the load.
    let roles = summary["stages"][0]["memory_by_role"].as_array().unwrap();
    let growth = |role: &str| -> f64 {
        let r = roles.iter().find(|r| r["role"] == role).unwrap();
        (r["max_bytes"].as_f64().unwrap() - r["baseline_bytes"].as_f64().unwrap()) / 1024.0 / 1024.0
    };
    let (runner_mib, worker_mib) = (growth("runner"), growth("worker"));
    assert!(
        runner_mib > 0.8 * 4.0 * 64.0 && runner_mib < 1.25 * 4.0 * 64.0,
        "runners grew {runner_mib:.0} MiB, expected ≈ 4 × 64 = 256"
    );
    assert!(worker_mib < 20.0, "workers grew {worker_mib:.0} MiB");
    assert!(stdout.contains("memory-in-runner"), "{stdout}");
    // Per task: the runners' growth ÷ the tasks running, within 15 % of the 64 MiB allocated;
    // the proposed limit is above what any runner reached.
    let per_task = summary["diagnosis"]["runner_memory"]["per_task_mib"]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}", summary["diagnosis"]["runner_memory"]));
    assert!(within(per_task, 64.0, 0.15), "per task {per_task:.1} MiB");
    let plan = summary["memory_plan"]["memory_limit_mib"].as_f64().unwrap();
    for c in summary["stages"][0]["containers"].as_array().unwrap() {
        if c["role"] == "runner" {
            let peak = c["memory_peak_bytes"].as_f64().unwrap() / 1024.0 / 1024.0;
            assert!(
                plan > peak,
                "plan {plan} MiB ≤ {} peak {peak:.0} MiB",
                c["name"]
            );
        }
    }
    let timeline = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    assert!(timeline
        .lines()
        .any(|l| l.contains("\"kind\":\"container\"")));
    assert!(timeline.lines().any(|l| l.contains("\"kind\":\"metrics\"")));
    // The exporter publishes the runner metrics n8n has not.
    let eport = free_port();
    let _exporter = ChildGuard(
        Command::new(bin())
            .args([
                "exporter",
                "--listen",
                &format!("127.0.0.1:{eport}"),
                "--project",
                &stack.project,
                "--refresh",
                "1s",
                "--job-time",
                "1s",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let text = rt.block_on(async {
        for _ in 0..100 {
            if let Ok((200, b)) = n8ncap::wire::http::http_get(
                &format!("http://127.0.0.1:{eport}/metrics"),
                Duration::from_secs(2),
            )
            .await
            {
                let t = String::from_utf8_lossy(&b).to_string();
                let up = n8ncap::wire::prometheus::parse(&t)
                    .ok()
                    .and_then(|e| e.value("n8ncap_up"));
                if up == Some(1.0) {
                    return t;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("exporter never served n8ncap_up 1");
    });
    assert_no_secret("exporter", &text);
    let e = n8ncap::wire::prometheus::parse(&text).unwrap();
    let by = |series: &str, container: &str| {
        e.series(series)
            .find(|s| s.label("container") == Some(container))
            .map(|s| s.value)
    };
    let w1 = format!("{}-n8n-worker-1", stack.project);
    let w2 = format!("{}-n8n-worker-2", stack.project);
    assert_eq!(by("n8ncap_worker_concurrency", &w1), Some(10.0));
    assert_eq!(by("n8ncap_worker_concurrency", &w2), Some(4.0));
    assert_eq!(by("n8ncap_worker_runner_capacity", &w1), Some(5.0));
    assert_eq!(by("n8ncap_worker_effective_concurrency", &w2), Some(3.0));
    assert_eq!(by("n8ncap_theoretical_ceiling_per_second", &w1), Some(5.0));
    assert_eq!(
        e.value("n8ncap_theoretical_ceiling_total_per_second"),
        Some(8.0)
    );
    assert_eq!(
        by(
            "n8ncap_memory_limit_bytes",
            &format!("{}-runner-1", stack.project)
        ),
        Some(768.0 * 1024.0 * 1024.0)
    );
    // Docker settings reached the diagnosis.
    assert!(
        summary["diagnosis"]["settings"]["workers"]["source"]
            .as_str()
            .unwrap_or("")
            .contains("Docker"),
        "{}",
        summary["diagnosis"]["settings"]
    );
}

#[test]
fn docker_socket_absent_is_one_clear_line_and_the_sweep_runs() {
    let port = free_port();
    let _sim = ChildGuard(
        Command::new(bin())
            .args([
                "sim",
                "all",
                "--main-cpu-ms",
                "0",
                "--cpu-ms",
                "0",
                "--port",
                &port.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    let out = Command::new(bin())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "2",
            "--stage-duration",
            "1s",
            "--warmup",
            "200ms",
            "--body",
            r#"{"sleep_ms":50}"#,
            "--docker",
            "--no-out",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("Docker")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("/nonexistent/docker.sock")
            && lines[0].contains("without container data"),
        "{err}"
    );
    let out = Command::new(bin())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(["inspect"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
#[ignore = "stack tier (≈ 14 s): Docker containers"]
fn a_container_that_disappears_mid_run_is_noted_not_fatal() {
    if !docker_available() {
        return;
    }
    let mut stack = Stack {
        project: format!("n8ncapg{}", std::process::id()),
        names: Vec::new(),
        network: format!("n8ncapg{}-net", std::process::id()),
        image: format!("n8ncap-test-gone:{}", std::process::id()),
    };
    build_image(&stack.image, &["/n8ncap"]);
    docker(&["network", "create", &stack.network]);
    stack.run("n8n", &[], None, &["sim", "all", "--port", "5678"], true);
    stack.run("spare-runner", &[], None, &["sim", "runner"], false);
    let port = stack.main_port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    let dir = fresh_dir("gone");
    let child = Command::new(bin())
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "2,2,2",
            "--stage-duration",
            "3s",
            "--warmup",
            "500ms",
            "--body",
            r#"{"sleep_ms":50}"#,
            "--project",
            &stack.project,
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Removed once the first stage is written (not after a fixed time a busy host can stretch).
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    while std::fs::read_to_string(dir.join("stages.jsonl")).map_or(true, |t| t.lines().count() < 1)
    {
        assert!(std::time::Instant::now() < deadline, "no stage written");
        std::thread::sleep(Duration::from_millis(50));
    }
    docker(&["rm", "-f", &format!("{}-spare-runner", stack.project)]);
    let out = child.wait_with_output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let stages = summary["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 3);
    // Still reported after it vanished, and seen gone by the end (Docker's `destroy` can come
    // late on a busy host: a later stage than the one it vanished in).
    let reported: Vec<&serde_json::Value> = stages[1..]
        .iter()
        .map(|s| {
            s["containers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"].as_str().unwrap().ends_with("spare-runner"))
                .expect("the vanished container is still reported")
        })
        .collect();
    assert!(reported.iter().any(|c| c["gone"] == true), "{reported:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("container-gone"));
}

/// A stack whose worker's runner has a small memory limit: main (its own queue), a worker of
/// concurrency 4 whose Code tasks give up after 4 s, and that runner.
fn small_runner_stack(tag: &str, runner_mem: &str, runner_limit: &str) -> Stack {
    let pid = std::process::id();
    let mut stack = Stack {
        project: format!("n8ncap{tag}{pid}"),
        names: Vec::new(),
        network: format!("n8ncap{tag}{pid}-net"),
        image: format!("n8ncap-test-{tag}:{pid}"),
    };
    build_image(&stack.image, &["/n8ncap"]);
    docker(&["network", "create", &stack.network]);
    stack.run(
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
    stack.run(
        "n8n-worker",
        &[
            ("QUEUE_BULL_REDIS_HOST", "n8n"),
            ("N8N_RUNNERS_MODE", "external"),
            ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "0.0.0.0"),
            ("N8N_RUNNERS_TASK_REQUEST_TIMEOUT", "4"),
        ],
        None,
        &["sim", "worker", "--concurrency", "4"],
        false,
    );
    stack.run(
        "n8n-worker-runner",
        &[
            ("N8N_RUNNERS_TASK_BROKER_URI", "http://n8n-worker:5679"),
            ("N8N_RUNNERS_MAX_CONCURRENCY", runner_limit),
        ],
        Some(runner_mem),
        &["sim", "runner"],
        false,
    );
    stack
}

fn sweep_stack(stack: &Stack, dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let port = stack.main_port();
    let mut args: Vec<String> = [
        "sweep",
        "--url",
        &format!("http://127.0.0.1:{port}/webhook/load"),
        "--metrics",
        &format!("main=http://127.0.0.1:{port}/metrics"),
        "--project",
        &stack.project,
        "--out",
        dir.to_str().unwrap(),
        "--force",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    Command::new(bin()).args(&args).output().unwrap()
}

fn finding<'a>(d: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    d["findings"].as_array()?.iter().find(|f| f["id"] == id)
}

#[test]
#[ignore = "stack tier (≈ 17 s): Docker containers"]
fn a_runner_killed_at_its_memory_limit_is_the_first_thing_the_diagnosis_says() {
    if !docker_available() {
        return;
    }
    // 3 in flight × 100 MiB in a runner limited to 160 MiB: the second task kills it.
    let stack = small_runner_stack("oom", "160m", "4");
    let port = stack.main_port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    std::thread::sleep(Duration::from_secs(1));
    let dir = fresh_dir("oom");
    let out = sweep_stack(
        &stack,
        &dir,
        &[
            "--vus",
            "3",
            "--stage-duration",
            "9s",
            "--warmup",
            "1s",
            "--body",
            r#"{"sleep_ms":2000,"alloc_mb":100}"#,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runner = format!("{}-n8n-worker-runner", stack.project);
    let worker = format!("{}-n8n-worker", stack.project);
    // The timeline has the kill, with the container and its stage.
    let timeline = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    let kill = timeline
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "lifecycle" && (e["action"] == "oom" || e["oom_killed"] == true))
        .unwrap_or_else(|| panic!("no oom event in the timeline:\n{timeline}"));
    assert_eq!(kill["name"], runner.as_str());
    assert_eq!(kill["stage"], 0);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let check = |d: &serde_json::Value, plan: &serde_json::Value, what: &str| {
        let verdict = d["verdict"].as_str().unwrap();
        assert!(
            verdict.starts_with(&format!("Runner {runner} (of {worker}) was OOM-killed")),
            "{what}: {verdict}"
        );
        let f = finding(d, "runner-oom-killed").unwrap_or_else(|| panic!("{what}: {d}"));
        assert_eq!(f["severity"], "error");
        assert_eq!(f["subject"], runner.as_str());
        let fig = |n: &str| f["figures"][n].as_f64().unwrap_or(f64::NAN);
        assert!((fig("memory_limit_mib") - 160.0).abs() < 1.0, "{f}");
        assert!((fig("tasks_held") - 3.0).abs() < 1e-9, "{f}");
        assert!((fig("per_task_mib") - 100.0).abs() < 1e-9, "{f}");
        // The plan: 4 tasks × 100 MiB + base with headroom — that would hold what killed it —
        // or, at 160 MiB, one task.
        assert_eq!(plan["oom_killed"], true, "{what}: {plan}");
        assert_eq!(plan["runner"], runner.as_str());
        let limit = plan["memory_limit_mib"].as_f64().unwrap();
        assert!((500.0..560.0).contains(&limit), "{plan}");
        assert_eq!(plan["tasks_within_current_limit"], 1, "{plan}");
        // Findings of the death come first.
        assert_eq!(d["findings"][0]["id"], "runner-oom-killed", "{what}");
    };
    check(&summary["diagnosis"], &summary["memory_plan"], "sweep");
    assert!(
        stdout.contains("Runner memory (it was OOM-killed: start here)"),
        "{stdout}"
    );
    // The same run re-diagnosed from its directory.
    let again = run_json(&["diagnose", dir.to_str().unwrap(), "--json"]);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    check(&again["diagnosis"], &saved["memory_plan"], "re-diagnosed");
    let rec = Command::new(bin())
        .args(["recommend", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let rec_text = String::from_utf8_lossy(&rec.stdout).to_string();
    assert_eq!(rec.status.code(), Some(0), "{rec_text}");
    assert!(rec_text.contains("mem_limit: "), "{rec_text}");
    // The live audit: the runner's last exit was an OOM kill, and the worker has no runner.
    let audit = Command::new(bin())
        .args([
            "audit",
            "--live",
            "--project",
            &stack.project,
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(ids.contains(&"container-last-oom-killed"), "{ids:?}");
    // The dead runner is no runner: with it the stack had its only one.
    assert!(
        ids.contains(&"external-mode-without-runner") || ids.contains(&"worker-without-runner"),
        "{ids:?}"
    );
    assert_eq!(audit.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "stack tier (≈ 18 s): Docker containers"]
fn a_container_restarted_mid_run_is_named_and_invents_no_figures() {
    if !docker_available() {
        return;
    }
    let stack = small_runner_stack("rst", "512m", "4");
    let port = stack.main_port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    std::thread::sleep(Duration::from_secs(1));
    let dir = fresh_dir("rst");
    let runner = format!("{}-n8n-worker-runner", stack.project);
    let restarter = {
        let runner = runner.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(4));
            docker(&["restart", "-t", "1", &runner]);
        })
    };
    let out = sweep_stack(
        &stack,
        &dir,
        &[
            "--vus",
            "2,2",
            "--stage-duration",
            "5s",
            "--warmup",
            "1s",
            "--body",
            r#"{"sleep_ms":200}"#,
        ],
    );
    restarter.join().unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(99)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let d = &summary["diagnosis"];
    let f = finding(d, "container-restarted").unwrap_or_else(|| panic!("{d}"));
    assert_eq!(f["subject"], runner.as_str());
    assert!(finding(d, "runner-oom-killed").is_none());
    // The stage it restarted in is left out, and its CPU comes from one process only.
    let stage = f["figures"]["stage"].as_f64().unwrap() as usize - 1;
    let level = d["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["stages"].as_array().unwrap().iter().any(|s| s == stage))
        .unwrap();
    assert!(level["stack_changed"].is_string(), "{level}");
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    for s in summary["stages"].as_array().unwrap() {
        for c in s["containers"].as_array().unwrap() {
            assert!(
                c["cpu_percent_max"].as_f64().unwrap() <= 100.0 * cores * 1.25,
                "{c}"
            );
            assert!(c["memory_max_bytes"].as_f64().unwrap() >= 0.0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
