//! A node's own settings read from its facts, each with where it came from: worker
//! concurrency, runner limits and mode, executions mode, production limit, binary-data mode,
//! the database pool, and a Postgres container's connections.

use super::{concurrency_flag, n8n_defaults, ExecutionsMode, Node, Role, RunnersMode, Sourced};
use crate::model::budget;
use crate::model::settings::BinaryDataMode;
use crate::model::settings::Provenance;

/// An n8n process's executions mode, binary data mode and (main in regular mode) production
/// limit, each with where it came from.
fn settle_modes(
    n: &mut Node,
    get: &dyn Fn(&str) -> Option<String>,
    src: &dyn Fn(&str) -> Provenance,
) {
    if matches!(n.role, Role::Worker | Role::Main | Role::Webhook) {
        let exec = match get("EXECUTIONS_MODE").as_deref() {
            Some("queue") => Sourced::new(ExecutionsMode::Queue, src("EXECUTIONS_MODE")),
            Some(_) => Sourced::new(ExecutionsMode::Regular, src("EXECUTIONS_MODE")),
            // n8ncap's simulator is a queue-mode stand-in unless told otherwise.
            None if n.facts.command.iter().any(|a| a == "sim") => Sourced::new(
                ExecutionsMode::Queue,
                Provenance::Default("simulator default (EXECUTIONS_MODE unset)".into()),
            ),
            None => Sourced::new(
                ExecutionsMode::Regular,
                Provenance::Default("n8n default (EXECUTIONS_MODE unset)".into()),
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
                Provenance::Default("n8n 2.x default in queue mode".into()),
            )),
            None => Some(Sourced::new(
                BinaryDataMode::Filesystem,
                Provenance::Default("n8n 2.x default in regular mode".into()),
            )),
        };
        n.db_pool_size = Some(
            match get("DB_POSTGRESDB_POOL_SIZE")
                .map(|v| super::n8n_env::whole(&v).and_then(|p| u32::try_from(p).ok()))
            {
                Some(Some(p)) => Sourced::new(p, src("DB_POSTGRESDB_POOL_SIZE")),
                Some(None) => {
                    n.notes.push(
                        "DB_POSTGRESDB_POOL_SIZE is not a whole number: n8n's default 2 is assumed"
                            .into(),
                    );
                    Sourced::new(
                        n8n_defaults::DB_POOL_SIZE,
                        Provenance::Default("n8n default (the value set is not a number)".into()),
                    )
                }
                None => Sourced::new(
                    n8n_defaults::DB_POOL_SIZE,
                    Provenance::Default("n8n default".into()),
                ),
            },
        );
        n.production_limit = production_limit(n, get, src);
        n.executions_mode = Some(exec);
    }
}

/// `N8N_CONCURRENCY_PRODUCTION_LIMIT`, read once for every n8n process: -1 (n8n's default, and
/// any value below it, which n8n raises to -1) is no limit; 0 n8n refuses at start
/// (`InvalidConcurrencyLimitError`); a positive whole number is the limit.
fn production_limit(
    n: &mut Node,
    get: &dyn Fn(&str) -> Option<String>,
    src: &dyn Fn(&str) -> Provenance,
) -> Option<Sourced<u32>> {
    const VAR: &str = "N8N_CONCURRENCY_PRODUCTION_LIMIT";
    let v = get(VAR)?;
    match super::n8n_env::whole(&v).ok_or(()) {
        Ok(l) if l > 0 => Some(Sourced::new(u32::try_from(l).unwrap_or(u32::MAX), src(VAR))),
        Ok(0) => {
            n.notes
                .push(format!("{VAR}=0: n8n refuses to start with a limit of 0"));
            None
        }
        Ok(_) => None,
        Err(_) => {
            n.notes.push(format!(
                "{VAR}={:?} is not a whole number: n8n's default -1 (no limit) is assumed",
                crate::util::truncate(&crate::util::escape_control(&v), 40)
            ));
            None
        }
    }
}

