//! The whole host's CPU placed on the processes that spent it (/proc), on this machine: a
//! simulated n8n of main and two worker processes that cost CPU per execution as n8n's do (a
//! worker 50 ms, measured on n8n 2.41.1), swept with only main's metrics given. The workers'
//! CPU is the work's — found through their connection to main's queue, not because they were
//! given — and the host's bound follows from all of it.

use crate::common::*;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 12 s): a simulated stack under load"]
async fn the_host_s_cpu_is_placed_on_the_workers_no_one_named() {
    let (http, queue) = (free_port(), free_port());
    let _main = spawn_sim_main(http, queue);
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(spawn_role(
            &["sim", "worker", "--concurrency", "10"],
            &[
                ("QUEUE_BULL_REDIS_HOST", "127.0.0.1".to_string()),
                ("QUEUE_BULL_REDIS_PORT", queue.to_string()),
                ("QUEUE_HEALTH_CHECK_PORT", free_port().to_string()),
                ("N8N_WORKER_SERVER_ADDRESS", "127.0.0.1".into()),
                ("N8N_RUNNERS_BROKER_PORT", free_port().to_string()),
                ("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "127.0.0.1".into()),
                ("SIM_WORKER_CPU_MS", "50".into()),
            ],
        ));
    }
    let metrics = format!("http://127.0.0.1:{http}/metrics");
    wait_http_ok(&metrics).await;
    // Both workers took a job before the load (each job goes to a free slot).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let dir = fresh_dir("host-cpu");
    let o = Command::new(bin())
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{http}/webhook/load"),
            "--vus",
            "1,16",
            "--warmup",
            "1s",
            "--stage-duration",
            "5s",
            "--body",
            r#"{"sleep_ms":0}"#,
            "--metrics",
            &format!("main={metrics}"),
            "--out",
            dir.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let saved = n8ncap::record::dir::load_summary(&dir).unwrap();
    let busy = saved.stages.last().unwrap();
    let g = |name: &str| busy.host_processes.iter().find(|g| g.group == name);
    let w = g("n8n worker").unwrap_or_else(|| panic!("{:?}", busy.host_processes));
    assert!(w.stack && w.processes == 2, "{w:?}");
    // 50 ms of CPU per execution on the workers: their cores follow from the throughput.
    let x = busy.throughput_rps;
    assert!(
        within(w.cores, 0.050 * x, 0.35),
        "{} cores at {x}/s: {:?}",
        w.cores,
        busy.host_processes
    );
    assert!(g("n8ncap (the load)").is_some_and(|l| l.stack));
    assert!(g("n8n main").is_some_and(|m| m.stack));
    let d = &v["diagnosis"];
    let host = d["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["site"] == "host")
        .unwrap_or_else(|| panic!("{d}"));
    // The host's CPU is at least what the workers, main and the load used.
    let placed: f64 = busy
        .host_processes
        .iter()
        .filter(|g| g.stack)
        .map(|g| g.cores)
        .sum();
    assert!(
        host["cores_used"].as_f64().unwrap() >= 0.95 * w.cores,
        "{host}"
    );
    let shared = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "host-shared");
    match shared {
        // A quiet machine: the host is the work's, and its bound is near what it held.
        None => {
            assert!(placed > 1.5, "{:?}", busy.host_processes);
            let bound = host["bound_per_s"].as_f64().unwrap();
            let ceiling = d["measured_ceiling"]["mean"].as_f64().unwrap();
            assert!(within(bound, ceiling, 0.30), "{bound} vs {ceiling}: {d}");
            assert_eq!(d["capping_limit"], "cpu", "{}", d["verdict"]);
        }
        // Beside other work (a CPU hog): it is named by program, never as n8n's.
        Some(f) => {
            let other = f["figures"]["other_cores"].as_f64().unwrap();
            assert!(other > 0.25, "{f}");
            assert!(
                f["evidence"]
                    .to_string()
                    .contains("outside the work, by /proc"),
                "{f}"
            );
            assert!(!f["evidence"].to_string().contains("n8n worker 0"), "{f}");
        }
    }
    drop(workers);
}
