//! The role of a container (main, worker, webhook, runner, redis, postgres) and the signal
//! that decided it, and the small readings of a command line or a broker URI it rests on.

use super::{Facts, Role};
use crate::error::BadInput;

fn command_has(cmd: &[String], word: &str) -> bool {
    cmd.iter().any(|a| a == word)
}

pub fn classify(f: &Facts) -> Role {
    classify_why(f).0
}

/// The role and the signal that decided it: the simulator's command, the runner's own variable
/// or launcher, the command (`worker`, `webhook`), the image name (a hint only: custom images
/// are named anything).
pub fn classify_why(f: &Facts) -> (Role, &'static str) {
    let image = f.image.to_ascii_lowercase();
    let cmd = &f.command;
    let sim_role = cmd
        .iter()
        .position(|a| a == "sim")
        .and_then(|i| cmd.get(i + 1))
        .map(String::as_str);
    match sim_role {
        Some("runner") => return (Role::Runner, "command: sim runner"),
        Some("worker") => return (Role::Worker, "command: sim worker"),
        Some("main") | Some("all") => return (Role::Main, "command: sim main"),
        _ => {}
    }
    // Only the runner launcher reads N8N_RUNNERS_TASK_BROKER_URI: whatever the image is
    // called, a container with it is a runner.
    if f.env_names
        .iter()
        .any(|n| n == "N8N_RUNNERS_TASK_BROKER_URI")
    {
        return (Role::Runner, "N8N_RUNNERS_TASK_BROKER_URI is set");
    }
    if cmd.iter().any(|a| a.contains("task-runner-launcher")) {
        return (Role::Runner, "command: task-runner-launcher");
    }
    if image.contains("n8nio/runners") {
        return (Role::Runner, "image n8nio/runners");
    }
    // The image's own name before the repository's: `n8ncap-sim/redis` is a Redis.
    let base = image.rsplit('/').next().unwrap_or(&image);
    if base.starts_with("redis") || base.starts_with("valkey") {
        return (Role::Redis, "image redis/valkey");
    }
    if base.starts_with("postgres") {
        return (Role::Postgres, "image postgres");
    }
    let n8n_cmd = cmd.iter().any(|a| a == "n8n" || a.ends_with("/n8n"));
    let n8n =
        n8n_cmd || image.contains("n8n") || f.env_names.iter().any(|n| n == "EXECUTIONS_MODE");
    if n8n {
        if command_has(cmd, "worker") {
            return (Role::Worker, "command: worker");
        }
        if command_has(cmd, "webhook") {
            return (Role::Webhook, "command: webhook");
        }
        return (
            Role::Main,
            if n8n_cmd {
                "command: n8n"
            } else if image.contains("n8n") {
                "image n8n, no worker/webhook command"
            } else {
                "EXECUTIONS_MODE is set, no worker/webhook command"
            },
        );
    }
    (Role::Other, "no n8n signal")
}

/// `--concurrency=N` or `--concurrency N` in a command line.
pub fn concurrency_flag(cmd: &[String]) -> Option<Result<u32, BadInput>> {
    for (i, a) in cmd.iter().enumerate() {
        // A compose command given as one string ("worker --concurrency=5") arrives split.
        let positive = |v: &str| match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(BadInput(v.to_string())),
        };
        if let Some(v) = a.strip_prefix("--concurrency=") {
            return Some(positive(v));
        }
        if a == "--concurrency" {
            return Some(positive(cmd.get(i + 1).map(String::as_str).unwrap_or("")));
        }
    }
    None
}

/// Two containers of one Kubernetes pod (they share `localhost`).
pub fn same_pod(a: &Facts, b: &Facts) -> bool {
    match (&a.k8s, &b.k8s) {
        (Some(x), Some(y)) => x.workload_kind == y.workload_kind && x.workload == y.workload,
        _ => false,
    }
}

/// The host part of `N8N_RUNNERS_TASK_BROKER_URI`.
pub fn broker_host(uri: &str) -> Option<String> {
    let rest = uri.split("://").nth(1).unwrap_or(uri);
    let authority = rest.split(['/', '?', '#']).next()?;
    // Credentials before the host are not part of it.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority);
    (!host.is_empty()).then(|| host.trim_matches(['[', ']']).to_string())
}