/// A PgBouncer container's (by its image's name) client limit, server pool and pool mode: each
/// from `PGBOUNCER_<NAME>` (bitnami's and PgBouncer's images) or `<NAME>` (edoburu's), else
/// PgBouncer's default; the source says which were set.
fn pgbouncer(n: &Node, get: &dyn Fn(&str) -> Option<String>) -> Option<Sourced<budget::PgBouncer>> {
    let image = n.facts.image.to_ascii_lowercase();
    let base = image.rsplit('/').next().unwrap_or(&image);
    if !base.starts_with("pgbouncer") {
        return None;
    }
    let mut set = Vec::new();
    let read = |name: &str| -> Option<(String, String)> {
        [format!("PGBOUNCER_{name}"), name.to_string()]
            .into_iter()
            .find_map(|k| get(&k).map(|v| (k, v)))
    };
    let mut num = |name: &str, default: u32| -> u32 {
        let Some((k, v)) = read(name) else {
            return default;
        };
        match v.parse() {
            Ok(n) => {
                set.push(format!("{k}={n}"));
                n
            }
            Err(_) => {
                set.push(format!(
                    "{k}={v:?} is not a number: PgBouncer's default {default}"
                ));
                default
            }
        }
    };
    let max_client_conn = num("MAX_CLIENT_CONN", budget::PGBOUNCER_MAX_CLIENT_CONN);
    let pool = num("DEFAULT_POOL_SIZE", budget::PGBOUNCER_DEFAULT_POOL_SIZE);
    let reserve = num("RESERVE_POOL_SIZE", 0);
    // session, transaction or statement; PgBouncer refuses to start on any other value, and
    // n8n's pools then reach nothing — read as its default, session, and said.
    let mode = read("POOL_MODE");
    let known = |m: &str| {
        ["session", "transaction", "statement"].contains(&m.to_ascii_lowercase().as_str())
    };
    match &mode {
        Some((k, v)) if known(v) => set.push(format!("{k}={v}")),
        Some((k, v)) => set.push(format!(
            "{k}={:?} is no pool mode PgBouncer knows (session, transaction, statement): it refuses to start so; read as session",
            crate::util::truncate(&crate::util::escape_control(v), 20)
        )),
        None => {}
    }
    let session = mode.is_none_or(|(_, m)| !known(&m) || m.eq_ignore_ascii_case("session"));
    let source = if set.is_empty() {
        Provenance::Default(format!("PgBouncer's defaults on {}", n.facts.origin))
    } else {
        Provenance::Deployment(format!(
            "{} on {} (the rest PgBouncer's defaults)",
            set.join(", "),
            n.facts.origin
        ))
    };
    Some(Sourced::new(
        budget::PgBouncer {
            max_client_conn,
            pool_size: pool.saturating_add(reserve),
            session,
        },
        source,
    ))
}

/// A Postgres container's `max_connections` and `superuser_reserved_connections`, from its
/// command (`-c name=N`, `-c` and `name=N` apart, or `--name=N`), else Postgres' defaults.
fn postgres_connections(n: &mut Node) {
    let set = |name: &str| -> Option<(u32, Provenance)> {
        let args = &n.facts.command;
        args.iter().enumerate().find_map(|(i, a)| {
            let a = a.trim_start_matches("-c").trim_start_matches("--").trim();
            let a = if a.is_empty() {
                args.get(i + 1).map(String::as_str).unwrap_or("")
            } else {
                a
            };
            let v = a.strip_prefix(name)?.strip_prefix('=')?;
            Some((
                v.trim().parse().ok()?,
                Provenance::Deployment(format!("-c {name} in the command of {}", n.facts.origin)),
            ))
        })
    };
    n.max_connections = Some(match set("max_connections") {
        Some((v, s)) => Sourced::new(v, s),
        None => Sourced::new(
            budget::MAX_CONNECTIONS_DEFAULT,
            Provenance::Default("Postgres default".into()),
        ),
    });
    n.reserved_connections = Some(match set("superuser_reserved_connections") {
        Some((v, s)) => Sourced::new(v, s),
        None => Sourced::new(
            budget::RESERVED_DEFAULT,
            Provenance::Default("Postgres default".into()),
        ),
    });
}

/// The timeouts that end executions and tasks, each with where it came from (n8n 2.x's
/// defaults, from its config: `N8N_GRACEFUL_SHUTDOWN_TIMEOUT` 30 s; the scaling-mode settings'
/// `QUEUE_WORKER_LOCK_DURATION` 60 000 ms and `QUEUE_WORKER_LOCK_RENEW_TIME` 10 000 ms;
/// `N8N_RUNNERS_TASK_TIMEOUT` 300 s, 60 s from n8n 3.0 on).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimeSettings {
    /// n8n processes: how long shutdown waits for running executions, s.
    pub graceful_shutdown_s: Option<Sourced<f64>>,
    /// Workers: Bull's job lock and how often it is renewed, ms.
    pub lock_duration_ms: Option<Sourced<f64>>,
    pub lock_renew_ms: Option<Sourced<f64>>,
    /// Workers: how often Bull's stalled check runs, ms (`QUEUE_WORKER_STALLED_INTERVAL`).
    #[serde(default)]
    pub stalled_interval_ms: Option<Sourced<f64>>,
    /// n8n processes: how long a lost Redis is tried before the process exits, ms
    /// (`QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD`).
    #[serde(default)]
    pub redis_timeout_ms: Option<Sourced<f64>>,
    /// Where Code runs (a runner, an n8n process with its internal runner): the task timeout,
    /// s; `set` false when it is n8n's default (which n8n 3.0 lowers).
    pub task_timeout_s: Option<Sourced<f64>>,
    pub task_timeout_set: bool,
}

