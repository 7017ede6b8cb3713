//! `n8ncap audit`: one small compose file per rule triggers exactly that rule, the example
//! stacks audit clean, the official n8n-hosting files parse with defensible findings, SARIF
//! validates, no secret value reaches any output, and the live audit finds the same problems
//! on the same stacks started as containers.

use crate::common::*;
use n8ncap::audit;
use n8ncap::findings::FindingId;
use n8ncap::topology::compose;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn rule_ids(files: &[PathBuf]) -> BTreeSet<String> {
    rule_ids_with(files, audit::Options::default())
}

fn rule_ids_with(files: &[PathBuf], opts: audit::Options) -> BTreeSet<String> {
    // Compose files or Kubernetes manifests, as `audit -f` reads them.
    let (services, _) =
        n8ncap::topology::load_files(files).unwrap_or_else(|e| panic!("{files:?}: {}", e.0));
    let r = audit::audit_for(
        services.into_iter().map(|s| s.facts).collect(),
        &Default::default(),
        "t".into(),
        &opts,
    );
    r.findings
        .into_iter()
        .map(|f| f.finding.id.to_string())
        .collect()
}

/// Each fixture of `dir` fires exactly its rule with `opts`, and nothing without them; their
/// rules' ids.
fn fire_only_with(dir: &str, opts: impl Fn() -> audit::Options) -> Vec<String> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(root().join(dir)).unwrap() {
        let path = e.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let with = rule_ids_with(std::slice::from_ref(&path), opts());
        assert_eq!(with, BTreeSet::from([stem.clone()]), "{}", path.display());
        let without = rule_ids(std::slice::from_ref(&path));
        assert!(without.is_empty(), "{}: {without:?}", path.display());
        ids.push(stem);
    }
    assert!(!ids.is_empty(), "no fixture in {dir}");
    ids
}

