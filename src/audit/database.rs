//! The database's rules: the connection budget (every process's pool against what Postgres
//! allows), a worker whose pool is below its concurrency, webhook processors on n8n's default
//! pool, and the database ping at its default timeout where a pool can make it wait
//! (n8n-io/terraform-aws-n8n#106: pools backed up, the ping timed out and pods declared a
//! healthy database dead; `DB_POSTGRESDB_POOL_SIZE=20` and `DB_PING_TIMEOUT_MS=20000` ended it;
//! #109: size the pool at or above the per-pod concurrency that touches the database).

use super::{env, finding, Ctx};
use crate::findings::{Finding, FindingId};
use crate::model::budget::{self, Postgres, Processes};
use crate::model::n8n_defaults;
use crate::topology::{Node, Role};

pub(super) fn rules(c: &Ctx, out: &mut Vec<Finding>) {
    live_postgres(c, out);
    version(c, out);
    tls_unverified(c, out);
    budget(c, out);
    pool_below_concurrency(c, out);
    webhook_default_pool(c, out);
    ping_timeout_default(c, out);
}

/// n8n 2.41's version policy (`@n8n/db` postgres-version-policy: "Postgres 15 is not
/// supported. n8n supports Postgres 17 and newer, with 16 on compatibility support"): the live
/// server's major when it was read, else the Postgres image's tag (`postgres:15`,
/// `bitnami/postgresql:15.4.0`).
fn version(c: &Ctx, out: &mut Vec<Finding>) {
    const SUPPORTED_FROM: u32 = 16;
    let live = c
        .postgres
        .and_then(|p| Some((p.major?, format!("the live server at {}", p.at), "postgres")));
    let image = || {
        c.t.nodes
            .iter()
            .filter(|n| n.role == Role::Postgres)
            .find_map(|n| {
                let tag = crate::topology::image_tag(&n.facts.image);
                let digits: String = tag.chars().take_while(char::is_ascii_digit).collect();
                let major: u32 = digits.parse().ok().filter(|m| (9..100).contains(m))?;
                Some((major, format!("its image {}", n.facts.image), n.name()))
            })
    };
    let Some((major, at, subject)) = live.or_else(image) else {
        return;
    };
    if major >= SUPPORTED_FROM {
        return;
    }
    out.push(
        finding(FindingId::PostgresVersionUnsupported, subject, format!(
            "Postgres {major} ({at}): n8n 2.41 supports 17 and newer, 16 on compatibility support"
        ))
        .figure("postgres_major", f64::from(major))
        .why("n8n 2.41.1 logs \"Postgres 15 is not supported. n8n supports Postgres 17 and newer, with 16 on compatibility support\" at start: it runs, but an n8n upgrade may stop running on it, and its database fixes are tested on supported versions only.")
        .fix("upgrade Postgres to 17 (pg_upgrade, or a dump and restore) before the next n8n upgrade"),
    );
}

/// n8n over TLS to Postgres without checking the server's certificate: encrypted, but anyone
/// between them can stand in for the database (n8n 2.41.1 ran so with a self-signed server:
/// `DB_POSTGRESDB_SSL_ENABLED=true`, `DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED=false`).
fn tls_unverified(c: &Ctx, out: &mut Vec<Finding>) {
    let unverified: Vec<&str> = c
        .n8n
        .iter()
        .filter(|n| on_postgres(n) && super::is_true(env(n, "DB_POSTGRESDB_SSL_ENABLED")))
        .filter(|n| {
            env(n, "DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED")
                .and_then(crate::topology::n8n_env::boolean)
                == Some(false)
        })
        .map(|n| n.name())
        .collect();
    let Some(first) = unverified.first() else {
        return;
    };
    out.push(
        finding(FindingId::PostgresTlsUnverified, first, format!(
            "{}: TLS to Postgres with DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED=false — the server's certificate is not checked",
            unverified.join(", ")
        ))
        .figure("processes", unverified.len() as f64)
        .why("The connection is encrypted, but any server on the path can present itself as the database and receive n8n's credentials and every execution's data.")
        .fix("give DB_POSTGRESDB_SSL_CA (the CA that signed Postgres' certificate) and remove DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED=false"),
    );
}

fn on_postgres(n: &Node) -> bool {
    env(n, "DB_TYPE") == Some("postgresdb")
}

/// A process's pool and where it came from.
fn pool_of(n: &Node) -> (u32, String) {
    match &n.db_pool_size {
        Some(p) => (p.value, p.source.words()),
        None => (
            n8n_defaults::DB_POOL_SIZE,
            "n8n's default: DB_POSTGRESDB_POOL_SIZE unset".into(),
        ),
    }
}

