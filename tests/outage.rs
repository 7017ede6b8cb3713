//! `n8ncap outage` on the simulator's compose stack (the project's images, a real Redis,
//! docker-compose), as a real n8n 2.41.1 lived through a Redis outage: its processes retry a
//! lost Redis every second and exit once it was gone past `QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`
//! (scaled here to 3 s for n8n's 10 s); the webhooks in flight get no answer; only a restart
//! policy brings n8n back. Without restart policies a short outage (1 s) costs nothing and a
//! long one (6 s) ends main and the worker for good; with `restart: always` answers come back.

use crate::common::compose::SimStacks;
use crate::common::*;
use std::process::Command;

/// Redis, main, a worker and its runner; `restart` on every service when given.
fn compose_file(tag: &str, port: u16, restart: Option<&str>) -> String {
    let r = restart.map_or(String::new(), |r| format!("    restart: {r}\n"));
    format!(
        r#"x-n8n-env: &n8n-env
  EXECUTIONS_MODE: queue
  QUEUE_BULL_REDIS_HOST: redis
  QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD: "3000"
  N8N_RUNNERS_MODE: external
  N8N_RUNNERS_AUTH_TOKEN: outage-not-a-secret
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0
  N8N_METRICS: "true"
  SIM_MAIN_CPU_MS: "0"
  SIM_WORKER_CPU_MS: "0"
  SIM_RUNNER_CPU_MS: "0"
services:
  redis:
    image: n8ncap-sim/redis:{tag}
{r}  n8n:
    image: n8ncap-sim/n8n:{tag}
{r}    depends_on: [redis]
    ports:
      - "127.0.0.1:{port}:5678"
    environment:
      <<: *n8n-env
  n8n-worker:
    image: n8ncap-sim/n8n:{tag}
{r}    command: worker --concurrency=5
    depends_on: [redis]
    environment:
      <<: *n8n-env
  n8n-worker-runner:
    image: n8ncap-sim/runners:{tag}
{r}    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_AUTH_TOKEN: outage-not-a-secret
      N8N_RUNNERS_MAX_CONCURRENCY: "5"
"#
    )
}

async fn up(stacks: &mut SimStacks, project: &str, file: &std::path::Path, port: u16) {
    stacks.up(project, file);
    wait_answering(port).await;
}