#[test]
fn each_rule_fixture_triggers_exactly_its_rule() {
    let dir = root().join("fixtures/compose/rules");
    let mut seen = BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let ids = rule_ids(std::slice::from_ref(&path));
        assert_eq!(ids, BTreeSet::from([stem.clone()]), "{}", path.display());
        seen.insert(stem);
    }
    // `--upgrade 3.0`'s rules: each fixture fires its rule with the upgrade asked, and nothing
    // without it (what n8n 3.0 changes is not a fault of the deployment running 2.x).
    let upgrade = || audit::Options {
        upgrade: Some(n8ncap::model::Upgrade::V3),
        ..Default::default()
    };
    seen.extend(fire_only_with("fixtures/compose/upgrade-3.0", upgrade));
    // The time budget's rules, against a run that measured 20 s jobs (all Code) and 1 s of
    // event-loop lag on the worker; the clean stack passes the same budget.
    let measured = || audit::Options {
        upgrade: None,
        measured: Some(n8ncap::model::OperatingPoint {
            from: "a run".into(),
            job_p99_s: 20.0,
            code_p99_s: Some(20.0),
            worker_lag_max_s: Some(1.0),
            // 5 jobs held per worker at 2/3 (0.5/s × 15 s), the shared bound at 20 workers.
            per_worker: Some((0.5, 15.0)),
            useful_workers: Some((20, "main's intake bounds the deployment at 10/s".into())),
            ceiling_per_s: None,
        }),
        ..Default::default()
    };
    let clean = root().join("examples/compose/minimal-clean.yml");
    assert!(rule_ids_with(&[clean], measured()).is_empty());
    seen.extend(fire_only_with("fixtures/compose/time-budget", measured));
    // The autoscaler's scale-down against the job time: a manifest (its autoscaler's
    // worker-scaling is there with or without a run).
    let scaled = root().join("fixtures/k8s/time-budget/scale-down-before-jobs-finish.yaml");
    assert_eq!(
        rule_ids_with(std::slice::from_ref(&scaled), measured()),
        BTreeSet::from([
            "scale-down-before-jobs-finish".to_string(),
            "worker-scaling".to_string()
        ])
    );
    assert_eq!(
        rule_ids(std::slice::from_ref(&scaled)),
        BTreeSet::from(["worker-scaling".to_string()])
    );
    seen.insert("scale-down-before-jobs-finish".to_string());
    // The autoscaler against the measured capacity: the same manifest, scale-down held 60 s,
    // with a target of 50 jobs per replica (10 × the 5 held at 2/3), or a maximum of 25
    // replicas (past the 20 the shared bound allows).
    for rule in [
        "autoscaler-target-far",
        "autoscaler-max-beyond-shared-bound",
    ] {
        let f = root().join(format!("fixtures/k8s/time-budget/{rule}.yaml"));
        assert_eq!(
            rule_ids_with(std::slice::from_ref(&f), measured()),
            BTreeSet::from([rule.to_string(), "worker-scaling".to_string()]),
            "{rule}"
        );
        assert_eq!(
            rule_ids(std::slice::from_ref(&f)),
            BTreeSet::from(["worker-scaling".to_string()])
        );
        seen.insert(rule.to_string());
    }
    // An alerting setup already deployed, against a run that measured 10/s with 1 s jobs: two
    // of its four alerts are far (5000 waiting jobs; 50/s above the ceiling), and nothing is
    // said without the run.
    let f = root().join("fixtures/prometheus/rules/alert-threshold-far.yaml");
    let alerts =
        n8ncap::topology::alert_rules::read("fixture", &std::fs::read_to_string(&f).unwrap())
            .unwrap();
    assert_eq!(alerts.len(), 4);
    let judged = |run: bool| {
        audit::audit_for(
            Vec::new(),
            &Default::default(),
            "t".into(),
            &audit::Options {
                measured: run.then(|| n8ncap::model::OperatingPoint {
                    from: "a run".into(),
                    job_p99_s: 1.0,
                    code_p99_s: None,
                    worker_lag_max_s: None,
                    per_worker: None,
                    useful_workers: None,
                    ceiling_per_s: Some(10.0),
                }),
                alerts: alerts.clone(),
                ..Default::default()
            },
        )
        .findings
    };
    let named = judged(true);
    let subjects: Vec<_> = named
        .iter()
        .map(|f| (f.finding.id.to_string(), f.finding.subject.clone()))
        .collect();
    assert_eq!(
        subjects,
        vec![
            (
                "alert-threshold-far".to_string(),
                Some("N8nBacklogHuge".to_string())
            ),
            (
                "alert-threshold-far".to_string(),
                Some("N8nThroughputHigh".to_string())
            ),
        ]
    );
    assert_eq!(named[0].finding.get("wait_budget_jobs"), Some(290.0));
    assert!(judged(false).is_empty());
    seen.insert("alert-threshold-far".to_string());
    // Rules only a Kubernetes manifest can break have their fixture there (tests/k8s.rs).
    for e in std::fs::read_dir(root().join("fixtures/k8s/rules")).unwrap() {
        let path = e.unwrap().path();
        seen.insert(path.file_stem().unwrap().to_string_lossy().to_string());
    }
    // Rules of a live container's state (OOM kills, restarts) have theirs in tests/docker.rs.
    let all: BTreeSet<String> = FindingId::audit_rules()
        .filter(|r| !r.live_only())
        .map(|r| r.as_str().to_string())
        .collect();
    assert_eq!(seen, all, "one fixture per rule");
}

#[test]
fn example_stacks_audit_clean() {
    assert!(rule_ids(&[root().join("examples/compose/minimal-clean.yml")]).is_empty());
    let out = Command::new(bin())
        .args([
            "audit",
            "-f",
            "examples/compose/queue-mode/docker-compose.yml",
        ])
        .current_dir(root())
        .env("POSTGRES_PASSWORD", "x")
        .env("ENCRYPTION_KEY", "y")
        .env("RUNNERS_AUTH_TOKEN", "z")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no findings"));
}

