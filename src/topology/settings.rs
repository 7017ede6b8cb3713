//! A node's own settings read from its facts, each with where it came from: worker
//! concurrency, runner limits and mode, executions mode, production limit, binary-data mode.

use super::{concurrency_flag, n8n_defaults, ExecutionsMode, Node, Role, RunnersMode, Sourced};
use crate::model::settings::BinaryDataMode;

/// An n8n process's executions mode, binary data mode and (main in regular mode) production
/// limit, each with where it came from.
fn settle_modes(n: &mut Node, get: &dyn Fn(&str) -> Option<String>, src: &dyn Fn(&str) -> String) {
    if matches!(n.role, Role::Worker | Role::Main | Role::Webhook) {
        let exec = match get("EXECUTIONS_MODE").as_deref() {
            Some("queue") => Sourced::new(ExecutionsMode::Queue, src("EXECUTIONS_MODE")),
            Some(_) => Sourced::new(ExecutionsMode::Regular, src("EXECUTIONS_MODE")),
            // n8ncap's simulator is a queue-mode stand-in unless told otherwise.
            None if n.facts.command.iter().any(|a| a == "sim") => Sourced::new(
                ExecutionsMode::Queue,
                "simulator default (EXECUTIONS_MODE unset)",
            ),
            None => Sourced::new(
                ExecutionsMode::Regular,
                "n8n default (EXECUTIONS_MODE unset)",
            ),
        };
        n.binary_data_mode = match get("N8N_DEFAULT_BINARY_DATA_MODE") {
            Some(m) => match BinaryDataMode::parse(&m) {
                Some(mode) => Some(Sourced::new(mode, src("N8N_DEFAULT_BINARY_DATA_MODE"))),
                None => {
                    n.notes.push(format!(
                        "N8N_DEFAULT_BINARY_DATA_MODE={:?} is none of default, filesystem, database, s3: n8n refuses it",
                        crate::util::truncate(&crate::util::escape_control(&m), 40)
                    ));
                    None
                }
            },
            None if exec.value == ExecutionsMode::Queue => Some(Sourced::new(
                BinaryDataMode::Database,
                "n8n 2.x default in queue mode",
            )),
            None => Some(Sourced::new(
                BinaryDataMode::Filesystem,
                "n8n 2.x default in regular mode",
            )),
        };
        n.db_pool_size = Some(
            match get("DB_POSTGRESDB_POOL_SIZE").map(|v| v.trim().parse::<u32>()) {
                Some(Ok(p)) => Sourced::new(p, src("DB_POSTGRESDB_POOL_SIZE")),
                Some(Err(_)) => {
                    n.notes.push(
                        "DB_POSTGRESDB_POOL_SIZE is not a whole number: n8n's default 2 is assumed"
                            .into(),
                    );
                    Sourced::new(
                        n8n_defaults::DB_POOL_SIZE,
                        "n8n default (the value set is not a number)",
                    )
                }
                None => Sourced::new(n8n_defaults::DB_POOL_SIZE, "n8n default"),
            },
        );
        if n.role == Role::Main && exec.value == ExecutionsMode::Regular {
            n.production_limit = get("N8N_CONCURRENCY_PRODUCTION_LIMIT")
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|l| *l > 0)
                .map(|l| Sourced::new(l, src("N8N_CONCURRENCY_PRODUCTION_LIMIT")));
        }
        n.executions_mode = Some(exec);
    }
}

/// Reads a node's own settings from its facts.
pub(super) fn settle(n: &mut Node) {
    let origin = n.facts.origin.clone();
    let env = n.facts.env.clone();
    let sources = n.facts.env_sources.clone();
    // Where a variable is set: its recorded source (a ConfigMap key, a Secret), else the node.
    let src = |k: &str| {
        sources
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("{k} on {origin}"))
    };
    let get = |k: &str| {
        env.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    settle_modes(n, &get, &src);
    match n.role {
        Role::Worker | Role::Main | Role::Webhook => {
            let mode = get("N8N_RUNNERS_MODE");
            let parsed = mode.as_deref().map(RunnersMode::parse);
            n.runners_mode = Some(match parsed {
                Some(m) => Sourced::new(m, src("N8N_RUNNERS_MODE")),
                None => Sourced::new(RunnersMode::Internal, "n8n default"),
            });
            let external = parsed == Some(RunnersMode::External);
            if let Some(v) = get("N8N_RUNNERS_MAX_CONCURRENCY") {
                if external {
                    n.notes.push(format!(
                        "N8N_RUNNERS_MAX_CONCURRENCY={v} on this {} has no effect in external mode: \
                         only the runner containers read it",
                        n.role.word()
                    ));
                } else if let Ok(l) = v.parse() {
                    n.runner_limit = Some(Sourced::new(
                        l,
                        format!("N8N_RUNNERS_MAX_CONCURRENCY on {origin} (internal runner)"),
                    ));
                }
            } else if !external {
                n.runner_limit = Some(Sourced::new(
                    n8n_defaults::RUNNER_LIMIT,
                    "n8n 2.x default for the internal runner",
                ));
            }
            if n.role == Role::Worker {
                let flag = concurrency_flag(&n.facts.command);
                let limit =
                    get("N8N_CONCURRENCY_PRODUCTION_LIMIT").and_then(|v| v.parse::<i64>().ok());
                n.worker_concurrency = match (limit, flag) {
                    (Some(l), flag) if l != -1 && l > 0 => {
                        if let Some(Ok(f)) = flag {
                            n.notes.push(format!(
                                "N8N_CONCURRENCY_PRODUCTION_LIMIT={l} overrides --concurrency={f}"
                            ));
                        }
                        Some(Sourced::new(
                            l as u32,
                            format!(
                                "{} (N8N_CONCURRENCY_PRODUCTION_LIMIT overrides --concurrency)",
                                src("N8N_CONCURRENCY_PRODUCTION_LIMIT")
                            ),
                        ))
                    }
                    (_, Some(Ok(f))) => Some(Sourced::new(
                        f,
                        format!("--concurrency in the command of {origin}"),
                    )),
                    (_, Some(Err(bad))) => {
                        n.notes
                            .push(format!("--concurrency {bad:?} is not a number"));
                        None
                    }
                    _ => Some(Sourced::new(
                        n8n_defaults::WORKER_CONCURRENCY,
                        "n8n default (--concurrency not set)",
                    )),
                };
                if let Some(v) = get("QUEUE_WORKER_CONCURRENCY") {
                    n.notes.push(format!(
                        "QUEUE_WORKER_CONCURRENCY={v} is not an n8n setting: it has no effect"
                    ));
                }
            }
        }
        Role::Runner => {
            n.runner_limit = Some(
                match get("N8N_RUNNERS_MAX_CONCURRENCY").and_then(|v| v.parse().ok()) {
                    Some(l) => Sourced::new(l, src("N8N_RUNNERS_MAX_CONCURRENCY")),
                    None => Sourced::new(
                        n8n_defaults::RUNNER_LIMIT,
                        "n8n 2.x default (the docs say 5)",
                    ),
                },
            );
        }
        _ => {}
    }
}
