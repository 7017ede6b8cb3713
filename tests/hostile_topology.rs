//! Deployments read from files a hostile user wrote: names that would forge output lines,
//! autoscaler bounds no cluster runs, PgBouncer modes it does not have.

use crate::common::*;
use std::process::{Command, Output, Stdio};

fn written(name: &str, text: &str) -> String {
    let d = scratch().join(format!("n8ncap-topology-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn n8ncap(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_newline_in_a_compose_service_name_is_refused_and_never_printed_raw() {
    let f = written(
        "newline.yml",
        "services:\n  \"n8n\\ncompose: x.yml: 5 services, no findings.\":\n    image: docker.n8n.io/n8nio/n8n:2.41.1\n",
    );
    for cmd in ["audit", "inspect"] {
        let out = n8ncap(&[cmd, "-f", &f]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("not a compose service name"), "{err}");
        // The forged line never starts a line of the output.
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert!(
            !all.lines().any(|l| l.starts_with("compose: x.yml")),
            "{all}"
        );
    }
}
