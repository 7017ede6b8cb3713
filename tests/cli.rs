//! Bad input on the command line or in the environment: a clear message naming what was wrong,
//! and exit code 2 (1 when the run cannot complete, e.g. a port in use).

use crate::common::*;

/// Every subcommand `--help` lists, in its order.
const SUBCOMMANDS: [&str; 19] = [
    "demo",
    "sweep",
    "inspect",
    "exporter",
    "grafana",
    "report",
    "audit",
    "diagnose",
    "recommend",
    "compare",
    "scale",
    "drain",
    "outage",
    "postgres-restart",
    "replay",
    "sim",
    "completions",
    "man",
    "help",
];
use std::process::Command;

#[test]
fn bad_runner_limit_names_the_variable_and_exits_2() {
    let out = Command::new(bin())
        .args(["sim", "runner"])
        .env("N8N_RUNNERS_MAX_CONCURRENCY", "abc")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("N8N_RUNNERS_MAX_CONCURRENCY"), "{err}");
}

#[test]
fn bad_production_limit_names_the_variable_and_exits_2() {
    let out = Command::new(bin())
        .args(["sim", "worker"])
        .env("N8N_CONCURRENCY_PRODUCTION_LIMIT", "lots")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("N8N_CONCURRENCY_PRODUCTION_LIMIT"));
}