/// A worker runs `concurrency` executions at once and each saves through its pool: fewer
/// connections than slots queue them for the database.
fn pool_below_concurrency(c: &Ctx, out: &mut Vec<Finding>) {
    for n in c
        .n8n
        .iter()
        .filter(|n| n.role == Role::Worker && on_postgres(n))
    {
        let slots = n
            .worker_concurrency
            .as_ref()
            .map_or(n8n_defaults::WORKER_CONCURRENCY, |w| w.value);
        let (pool, source) = pool_of(n);
        if pool < slots {
            out.push(
                finding(FindingId::DbPoolBelowConcurrency, n.name(), format!(
                    "{}: a database pool of {pool} for {slots} worker slots",
                    n.name()
                ))
                .evidence(format!("DB_POSTGRESDB_POOL_SIZE {pool} ({source}); worker concurrency {slots}"))
                .figure("db_pool", pool as f64)
                .figure("worker_slots", slots as f64)
                .why("Every execution reads and saves itself through the worker's pool: it caps at pool ÷ database time per execution, whatever the slots allow, and the executions waiting for a connection still hold their slots. A sweep with N8N_METRICS_INCLUDE_DB_POOL_METRICS=true measures that time (db-pool-caps).")
                .fix(format!("raise DB_POSTGRESDB_POOL_SIZE on {} toward its concurrency ({slots}), within Postgres max_connections", n.name())),
            );
        }
    }
}

/// Webhook processors take every production webhook: on n8n's default pool of 2 their intake
/// queues for the database first.
fn webhook_default_pool(c: &Ctx, out: &mut Vec<Finding>) {
    for n in c.n8n.iter().filter(|n| {
        n.role == Role::Webhook && on_postgres(n) && env(n, "DB_POSTGRESDB_POOL_SIZE").is_none()
    }) {
        out.push(
            finding(FindingId::WebhookDefaultPool, n.name(), format!(
                "{}: a webhook processor on n8n's default database pool ({} connections)",
                n.name(),
                n8n_defaults::DB_POOL_SIZE
            ))
            .why("A webhook processor writes every execution it receives before it is queued; with 2 connections its intake waits for the database, and its health ping waits in the same queue.")
            .fix(format!("set DB_POSTGRESDB_POOL_SIZE on {} (n8n's load test: 20), within Postgres max_connections", n.name())),
        );
    }
}

/// The database ping waits for a connection like any query: where the pool can be full (a
/// process taking webhooks, a worker with fewer connections than slots) a ping at n8n's 5 s
/// default times out and the process declares a healthy database dead.
fn ping_timeout_default(c: &Ctx, out: &mut Vec<Finding>) {
    let waits = |n: &Node| {
        let slots = n
            .worker_concurrency
            .as_ref()
            .map_or(n8n_defaults::WORKER_CONCURRENCY, |w| w.value);
        match n.role {
            Role::Main | Role::Webhook => true,
            Role::Worker => pool_of(n).0 < slots,
            _ => false,
        }
    };
    let at_default: Vec<&&Node> = c
        .n8n
        .iter()
        .filter(|n| on_postgres(n) && waits(n) && env(n, "DB_PING_TIMEOUT_MS").is_none())
        .collect();
    let Some(first) = at_default.first() else {
        return;
    };
    let names: Vec<&str> = at_default.iter().map(|n| n.name()).collect();
    out.push(
        finding(FindingId::DbPingTimeoutDefault, first.name(), format!(
            "{}: the database ping at n8n's default timeout ({:.0} ms) on processes whose pool can be full",
            names.join(", "),
            n8n_defaults::DB_PING_TIMEOUT_MS
        ))
        .figure("processes", names.len() as f64)
        .why("n8n's database ping takes a connection from the same pool as the executions: behind a full pool it times out and n8n declares a healthy database dead (n8n's own load test: 503s on most webhook pods while the database sat idle).")
        .fix("set DB_PING_TIMEOUT_MS above the pool's acquire p99 (n8n_db_pool_acquire_seconds, with N8N_METRICS_INCLUDE_DB_POOL_METRICS=true; n8n's load test settled on 20000)"),
    );
}

/// Postgres' side of the budget: the live Postgres when `--postgres-env`/`--postgres-file` read
/// it, else the Postgres service of the input; its name and where it was read.
fn postgres_side<'a>(c: &'a Ctx, users: &[&&'a Node]) -> Option<(&'a str, Postgres, String)> {
    let node = c.t.nodes.iter().find(|n| n.role == Role::Postgres);
    // A Postgres that refused n8ncap's connection told no figures: its finding is said apart.
    match (c.postgres.filter(|p| p.refused.is_none()), node) {
        (Some(live), _) => Some((
            node.map_or(users.first().map_or("postgres", |n| n.name()), |p| p.name()),
            Postgres {
                max_connections: live.max_connections,
                reserved: Some(live.reserved),
            },
            format!("live Postgres {}", live.at),
        )),
        (None, Some(p)) => Some((
            p.name(),
            Postgres {
                max_connections: p
                    .max_connections
                    .as_ref()
                    .map_or(budget::MAX_CONNECTIONS_DEFAULT, |m| m.value),
                reserved: p.reserved_connections.as_ref().map(|r| r.value),
            },
            p.name().to_string(),
        )),
        (None, None) => None,
    }
}

