//! Postgres itself, read-only (`--postgres-env VAR` / `--postgres-file FILE`): the connections
//! it allows (`max_connections`, `superuser_reserved_connections`) and the ones open now, by
//! application and state, and what they wait on (`pg_stat_activity`). The DSN (key=value or a
//! `postgres://` URL) is read from the variable or file and never shown, stored or logged:
//! errors name the host, port and database only. Every figure is checked before it is one.

use crate::error::BadInput;
pub use crate::topology::PostgresFacts;
use std::time::Duration;

/// Most connections believed (Postgres' own ceiling is far below).
const MAX_CONNECTIONS: u32 = 1_000_000;

/// How long each exchange may take: the connection with its start-up and authentication, and
/// each query. A server that accepts and goes silent is named, never waited on for ever.
const DEADLINE: Duration = Duration::from_secs(10);

/// `fut` within [`DEADLINE`], else an error naming the server and the step.
async fn within<T>(
    at: &str,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, BadInput> {
    match tokio::time::timeout(DEADLINE, fut).await {
        Ok(r) => r.map_err(|e| words(at, what, e)),
        Err(_) => Err(silent(at, what)),
    }
}

fn silent(at: &str, what: &str) -> BadInput {
    BadInput(format!(
        "Postgres at {at}: {what}: no answer within {} s (the server took the connection and \
         went silent: is this port a Postgres, and is it alive?)",
        DEADLINE.as_secs()
    ))
}

/// A `postgres://` URL whose user or password holds a raw `@` is refused before it is parsed:
/// the parser would take what follows the first `@` for the host, and show it.
fn raw_at_in_userinfo(dsn: &str) -> Result<(), BadInput> {
    let Some(rest) = dsn
        .strip_prefix("postgres://")
        .or_else(|| dsn.strip_prefix("postgresql://"))
    else {
        return Ok(());
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.matches('@').count() > 1 {
        return Err(BadInput(
            "the Postgres DSN's user or password holds a raw '@': percent-encode it as %40 \
             (postgres://user:p%40ss@host/db)"
                .into(),
        ));
    }
    Ok(())
}

/// The DSN from `--postgres-env VAR` or `--postgres-file FILE` (its first line). A DSN pasted
/// where the variable's name or the file goes is refused without being echoed: it may hold a
/// password.
pub fn dsn(env: Option<&str>, file: Option<&std::path::Path>) -> Result<Option<String>, BadInput> {
    match (env, file) {
        (Some(v), _) => {
            let name = !v.is_empty()
                && !v.starts_with(|c: char| c.is_ascii_digit())
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name {
                return Err(BadInput(
                    "--postgres-env takes the name of a variable that holds the DSN, not the DSN \
                     (not shown: it may hold a password): export N8N_DB='postgres://…' and give \
                     --postgres-env N8N_DB"
                        .into(),
                ));
            }
            std::env::var(v).map(Some).map_err(|_| {
                BadInput(format!(
                    "--postgres-env {v}: the variable is not set (it holds the DSN: host=… user=… dbname=… or postgres://…)"
                ))
            })
        }
        (None, Some(f)) => {
            let text = f.to_string_lossy();
            if !f.exists() && (text.contains("://") || text.contains('=')) {
                return Err(BadInput(
                    "--postgres-file takes a file whose first line is the DSN, not the DSN (not \
                     shown: it may hold a password)"
                        .into(),
                ));
            }
            let text = crate::util::read_text_file(f, 64 * 1024, "--postgres-file")?;
            let line = text.lines().next().unwrap_or("").trim().to_string();
            if line.is_empty() {
                return Err(BadInput(format!(
                    "--postgres-file {}: empty; its first line is the DSN",
                    f.display()
                )));
            }
            Ok(Some(line))
        }
        (None, None) => Ok(None),
    }
}

/// A DSN parsed: the connection's settings (read-only), TLS as its `sslmode` asks
/// (`postgres_tls`), and where it points without credentials ("host:port/database").
struct Target {
    cfg: tokio_postgres::Config,
    tls: super::postgres_tls::Tls,
    at: String,
}

/// The DSN parsed, read-only, and where it points without credentials ("host:port/database").
fn config(dsn: &str) -> Result<Target, BadInput> {
    raw_at_in_userinfo(dsn)?;
    // The ssl* keys taken out first: tokio-postgres knows no verify-ca, verify-full or
    // certificate files.
    let (rest, tls) = super::postgres_tls::split(dsn)?;
    let mut cfg: tokio_postgres::Config = rest.parse().map_err(|_| {
        BadInput(
            "the Postgres DSN does not parse: give key=value pairs (host=… port=… user=… dbname=…) or a postgres:// URL"
                .into(),
        )
    })?;
    cfg.connect_timeout(DEADLINE)
        .application_name("n8ncap")
        .options("-c default_transaction_read_only=on");
    let at = format!(
        "{}:{}/{}",
        cfg.get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(s) => s.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into()),
        cfg.get_ports().first().copied().unwrap_or(5432),
        cfg.get_dbname().unwrap_or("postgres")
    );
    Ok(Target { cfg, tls, at })
}

/// A connection to `t` within [`DEADLINE`]: a silent server and a TLS setting that cannot be
/// used (a certificate file that does not read) are errors; Postgres' refusal is the inner one.
async fn connect(
    t: &Target,
) -> Result<Result<super::postgres_tls::Connected, tokio_postgres::Error>, BadInput> {
    match tokio::time::timeout(DEADLINE, super::postgres_tls::connect(&t.cfg, &t.tls)).await {
        Err(_) => Err(silent(&t.at, "cannot connect")),
        Ok(r) => r,
    }
}

/// A Postgres error in its own words (its SQLSTATE), or that it did not answer.
fn words(at: &str, what: &str, e: tokio_postgres::Error) -> BadInput {
    BadInput(format!(
        "Postgres at {at}: {what}: {}",
        e.as_db_error()
            .map(|d| format!("{} ({})", d.message(), d.code().code()))
            .or_else(|| tls_words(&e))
            .unwrap_or_else(|| "no answer (host, port, credentials?)".into())
    ))
}

/// A TLS failure in rustls' words (an unknown issuer, a name the certificate is not for, a
/// server that offers no TLS), with what to check: the error chain, never the DSN.
fn tls_words(e: &tokio_postgres::Error) -> Option<String> {
    let mut chain = vec![e.to_string()];
    let mut cur = std::error::Error::source(e);
    while let Some(s) = cur {
        chain.push(s.to_string());
        cur = s.source();
    }
    let all = chain.join(": ");
    let tls = all.contains("TLS") || all.contains("certificate") || all.contains("SSL");
    tls.then(|| {
        format!(
            "{all} (check sslmode and sslrootcert: the CA that signed the server's certificate)"
        )
    })
}

/// A setting that counts connections, checked.
fn count(at: &str, name: &str, v: String) -> Result<u32, BadInput> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_CONNECTIONS)
        .ok_or_else(|| {
            BadInput(format!(
                "Postgres at {at}: {name} is {v:?}, not a count of connections"
            ))
        })
}

