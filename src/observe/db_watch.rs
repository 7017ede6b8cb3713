//! The database beside a sweep, where its cause shows (n8n's answers never name Postgres: a
//! real n8n 2.41.1 out of connections answered HTTP 500 "Error in workflow" and HTTP 200 "…did
//! not return any data"). Two sources, each optional:
//! - **n8n's logs**, followed through the Docker API for every main, worker and webhook
//!   processor container: lines naming Postgres' refusal (53300, "too many clients",
//!   "remaining connection slots are reserved") and n8n's "Problem with execution N: …
//!   Aborting.", counted per stage (warm-up included).
//! - **Postgres itself**, through a DSN: every interval a short read-only connection reads
//!   `max_connections`, the reserved slots and the client connections by application; a round
//!   whose connection Postgres refuses (53300) is counted: a new client was refused then.
//!
//! It wraps the sweep's other observer: what that one sees is handed on unchanged.

use crate::observe::postgres;
use crate::record::db::{db_line, DatabaseObserved, PostgresSampled};
use crate::record::observation::{Observer, StageObservation};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::task::JoinHandle;

/// What a sweep gives it to watch.
pub struct DbSources {
    /// The Docker API and the n8n containers (id, name) whose logs to follow.
    pub docker: Option<(bollard::Docker, Vec<(String, String)>)>,
    /// The DSN (never shown).
    pub dsn: Option<String>,
    pub interval: Duration,
}

#[derive(Default)]
struct Acc {
    in_stage: bool,
    refusal_lines: u64,
    problem_lines: u64,
    logged_by: BTreeSet<String>,
    example: Option<String>,
    pg: PostgresSampled,
}

pub struct DbWatch {
    inner: Option<Box<dyn Observer>>,
    acc: Arc<Mutex<Acc>>,
    tasks: Vec<JoinHandle<()>>,
    logs: bool,
    pg: bool,
}

/// `inner` with the database watched beside it; `inner` itself when there is nothing to watch.
pub fn wrap(inner: Option<Box<dyn Observer>>, src: DbSources) -> Option<Box<dyn Observer>> {
    let containers = src.docker.as_ref().map_or(0, |(_, c)| c.len());
    if containers == 0 && src.dsn.is_none() {
        return inner;
    }
    let acc = Arc::new(Mutex::new(Acc::default()));
    let mut tasks = Vec::new();
    if let Some((docker, list)) = src.docker {
        for (id, name) in list {
            tasks.push(tokio::spawn(follow_logs(
                acc.clone(),
                docker.clone(),
                id,
                name,
            )));
        }
    }
    let pg = src.dsn.is_some();
    if let Some(dsn) = src.dsn {
        tasks.push(tokio::spawn(sample_postgres(
            acc.clone(),
            dsn,
            src.interval,
        )));
    }
    Some(Box::new(DbWatch {
        inner,
        acc,
        tasks,
        logs: containers > 0,
        pg,
    }))
}

impl Observer for DbWatch {
    fn begin_stage(&mut self, index: usize, steady_from: std::time::Instant) {
        if let Some(i) = &mut self.inner {
            i.begin_stage(index, steady_from);
        }
        if let Ok(mut a) = self.acc.lock() {
            *a = Acc {
                in_stage: true,
                ..Acc::default()
            };
        }
    }

    fn end_stage(&mut self, coarse: bool) -> StageObservation {
        let mut o = match &mut self.inner {
            Some(i) => i.end_stage(coarse),
            None => StageObservation {
                memory_by_role: Vec::new(),
                queue: None,
                endpoints: Vec::new(),
                containers: Vec::new(),
                database: None,
            },
        };
        let a = self
            .acc
            .lock()
            .map(|mut a| std::mem::take(&mut *a))
            .unwrap_or_default();
        o.database = Some(DatabaseObserved {
            logs_read: self.logs,
            refusal_lines: a.refusal_lines,
            problem_lines: a.problem_lines,
            logged_by: a.logged_by.into_iter().collect(),
            example: a.example,
            postgres: self.pg.then_some(a.pg),
        });
        o
    }