/// The PgBouncer n8n connects through: the one `DB_POSTGRESDB_HOST` names (whole, or its first
/// DNS label), or the only one when the host says "bouncer".
pub(super) fn bouncer_in_front<'a>(c: &'a Ctx, users: &[&&Node]) -> Option<&'a Node> {
    let bouncers: Vec<&Node> = c.t.nodes.iter().filter(|n| n.pgbouncer.is_some()).collect();
    let hosts: Vec<String> = users
        .iter()
        .filter_map(|n| env(n, "DB_POSTGRESDB_HOST"))
        .map(|h| h.to_ascii_lowercase())
        .collect();
    // Its name, or any name others reach it by (hostname, service, network aliases).
    let named = |b: &&Node| {
        let names: Vec<String> = std::iter::once(b.name())
            .chain(b.facts.hostnames.iter().map(String::as_str))
            .map(str::to_ascii_lowercase)
            .collect();
        hosts.iter().any(|h| {
            names
                .iter()
                .any(|n| h == n || h.split('.').next() == Some(n))
        })
    };
    bouncers.iter().find(|b| named(b)).copied().or_else(|| {
        (bouncers.len() == 1 && hosts.iter().any(|h| h.contains("bouncer"))).then(|| bouncers[0])
    })
}

/// The connection budget: Σ pools × processes against what Postgres leaves to them, through
/// the PgBouncer in front when there is one.
fn budget(c: &Ctx, out: &mut Vec<Finding>) {
    let pg_users: Vec<&&Node> = c.n8n.iter().filter(|n| on_postgres(n)).collect();
    if pg_users.is_empty() {
        return;
    }
    let pg = postgres_side(c, &pg_users);
    let bouncer = bouncer_in_front(c, &pg_users).and_then(|n| Some((n, n.pgbouncer.as_ref()?)));
    if pg.is_none() && bouncer.is_none() {
        return;
    }
    let groups: Vec<Processes> = pg_users
        .iter()
        .map(|n| Processes {
            count: n.facts.replicas,
            pool: pool_of(n).0,
        })
        .collect();
    let processes: u32 = groups.iter().map(|g| g.count).fold(0, u32::saturating_add);
    let b = budget::connections(
        &groups,
        pg.as_ref().map(|p| p.1),
        bouncer.map(|(_, b)| b.value),
    );
    if b.fits() {
        return;
    }
    let pools = format!(
        "{processes} n8n processes × their DB_POSTGRESDB_POOL_SIZE = {} connections",
        b.needed
    );
    // Each case's figures: the connections asked for, and what serves them.
    let (f, needed, available) = match (bouncer, &pg) {
        (Some((n, bo)), _) if b.needed > b.allowed => {
            let what = if bo.value.session {
                format!("the {} server connections PgBouncer {} gives in session mode (pool_mode session keeps one per connected client)", b.allowed, n.name())
            } else {
                format!("PgBouncer {}'s max_client_conn {}", n.name(), b.allowed)
            };
            (finding(FindingId::DbConnectionsExhausted, n.name(), format!("{pools} > {what}"))
                .evidence(format!("PgBouncer: {}", bo.source))
                .why("Under load the pools open more connections than PgBouncer serves: past max_client_conn it refuses the next, and in session mode the connections past its pool wait for a server connection until query_wait_timeout — the executions that need them fail or stall.")
                .fix("set PgBouncer's pool_mode to transaction and its max_client_conn above the total, or lower DB_POSTGRESDB_POOL_SIZE"), b.needed, b.allowed)
        }
        (Some((n, bo)), Some((subject, p, at))) => (finding(FindingId::DbConnectionsExhausted, subject, format!(
            "{at}: PgBouncer {}'s server pool of {} connections > the {} max_connections {} leaves to it",
            n.name(),
            b.on_postgres,
            p.available(),
            p.max_connections
        ))
        .evidence(format!("PgBouncer: {}", bo.source))
        .why("PgBouncer opens up to default_pool_size + reserve_pool_size connections to Postgres; past max_connections less superuser_reserved_connections Postgres refuses them with SQLSTATE 53300 and the queries waiting in PgBouncer fail.")
        .fix("lower PgBouncer's DEFAULT_POOL_SIZE (and RESERVE_POOL_SIZE) under what Postgres leaves, or raise max_connections"), b.on_postgres, p.available()),
        (_, Some((subject, p, at))) => (finding(FindingId::DbConnectionsExhausted, subject, format!(
            "{at}: {pools} > the {} max_connections {} leaves to them",
            p.available(),
            p.max_connections
        ))
        .why("Under load the pools ask for more connections than Postgres allows (max_connections less superuser_reserved_connections): it refuses the next with SQLSTATE 53300 and the execution that needed it fails.")
        .fix("lower DB_POSTGRESDB_POOL_SIZE, raise max_connections (postgres -c max_connections=N) above the total, or put PgBouncer (transaction mode) in front"), b.needed, p.available()),
        (_, None) => return,
    };
    out.push(live_evidence(
        f.figure("connections_needed", needed as f64)
            .figure("connections_available", available as f64),
        c,
    ));
}