#[test]
fn unknown_flag_exits_2() {
    let out = Command::new(bin())
        .args(["sim", "worker", "--concurency", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--concurency"));
    let out = Command::new(bin()).args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn port_in_use_is_a_clear_message() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(bin())
        .args(["sim", "main"])
        .env("N8N_PORT", port.to_string())
        .env("N8N_LISTEN_ADDRESS", "127.0.0.1")
        .env("QUEUE_BULL_REDIS_PORT", free_port().to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already in use") && err.contains(&port.to_string()),
        "{err}"
    );
    assert!(err.contains("N8N_PORT"), "{err}");
}

#[test]
fn help_lists_the_commands() {
    let out = Command::new(bin()).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8_lossy(&out.stdout);
    // The names in the "Commands:" list, exactly: a command that disappears (or appears
    // unannounced) fails, whatever the rest of the help text says.
    let listed: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed, SUBCOMMANDS, "{s}");
}

#[test]
fn recommend_reference_check_from_flags() {
    // Break point 120, job 24 s → worker concurrency 80; with the runner limit left at 10 the
    // ceiling stays 10 ÷ 24 s = 25/min, and the tool proposes runner capacity 80.
    let out = Command::new(bin())
        .args([
            "recommend",
            "--break-point",
            "120",
            "--job-time",
            "24s",
            "--worker-concurrency",
            "120",
            "--runner-limit",
            "10",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of_success(&out);
    assert_eq!(v["worker_concurrency"], 80);
    assert_eq!(v["runner_capacity_per_worker"], 80);
    let notes = v["notes"].to_string();
    assert!(notes.contains("25/min"), "{notes}");
    let text = Command::new(bin())
        .args(["recommend", "--break-point", "120", "--job-time", "24s"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(
        s.contains("N8N_RUNNERS_MAX_CONCURRENCY: \"80\"") && s.contains("--concurrency=80"),
        "{s}"
    );
}

#[test]
fn diagnose_and_recommend_reject_bad_input_with_exit_2() {
    let dir = fresh_dir("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("summary.json");
    std::fs::write(&bad, "{\"schema\": 3").unwrap();
    for args in [
        vec!["diagnose", bad.to_str().unwrap()],
        vec!["diagnose", "/nonexistent/results"],
        vec!["recommend"],
        vec!["recommend", "--break-point", "30"],
        vec!["recommend", "--break-point", "30", "--job-time", "never"],
        vec![
            "diagnose",
            dir.to_str().unwrap(),
            "--job-time",
            "1s",
            "--code-time",
            "2s",
        ],
    ] {
        let out = Command::new(bin()).args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stderr.is_empty());
    }
    let out = Command::new(bin())
        .args(["diagnose", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("summary.json:1:"), "{err}");
}

#[test]
fn a_saved_sweep_is_diagnosed_again_with_settings_from_flags() {
    let port = free_port();
    let _sim = ChildGuard(
        Command::new(bin())
            .args([
                "sim",
                "all",
                "--port",
                &port.to_string(),
                "--concurrency",
                "6",
                "--runner-limit",
                "3",
                "--main-cpu-ms",
                "0",
                "--cpu-ms",
                "0",
            ])
            // n8n's default refresh (20 s) is longer than these stages.
            .env("N8N_METRICS_QUEUE_METRICS_INTERVAL", "1")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_http_ok(&format!("http://127.0.0.1:{port}/healthz")));
    let dir = fresh_dir("saved");
    let out = Command::new(bin())
        .args([
            "sweep",
            "--url",
            &format!("http://127.0.0.1:{port}/webhook/load"),
            "--vus",
            "8,12",
            "--stage-duration",
            "4s",
            "--warmup",
            "1500ms",
            "--body",
            r#"{"sleep_ms":200}"#,
            "--metrics",
            &format!("http://127.0.0.1:{port}/metrics"),
            // As the simulator was started: gauges refreshed every second, so a 4 s stage can
            // trust them (at n8n's default 20 s they would be flagged and not used).
            "--queue-metrics-interval",
            "1",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    // Nothing given: worker concurrency comes from the queue gauges, the runner limit from the
    // measured ceiling.
    assert_eq!(
        summary["diagnosis"]["capping_limit"], "runner_limit",
        "{}",
        summary["diagnosis"]
    );
    assert_eq!(summary["diagnosis"]["settings"]["runner_limit"]["value"], 3);
    let out = Command::new(bin())
        .args([
            "diagnose",
            dir.to_str().unwrap(),
            "--runner-limit",
            "3",
            "--worker-concurrency",
            "6",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["diagnosis"]["capping_limit"], "runner_limit");
    assert_eq!(
        v["diagnosis"]["settings"]["runner_limit"]["source"],
        "flag --runner-limit"
    );
}

#[test]
fn completions_and_the_man_page_cover_every_command() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = std::process::Command::new(bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        for cmd in ["sweep", "audit", "inspect", "diagnose", "recommend"] {
            assert!(text.contains(cmd), "{shell} lacks {cmd}");
        }
    }
    let out = std::process::Command::new(bin())
        .arg("man")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(".ie") && text.contains(".TH n8ncap 1"),
        "{text}"
    );
    assert!(
        text.contains("n8ncap\\-audit") || text.contains("audit"),
        "{text}"
    );
    // A page for every subcommand, from the same definitions as its --help.
    for cmd in SUBCOMMANDS.iter().filter(|c| !["man", "help"].contains(c)) {
        let out = std::process::Command::new(bin())
            .args(["man", cmd])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "man {cmd}");
        let page = String::from_utf8_lossy(&out.stdout);
        assert!(page.contains(&format!(".TH n8ncap-{cmd} 1")), "{page}");
    }
    let out = std::process::Command::new(bin())
        .args(["man", "sweeep"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sweep_help_names_every_built_in_profile() {
    let out = Command::new(bin())
        .args(["sweep", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for (name, _) in n8ncap::load::profile::BUILTIN {
        assert!(help.contains(name), "{name} is not in sweep --help");
    }
}

#[test]
fn a_live_audit_of_a_project_with_no_container_is_refused_with_exit_2() {
    if !have_docker() {
        return;
    }
    let project = format!("n8ncap-no-such-project-{}", std::process::id());
    let out = Command::new(bin())
        .args(["audit", "--live", "--project", &project])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&project), "{err}");
    assert!(out.stdout.is_empty(), "no report of 0 services");
}

/// A project name typed wrong is refused naming the projects the engine has and the nearest.
#[test]
fn a_mistyped_project_names_the_nearest_project_found() {
    if !have_docker() {
        return;
    }
    let pid = std::process::id();
    let (project, tag, name) = (
        format!("n8ncapshop{pid}"),
        format!("n8ncap-test/project-typo:{pid}"),
        format!("n8ncap-typo-{pid}"),
    );
    build_image(&tag, &["/n8ncap", "--version"]);
    let docker = |args: &[&str]| Command::new("docker").args(args).output().unwrap();
    let made = docker(&[
        "create",
        "--name",
        &name,
        "--label",
        &format!("com.docker.compose.project={project}"),
        &tag,
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    // "shop" typed "shpo": two letters swapped.
    let typo = project.replace("shop", "shpo");
    let out = Command::new(bin())
        .args(["audit", "--live", "--project", &typo])
        .output()
        .unwrap();
    let _ = docker(&["rm", "-f", &name]);
    let _ = docker(&["rmi", "-f", &tag]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("did you mean `{project}`")), "{err}");
}

/// Severities are coloured on a terminal (a pseudo-terminal by `script`), never in a pipe or
/// with NO_COLOR set.
#[test]
fn severities_are_coloured_on_a_terminal_only() {
    if !have_command("script", "--version", "apt-get install bsdutils") {
        return;
    }
    let fixture = format!(
        "{}/fixtures/compose/rules/not-queue-mode.yml",
        env!("CARGO_MANIFEST_DIR")
    );
    let in_pty = |no_color: bool| {
        let mut c = Command::new("script");
        c.args([
            "-qec",
            &format!("{} audit -f {fixture}", bin()),
            "/dev/null",
        ])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).to_string()
    };
    let tty = in_pty(false);
    assert!(tty.contains("\u{1b}[1;31merror\u{1b}[0m"), "{tty:?}");
    assert!(!in_pty(true).contains('\u{1b}'));
    let piped = Command::new(bin())
        .args(["audit", "-f", &fixture])
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(!piped.stdout.contains(&0x1b));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("error"));
}
