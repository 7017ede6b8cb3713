//! Hostile deployments and outputs: compose files Compose would refuse, credentials in broker
//! URIs, full disks, garbage metrics pages, profiles with secrets, mixes and uploads that cannot
//! run, closed pipes and control characters from input.

use crate::common::hostile::*;
use crate::common::*;
use std::process::{Command, Stdio};

/// A clean one-worker stack (it audits without error) with `{worker}` and `{runner}` extra
/// lines spliced into the worker's and the runner's service.
fn stack(worker: &str, runner: &str) -> String {
    format!(
        r#"x-env: &env
  EXECUTIONS_MODE: queue
  QUEUE_BULL_REDIS_HOST: n8n
  N8N_ENCRYPTION_KEY: fixture-key-not-secret
  N8N_RUNNERS_MODE: external
  N8N_RUNNERS_AUTH_TOKEN: fixture-token-not-secret
  N8N_RUNNERS_BROKER_LISTEN_ADDRESS: 0.0.0.0
  N8N_METRICS: "true"
  N8N_METRICS_INCLUDE_QUEUE_METRICS: "true"
  OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS: "true"
services:
  n8n:
    image: n8nio/n8n:2.41.1
    restart: always
    environment:
      <<: *env
  n8n-worker:
    image: n8nio/n8n:2.41.1
    restart: always
    command: worker --concurrency=10
    environment:
      <<: *env
{worker}
  n8n-worker-runner:
    image: n8nio/runners:2.41.1
    mem_limit: 1g
    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_AUTH_TOKEN: fixture-token-not-secret
      N8N_RUNNERS_MAX_CONCURRENCY: "10"
{runner}
"#
    )
}

