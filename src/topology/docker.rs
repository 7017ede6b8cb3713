//! The Docker reader: a container's `inspect` answer as [`Facts`] (secrets dropped at once) and
//! its state. The API calls live in `observe::docker`; this is the pure conversion.

use super::Facts;
use crate::record::lifecycle::ContainerState;
use bollard::models::ContainerInspectResponse;

/// What n8ncap keeps of one container: name, compose labels, image, command, environment
/// (only the kept variables' values), host names, limits and state.
pub fn facts(info: &ContainerInspectResponse) -> Facts {
    let name = info
        .name
        .clone()
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_string();
    // Docker allows only [a-zA-Z0-9][a-zA-Z0-9_.-] in names; an engine that says otherwise
    // is not believed to the letter (a newline would forge output lines).
    let name = crate::util::escape_control(&name).into_owned();
    let config = info.config.clone().unwrap_or_default();
    let labels = config.labels.clone().unwrap_or_default();
    let mut f = Facts {
        name: name.clone(),
        service: labels.get("com.docker.compose.service").cloned(),
        project: labels.get("com.docker.compose.project").cloned(),
        image: config.image.clone().unwrap_or_default(),
        replicas: 1,
        origin: format!("container {name}"),
        ..Facts::default()
    };
    let mut cmd: Vec<String> = config.entrypoint.clone().unwrap_or_default();
    cmd.extend(config.cmd.clone().unwrap_or_default());
    f.command = cmd;
    let env = config.env.clone().unwrap_or_default();
    f.set_env(env.iter().map(|kv| match kv.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (kv.as_str(), None),
    }));
    if let Some(h) = config.hostname.clone() {
        f.hostnames.push(h);
    }
    f.hostnames.push(name.clone());
    if let Some(s) = &f.service {
        f.hostnames.push(s.clone());
    }
    if let Some(nets) = info
        .network_settings
        .as_ref()
        .and_then(|n| n.networks.as_ref())
    {
        for ep in nets.values() {
            for a in ep.aliases.clone().unwrap_or_default() {
                if !f.hostnames.contains(&a) {
                    f.hostnames.push(a);
                }
            }
        }
    }
    f.restart = info
        .host_config
        .as_ref()
        .and_then(|h| h.restart_policy.as_ref())
        .and_then(|p| p.name.as_ref())
        .map(|n| {
            let written = n.to_string();
            super::facts::RestartPolicy::new(
                if written.is_empty() { "no" } else { &written },
                "HostConfig.RestartPolicy",
            )
        });
    f.memory_limit_bytes = info
        .host_config
        .as_ref()
        .and_then(|h| h.memory)
        .filter(|m| *m > 0)
        .map(|m| m as u64);
    f.cpu_limit_cores = info.host_config.as_ref().and_then(cpu_limit_cores);
    f.state = Some(state(info));
    f
}

/// A container's CPU limit in cores: `--cpus` (NanoCpus) or a CFS quota over its period.
fn cpu_limit_cores(h: &bollard::models::HostConfig) -> Option<f64> {
    if let Some(n) = h.nano_cpus.filter(|n| *n > 0) {
        return Some(n as f64 / 1e9);
    }
    match (h.cpu_quota, h.cpu_period) {
        (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
        (Some(q), _) if q > 0 => Some(q as f64 / 100_000.0),
        _ => None,
    }
}

/// A container's state from `inspect`: running, `State.OOMKilled`, `ExitCode`,
/// `RestartCount`, `StartedAt`, `FinishedAt`.
pub fn state(info: &bollard::models::ContainerInspectResponse) -> ContainerState {
    let st = info.state.clone().unwrap_or_default();
    // Docker writes 0001-01-01T00:00:00Z for "never".
    let when = |t: Option<String>| t.filter(|t| !t.starts_with("0001-"));
    ContainerState {
        running: st.running.unwrap_or(false),
        oom_killed: st.oom_killed.unwrap_or(false),
        exit_code: st.exit_code,
        restart_count: info.restart_count.unwrap_or(0).max(0),
        started_at: when(st.started_at),
        finished_at: when(st.finished_at),
    }
}
