//! Settings written the way users write them, read the way n8n reads them: numbers through
//! JavaScript's `Number()` ("0", "-5", "0x1E", "1e309"), booleans as `true`/`1` in any case.
//! A 0 s shutdown window against 20 s jobs is a finding, not n8n's 30 s default.

use crate::common::root;
use n8ncap::audit;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn written(name: &str, text: &str) -> PathBuf {
    let d = crate::common::scratch().join(format!("n8ncap-settings-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn findings(file: &Path, opts: audit::Options) -> Vec<n8ncap::findings::Finding> {
    let (services, _) = n8ncap::topology::load_files(&[file.to_path_buf()])
        .unwrap_or_else(|e| panic!("{}: {}", file.display(), e.0));
    audit::audit_for(
        services.into_iter().map(|s| s.facts).collect(),
        &Default::default(),
        "t".into(),
        &opts,
    )
    .findings
    .into_iter()
    .map(|f| f.finding)
    .collect()
}

fn twenty_second_jobs() -> audit::Options {
    audit::Options {
        measured: Some(n8ncap::model::OperatingPoint {
            from: "a run".into(),
            job_p99_s: 20.0,
            code_p99_s: Some(20.0),
            worker_lag_max_s: None,
            per_worker: None,
            useful_workers: None,
            ceiling_per_s: None,
        }),
        ..Default::default()
    }
}

#[test]
fn the_shutdown_window_is_read_with_javascripts_number() {
    let fixture = std::fs::read_to_string(
        root().join("fixtures/compose/time-budget/shutdown-window-below-job-time.yml"),
    )
    .unwrap();
    assert!(fixture.contains(r#"N8N_GRACEFUL_SHUTDOWN_TIMEOUT: "10""#));
    // (written, the window n8n waits, or None where the 20 s jobs fit)
    for (value, window) in [
        ("0", Some(0.0)),
        ("-5", Some(0.0)),
        ("10", Some(10.0)),
        ("0xA", Some(10.0)),
        ("1e1", Some(10.0)),
        ("0x1E", None),
        ("1e309", None),
        ("Infinity", None),
        // Not a number to JavaScript: n8n keeps its 30 s default.
        ("30s", None),
    ] {
        let text = fixture.replace(
            r#"N8N_GRACEFUL_SHUTDOWN_TIMEOUT: "10""#,
            &format!("N8N_GRACEFUL_SHUTDOWN_TIMEOUT: {value:?}"),
        );
        let f = findings(&written("shutdown.yml", &text), twenty_second_jobs());
        let got = f
            .iter()
            .find(|f| f.id == n8ncap::findings::FindingId::ShutdownWindowBelowJobTime)
            .map(|f| f.figures["shutdown_window_s"]);
        assert_eq!(got, window, "{value}: {f:?}");
    }
}

#[test]
fn offloading_manual_executions_is_read_as_n8n_reads_a_boolean() {
    let fixture = std::fs::read_to_string(
        root().join("fixtures/compose/upgrade-3.0/upgrade-manual-executions-on-workers.yml"),
    )
    .unwrap();
    let upgrade = || audit::Options {
        upgrade: Some(n8ncap::model::Upgrade::V3),
        ..Default::default()
    };
    let ids = |text: &str| -> BTreeSet<String> {
        findings(&written("offload.yml", text), upgrade())
            .iter()
            .map(|f| f.id.to_string())
            .collect()
    };
    let rule = "upgrade-manual-executions-on-workers";
    assert!(ids(&fixture).contains(rule));
    // The variable set in the environment every n8n process shares (main's among them).
    let anchor = "EXECUTIONS_MODE: queue\n";
    assert!(fixture.contains(anchor));
    for (value, fires) in [
        ("true", false),
        ("TRUE", false),
        ("True", false),
        ("1", false),
        ("false", true),
        ("yes", true),
    ] {
        let text = fixture.replacen(
            anchor,
            &format!("{anchor}  OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS: {value:?}\n"),
            1,
        );
        assert_eq!(ids(&text).contains(rule), fires, "{value}");
    }
}

/// A setting left unset takes the default of the version the image runs: n8n 3.x stops a Code
/// task after 60 s (2.x after 300 s), so 100 s of Code fails there and not on 2.41.
#[test]
fn an_unset_task_timeout_is_the_default_of_the_version_the_image_runs() {
    let clean = std::fs::read_to_string(root().join("examples/compose/minimal-clean.yml")).unwrap();
    assert!(clean.contains("N8N_VERSION:-2.41.1"));
    let hundred_seconds = || audit::Options {
        measured: Some(n8ncap::model::OperatingPoint {
            from: "a run".into(),
            job_p99_s: 100.0,
            code_p99_s: Some(100.0),
            worker_lag_max_s: None,
            per_worker: None,
            useful_workers: None,
            ceiling_per_s: None,
        }),
        ..Default::default()
    };
    let timeout_of = |text: &str| {
        findings(&written("version.yml", text), hundred_seconds())
            .into_iter()
            .find(|f| f.id == n8ncap::findings::FindingId::TaskTimeoutBelowCodeTime)
            .map(|f| f.figures["task_timeout_s"])
    };
    assert_eq!(timeout_of(&clean), None, "2.41: 300 s covers 100 s of Code");
    let v3 = clean.replace("N8N_VERSION:-2.41.1", "N8N_VERSION:-3.0.1");
    assert_eq!(timeout_of(&v3), Some(60.0));
}