/// What a running Postgres can report: `max_connections` of 1 or more, above the superuser
/// reserve (Postgres refuses to start otherwise), and no more client connections open than it
/// allows. Else the answer is not a Postgres' (a proxy, a mock) and nothing is judged from it.
fn possible(at: &str, (max, reserved): (u32, u32), open: u64) -> Result<(), BadInput> {
    let why = if max == 0 {
        "max_connections 0 (a Postgres needs at least 1)".to_string()
    } else if reserved >= max {
        format!("superuser_reserved_connections {reserved} at or above max_connections {max} (a Postgres refuses to start so)")
    } else if open > max as u64 {
        format!("{open} client connections open of max_connections {max}")
    } else {
        return Ok(());
    };
    Err(BadInput(format!(
        "Postgres at {at} reports {why}: not figures a running PostgreSQL gives — is the DSN a PostgreSQL server's (not a proxy's or a mock's)?"
    )))
}

/// The client connections open now by application and state, and what they wait on.
type Activity = (Vec<(String, String, u32)>, Vec<(String, u32)>);

async fn activity(client: &tokio_postgres::Client, at: &str) -> Result<Activity, BadInput> {
    let rows = within(
        at,
        "reading pg_stat_activity",
        client.query(
            "SELECT coalesce(application_name, ''), coalesce(state, ''), count(*)::int8 \
             FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1, 2 ORDER BY 3 DESC",
            &[],
        ),
    )
    .await?;
    let typed = |e| words(at, "pg_stat_activity: an answer of another type", e);
    let by_application = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get::<_, String>(0)?,
                r.try_get::<_, String>(1)?,
                r.try_get::<_, i64>(2)?,
            ))
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(typed)?
        .into_iter()
        .map(|(a, s, n)| {
            (
                crate::util::escape_control(&a).into_owned(),
                s,
                n.clamp(0, MAX_CONNECTIONS as i64) as u32,
            )
        })
        .collect();
    let rows = within(
        at,
        "reading pg_stat_activity",
        client.query(
            "SELECT wait_event_type, count(*)::int8 FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND wait_event_type IS NOT NULL GROUP BY 1",
            &[],
        ),
    )
    .await?;
    let waiting = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get::<_, String>(0)?,
                r.try_get::<_, i64>(1)?.clamp(0, MAX_CONNECTIONS as i64) as u32,
            ))
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(typed)?;
    Ok((by_application, waiting))
}