/// The live Postgres on its own: out of connections now (it refused n8ncap's connection with
/// SQLSTATE 53300, or every slot but the reserved ones is open), else — for an audit of the
/// database alone, a deployment of plain processes — what is open against what it allows.
fn live_postgres(c: &Ctx, out: &mut Vec<Finding>) {
    let Some(live) = c.postgres else {
        return;
    };
    let p = Postgres {
        max_connections: live.max_connections,
        reserved: Some(live.reserved),
    };
    if let Some(why) = &live.refused {
        out.push(
            finding(FindingId::PostgresOutOfConnections, "postgres", format!(
                "Postgres at {} refused a connection now: {why}",
                live.at
            ))
            .evidence("n8ncap's own connection, with the DSN given, was refused for want of a slot".to_string())
            .why("Every n8n process that needs a new connection is refused the same way: executions fail (HTTP 500 \"Error in workflow\", or 200 without data when the last write was refused), n8n logs \"Problem with execution … remaining connection slots are reserved\", and executions are left running or new in its table. No response names Postgres.")
            .fix("read it with a role that has a reserved slot (a superuser) to see who holds the connections (pg_stat_activity by application_name); then lower DB_POSTGRESDB_POOL_SIZE × processes under max_connections − superuser_reserved_connections, raise max_connections, or put PgBouncer (transaction mode) in front"),
        );
        return;
    }
    let (open, available) = (live.open(), p.available());
    if open >= available {
        out.push(live_evidence(
            finding(FindingId::PostgresOutOfConnections, "postgres", format!(
                "Postgres at {}: {open} connections open, every one of the {available} that max_connections {} − superuser_reserved_connections {} leaves",
                live.at, live.max_connections, live.reserved
            ))
            .figure("connections_available", available as f64)
            .why("The next process that needs a connection is refused (SQLSTATE 53300): its execution fails, and no response names Postgres.")
            .fix("lower DB_POSTGRESDB_POOL_SIZE × processes under what Postgres leaves, raise max_connections, or put PgBouncer (transaction mode) in front"),
            c,
        ));
    } else if c.n8n.is_empty() {
        out.push(live_evidence(
            finding(FindingId::PostgresConnections, "postgres", format!(
                "Postgres at {}: {open} of the {available} connections max_connections {} − superuser_reserved_connections {} leaves are open",
                live.at, live.max_connections, live.reserved
            ))
            .figure("connections_available", available as f64)
            .why("Every n8n process (main, webhook processors, each worker) opens up to DB_POSTGRESDB_POOL_SIZE (2 by default) connections: their sum at the autoscalers' maxima must fit what Postgres leaves.")
            .fix("compare Σ DB_POSTGRESDB_POOL_SIZE × processes with the connections available; give the deployment (-f, --live) for n8ncap to add them up"),
            c,
        ));
    }
}

/// What the live Postgres showed open and waiting, when it was read.
fn live_evidence(mut f: Finding, c: &Ctx) -> Finding {
    let Some(live) = c.postgres else {
        return f;
    };
    let apps: Vec<String> = live
        .by_application
        .iter()
        .map(|(a, st, n)| {
            format!(
                "{n} {} {}",
                if a.is_empty() {
                    "(no application_name)"
                } else {
                    a
                },
                if st.is_empty() { "-" } else { st }
            )
        })
        .collect();
    f = f
        .evidence(format!("open now: {} ({})", live.open(), apps.join(", ")))
        .figure("connections_open", live.open() as f64);
    if !live.waiting.is_empty() {
        let w: Vec<String> = live
            .waiting
            .iter()
            .map(|(t, n)| format!("{n} on {t}"))
            .collect();
        f = f.evidence(format!("waiting now: {}", w.join(", ")));
    }
    f
}
