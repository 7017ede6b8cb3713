//! A scale sweep of a compose-like project on this machine's Docker Engine, n8ncap adding and
//! removing the worker/runner pairs itself through the Docker API (`sweep --workers 1,2
//! --project P`): each count's workers take jobs, the copies' runners serve their own worker,
//! and the project is left as it was found.

use crate::common::*;
use crate::docker::{docker, Stack};
use crate::sweep_scale::{ceiling, plan_past_main_adds_webhook_processors, shared};
use std::process::Command;

const TOKEN: &str = "runner-token-scale-5d4c3b2a";

/// Main (burning `main_cpu_ms` of CPU per request on its one thread), one worker of 2 slots and
/// its runner of 2 tasks, as a compose project.
fn one_pair(tag: &str, main_cpu_ms: &str) -> Stack {
    let mut s = Stack::empty(tag);
    s.run(
        "n8n",
        &[
            ("N8N_METRICS", "true"),
            ("N8N_METRICS_INCLUDE_QUEUE_METRICS", "true"),
            ("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1"),
            ("SIM_MAIN_CPU_MS", main_cpu_ms),
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
        &format!("label={}", n8ncap::actuate::docker_scale::SCALED_LABEL),
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--format",
        "{{.Names}}",
    ]);
    out.lines().map(str::to_string).collect()
}

/// `sweep --project` of the stack at `counts` workers, `vus` in flight, 0.4 s jobs.
fn scale_sweep(
    stack: &Stack,
    port: &str,
    counts: &str,
    vus: &str,
    out: &std::path::Path,
) -> std::process::Output {
    Command::new(bin())
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            vus,
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
            counts,
            "--scale-settle",
            "2s",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap()
}

fn running(name: &str) -> bool {
    docker(&["inspect", "-f", "{{.State.Running}}", name]) == "true"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 31 s): a scale study, one at a time, Docker containers"]
async fn a_scale_sweep_through_docker_adds_pairs_that_take_jobs_and_removes_them() {
    if !have_docker() {
        return;
    }
    let _turn = crate::common::one_scale_study_at_a_time().await;
    let stack = one_pair("scale", "0");
    let port = stack.main_port();
    wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let out = fresh_dir("docker-scale").join("run");
    let sweep = |out: &std::path::Path| scale_sweep(&stack, &port, "1,2", "12", out);
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
        &format!("{}=x", n8ncap::actuate::docker_scale::SCALED_LABEL),
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

/// The same project whose main burns 80 ms of CPU per request (n8n's intake, 27 ms in the real
/// lab, made larger so two cores hold it): at most 12.5/s, under the 18/s that four pairs of 2
/// slots and 0.4 s jobs give. Scaled 1 → 2 → 4 through the Docker API, the sweep names main's
/// intake as what stops scale-out, the step to 4 workers gains well under linear, and the plan
/// for a rate past main's bound adds webhook processors, not workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 53 s): a scale study, one at a time, Docker containers"]
async fn main_s_intake_stops_a_docker_scale_sweep_and_the_plan_adds_webhook_processors() {
    if !have_docker() {
        return;
    }
    let _turn = crate::common::one_scale_study_at_a_time().await;
    let stack = one_pair("scalemain", "80");
    let port = stack.main_port();
    wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let out = fresh_dir("docker-scale-main").join("run");
    let o = scale_sweep(&stack, &port, "1,2,4", "16", &out);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["scaling"];
    let c = |n: u64| ceiling(&v, n);
    // Each count's ceiling is within what its slots hold (2 per worker ÷ 0.4 s), and the second
    // pair adds most of a worker: below main's bound the copies take their share.
    for n in [1u64, 2, 4] {
        assert!(c(n) <= n as f64 * 2.0 / 0.4 * 1.05, "{n} workers: {}", c(n));
    }
    assert!(c(2) > 1.5 * c(1), "{} → {}", c(1), c(2));
    // Main's bound is its 80 ms (read from its CPU per execution), and caps 4 workers.
    let main = shared(s, "main_intake");
    let bound = main["bound_per_s"].as_f64().unwrap();
    // Docker's CPU readings beside a CPU hog miss some of main's time (13.9/s read once for
    // 12.5): the bound within 0.8–1.2 of 80 ms's.
    assert!(
        (1000.0 / 80.0 * 0.8..=1000.0 / 80.0 * 1.2).contains(&bound),
        "main's bound {bound}"
    );
    assert!(
        c(4) <= bound * 1.1,
        "{} at 4 workers beyond main's {bound}",
        c(4)
    );
    // On a machine whose CPU other work takes (a hog beside the suite), main cannot get its
    // core: the host is named instead, and main's bound still caps.
    let top = n8ncap::record::dir::load_summary(&out.join("w4")).unwrap();
    let starved = main["reached"] != true;
    let host_taken = top
        .diagnosis
        .as_ref()
        .is_some_and(|d| d.findings.iter().any(|f| f.id == "host-shared"));
    assert!(
        !starved || host_taken,
        "main reached nothing on a quiet host: {s}"
    );
    let eff4 = s["points"][2]["efficiency"].as_f64().unwrap();
    assert_eq!(s["points"][2]["workers"], 4);
    assert!(eff4 < 0.6, "the step to 4 workers gained {eff4} of linear");
    plan_past_main_adds_webhook_processors(&out, bound);
    // The project is back at its one pair, nothing n8ncap made left.
    assert!(
        copies(&stack.project).is_empty(),
        "{:?}",
        copies(&stack.project)
    );
}