fn audit_json(file: &str) -> (Option<i32>, serde_json::Value, String) {
    let out = run(&["audit", "-f", file, "--format", "json"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, stderr(&out))
}

fn finding_ids(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["id"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn compose_files_compose_refuses_are_refused_naming_the_place() {
    let d = dir("compose");
    let clean = write(&d, "clean.yml", &stack("", ""));
    let (code, v, err) = audit_json(&clean);
    assert_eq!(code, Some(0), "{err} {v}");
    for (name, text, names) in [
        (
            "list.yml",
            "services: [a, b]\n".to_string(),
            vec!["list.yml:1", "services"],
        ),
        (
            "scalar.yml",
            "services:\n  n8n: hello\n".to_string(),
            vec!["scalar.yml:2", "n8n"],
        ),
        (
            "conc.yml",
            stack("", "").replace("--concurrency=10", "--concurrency=-5"),
            vec!["conc.yml:17", "n8n-worker", "--concurrency"],
        ),
        (
            "mem.yml",
            stack("", "").replace("mem_limit: 1g", "mem_limit: -1g"),
            vec!["mem.yml", "n8n-worker-runner", "mem_limit"],
        ),
        (
            "envfile.yml",
            stack("    env_file: missing.env", ""),
            vec!["envfile.yml:17", "n8n-worker", "missing.env"],
        ),
        (
            "replicas.yml",
            stack("    deploy: {replicas: -2}", ""),
            vec!["replicas.yml", "n8n-worker", "replicas"],
        ),
    ] {
        let f = write(&d, name, &text);
        refused(&run(&["audit", "-f", &f]), &names);
    }
    std::fs::write(d.join("bin.env"), b"A=1\0\xff\xfe").unwrap();
    let f = write(&d, "binenv.yml", &stack("    env_file: bin.env", ""));
    refused(&run(&["audit", "-f", &f]), &["bin.env", "binary"]);
    // An optional env_file may be missing, as in Compose.
    let f = write(
        &d,
        "optional.yml",
        &stack("    env_file: [{path: missing.env, required: false}]", ""),
    );
    assert_eq!(audit_json(&f).0, Some(0));
}

#[test]
fn a_runner_with_zero_replicas_is_no_runner() {
    let d = dir("zero");
    let f = write(&d, "z.yml", &stack("", "    deploy: {replicas: 0}"));
    let (code, v, err) = audit_json(&f);
    assert_eq!(code, Some(1), "{err}");
    // The stack has no runner at all now.
    assert_eq!(finding_ids(&v), vec!["external-mode-without-runner"], "{v}");
    assert_eq!(v["services"], 2);
}

#[test]
fn nested_defaults_interpolate_and_errors_quote_no_value() {
    let d = dir("interp");
    // ${C:-${D:-20}}: worker concurrency 20 over a runner limit of 10.
    let f = write(
        &d,
        "n.yml",
        &stack("", "").replace("--concurrency=10", "--concurrency=${NOPE_C:-${NOPE_D:-20}}"),
    );
    let (code, v, err) = audit_json(&f);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        finding_ids(&v).contains(&"runner-limit-below-worker-concurrency".to_string()),
        "{v}"
    );
    assert!(v.to_string().contains("20"), "{v}");
    // A required variable that is not set: its name and line, nothing else of the line.
    let f = write(
        &d,
        "r.yml",
        &stack("", "").replace(
            "N8N_ENCRYPTION_KEY: fixture-key-not-secret",
            "N8N_ENCRYPTION_KEY: planted-s3cret-${NOPE_KEY:?say it}",
        ),
    );
    let out = run(&["audit", "-f", &f]);
    refused(&out, &["r.yml:4", "NOPE_KEY"]);
    assert!(!stderr(&out).contains("planted-s3cret"), "{}", stderr(&out));
    let f = write(
        &d,
        "u.yml",
        &stack("", "").replace(
            "N8N_ENCRYPTION_KEY: fixture-key-not-secret",
            "N8N_ENCRYPTION_KEY: planted-s3cret-${NOPE_KEY",
        ),
    );
    let out = run(&["audit", "-f", &f]);
    refused(&out, &["u.yml:4"]);
    assert!(!stderr(&out).contains("planted-s3cret"), "{}", stderr(&out));
}

#[test]
fn credentials_in_broker_uris_never_reach_any_output() {
    let d = dir("creds");
    let f = write(
        &d,
        "c.yml",
        &stack("", "").replace(
            "http://n8n-worker:5679",
            "http://runner:planted-pw-77@n8n-worker:5679",
        ),
    );
    for format in ["table", "json", "sarif"] {
        let out = run(&["audit", "-f", &f, "--format", format]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!all.contains("planted-pw-77"), "{format}: {all}");
        assert!(!all.contains("panicked"), "{all}");
    }
    // The runner is still paired with its worker: the host is read past the credentials.
    let (code, v, _) = audit_json(&f);
    assert_eq!(code, Some(0), "{v}");
}

#[test]
fn a_full_disk_is_reported_at_once_and_the_last_good_summary_stays() {
    // A 96 KiB tmpfs in a private mount namespace (root only: CI runs as root here).
    let ok = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs -o size=8k tmpfs /mnt && umount /mnt",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !require(
        "a private tmpfs mount (unshare -m, root)",
        ok,
        "run the tests as root",
    ) {
        return;
    }
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("full");
    let keep = d.join("kept");
    std::fs::create_dir_all(&keep).unwrap();
    let vus = vec!["1"; 40].join(",");
    // Fill the tmpfs to leave ~12 KiB: a few stages fit, then a write fails.
    let script = format!(
        "set -u; mount -t tmpfs -o size=96k tmpfs {mnt}; \
         head -c 86000 /dev/zero > {mnt}/fill; \
         {bin} sweep --profile smoke --url {url} --vus {vus} --stage-duration 300ms --warmup 0s \
           --out {mnt}/out > {keep}/stdout 2> {keep}/stderr; echo $? > {keep}/rc; \
         ls -a {mnt}/out > {keep}/listing; cp {mnt}/out/summary.json {keep}/ 2>/dev/null; true",
        mnt = d.join("m").display(),
        bin = bin(),
        keep = keep.display(),
    );
    std::fs::create_dir_all(d.join("m")).unwrap();
    let st = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(st.success());
    let rc = std::fs::read_to_string(keep.join("rc")).unwrap();
    let err = std::fs::read_to_string(keep.join("stderr")).unwrap();
    assert_eq!(rc.trim(), "1", "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("/out/"), "the path is named: {err}");
    let listing = std::fs::read_to_string(keep.join("listing")).unwrap();
    assert!(!listing.contains(".tmp"), "{listing}");
    // The last summary that was written whole is still there, and valid.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(keep.join("summary.json")).unwrap())
            .expect("the last good summary.json");
    let n = s["stages"].as_array().unwrap().len();
    assert!((1..40).contains(&n), "{n} stages");
}

#[test]
fn a_garbage_metrics_page_is_a_short_gap_not_a_copy_of_itself() {
    let garbage = format!("{}\n", "z{".repeat(1 << 20));
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        garbage.len()
    )
    .into_bytes();
    answer.extend_from_slice(garbage.as_bytes());
    let metrics = canned_server(answer, false).replace("/webhook/load", "/metrics");
    let url = canned_server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".to_vec(),
        false,
    );
    let d = dir("garbage").join("out");
    let out = run(&[
        "sweep",
        "--profile",
        "smoke",
        "--url",
        &url,
        "--vus",
        "1",
        "--stage-duration",
        "2s",
        "--warmup",
        "0s",
        "--metrics",
        &format!("main={metrics}"),
        "--scrape-interval",
        "200ms",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let timeline = std::fs::read_to_string(d.join("timeline.jsonl")).unwrap();
    let gaps: Vec<&str> = timeline.lines().filter(|l| l.contains("\"gap\"")).collect();
    assert!(gaps.len() >= 3, "{} gaps", gaps.len());
    assert!(gaps.iter().all(|l| l.len() < 1000), "{}", gaps[0].len());
    let summary = std::fs::read_to_string(d.join("summary.json")).unwrap();
    assert!(summary.len() < 200_000, "{} bytes", summary.len());
}

#[test]
fn profile_errors_quote_no_secret_and_no_library_wording() {
    let d = dir("profsecret");
    for text in [
        "model: closed\nrequest:\n  headers:\n    Authorization: \"Bearer planted-tok-1\"\n    Authorization: \"Bearer planted-tok-2\"\nstages: [{vus: 1}]\n",
        "model: closed\nrequest:\n  headers: {Authorization: \"Bearer planted-tok-1\"}\n  timeout: [planted-tok-2]\nstages: [{vus: 1}]\n",
        "model: closed\nrequest: {headers: {X-Key: planted-tok-1}}\nstages: [{vus: \"planted-tok-2\"}]\n",
    ] {
        let p = write(&d, "p.yaml", text);
        let out = run(&["sweep", "--profile", &p, "--no-out"]);
        refused(&out, &["p.yaml:"]);
        let err = stderr(&out);
        assert!(!err.contains("planted-tok"), "{err}");
        assert!(!err.contains("DuplicateKeyPolicy"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_custom_runner_image_is_a_runner_by_its_variables() {
    let d = dir("customrunner");
    for image in [
        "ghcr.io/acme/n8n-runners-custom:2.41.1",
        "evalsim/runners:local",
    ] {
        let f = write(
            &d,
            "c.yml",
            &stack("", "").replace("image: n8nio/runners:2.41.1", &format!("image: {image}")),
        );
        let (code, v, err) = audit_json(&f);
        // Only the tag comparison can differ (a custom image's tag is its own business).
        let ids = finding_ids(&v);
        assert!(
            ids.iter().all(|i| i == "runner-image-mismatch"),
            "{image}: {ids:?} {err}"
        );
        assert_eq!(code, Some(0), "{image}: {err}");
        let out = run(&["inspect", "-f", &f, "--json"]);
        let t: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let runner = t["topology"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["facts"]["name"] == "n8n-worker-runner")
            .unwrap()
            .clone();
        assert_eq!(runner["role"], "runner");
        assert_eq!(runner["role_by"], "N8N_RUNNERS_TASK_BROKER_URI is set");
        assert_eq!(runner["attached_to"], "n8n-worker");
    }
}

#[test]
fn no_output_contains_an_unfilled_placeholder() {
    // Fast 500s, garbage, a refused port and a slow timeout: every finding's text is filled in.
    let fast_500 = canned_server(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        false,
    );
    let garbage = canned_server(b"garbage\r\n\r\n".to_vec(), true);
    let refused = format!("http://127.0.0.1:{}/x", free_port());
    for url in [fast_500.as_str(), garbage.as_str(), refused.as_str()] {
        let out = run(&[
            "sweep",
            "--no-preflight",
            "--profile",
            "smoke",
            "--url",
            url,
            "--vus",
            "1,2",
            "--stage-duration",
            "1s",
            "--warmup",
            "0s",
            "--timeout",
            "1s",
            "--no-out",
        ]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("Diagnosis"), "{text}");
        assert!(!text.contains("{}"), "{url}: {text}");
    }
}

#[test]
fn mixes_uploads_and_ramps_that_cannot_run_are_refused_naming_the_field() {
    let d = dir("mixes");
    let sc = |s: &str| {
        format!(
            "model: closed\nrequest: {{url: 'http://127.0.0.1:1'}}\nstages: [{{vus: 1}}]\nscenarios:\n{s}"
        )
    };
    let cases: Vec<(String, &[&str])> = vec![
        (sc("- {name: a, weight: 0, request: {url: /x}}\n"), &["scenarios[0].weight"]),
        (sc("- {name: a, weight: .nan, request: {url: /x}}\n"), &["scenarios[0].weight"]),
        (
            sc("- {name: a, request: {url: /x}}\n- {name: a, request: {url: /y}}\n"),
            &["scenarios[1]", "used twice"],
        ),
        (sc("- {name: '', request: {url: /x}}\n"), &["scenarios[0].name"]),
        (
            sc("- {name: a, request: {url: /x, body: {}, files: [{size: 1kB}]}}\n"),
            &["scenarios[0].request", "one of body"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{size: 10XB}]}}\n"),
            &["files[0].size", "unit"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{size: 5GB}]}}\n"),
            &["files[0].size", "MiB"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{path: /no/such/file}]}}\n"),
            &["files[0]", "/no/such/file"],
        ),
        (
            sc("- {name: a, request: {url: /x, files: [{path: /dev/zero}]}}\n"),
            &["/dev/zero", "not a regular file"],
        ),
        (
            sc("- {name: a, request: {url: /x, fields: {k: v}}}\n"),
            &["fields", "files"],
        ),
        (
            sc("- {name: a, job_time: 1s, code_time: 2s, request: {url: /x}}\n"),
            &["code_time", "job_time"],
        ),
        (sc("- {name: a, request: {url: /x, colour: red}}\n"), &[":5:", "unknown field"]),
        (
            sc("- {name: a, request: {url: /x, timeout: 0s}}\n"),
            &["scenarios[0].request.timeout", "more than 0"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1', body: {a: 1}}\nstages: [{vus: 1}]\n\
             scenarios: [{name: a, request: {url: /x}}]\n"
                .to_string(),
            &["request.body", "scenarios"],
        ),
        (
            format!(
                "model: closed\nrequest: {{url: 'http://127.0.0.1:1'}}\nstages: [{{vus: 1}}]\nscenarios:\n{}",
                (0..17)
                    .map(|i| format!("- {{name: s{i}, request: {{url: /x}}}}\n"))
                    .collect::<String>()
            ),
            &["17 scenarios", "at most 16"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3}]\n".into(),
            &["stage 1", "duration"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3, duration: 1s}, {vus: 2}]\n"
                .into(),
            &["stage 2", "target"],
        ),
        (
            "model: closed\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 99999999, duration: 1s}]\n"
                .into(),
            &["target", "at most"],
        ),
        (
            "model: open\nrequest: {url: 'http://127.0.0.1:1/x'}\nstages: [{target: 3, duration: 1s}]\n".into(),
            &["target", "closed model"],
        ),
    ];
    for (text, names) in &cases {
        let p = write(&d, "p.yaml", text);
        refused(&run(&["sweep", "--profile", &p, "--no-out"]), names);
    }
    // --body cannot say which scenario it is for.
    refused(
        &run(&["sweep", "--profile", "mix", "--body", "{}", "--no-out"]),
        &["--body", "2 scenarios"],
    );
}