/// Connects read-only and reads the connection figures.
pub async fn read(dsn: &str) -> Result<PostgresFacts, BadInput> {
    let t = config(dsn)?;
    let at = t.at.clone();
    // Out of connections is what the audit was asked about, not bad input: said as a fact.
    let (client, task) = match connect(&t).await? {
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::TOO_MANY_CONNECTIONS) => {
            let message = e
                .as_db_error()
                .map(|d| format!("{} ({})", d.message(), d.code().code()))
                .unwrap_or_else(|| "too many connections (53300)".into());
            return Ok(PostgresFacts {
                at,
                max_connections: 0,
                reserved: 0,
                by_application: Vec::new(),
                waiting: Vec::new(),
                refused: Some(crate::util::escape_control(&message).into_owned()),
                major: None,
            });
        }
        Err(e) => return Err(words(&at, "cannot connect", e)),
        Ok(c) => c,
    };
    let read = async {
        let mut settings = Vec::new();
        for name in ["max_connections", "superuser_reserved_connections"] {
            let show = format!("SHOW {name}");
            let row = within(&at, &show, client.query_one(&show, &[])).await?;
            let v: String = row
                .try_get(0)
                .map_err(|e| words(&at, &format!("{show}: not a text answer"), e))?;
            settings.push(count(&at, name, v)?);
        }
        let (by_application, waiting) = activity(&client, &at).await?;
        let show = "SHOW server_version_num";
        let major = within(&at, show, client.query_one(show, &[]))
            .await
            .ok()
            .and_then(|row| row.try_get::<_, String>(0).ok())
            .and_then(|v| major_of(&v));
        Ok::<_, BadInput>((settings, by_application, waiting, major))
    }
    .await;
    drop(client);
    // A silent server keeps the connection task waiting: it is not waited for.
    task.abort();
    let (settings, by_application, waiting, major) = read?;
    let open: u64 = by_application.iter().map(|(_, _, n)| *n as u64).sum();
    possible(&at, (settings[0], settings[1]), open)?;
    Ok(PostgresFacts {
        at,
        max_connections: settings[0],
        reserved: settings[1],
        by_application,
        waiting,
        refused: None,
        major,
    })
}

/// A major version from `server_version_num` (150010 → 15): PostgreSQL 10 and later, the
/// numbers a server gives (none from an answer that is not one).
fn major_of(num: &str) -> Option<u32> {
    let n: u32 = num.trim().parse().ok()?;
    (100_000..10_000_000).contains(&n).then_some(n / 10_000)
}

