//! `audit --postgres-env` against servers that are not a healthy Postgres: one that accepts and
//! stalls, one that answers garbage, one that says AuthenticationOk and goes silent; DSNs that
//! would leak (a raw `@` in the password) or ask for TLS. Each ends in an error that names the
//! server (never the password), after one connection: the deadline is seen as a count of
//! attempts, not as seconds.

use crate::common::*;
use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A TCP server on a free loopback port that counts connections and, on each, reads the
/// client's first message and then does `then` with the stream.
fn fake(then: fn(&mut std::net::TcpStream)) -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                then(&mut s);
                // Hold the connection open and silent until the client leaves.
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    (port, seen)
}

fn audit(dsn: &str) -> Output {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/compose/rules/db-connections-exhausted.yml");
    Command::new(bin())
        .args(["audit", "--json", "-f"])
        .arg(&fixture)
        .args(["--postgres-env", "N8NCAP_TEST_DSN"])
        .env("N8NCAP_TEST_DSN", dsn)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Refused with exit 2, the server named by host and port, no password, no panic.
fn refused_naming(out: &Output, port: u16, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains(what), "{what:?} not in {err}");
    assert!(!err.contains("s3cr3t"), "{err}");
    err
}

fn dsn(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=n8n dbname=n8n password=s3cr3t connect_timeout=1")
}

#[test]
fn a_postgres_that_accepts_and_stalls_is_named_after_one_attempt() {
    let (port, seen) = fake(|_| {});
    let out = audit(&dsn(port));
    refused_naming(&out, port, "no answer within");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "one connection, no retry storm"
    );
}

#[test]
fn a_postgres_that_says_authentication_ok_and_goes_silent_is_named() {
    // 'R', length 8, code 0: AuthenticationOk; then nothing (no ReadyForQuery).
    let (port, seen) = fake(|s| {
        let _ = s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]);
    });
    let out = audit(&dsn(port));
    refused_naming(&out, port, "no answer within");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn a_server_answering_garbage_is_refused_at_once() {
    let (port, seen) = fake(|s| {
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        let _ = s.shutdown(std::net::Shutdown::Both);
    });
    let out = audit(&dsn(port));
    let err = refused_naming(&out, port, "cannot connect");
    assert!(!err.contains("no answer within"), "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn a_raw_at_in_a_url_password_is_refused_without_showing_it() {
    let (port, seen) = fake(|_| {});
    let out = audit(&format!("postgres://app:abc@SECRET@127.0.0.1:{port}/n8n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("SECRET") && !err.contains("abc"), "{err}");
    assert!(err.contains("%40"), "{err}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "refused before any connection"
    );
}

/// TLS is spoken now (sslmode as libpq has it): a server that refuses the SSLRequest ('N') is
/// said to offer no TLS when the DSN requires it, in both DSN forms, after one connection each;
/// a root certificate file that is missing is named before any connection; the password never.
#[test]
fn tls_a_server_does_not_offer_or_a_missing_root_certificate_is_said() {
    let (port, seen) = fake(|s| {
        let _ = s.write_all(b"N");
    });
    for dsn in [
        format!("{} sslmode=require", dsn(port)),
        format!("{} sslmode=verify-full", dsn(port)),
        format!("postgres://n8n:s3cr3t@127.0.0.1:{port}/n8n?sslmode=verify-ca"),
    ] {
        let out = audit(&dsn);
        let err = refused_naming(&out, port, "TLS");
        assert!(!err.contains("no answer within"), "{err}");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    let out = audit(&format!(
        "{} sslmode=verify-full sslrootcert=/nonexistent/ca.pem",
        dsn(port)
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "no connection with a missing CA file"
    );
}

/// A DSN pasted where the variable's name or the file goes is refused (exit 2) without being
/// echoed, by the audit and the sweep alike.
#[test]
fn a_dsn_pasted_for_the_variable_or_the_file_is_never_echoed() {
    let pasted = "postgres://n8n:s3cr3t@127.0.0.1:5432/n8n";
    for (cmd, flag) in [
        (vec!["audit", "--json"], "--postgres-env"),
        (vec!["audit", "--json"], "--postgres-file"),
        (
            vec!["sweep", "--url", "http://127.0.0.1:9/webhook/load"],
            "--postgres-env",
        ),
        (
            vec!["sweep", "--url", "http://127.0.0.1:9/webhook/load"],
            "--postgres-file",
        ),
    ] {
        let out = Command::new(bin())
            .args(&cmd)
            .args([flag, pasted])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?} {flag}: {err}");
        assert!(!err.contains("s3cr3t"), "{cmd:?} {flag}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cr3t"));
    }
}
