//! The README's walkthrough, end to end on the Docker Engine here, command by command as the
//! README's block writes them (only the compose project, the host port, the results directory
//! and the binary's path are replaced): build the simulator's images without a registry, bring
//! the queue-mode stack up with a real Redis (docker-compose), then `inspect`, `audit --live`,
//! `sweep --project`, `diagnose`, `report.html` and `docker-compose down` — and the verdict is
//! the runner limit the stack was built with.

use crate::common::*;
use std::path::PathBuf;
use std::process::Command;

struct Down {
    project: String,
    files: [PathBuf; 2],
    tag: String,
}

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new("docker-compose")
            .args(["-p", &self.project, "-f"])
            .arg(&self.files[0])
            .arg("-f")
            .arg(&self.files[1])
            .args(["down", "-t", "1"])
            .output();
        for image in ["n8n", "runners", "redis", "postgres"] {
            let _ = Command::new("docker")
                .args(["rmi", "-f", &format!("n8ncap-sim/{image}:{}", self.tag)])
                .output();
        }
    }
}

use crate::docs::{walkthrough as readme_walkthrough, words};

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The signals Docker sent to the project's containers since `since` (its `kill` events).
fn kill_signals(project: &str, since: u64) -> Vec<String> {
    let out = Command::new("docker")
        .args(["events", "--since", &since.to_string(), "--until"])
        .arg((unix_now() + 1).to_string())
        .args(["--filter", "event=kill", "--filter"])
        .arg(format!("label=com.docker.compose.project={project}"))
        .args(["--format", "{{.Actor.Attributes.signal}}"])
        .output()
        .expect("docker events runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The stack's database password (postgres.yml, build.sh): no command may print it.
const DB_PASSWORD: &str = "simulated-stack-not-a-secret";

#[test]
#[ignore = "stack tier (≈ 5 min): a compose project with Redis and PostgreSQL, a sweep, a drain and an outage"]
fn the_readme_walkthrough_runs_as_written() {
    if !have_docker()
        || !have_command(
            "docker-compose",
            "version",
            "apt-get install docker-compose",
        )
        || !have_command("redis-server", "--version", "apt-get install redis-server")
        || !require(
            "PostgreSQL",
            std::path::Path::new("/usr/lib/postgresql").exists(),
            "apt-get install postgresql",
        )
    {
        return;
    }
    let id = std::process::id();
    let tag = format!("e2e{id}");
    let project = format!("n8ncap-e2e{id}");
    let here = root().join("examples/compose/simulated");
    let files = [here.join("docker-compose.yml"), here.join("postgres.yml")];
    let _down = Down {
        project: project.clone(),
        files: files.clone(),
        tag: tag.clone(),
    };
    let (port, pg_port) = (free_port(), free_port());
    let dir = crate::common::scratch().join(format!("n8ncap-e2e-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    let compose = |args: &[&str]| {
        Command::new("docker-compose")
            .args(["-p", &project, "-f"])
            .arg(&files[0])
            .arg("-f")
            .arg(&files[1])
            .args(args)
            .env("N8N_HOST_PORT", port.to_string())
            .env("PG_HOST_PORT", pg_port.to_string())
            .env("N8N_IMAGE", format!("n8ncap-sim/n8n:{tag}"))
            .env("RUNNERS_IMAGE", format!("n8ncap-sim/runners:{tag}"))
            .env("REDIS_IMAGE", format!("n8ncap-sim/redis:{tag}"))
            .env("POSTGRES_IMAGE", format!("n8ncap-sim/postgres:{tag}"))
            .output()
            .unwrap()
    };
    let commands = readme_walkthrough();
    assert!(commands.len() >= 13, "{commands:?}");
    let mut outputs: Vec<(String, std::process::Output)> = Vec::new();
    let mut exported: Vec<(String, String)> = Vec::new();
    let mut down_signals = None;
    for line in &commands {
        let w = words(
            &line
                .replace("--project simulated", &format!("--project {project}"))
                .replace("127.0.0.1:5678", &format!("127.0.0.1:{port}"))
                .replace("127.0.0.1:5432", &format!("127.0.0.1:{pg_port}"))
                .replace("results/sim", dir.to_str().unwrap()),
        );
        let w: Vec<&str> = w.iter().map(String::as_str).collect();
        let up = ["-f", "docker-compose.yml", "-f", "postgres.yml", "up", "-d"];
        let down = ["-f", "docker-compose.yml", "-f", "postgres.yml", "down"];
        let out = match w.as_slice() {
            ["bash", script] if script.ends_with("build.sh") => Command::new("bash")
                .arg(root().join(script))
                .arg(bin())
                .env("TAG", &tag)
                .output()
                .unwrap(),
            ["cd", "examples/compose/simulated", "&&", "docker-compose", rest @ .., "&&", "cd", "-"]
                if rest == up =>
            {
                let out = compose(&["up", "-d"]);
                let rt = tokio::runtime::Runtime::new().unwrap();
                rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
                out
            }
            ["cd", "examples/compose/simulated", "&&", "docker-compose", rest @ .., "&&", "cd", "-"]
                if rest == down =>
            {
                let since = unix_now();
                let out = compose(&["down"]);
                down_signals = Some(kill_signals(&project, since));
                out
            }
            ["export", assignment] => {
                let (k, v) = assignment.split_once('=').expect("export NAME=VALUE");
                exported.push((k.to_string(), v.to_string()));
                continue;
            }
            ["n8ncap", args @ ..] => {
                let (args, into) = match args.iter().position(|a| *a == ">") {
                    Some(i) => (&args[..i], Some(args[i + 1])),
                    None => (args, None),
                };
                let out = Command::new(bin())
                    .args(args)
                    .envs(exported.iter().map(|(k, v)| (k, v)))
                    .output()
                    .unwrap();
                if let Some(file) = into {
                    std::fs::write(file, &out.stdout).unwrap();
                }
                out
            }
            ["xdg-open", page] => {
                assert!(std::path::Path::new(page).exists(), "{page}");
                continue;
            }
            other => {
                panic!("the README's walkthrough has a command this test cannot run: {other:?}")
            }
        };
        let code = out.status.code();
        // audit exits 1 on an error-level finding; a sweep 99 when a threshold fails.
        assert!(
            matches!(code, Some(0) | Some(1) | Some(99)),
            "{line}: {code:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The DSN's password never reaches a terminal.
        for text in [&out.stdout, &out.stderr] {
            assert!(
                !String::from_utf8_lossy(text).contains(DB_PASSWORD),
                "{line} printed the database's password"
            );
        }
        outputs.push((line.clone(), out));
    }
    assert!(!exported.is_empty(), "the walkthrough exports the DSN");
    walked(&outputs, down_signals, &dir);
}

/// What the walkthrough's commands said and saved, held to what the stack is: a runner limit of
/// 5 for 1 s Code, Postgres' 100 connections, a killed worker's jobs failed by Bull's stalled
/// check after its 60 s lock, a 5 s Redis outage under n8n's 10 s threshold.
fn walked(
    outputs: &[(String, std::process::Output)],
    down_signals: Option<Vec<String>>,
    dir: &std::path::Path,
) {
    let out_of = |what: &str| {
        outputs
            .iter()
            .find(|(l, _)| l.starts_with(what))
            .map(|(_, o)| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_else(|| panic!("the walkthrough runs no {what}"))
    };
    assert!(out_of("n8ncap inspect").contains("runner"));
    assert!(out_of("n8ncap audit --live").contains("runner-limit-below-worker-concurrency"));
    // The simulator stops on SIGTERM, as n8n does: `docker-compose down` does not wait out
    // Docker's stop grace and kill it. Docker's own events say which signals the stop sent (a
    // SIGKILL, 9, only when a container outlived the grace), whatever a busy machine adds to
    // how long the stop took.
    let signals = down_signals.expect("the walkthrough ends with docker-compose down");
    assert!(
        !signals.is_empty(),
        "docker recorded no kill event for the stop"
    );
    assert!(
        signals.iter().all(|s| s != "9"),
        "signals sent by docker-compose down: {signals:?} (a SIGKILL: SIGTERM was ignored)"
    );
    // The saved directory, judged again as JSON: the runner limit caps, ≈ 5 tasks ÷ 1 s, and the
    // slots taken at 8 in flight come from n8n's own gauges (the runner limit invisible there).
    let d = run_json(&["diagnose", dir.to_str().unwrap(), "--json"]);
    assert_eq!(
        d["diagnosis"]["capping_limit"], "runner_limit",
        "{}",
        d["diagnosis"]["verdict"]
    );
    let x = d["diagnosis"]["measured_ceiling"]["mean"].as_f64().unwrap();
    assert!((4.0..=5.2).contains(&x), "ceiling {x}");
    let level8 = d["diagnosis"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["level"]["in_flight"] == 8)
        .unwrap();
    // n8n's gauges count slots taken, not runner tasks: at least the tasks running (X × the
    // 1 s Code time, Little's law at the runner) — the runner limit is invisible there. Held to
    // what this run measured: on a busy host main's intake holds more of the 8 outside any
    // slot (CI read 5.33 slots at 4.9/s).
    let slots = level8["slots_taken"].as_f64().unwrap_or(0.0);
    assert!(slots >= 0.95 * x * 1.0, "slots taken {slots} at {x}/s");
    assert!(dir.join("report.html").exists());
    postgres_read(dir);
    let rules = std::fs::read_to_string(dir.join("rules.yml")).unwrap();
    // The rules' connection budget is Postgres' own: 100 less its 3 reserved, read live.
    let usable: f64 = rules
        .lines()
        .find_map(|l| l.split("Postgres connections usable: ").nth(1))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no Postgres budget in the rules:\n{rules}"));
    assert_eq!(usable, 97.0);
    drained(dir);
    outage(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// The sweep read Postgres through the exported DSN: its 100 connections and 3 reserved, the
/// pools open, no refusal.
fn postgres_read(dir: &std::path::Path) {
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let pg: Vec<&serde_json::Value> = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| &st["database"]["postgres"])
        .collect();
    assert!(
        pg.iter().all(|p| p["samples"].as_u64() >= Some(1)),
        "{pg:?}"
    );
    for p in &pg {
        assert_eq!(p["max_connections"], 100, "{p}");
        assert_eq!(p["reserved"], 3, "{p}");
        assert_eq!(p["refused"], 0, "{p}");
        // n8ncap's own connection and at least one of main's and the worker's pools.
        assert!(p["open_max"].as_u64() >= Some(2), "{p}");
    }
}

/// The worker killed through the Docker API: the requests in flight at the kill fail, but for
/// an answer already on its way in the moment the kill took to land (a busy host: 1 of 4), none
/// before Bull's 60 s lock lapsed (the stalled check answers them), as predicted for a kill.
fn drained(dir: &std::path::Path) {
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("drain.json")).unwrap()).unwrap();
    assert_eq!(d["stop"]["signal"], "KILL", "{d}");
    let f = &d["in_flight"];
    let lost = crate::drain::lost(&d);
    assert!(lost >= 1, "{d}");
    assert_eq!(
        lost + f["finished"].as_u64().unwrap(),
        f["total"].as_u64().unwrap(),
        "{d}"
    );
    assert_eq!(f["unanswered"], 0, "{d}");
    assert!(f["last_failure_after_s"].as_f64() >= Some(60.0), "{d}");
    assert_eq!(d["predicted"]["lost"], d["predicted"]["held"], "{d}");
    assert_eq!(d["advice"]["kind"], "avoid_kill", "{d}");
}

/// Redis stopped for 5 s, under n8n's 10 s: no process exited, nothing lost, as predicted.
fn outage(dir: &std::path::Path) {
    let o: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outage.json")).unwrap()).unwrap();
    let processes = o["processes"].as_array().unwrap();
    assert!(processes.len() >= 2, "{o}");
    assert!(processes.iter().all(|p| p["exited"] == false), "{o}");
    assert_eq!(o["in_flight"]["unanswered"], 0, "{o}");
    assert_eq!(o["after_lost"], 0, "{o}");
    assert_eq!(o["predicted_lost"].as_f64(), Some(0.0), "{o}");
}

#[test]
fn the_walkthrough_block_is_read_as_the_shell_would() {
    let c = readme_walkthrough();
    assert!(c
        .iter()
        .any(|l| l.starts_with("n8ncap sweep") && l.contains("--out results/sim")));
    assert_eq!(
        words(r#"n8ncap sweep --body '{"sleep_ms":1000}' --vus 2,8"#),
        [
            "n8ncap",
            "sweep",
            "--body",
            r#"{"sleep_ms":1000}"#,
            "--vus",
            "2,8"
        ]
    );
}