    fn stop(&mut self) {
        if let Some(i) = &mut self.inner {
            i.stop();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for DbWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Most bytes of one unfinished log line kept.
const MAX_LINE: usize = 64 * 1024;

/// Follows one container's log from now on, counting the lines about the database in the stage
/// under way; a stream that ends (the container stopped) is followed again a second later, from
/// where it ended.
async fn follow_logs(acc: Arc<Mutex<Acc>>, docker: bollard::Docker, id: String, name: String) {
    use futures_util::StreamExt;
    let mut since = unix_now();
    loop {
        let opts = bollard::query_parameters::LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(true)
            .since(since.clamp(0, i32::MAX as i64) as i32)
            .build();
        let mut stream = docker.logs(&id, Some(opts));
        let mut partial = String::new();
        while let Some(Ok(chunk)) = stream.next().await {
            partial.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            while let Some(end) = partial.find('\n') {
                let line: String = partial.drain(..=end).collect();
                count_line(&acc, &name, &line);
            }
            if partial.len() > MAX_LINE {
                count_line(&acc, &name, &partial);
                partial.clear();
            }
        }
        since = unix_now();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn count_line(acc: &Mutex<Acc>, name: &str, line: &str) {
    let (refusal, problem) = db_line(line);
    if !(refusal || problem) {
        return;
    }
    let Ok(mut a) = acc.lock() else { return };
    if !a.in_stage {
        return;
    }
    a.refusal_lines += refusal as u64;
    a.problem_lines += problem as u64;
    a.logged_by.insert(name.to_string());
    if a.example.is_none() {
        a.example = Some(
            crate::util::escape_control(&crate::util::truncate(line.trim(), 300)).into_owned(),
        );
    }
}

/// Reads Postgres' connections every interval (at least every second) for the whole sweep.
async fn sample_postgres(acc: Arc<Mutex<Acc>>, dsn: String, interval: Duration) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let got = postgres::read(&dsn).await;
        let Ok(mut a) = acc.lock() else { return };
        if !a.in_stage {
            continue;
        }
        record(&mut a.pg, got);
    }
}

/// One round's reading into the stage's figures: a refusal counted with its words, the busiest
/// round's connections kept, what cannot be true a gap.
fn record(pg: &mut PostgresSampled, got: Result<postgres::PostgresFacts, crate::error::BadInput>) {
    match got {
        Ok(f) if f.refused.is_some() => {
            pg.refused += 1;
            pg.refused_message = f.refused;
        }
        Ok(f) if f.max_connections == 0 || f.open() > f.max_connections => pg.gaps += 1,
        Ok(f) => {
            pg.samples += 1;
            pg.max_connections = f.max_connections;
            pg.reserved = f.reserved;
            let open = f.open();
            if open >= pg.open_max {
                pg.open_max = open;
                let mut by: std::collections::BTreeMap<String, u32> = Default::default();
                for (app, _, n) in &f.by_application {
                    *by.entry(app.clone()).or_default() += n;
                }
                let mut by: Vec<(String, u32)> = by.into_iter().collect();
                by.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                pg.by_application = by;
            }
        }
        Err(_) => pg.gaps += 1,
    }
}

/// The last line of a log about n8n's watch over its database (n8n 2.41's
/// `DbConnectionMonitor`): its recovery, its tries, its failed pings, a pooled connection
/// Postgres ended. Read by `postgres-restart`'s read-back.
pub fn recovery_line_in(text: &str) -> Option<String> {
    let words = [
        "Database connection recovered",
        "Attempting to recover database connection",
        "Recovery attempt",
        "Triggering database connection recovery",
        "Database ping failed",
        "Postgres pool client error",
    ];
    text.lines()
        .rev()
        .find(|l| words.iter().any(|w| l.contains(w)))
        .map(|l| crate::util::escape_control(&crate::util::truncate(l.trim(), 300)).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(max: u32, reserved: u32, open: &[(&str, u32)]) -> postgres::PostgresFacts {
        postgres::PostgresFacts {
            at: "db:5432/n8n".into(),
            max_connections: max,
            reserved,
            by_application: open
                .iter()
                .map(|(a, n)| (a.to_string(), "idle".to_string(), *n))
                .collect(),
            waiting: Vec::new(),
            refused: None,
            major: Some(16),
        }
    }

    #[test]
    fn rounds_keep_the_busiest_and_count_refusals_and_impossible_answers() {
        let mut pg = PostgresSampled::default();
        record(&mut pg, Ok(facts(20, 3, &[("main", 4), ("worker-1", 6)])));
        record(&mut pg, Ok(facts(20, 3, &[("main", 10), ("worker-1", 7)])));
        record(&mut pg, Ok(facts(20, 3, &[("main", 2)])));
        // More open than Postgres allows cannot be true.
        record(&mut pg, Ok(facts(20, 3, &[("main", 25)])));
        let mut refused = facts(0, 0, &[]);
        refused.refused = Some("remaining connection slots are reserved (53300)".into());
        record(&mut pg, Ok(refused));
        record(
            &mut pg,
            Err(crate::error::BadInput("Postgres at db: no answer".into())),
        );
        assert_eq!((pg.samples, pg.refused, pg.gaps), (3, 1, 2));
        assert_eq!(pg.open_max, 17);
        assert_eq!(pg.usable(), Some(17));
        assert!(pg.exhausted());
        assert_eq!(pg.by_application[0], ("main".to_string(), 10));
    }

    #[test]
    fn only_lines_about_the_database_in_a_stage_count() {
        let acc = Mutex::new(Acc::default());
        count_line(&acc, "w1", "Problem with execution 7: remaining connection slots are reserved for non-replication superuser connections. Aborting.\n");
        assert_eq!(acc.lock().unwrap().problem_lines, 0, "outside a stage");
        acc.lock().unwrap().in_stage = true;
        count_line(&acc, "w1", "Problem with execution 7: remaining connection slots are reserved for non-replication superuser connections. Aborting.\n");
        count_line(&acc, "main", "sorry, too many clients already\n");
        count_line(&acc, "main", "Worker started execution 8\n");
        let a = acc.lock().unwrap();
        assert_eq!((a.refusal_lines, a.problem_lines), (2, 1));
        assert_eq!(a.logged_by.len(), 2);
    }
}