/// A connection opened before the load and held to its end, so that what the run left behind
/// is counted even when n8n's pools have filled Postgres (they keep idle connections 30 s: a
/// connection asked for at the end is refused, 53300).
pub struct Held {
    client: tokio_postgres::Client,
    task: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    at: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens the connection [`Held`] keeps; None when Postgres refuses or does not answer now (the
/// count then connects at the end, as before).
pub async fn hold(dsn: &str) -> Option<Held> {
    let t = config(dsn).ok()?;
    let (client, task) = connect(&t).await.ok()?.ok()?;
    Some(Held {
        client,
        task,
        at: t.at,
    })
}

/// Checks `DB_TABLE_PREFIX` before it is put in a statement.
fn checked_prefix(table_prefix: &str) -> Result<(), BadInput> {
    if table_prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Ok(());
    }
    Err(BadInput(format!(
        "DB_TABLE_PREFIX {table_prefix:?}: letters, digits and _ only"
    )))
}

/// Counts into `left` over `client`: the executions since its `since_unix` left `new` or
/// `running`; a failed count is said in `not_counted`.
async fn count_left(
    client: &tokio_postgres::Client,
    at: &str,
    table_prefix: &str,
    left: &mut crate::record::db::ExecutionsLeft,
) {
    let sql = format!(
        "SELECT status, count(*)::int8 FROM {table_prefix}execution_entity \
         WHERE \"createdAt\" >= to_timestamp($1::float8) AND status IN ('new', 'running') \
         GROUP BY status"
    );
    let since_unix = left.since_unix;
    let got = within(
        at,
        "counting the executions left",
        client.query(&sql, &[&since_unix]),
    )
    .await;
    match got {
        Ok(rows) => {
            for r in rows {
                let (status, n): (String, i64) = match (r.try_get(0), r.try_get(1)) {
                    (Ok(s), Ok(n)) => (s, n),
                    _ => continue,
                };
                let n = n.max(0) as u64;
                match status.as_str() {
                    "new" => left.new = n,
                    "running" => left.running = n,
                    _ => {}
                }
            }
        }
        Err(e) => left.not_counted = Some(e.0),
    }
}

impl Held {
    /// [`executions_left`] over the held connection; None when it is gone (Postgres restarted
    /// or closed it), to count on a new one.
    pub async fn executions_left(
        &self,
        since_unix: f64,
        table_prefix: &str,
    ) -> Option<Result<crate::record::db::ExecutionsLeft, BadInput>> {
        if self.client.is_closed() {
            return None;
        }
        if let Err(e) = checked_prefix(table_prefix) {
            return Some(Err(e));
        }
        let mut left = crate::record::db::ExecutionsLeft {
            since_unix,
            held: true,
            ..Default::default()
        };
        count_left(&self.client, &self.at, table_prefix, &mut left).await;
        Some(Ok(left))
    }
}

/// n8n's executions created since `since_unix` and left `new` or `running` (`execution_entity`,
/// n8n's table and columns; `table_prefix` is `DB_TABLE_PREFIX`). Read-only; a Postgres that
/// refuses the connection, or a database without the table, is said in `not_counted`.
pub async fn executions_left(
    dsn: &str,
    since_unix: f64,
    table_prefix: &str,
) -> Result<crate::record::db::ExecutionsLeft, BadInput> {
    let mut left = crate::record::db::ExecutionsLeft {
        since_unix,
        ..Default::default()
    };
    checked_prefix(table_prefix)?;
    let t = config(dsn)?;
    let at = t.at.clone();
    let (client, task) = match connect(&t).await? {
        Err(e) => {
            left.not_counted = Some(words(&at, "cannot connect", e).0);
            return Ok(left);
        }
        Ok(c) => c,
    };
    count_left(&client, &at, table_prefix, &mut left).await;
    drop(client);
    task.abort();
    Ok(left)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_major_version_is_read_from_server_version_num_only() {
        assert_eq!(super::major_of("150010"), Some(15));
        assert_eq!(super::major_of(" 170002 "), Some(17));
        for not in ["90624", "abc", "", "99999999", "-150010"] {
            assert_eq!(super::major_of(not), None, "{not}");
        }
    }

    /// Figures no running Postgres gives are refused: max_connections 0, a reserve at or above
    /// it, more connections open than it allows; a real one's (100, 3, 12 open) pass.
    #[test]
    fn impossible_connection_figures_are_refused() {
        let at = "127.0.0.1:5432/n8n";
        assert!(super::possible(at, (0, 0), 0).is_err());
        assert!(super::possible(at, (20, 20), 1).is_err());
        assert!(super::possible(at, (20, 30), 1).is_err());
        assert!(super::possible(at, (20, 3), 9_000_000_000_000_000_000).is_err());
        assert!(super::possible(at, (100, 3), 12).is_ok());
        assert!(super::possible(at, (20, 3), 20).is_ok());
    }
}