/// n8n 2.x's defaults for [`TimeSettings`].
pub const GRACEFUL_SHUTDOWN_S: f64 = n8n_defaults::GRACEFUL_SHUTDOWN_S;
pub const LOCK_DURATION_MS: f64 = n8n_defaults::LOCK_DURATION_MS;
pub const LOCK_RENEW_MS: f64 = 10_000.0;
pub const STALLED_INTERVAL_MS: f64 = n8n_defaults::STALLED_INTERVAL_MS;
pub const REDIS_TIMEOUT_MS: f64 = n8n_defaults::REDIS_TIMEOUT_THRESHOLD_MS;
pub const TASK_TIMEOUT_S: f64 = n8n_defaults::TASK_TIMEOUT_S;
pub const TASK_TIMEOUT_3_S: f64 = n8n_defaults::TASK_TIMEOUT_3_S;

fn time_settings(
    n: &mut Node,
    get: &dyn Fn(&str) -> Option<String>,
    src: &dyn Fn(&str) -> Provenance,
) {
    // n8n reads each with JavaScript's Number() (super::n8n_env): NaN keeps its default; 0
    // and negative values are taken as set (a timer of 0 or less fires at once); Infinity
    // never fires, read here as the longest duration n8ncap knows.
    let longest = crate::util::MAX_DURATION.as_secs_f64();
    let mut read = |var: &str, default: f64, unit_s: f64| -> Sourced<f64> {
        match get(var).map(|v| super::n8n_env::number(&v)) {
            Some(Some(v)) if v.is_infinite() || v * unit_s > longest => {
                n.notes.push(format!(
                    "{var} is {}: n8n never ends that wait; read as 30 days",
                    if v.is_infinite() {
                        "Infinity"
                    } else {
                        "over 30 days"
                    }
                ));
                Sourced::new(longest / unit_s, src(var))
            }
            Some(Some(v)) => Sourced::new(v.max(0.0), src(var)),
            Some(None) => {
                n.notes.push(format!(
                    "{var} is not a number to n8n (JavaScript's Number() gives NaN): n8n's default {default} is used"
                ));
                Sourced::new(
                    default,
                    Provenance::Default("n8n default (the value set is not a number)".into()),
                )
            }
            None => Sourced::new(default, Provenance::Default("n8n default".into())),
        }
    };
    let n8n = matches!(n.role, Role::Worker | Role::Main | Role::Webhook);
    let worker = n.role == Role::Worker;
    let code_here = n.role == Role::Runner
        || (n8n
            && n.role != Role::Webhook
            && n.runners_mode
                .as_ref()
                .is_some_and(|m| m.value == RunnersMode::Internal));
    if !(n8n || n.role == Role::Runner) {
        return;
    }
    // The task timeout's default moved with n8n 3.0 (300 → 60 s, n8n #37042): judged by the
    // version the image's tag names.
    let major = super::image_major(&n.facts.image);
    let task_default = if major.is_some_and(|m| m >= 3) {
        TASK_TIMEOUT_3_S
    } else {
        TASK_TIMEOUT_S
    };
    let t = TimeSettings {
        graceful_shutdown_s: n8n
            .then(|| read("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", GRACEFUL_SHUTDOWN_S, 1.0)),
        lock_duration_ms: worker
            .then(|| read("QUEUE_WORKER_LOCK_DURATION", LOCK_DURATION_MS, 0.001)),
        lock_renew_ms: worker.then(|| read("QUEUE_WORKER_LOCK_RENEW_TIME", LOCK_RENEW_MS, 0.001)),
        stalled_interval_ms: worker
            .then(|| read("QUEUE_WORKER_STALLED_INTERVAL", STALLED_INTERVAL_MS, 0.001)),
        redis_timeout_ms: n8n.then(|| {
            read(
                "QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD",
                REDIS_TIMEOUT_MS,
                0.001,
            )
        }),
        task_timeout_s: code_here.then(|| read("N8N_RUNNERS_TASK_TIMEOUT", task_default, 1.0)),
        task_timeout_set: get("N8N_RUNNERS_TASK_TIMEOUT").is_some(),
    };
    n.times = Some(t);
}

