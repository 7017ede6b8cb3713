//! Bad input on the command line or in the environment: a clear message naming what was wrong,
//! and exit code 2 (1 when the run cannot complete, e.g. a port in use).

mod common;
use common::*;
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
    for cmd in ["demo", "sweep", "sim"] {
        assert!(s.contains(cmd), "{s}");
    }
}