/// A reader that closes the pipe (`| head -1`) ends the command quietly: no panic, exit 0,
/// for every command that prints.
#[test]
fn a_closed_pipe_ends_quietly() {
    for args in [
        vec!["grafana"],
        vec!["man"],
        vec![
            "audit",
            "-f",
            "fixtures/compose/n8n-hosting/withPostgresAndWorker/docker-compose.yml",
        ],
        vec![
            "diagnose",
            "--k6-summary",
            "fixtures/n8n-real/rc20_wc15_cpu.k6-summary.json",
            "--worker-concurrency",
            "15",
        ],
    ] {
        // The reading end is closed before the command starts: its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(bin())
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// Names and values from a file are shown with their control characters escaped: an escape
/// sequence in a service name or an image clears no screen and forges no table line.
#[test]
fn control_characters_from_input_never_reach_the_terminal() {
    let d = dir("control");
    let f = write(
        &d,
        "docker-compose.yml",
        "services:\n  \"worker\\e[2J\\rFAKE: all clean\":\n    image: \"n8nio/n8n\\e]0;pwned\\a\"\n    command: worker\n    environment:\n      EXECUTIONS_MODE: queue\n",
    );
    for args in [
        vec!["audit", "-f", f.as_str()],
        vec!["inspect", "-f", f.as_str()],
    ] {
        let out = run(&args);
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(text.contains("worker"), "{args:?}: {text}");
        let bad: Vec<char> = text
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(bad.is_empty(), "{args:?} printed {bad:?}: {text}");
        assert!(
            text.contains("\\u{1b}"),
            "{args:?}: the escape is shown: {text}"
        );
    }
}