/// A runner container's `N8N_RUNNERS_MAX_CONCURRENCY`, or n8n's default.
fn runner_limit(
    get: &dyn Fn(&str) -> Option<String>,
    src: &dyn Fn(&str) -> Provenance,
) -> Sourced<u32> {
    match get("N8N_RUNNERS_MAX_CONCURRENCY")
        .and_then(|v| super::n8n_env::whole(&v))
        .and_then(|l| u32::try_from(l).ok())
    {
        Some(l) => Sourced::new(l, src("N8N_RUNNERS_MAX_CONCURRENCY")),
        None => Sourced::new(
            n8n_defaults::RUNNER_LIMIT,
            Provenance::Default("n8n 2.x default (the docs say 5)".into()),
        ),
    }
}

/// Reads a node's own settings from its facts.
pub(super) fn settle(n: &mut Node) {
    let origin = n.facts.origin.clone();
    let env = n.facts.env.clone();
    let sources = n.facts.env_sources.clone();
    // Where a variable is set: its recorded source (a ConfigMap key, a Secret), else the node.
    let src = |k: &str| {
        Provenance::Deployment(
            sources
                .get(k)
                .cloned()
                .unwrap_or_else(|| format!("{k} on {origin}")),
        )
    };
    let get = |k: &str| {
        env.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    settle_modes(n, &get, &src);
    n.pgbouncer = pgbouncer(n, &get);
    match n.role {
        Role::Worker | Role::Main | Role::Webhook => {
            let mode = get("N8N_RUNNERS_MODE");
            let parsed = mode.as_deref().map(RunnersMode::parse);
            n.runners_mode = Some(match parsed {
                Some(m) => Sourced::new(m, src("N8N_RUNNERS_MODE")),
                None => Sourced::new(
                    RunnersMode::Internal,
                    Provenance::Default("n8n default".into()),
                ),
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
                        Provenance::Deployment(format!(
                            "N8N_RUNNERS_MAX_CONCURRENCY on {origin} (internal runner)"
                        )),
                    ));
                }
            } else if !external {
                n.runner_limit = Some(Sourced::new(
                    n8n_defaults::RUNNER_LIMIT,
                    Provenance::Default("n8n 2.x default for the internal runner".into()),
                ));
            }
            if n.role == Role::Worker {
                worker_concurrency(n, &get, &origin);
            }
        }
        Role::Postgres => postgres_connections(n),
        Role::Runner => n.runner_limit = Some(runner_limit(&get, &src)),
        _ => {}
    }
    time_settings(n, &get, &src);
}