#[test]
fn official_n8n_hosting_files_parse_and_findings_are_the_expected_ones() {
    let base = root().join("fixtures/compose/n8n-hosting");
    let ids = rule_ids(&[base.join("withPostgresAndWorker/docker-compose.yml")]);
    // No memory limits on the two runners, no metrics on main and worker, and n8n's default
    // database pool (2) under the worker's 10 slots with the ping at its default: nothing else.
    assert_eq!(
        ids,
        BTreeSet::from([
            "runner-without-memory-limit".to_string(),
            "metrics-off".to_string(),
            "db-pool-below-concurrency".to_string(),
            "db-ping-timeout-default".to_string(),
        ])
    );
    let p = compose::load(&[base.join("withPostgresAndWorker/docker-compose.yml")]).unwrap();
    let names: Vec<&str> = p.services.iter().map(|s| s.facts.name.as_str()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let worker = p
        .services
        .iter()
        .find(|s| s.facts.name == "n8n-worker")
        .unwrap();
    assert_eq!(
        worker.facts.env.get("EXECUTIONS_MODE").map(String::as_str),
        Some("queue")
    );
    assert!(!worker.facts.image.contains("${"), "{}", worker.facts.image);
    // Without a worker, n8n's own default: regular mode, recognised as such.
    let ids = rule_ids(&[base.join("withPostgres/docker-compose.yml")]);
    assert_eq!(
        ids,
        BTreeSet::from([
            "runner-without-memory-limit".to_string(),
            "metrics-off".to_string(),
            "regular-mode".to_string(),
            "db-ping-timeout-default".to_string(),
        ])
    );
}

fn tmp(tag: &str) -> PathBuf {
    let d = crate::common::scratch().join(format!("n8ncap-audit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn merge_extends_env_file_and_interpolation_follow_compose() {
    let d = tmp("merge");
    std::fs::write(d.join(".env"), "CONC=7\nVERSION=2.41.1\n").unwrap();
    std::fs::write(
        d.join("worker.env"),
        "N8N_RUNNERS_MODE=external\nN8N_METRICS=true\nSOME_SECRET=s3cr3t-from-env-file\n",
    )
    .unwrap();
    std::fs::write(
        d.join("base.yml"),
        r#"
services:
  base-n8n:
    image: n8nio/n8n:${VERSION}
    restart: unless-stopped
    environment:
      - EXECUTIONS_MODE=queue
      - N8N_METRICS=true
      - N8N_METRICS_INCLUDE_QUEUE_METRICS=true
      - N8N_RUNNERS_MODE=external
      - N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0
      - OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS=true
  n8n:
    extends: base-n8n
  n8n-worker:
    extends: {service: base-n8n}
    command: ["worker", "--concurrency=${CONC:-3}"]
    env_file: worker.env
  runner:
    image: n8nio/runners:${VERSION}
    mem_limit: 512m
    environment:
      N8N_RUNNERS_TASK_BROKER_URI: http://n8n-worker:5679
      N8N_RUNNERS_MAX_CONCURRENCY: 7
"#,
    )
    .unwrap();
    std::fs::write(
        d.join("override.yml"),
        r#"
services:
  n8n-worker:
    environment:
      N8N_METRICS: "false"
  runner:
    deploy:
      resources:
        limits:
          memory: 768M
"#,
    )
    .unwrap();
    let p = compose::load(&[d.join("base.yml")]).unwrap();
    let w = p
        .services
        .iter()
        .find(|s| s.facts.name == "n8n-worker")
        .unwrap();
    assert_eq!(w.facts.command, vec!["worker", "--concurrency=7"]);
    assert_eq!(w.facts.image, "n8nio/n8n:2.41.1");
    assert!(w.facts.env_names.contains(&"SOME_SECRET".to_string()));
    assert!(!format!("{:?}", w.facts).contains("s3cr3t-from-env-file"));
    assert!(
        rule_ids(&[d.join("base.yml")]).is_empty(),
        "{:?}",
        rule_ids(&[d.join("base.yml")])
    );
    // The override turns the worker's metrics off and moves the runner's limit to deploy.
    let files = [d.join("base.yml"), d.join("override.yml")];
    assert_eq!(
        rule_ids(&files),
        BTreeSet::from(["metrics-off".to_string()])
    );
    let p = compose::load(&files).unwrap();
    let r = p
        .services
        .iter()
        .find(|s| s.facts.name == "runner")
        .unwrap();
    assert_eq!(r.facts.memory_limit_bytes, Some(768 * 1024 * 1024));
}

#[test]
fn outputs_exit_codes_and_no_secret_values() {
    let d = tmp("secrets");
    let (key, pass, token) = (
        "k3y-value-never-shown",
        "pa55-value-never-shown",
        "t0ken-value-never-shown",
    );
    std::fs::write(d.join(".env"), format!("KEY={key}\nTOKEN={token}\n")).unwrap();
    std::fs::write(
        d.join("docker-compose.yml"),
        format!(
            r#"
services:
  n8n:
    image: n8nio/n8n:2.41.1
    environment:
      EXECUTIONS_MODE: queue
      N8N_ENCRYPTION_KEY: ${{KEY}}
      DB_POSTGRESDB_PASSWORD: {pass}
      N8N_RUNNERS_MODE: external
      N8N_RUNNERS_AUTH_TOKEN: ${{TOKEN}}
  n8n-worker:
    image: n8nio/n8n:2.41.1
    command: worker
    environment:
      EXECUTIONS_MODE: queue
      N8N_ENCRYPTION_KEY: other-{key}
      DB_POSTGRESDB_PASSWORD: {pass}
      N8N_RUNNERS_MODE: external
"#
        ),
    )
    .unwrap();
    for fmt in ["table", "json", "sarif"] {
        let out = Command::new(bin())
            .args([
                "audit",
                "-f",
                d.join("docker-compose.yml").to_str().unwrap(),
                "--format",
                fmt,
            ])
            .output()
            .unwrap();
        // external mode with no runner and the key mismatch are errors: exit 1.
        assert_eq!(out.status.code(), Some(1), "{fmt}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for s in [key, pass, token] {
            assert!(!all.contains(s), "{fmt} output shows a secret value");
        }
        assert!(
            all.contains("encryption-key-mismatch") && all.contains("external-mode-without-runner"),
            "{all}"
        );
    }
    // Warnings only: exit 0.
    let out = Command::new(bin())
        .args([
            "audit",
            "-f",
            root()
                .join("fixtures/compose/rules/metrics-off.yml")
                .to_str()
                .unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn unreadable_input_exits_2_with_file_line_and_column() {
    let d = tmp("bad");
    let f = d.join("broken.yml");
    std::fs::write(
        &f,
        "services:\n  n8n:\n    image: x\n   environment: [\n      SECRET: hunter2-never-shown\n",
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["audit", "-f", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.yml:4:4"), "{err}");
    assert!(
        !err.contains("hunter2"),
        "the parser's snippet must not be printed: {err}"
    );
    let out = Command::new(bin())
        .args(["audit", "-f", "/nonexistent.yml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("compose file or manifest /nonexistent.yml"),
        "{err}"
    );
    // A typo in a top-level key is refused as Compose refuses it, naming the key it resembles
    // (it used to audit as 0 services, no findings, exit 0).
    let typo = d.join("typo.yml");
    std::fs::write(
        &typo,
        "x-common: {}\nservice:\n  n8n:\n    image: n8nio/n8n\n",
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["audit", "-f", typo.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("typo.yml:2"), "{err}");
    assert!(
        err.contains("`service:`") && err.contains("`services:`"),
        "{err}"
    );
    let out = Command::new(bin()).args(["audit"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sarif_validates_against_the_schema() {
    let have = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output();
    if !require(
        "python3 with jsonschema",
        have.map(|o| o.status.success()).unwrap_or(false),
        "pip install jsonschema; .ci/run does",
    ) {
        return;
    }
    let d = tmp("sarif");
    for fixture in [
        "worker-without-runner",
        "db-connections-exhausted",
        "runner-image-mismatch",
    ] {
        let out = Command::new(bin())
            .args([
                "audit",
                "-f",
                root()
                    .join(format!("fixtures/compose/rules/{fixture}.yml"))
                    .to_str()
                    .unwrap(),
                "--format",
                "sarif",
            ])
            .output()
            .unwrap();
        let path = d.join(format!("{fixture}.sarif"));
        std::fs::write(&path, &out.stdout).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let result = &v["runs"][0]["results"][0];
        assert_eq!(result["ruleId"], fixture);
        assert!(
            result["locations"][0]["physicalLocation"]["region"]["startLine"]
                .as_u64()
                .unwrap()
                > 1
        );
        let check = Command::new("python3")
            .args([
                "-c",
                "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))",
                path.to_str().unwrap(),
                root().join("fixtures/sarif-2.1.0-subset.schema.json").to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI")
}

struct Cleanup(Vec<String>, Vec<String>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for (proj, file) in self.0.iter().zip(self.1.iter()) {
            let _ = Command::new("docker-compose")
                .args(["-p", proj, "-f", file, "down", "-t", "1"])
                .output();
        }
    }
}

#[test]
#[ignore = "stack tier (≈ 30 s): a compose project"]
fn live_audit_finds_the_same_problems_on_running_containers() {
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
    let repo = format!("n8ncap-live{id}");
    let version = "live";
    build_image(
        &format!("{repo}/n8nio/n8n:{version}"),
        &["/n8ncap", "sim", "n8n"],
    );
    build_image(
        &format!("{repo}/n8nio/runners:{version}"),
        &["/n8ncap", "sim", "runner"],
    );
    let fixtures = [
        "worker-without-runner",
        "runner-limit-below-worker-concurrency",
        "runner-without-memory-limit",
        "production-limit-overrides-concurrency",
        "encryption-key-mismatch",
        "runner-limit-on-wrong-container",
        "memory-limit-on-worker-not-runner",
        "regular-mode",
        "binary-data-filesystem-in-queue-mode",
    ];
    let mut cleanup = Cleanup(Vec::new(), Vec::new());
    for fx in fixtures {
        let file = root().join(format!("fixtures/compose/rules/{fx}.yml"));
        let proj = format!("n8ncaplive{id}{}", fx.replace('-', ""));
        cleanup.0.push(proj.clone());
        cleanup.1.push(file.display().to_string());
        let up = Command::new("docker-compose")
            .args([
                "--compatibility",
                "-p",
                &proj,
                "-f",
                file.to_str().unwrap(),
                "up",
                "-d",
            ])
            .env("N8N_IMAGE", format!("{repo}/n8nio/n8n"))
            .env("RUNNERS_IMAGE", format!("{repo}/n8nio/runners"))
            .env("N8N_VERSION", version)
            // The simulator standing in for n8n defaults to queue mode; n8n to regular.
            .env(
                "EXECUTIONS_MODE",
                if fx == "regular-mode" { "regular" } else { "" },
            )
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "{fx}: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let out = Command::new(bin())
            .args(["audit", "--live", "--project", &proj, "--format", "json"])
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "{fx}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let live: BTreeSet<String> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            live,
            BTreeSet::from([fx.to_string()]),
            "{fx}: live audit found {live:?}"
        );
        let _ = Command::new("docker-compose")
            .args(["-p", &proj, "-f", file.to_str().unwrap(), "down", "-t", "1"])
            .output();
    }
    for t in ["n8n", "runners"] {
        let _ = docker(&["rmi", "-f", &format!("{repo}/n8nio/{t}:{version}")]);
    }
}

/// `audit --run`: the time budget from a saved run's own figures. The demo's jobs take about
/// half a second; a runner that stops Code after 0.3 s fails them, one that allows the default
/// 300 s does not, and without a run the audit says what it could not check.
#[test]
#[ignore = "stack tier (≈ 32 s): a simulated stack under load"]
fn the_time_budget_is_checked_against_a_saved_run() {
    let dir = scratch().join(format!("n8ncap-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let demo = Command::new(bin())
        .args(["demo", "--json"])
        .output()
        .unwrap();
    assert_eq!(demo.status.code(), Some(0));
    let run = dir.join("summary.json");
    std::fs::write(&run, &demo.stdout).unwrap();
    let clean = root().join("examples/compose/minimal-clean.yml");
    let short = stack_with_task_timeout(&dir, "0.3");
    let audit = |file: &std::path::Path, with_run: bool| {
        audit_json(file, with_run.then_some(run.as_path()))
    };
    let v = audit(&short, true);
    let f = finding_of(&v, "task-timeout-below-code-time");
    assert_eq!(f["figures"]["task_timeout_s"], 0.3);
    let code = f["figures"]["code_p99_s"].as_f64().unwrap();
    assert!(code > 0.5 && code < 5.0, "{code}");
    assert!(v["unchecked"].is_null(), "{v}");
    let ok = audit(&clean, true);
    assert!(ok["findings"].as_array().unwrap().is_empty(), "{ok}");
    let without = audit(&clean, false);
    assert_eq!(
        without["unchecked"].as_array().unwrap().len(),
        1,
        "{without}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PgBouncer in front of Postgres (n8n's `DB_POSTGRESDB_HOST` names it) takes n8n's pools
/// as its clients and holds only its own pool on Postgres: the budget is judged by its limits,
/// read from its variables (bitnami's `PGBOUNCER_*` or edoburu's), never by Σ pools against
/// `max_connections`; its password never reaches the output.
#[test]
fn a_pgbouncer_in_front_is_judged_by_its_own_limits() {
    let dir = root().join("fixtures/compose/pgbouncer");
    let audit_of = |name: &str| {
        let file = dir.join(format!("{name}.yml"));
        let out = Command::new(bin())
            .args(["audit", "--json", "-f"])
            .arg(&file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(!text.contains("fixture-password-not-secret"), "{text}");
        (
            rule_ids(&[file]),
            audit_json(&dir.join(format!("{name}.yml")), None),
        )
    };
    // Transaction mode, 100 clients, a pool of 5: the same 20 connections that exhaust
    // max_connections=10 directly (rules/db-connections-exhausted.yml) are served.
    let (ids, _) = audit_of("transaction-in-front");
    assert!(ids.is_empty(), "{ids:?}");
    // Session mode (bitnami's default): only the pool's 5 of the 20 get a server connection.
    let (ids, v) = audit_of("session-default");
    assert_eq!(
        ids,
        BTreeSet::from(["db-connections-exhausted".to_string()])
    );
    let f = finding_of(&v, "db-connections-exhausted");
    assert_eq!(f["subject"], "pgbouncer");
    assert_eq!(f["figures"]["connections_needed"], 20.0);
    assert_eq!(f["figures"]["connections_available"], 5.0);
    // PgBouncer's own pool (5 + a reserve of 5) against the 7 Postgres leaves.
    let (ids, v) = audit_of("pool-over-postgres");
    assert_eq!(
        ids,
        BTreeSet::from(["db-connections-exhausted".to_string()])
    );
    let f = finding_of(&v, "db-connections-exhausted");
    assert_eq!(f["subject"], "postgres");
    assert_eq!(f["figures"]["connections_needed"], 10.0);
    assert_eq!(f["figures"]["connections_available"], 7.0);
}

/// `audit --rules FILE --run DIR` from the command line: the deployed alerts judged against the
/// run (examples/runs/after: 28.9/s, so 5000 waiting jobs is minutes of wait and 50/s is past
/// the ceiling); without a run the rules are refused (exit 2), as is a file with no rule group.
#[test]
fn audit_names_deployed_alerts_far_from_the_measured_capacity() {
    let rules = "fixtures/prometheus/rules/alert-threshold-far.yaml";
    let run = |args: &[&str]| {
        Command::new(bin())
            .current_dir(root())
            .args(["audit", "--format", "json"])
            .args(args)
            .output()
            .unwrap()
    };
    let v = json_of_success(&run(&["--rules", rules, "--run", "examples/runs/after"]));
    let far: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "alert-threshold-far")
        .collect();
    assert_eq!(far.len(), 2, "{v}");
    let ceiling = far[0]["figures"]["ceiling_per_s"].as_f64().unwrap();
    assert!((28.0..30.0).contains(&ceiling), "{ceiling}");
    assert_eq!(run(&["--rules", rules]).status.code(), Some(2));
    let not_rules = run(&[
        "--rules",
        "examples/compose/minimal-clean.yml",
        "--run",
        "examples/runs/after",
    ]);
    assert_eq!(not_rules.status.code(), Some(2));
}