/// Until the webhook answers 200 (main and the worker on Redis, the runner attached).
async fn wait_answering(port: u16) {
    let url = format!("http://127.0.0.1:{port}/webhook/load");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let ok = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-m",
                "5",
                "-X",
                "POST",
            ])
            .args([
                "-H",
                "content-type: application/json",
                "-d",
                r#"{"sleep_ms":10}"#,
            ])
            .arg(&url)
            .output()
            .map(|o| o.stdout == b"200")
            .unwrap_or(false);
        if ok {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never answered 200"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// 2 s jobs at 2/s: about 4 in flight on 5 slots, so none waits for a slot and a request's
/// answer after a short outage comes within the stop, the outage, Redis' start, the
/// reconnection and its job — under 20 s on a busy host.
fn outage(project: &str, port: u16, outage: &str, duration: &str) -> serde_json::Value {
    let o = Command::new(bin())
        .args([
            "outage",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
        ])
        .args(["--rate", "2", "--body", r#"{"sleep_ms":2000}"#])
        .args([
            "--duration",
            duration,
            "--stop-after",
            "4s",
            "--outage",
            outage,
        ])
        .args(["--timeout", "20s", "--project", project, "--json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn processes(o: &serde_json::Value) -> Vec<&serde_json::Value> {
    o["processes"].as_array().unwrap().iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stack tier (≈ 91 s): a compose project, a real Redis"]
async fn an_outage_past_the_threshold_ends_n8n_unless_something_restarts_it() {
    if !have_docker()
        || !have_command(
            "docker-compose",
            "version",
            "apt-get install docker-compose",
        )
        || !have_command("redis-server", "--version", "apt-get install redis-server")
        || !have_command("curl", "--version", "apt-get install curl")
    {
        return;
    }
    let id = std::process::id();
    let tag = format!("otg{id}");
    let dir = scratch().join(format!("n8ncap-outage-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (bare, kept) = (format!("n8ncap-otg{id}"), format!("n8ncap-otgr{id}"));
    let (bare_file, kept_file) = (dir.join("bare.yml"), dir.join("kept.yml"));
    let (bare_port, kept_port) = (free_port(), free_port());
    std::fs::write(&bare_file, compose_file(&tag, bare_port, None)).unwrap();
    std::fs::write(&kept_file, compose_file(&tag, kept_port, Some("always"))).unwrap();
    let mut stacks = SimStacks::build(&tag);

    // No restart policy, 1 s of outage: n8n outlives it, nothing in flight is lost.
    up(&mut stacks, &bare, &bare_file, bare_port).await;
    let o = outage(&bare, bare_port, "1s", "12s");
    assert_eq!(o["threshold_s"]["value"], 3.0, "{o}");
    assert_eq!(o["predicted_exit"], false, "{o}");
    assert_eq!(processes(&o).len(), 2, "{o}");
    assert!(
        processes(&o)
            .iter()
            .all(|p| p["exited"] == false && p["running"] == true),
        "{o}"
    );
    assert_eq!(o["in_flight"]["unanswered"], 0, "{o}");
    assert_eq!(o["in_flight"]["finished"], o["in_flight"]["total"], "{o}");
    assert!(o["first_ok_after_start_s"].as_f64().is_some(), "{o}");

    // No restart policy, 6 s of outage: main and the worker exit with n8n's words and stay
    // down; what was in flight gets no answer, and nothing is answered after Redis is back.
    let o = outage(&bare, bare_port, "6s", "16s");
    assert_eq!(o["predicted_exit"], true, "{o}");
    for p in processes(&o) {
        assert_eq!(p["exited"], true, "{o}");
        assert_eq!(p["running"], false, "{o}");
        assert_eq!(p["exit_code"], 1, "{o}");
        assert_eq!(
            p["redis_line"], "Exiting process due to Redis connection error",
            "{o}"
        );
    }
    let f = &o["in_flight"];
    assert_eq!(f["finished"], 0, "{o}");
    assert_eq!(o["predicted_lost"], f["total"], "{o}");
    assert_eq!(o["after_ok"], 0, "{o}");
    assert!(o["first_ok_after_start_s"].is_null(), "{o}");
    assert!(o["recovered_after_start_s"].is_null(), "{o}");
    // Redis itself was started again.
    assert!(o["stop"]["started_s"].as_f64().is_some(), "{o}");

    // A sweep that loses its target: Redis stopped during its second stage; main and the worker
    // exit with n8n's words, and the diagnosis puts that first, keeping the first stage.
    up(&mut stacks, &bare, &bare_file, bare_port).await;
    let stopper = {
        let bare = bare.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(9));
            let _ = Command::new("docker")
                .args(["stop", "-t", "1", &format!("{bare}_redis_1")])
                .output();
        })
    };
    let out = dir.join("sweep");
    let s = Command::new(bin())
        .args(["sweep", "--project", &bare, "--url"])
        .arg(format!("http://127.0.0.1:{bare_port}/webhook/load"))
        .args([
            "--body",
            r#"{"sleep_ms":300}"#,
            "--vus",
            "2,4",
            "--stage-duration",
            "8s",
        ])
        .args(["--warmup", "1s", "--timeout", "6s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    stopper.join().unwrap();
    let d = Command::new(bin())
        .args(["diagnose", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&s.stderr),
            String::from_utf8_lossy(&d.stderr)
        )
    });
    let findings = v["diagnosis"]["findings"].as_array().unwrap();
    assert_eq!(findings[0]["id"], "redis-connection-lost", "{v}");
    assert!(
        findings.iter().any(|f| f["subject"]
            .as_str()
            .is_some_and(|s| s.contains("n8n-worker"))
            && f["id"] == "redis-connection-lost"),
        "{v}"
    );
    // The first stage, before the outage, kept its measurement.
    assert_eq!(v["stages"][0]["valid"], true, "{v}");

    // restart: always, 6 s of outage: the processes exit and are started again; answers come
    // back once Redis is.
    up(&mut stacks, &kept, &kept_file, kept_port).await;
    let o = outage(&kept, kept_port, "6s", "24s");
    for p in processes(&o) {
        assert_eq!(p["exited"], true, "{o}");
        assert_eq!(p["running"], true, "{o}");
        assert!(p["restarts"].as_u64().unwrap() >= 1, "{o}");
    }
    assert_eq!(o["in_flight"]["finished"], 0, "{o}");
    assert!(o["after_ok"].as_u64().unwrap() >= 1, "{o}");
    assert!(o["first_ok_after_start_s"].as_f64().is_some(), "{o}");
}

/// A `--start-cmd` that hangs: a first Ctrl-C says Redis is still being started and keeps
/// waiting (it is never cut short); a second exits at once with 130 and says what it leaves —
/// the start command named, Redis maybe down (it exited silently). The target is any HTTP
/// server: the step, not n8n, is what is tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_start_command_is_said_at_each_ctrl_c() {
    use std::io::BufRead;
    let port = free_port();
    let _server = ChildGuard(
        std::process::Command::new("python3")
            .args(["-c", &format!(
                "import http.server as h\n\
                 class A(h.BaseHTTPRequestHandler):\n\
                 \tdef do_POST(s):\n\
                 \t\ts.rfile.read(int(s.headers.get('Content-Length') or 0))\n\
                 \t\ts.send_response(200); s.send_header('Content-Length','2'); s.end_headers(); s.wfile.write(b'{{}}')\n\
                 \tdo_GET = do_POST\n\
                 \tdef log_message(s, *a): pass\n\
                 h.ThreadingHTTPServer(('127.0.0.1', {port}), A).serve_forever()"
            )])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_http_ok(&format!("http://127.0.0.1:{port}/")).await;
    let marker = format!("sleep 3{}", port % 10);
    let mut child = std::process::Command::new(bin())
        .args(["outage", "--url", &format!("http://127.0.0.1:{port}/")])
        .args([
            "--rate",
            "2",
            "--duration",
            "8s",
            "--stop-after",
            "1s",
            "--outage",
            "1s",
        ])
        .args(["--stop-cmd", "true", "--start-cmd", &marker])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let mut wait_for = |what: &str, said: &mut Vec<String>| {
        for l in lines.by_ref() {
            let l = l.unwrap();
            said.push(l.clone());
            if l.contains(what) {
                return;
            }
        }
        panic!("{what:?} never said: {said:#?}");
    };
    wait_for("starting Redis again", &mut said);
    // SAFETY: kill(2) with the pid of the child this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    wait_for("still starting Redis again", &mut said);
    unsafe { libc::kill(pid, libc::SIGINT) };
    wait_for("Redis may still be down", &mut said);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{said:#?}");
    assert!(said.last().unwrap().contains(&marker), "{said:#?}");
    let _ = std::process::Command::new("pkill")
        .args(["-f", &marker])
        .status();
}