/// A worker's concurrency: `N8N_CONCURRENCY_PRODUCTION_LIMIT` where set (it overrides the
/// flag, said in the notes), else `--concurrency` in its command, else n8n's default; a
/// `QUEUE_WORKER_CONCURRENCY` (no n8n setting) is said to have no effect.
fn worker_concurrency(n: &mut Node, get: &dyn Fn(&str) -> Option<String>, origin: &str) {
    let flag = concurrency_flag(&n.facts.command);
    n.worker_concurrency = match (n.production_limit.clone(), flag) {
        (Some(l), flag) => {
            if let Some(Ok(f)) = flag {
                n.overridden_concurrency = Some(f);
                n.notes.push(format!(
                    "N8N_CONCURRENCY_PRODUCTION_LIMIT={} overrides --concurrency={f}",
                    l.value
                ));
            }
            Some(Sourced::new(
                l.value,
                Provenance::Deployment(format!(
                    "{} (N8N_CONCURRENCY_PRODUCTION_LIMIT overrides --concurrency)",
                    l.source
                )),
            ))
        }
        (_, Some(Ok(f))) => Some(Sourced::new(
            f,
            Provenance::Deployment(format!("--concurrency in the command of {origin}")),
        )),
        (_, Some(Err(bad))) => {
            n.notes
                .push(format!("--concurrency {bad:?} is not a number"));
            None
        }
        _ => Some(Sourced::new(
            n8n_defaults::WORKER_CONCURRENCY,
            Provenance::Default("n8n default (--concurrency not set)".into()),
        )),
    };
    if let Some(v) = get("QUEUE_WORKER_CONCURRENCY") {
        n.notes.push(format!(
            "QUEUE_WORKER_CONCURRENCY={v} is not an n8n setting: it has no effect"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Facts, Topology};
    use super::*;

    fn node(image: &str, command: &[&str], env: &[(&str, &str)]) -> Node {
        let f = Facts {
            name: "n".into(),
            image: image.into(),
            command: command.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            replicas: 1,
            origin: "compose service n".into(),
            ..Facts::default()
        };
        Topology::build(vec![f]).nodes.remove(0)
    }

    #[test]
    fn a_pgbouncer_is_read_from_either_image_s_variables_or_its_defaults() {
        let b = |image: &str, env: &[(&str, &str)]| node(image, &[], env).pgbouncer;
        // bitnami's prefixed names; the reserve adds to the server pool.
        let p = b(
            "docker.io/bitnami/pgbouncer:1.24.1",
            &[
                ("PGBOUNCER_MAX_CLIENT_CONN", "500"),
                ("PGBOUNCER_DEFAULT_POOL_SIZE", "15"),
                ("PGBOUNCER_RESERVE_POOL_SIZE", "5"),
                ("PGBOUNCER_POOL_MODE", "transaction"),
            ],
        )
        .unwrap();
        assert_eq!(
            (p.value.max_client_conn, p.value.pool_size, p.value.session),
            (500, 20, false)
        );
        // edoburu's unprefixed names; no mode: PgBouncer's session default.
        let p = b("edoburu/pgbouncer", &[("DEFAULT_POOL_SIZE", "8")]).unwrap();
        assert_eq!(
            (p.value.max_client_conn, p.value.pool_size, p.value.session),
            (100, 8, true)
        );
        // A value that is no number is PgBouncer's default, and the source says so.
        let p = b("pgbouncer/pgbouncer", &[("MAX_CLIENT_CONN", "lots")]).unwrap();
        assert_eq!(p.value.max_client_conn, 100);
        assert!(matches!(p.source, Provenance::Deployment(_)));
        assert!(p.source.words().contains("not a number"), "{}", p.source);
        // Not a PgBouncer: nothing read, whatever its variables.
        assert!(b("postgres:16", &[("DEFAULT_POOL_SIZE", "8")]).is_none());
    }

    #[test]
    fn the_production_limit_is_read_once_with_n8n_s_rules() {
        let main = |v: &str| {
            node(
                "n8nio/n8n",
                &["n8n", "start"],
                &[("N8N_CONCURRENCY_PRODUCTION_LIMIT", v)],
            )
        };
        assert_eq!(main("4").production_limit.map(|l| l.value), Some(4));
        assert_eq!(main("-1").production_limit, None);
        // Below -1 n8n raises it to -1; 0 it refuses; a word is none of these.
        assert_eq!(main("-7").production_limit, None);
        let zero = main("0");
        assert_eq!(zero.production_limit, None);
        assert_eq!(zero.notes.len(), 1, "{:?}", zero.notes);
        let word = main("ten");
        assert_eq!(word.production_limit, None);
        assert_eq!(word.notes.len(), 1, "{:?}", word.notes);
        // A worker: the limit is its slots, over the flag, which is kept as overridden.
        let w = node(
            "n8nio/n8n",
            &["n8n", "worker", "--concurrency=10"],
            &[
                ("N8N_CONCURRENCY_PRODUCTION_LIMIT", "6"),
                ("EXECUTIONS_MODE", "queue"),
            ],
        );
        assert_eq!(w.worker_concurrency.map(|c| c.value), Some(6));
        assert_eq!(w.overridden_concurrency, Some(10));
        let plain = node(
            "n8nio/n8n",
            &["n8n", "worker", "--concurrency=10"],
            &[("EXECUTIONS_MODE", "queue")],
        );
        assert_eq!(plain.worker_concurrency.map(|c| c.value), Some(10));
        assert_eq!(plain.overridden_concurrency, None);
    }

    #[test]
    fn postgres_connections_come_from_its_command_or_its_defaults() {
        let pg = |cmd: &[&str]| {
            let n = node("postgres:16", cmd, &[]);
            (
                n.max_connections.map(|m| m.value),
                n.reserved_connections.map(|m| m.value),
            )
        };
        assert_eq!(pg(&["postgres"]), (Some(100), Some(3)));
        assert_eq!(
            pg(&["postgres", "-c", "max_connections=40"]),
            (Some(40), Some(3))
        );
        assert_eq!(
            pg(&[
                "postgres",
                "-c max_connections=250",
                "--superuser_reserved_connections=5"
            ]),
            (Some(250), Some(5))
        );
        assert_eq!(
            pg(&["postgres", "-c", "max_connections=many"]),
            (Some(100), Some(3))
        );
    }
}
