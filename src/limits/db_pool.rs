//! The database pool: each worker reaches Postgres through `DB_POSTGRESDB_POOL_SIZE`
//! connections (n8n's default 2), and an execution holds one for its database time D (reading
//! it, writing its result). Bound Σ pool ÷ D. D is measured, not set: Little's law at the pool,
//! connections in use (n8n's `db_pool_connections_active`) ÷ executions per second, at every
//! level a run measured. When the pool binds its requests wait (`db_pool_requests_pending`) and
//! the acquire time grows; n8n's own database health ping waits in the same queue
//! (n8n-io/terraform-aws-n8n#106: 33–54 requests pending per pod, pods declared a healthy
//! database dead, fixed by `DB_POSTGRESDB_POOL_SIZE=20` and `DB_PING_TIMEOUT_MS=20000`).

use super::reading::{inferred, pct};
use super::Membership;
use super::{Dialect, Key, Kind, Named, Process, SettingLine};
use super::{Share, Verdict};
use crate::error::NoPlan;
use crate::findings::{Finding, FindingId};
use crate::model::settings::Provenance;
use crate::model::settings::{Settings, Sourced};
use crate::model::{n8n_defaults, Bound, Holds, Job, Limit};
use crate::record::db::PostgresSampled;
use crate::record::diagnosis::{Diagnosis, Level};
use crate::record::{Role, StageResult};

pub struct DbPool;

/// A level's pool figures over the workers: connections in use, the pools' size, requests
/// pending; none when no worker exposed its pool.
fn workers_pool(stages: &[StageResult], level: &Level) -> Option<(f64, f64, f64)> {
    let mut per_stage = level.stages.iter().filter_map(|i| {
        let pools: Vec<_> = stages
            .get(*i)?
            .endpoints
            .iter()
            .filter(|e| e.role == Some(Role::Worker))
            .filter_map(|e| e.db_pool.as_ref())
            .filter(|p| p.samples > 0)
            .collect();
        (!pools.is_empty()).then(|| {
            (
                pools.iter().map(|p| p.active_mean).sum::<f64>(),
                pools.iter().map(|p| p.max).sum::<f64>(),
                pools.iter().map(|p| p.pending_mean).sum::<f64>(),
            )
        })
    });
    let first = per_stage.next()?;
    let (mut n, mut acc) = (1.0, first);
    for (a, m, p) in per_stage {
        acc = (acc.0 + a, acc.1 + m, acc.2 + p);
        n += 1.0;
    }
    Some((acc.0 / n, acc.1 / n, acc.2 / n))
}

/// The highest acquire p99 any valid level's workers measured, with whether it was only a bound.
fn acquire_p99(stages: &[StageResult], levels: &[Level]) -> Option<Sourced<f64>> {
    let (v, above) = levels
        .iter()
        .filter(|l| l.valid)
        .flat_map(|l| l.stages.iter().filter_map(|i| stages.get(*i)))
        .flat_map(|st| st.endpoints.iter())
        .filter(|e| e.role == Some(Role::Worker))
        .filter_map(|e| e.db_pool.as_ref())
        .filter_map(|p| p.acquire_p99_s.map(|v| (v, p.acquire_p99_above)))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(Sourced::new(
        v,
        Provenance::Measured(
            if above {
                "measured: above the last bucket of n8n_db_pool_acquire_seconds at the busiest level"
            } else {
                "measured: n8n_db_pool_acquire_seconds' bucket at the busiest level"
            }
            .into(),
        ),
    ))
}

impl Kind for DbPool {
    fn membership(&self) -> Membership {
        Membership {
            set: true,
            ..Membership::default()
        }
    }

    fn bound(&self, s: &Settings, _job: Job) -> Option<Bound> {
        let pool = s.db_pool_size.as_ref()?;
        let d = s.measured.db_time.as_ref().filter(|d| d.value > 0.0)?;
        let workers = s.worker_count();
        Some(Bound {
            limit: Limit::DbPool,
            servers: pool.value as f64 * workers as f64,
            demand_s: d.value,
            holds: Holds::Measured,
            source: pool.source.with_note(&format!(" × {workers} worker(s)")),
        })
    }

    /// The pools' size from n8n's `db_pool_connections_max` when no setting gave it, and the
    /// database time per execution from Little's law at the pool at every valid level
    /// (connections in use ÷ throughput: the median, the spread as its interval).
    fn read_run(&self, s: &mut Settings, stages: &[StageResult], levels: &[Level]) {
        let read: Vec<(f64, f64, f64, f64)> = levels
            .iter()
            .filter(|l| l.valid && l.throughput.mean > 0.0)
            .filter_map(|l| {
                let (active, max, pending) = workers_pool(stages, l)?;
                Some((active / l.throughput.mean, active, max, pending))
            })
            .filter(|(d, active, _, _)| d.is_finite() && *active > 0.0)
            .collect();
        if read.is_empty() {
            return;
        }
        let workers = s.worker_count().max(1) as f64;
        if s.db_pool_size.is_none() {
            let max = read.iter().map(|r| r.2).fold(0.0, f64::max);
            if max >= 1.0 {
                s.db_pool_size = Some(Sourced::new(
                    (max / workers).round() as u32,
                    Provenance::Measured(
                        "n8n_db_pool_connections_max on the workers' /metrics".into(),
                    ),
                ));
            }
        }
        // Where requests waited for a connection the pool was full: every connection in use
        // (a gauge read at the instant one is handed from a query to the next waiter shows one
        // fewer), so Little's law at the pool reads D = pool ÷ X exactly. Below that a gauge
        // read once per scrape can alias with steady job times (always busy, or always idle,
        // at the same phase), so those levels are used only when no level filled the pool.
        // A wait queue as long as the pool on average means the pool was full whenever it was
        // read with a request waiting: a gauge that reads fewer in use mixes instants between a
        // connection's return and its handover.
        let full: Vec<f64> = read
            .iter()
            .filter(|(_, active, max, pending)| {
                *pending >= 0.5 && (*active >= 0.75 * max || *pending >= *max)
            })
            .map(|(d, active, max, _)| d * max / active)
            .collect();
        let at_full = !full.is_empty();
        let mut d: Vec<f64> = if at_full {
            full
        } else {
            read.iter().map(|r| r.0).collect()
        };
        d.sort_by(f64::total_cmp);
        // Where the pool was full each level reads D exactly, and a busy host only stretches it:
        // the shortest is the pool's own (so its bound is the best any full level ran, never
        // below what was measured); elsewhere the median of the levels' readings.
        let median = if at_full { d[0] } else { d[d.len() / 2] };
        let pending = read.iter().map(|r| r.3).fold(0.0, f64::max);
        if s.measured.db_acquire_p99_s.is_none() {
            s.measured.db_acquire_p99_s = acquire_p99(stages, levels);
        }
        let busiest = read.iter().map(|r| r.1).fold(0.0, f64::max);
        s.measured.db_time.get_or_insert(Sourced {
            value: median,
            source: Provenance::Measured(format!(
                "measured: connections in use ÷ throughput (Little's law at the pool) at {} level(s){}; at most {busiest:.1} in use, {pending:.1} requests pending",
                d.len(),
                if at_full { " where the pool was full, the shortest" } else { "" }
            )),
            interval: Some([d[0], d[d.len() - 1]]),
        });
    }

    /// Postgres out of connections, from any evidence that names it (`db_refused`).
    fn leads(
        &self,
        stages: &[StageResult],
        s: &Settings,
        findings: &mut Vec<Finding>,
    ) -> Option<String> {
        refused_leads(stages, s, findings)
    }

    /// The ping timeout above the acquire p99 measured (n8n's ping waits in the pool's queue),
    /// and the connection budget the plan's pools need.
    fn notes(&self, s: &Settings, plan: &Settings) -> Vec<String> {
        let mut out = Vec::new();
        // Four times the p99 wait, in whole seconds: said only when n8n's default is short.
        let ms = s
            .measured
            .db_acquire_p99_s
            .as_ref()
            .map(|p| ((p.value * 4.0).ceil() * 1000.0, p))
            .filter(|(ms, _)| *ms > n8n_defaults::DB_PING_TIMEOUT_MS);
        if let Some((ms, p99)) = ms {
            out.push(format!(
                "DB_PING_TIMEOUT_MS={ms:.0} on every process: n8n's database ping waits behind the pool, whose acquire p99 was {:.3} s ({}); at n8n's default {:.0} ms a full pool makes a healthy database look dead",
                p99.value,
                p99.source,
                n8n_defaults::DB_PING_TIMEOUT_MS
            ));
        }
        let pool = plan.db_pool_size.as_ref().map(|p| p.value);
        if let Some(pool) = pool.filter(|_| s.measured.db_time.is_some()) {
            out.push(format!(
                "connections: {pool} × {} worker(s) = {} for the workers, plus main's and every webhook processor's pool, at their autoscaler maxima — keep the total within Postgres max_connections − superuser_reserved_connections (default 3), or put PgBouncer (transaction mode) in front; `n8ncap audit` checks it against the deployment",
                plan.worker_count(),
                pool.saturating_mul(plan.worker_count())
            ));
        }
        out
    }

    fn readings(&self, s: &Settings) -> Vec<String> {
        let mut out: Vec<String> = super::reading::reading(&s.db_pool_size, "database pool")
            .into_iter()
            .collect();
        if let Some(d) = &s.measured.db_time {
            out.push(format!("database time {:.3} s ({})", d.value, d.source));
        }
        out
    }

    /// The pool's size is read and its demand measured: neither is inferred from the ceiling,
    /// so a pool bound under what ran is a reading to doubt (the floor names it).
    fn inferred_here(&self, s: &Settings) -> bool {
        inferred(&s.db_pool_size)
    }

    fn caps(&self, n: &Named, findings: &mut Vec<Finding>) -> Verdict {
        let (s, ceiling) = (n.s, n.ceiling);
        let Some(b) = self.bound(s, n.job) else {
            return Verdict {
                limit: None,
                text: "The database pool was named, but its size or database time is unknown"
                    .into(),
                cpu: None,
            };
        };
        let x = ceiling.x.mean;
        let d = b.demand_s;
        let in_use = x * d;
        let at = ceiling.at();
        let wanted = (x * 1.5 * d / s.worker_count().max(1) as f64)
            .ceil()
            .max(1.0);
        let now = s
            .db_pool_size
            .as_ref()
            .map(|p| format!(" (now {})", p.value))
            .unwrap_or_default();
        findings.push(
            n.base(Finding::new(
                FindingId::DbPoolCaps,
                format!(
                    "The database pool caps throughput at {x:.2} req/s: {:.0} connection(s) across the workers",
                    b.servers
                ),
            ))
            .evidence(format!(
                "{in_use:.1} connections in use (X × D = {x:.2} × {d:.3} s) = {} of {:.0} (DB_POSTGRESDB_POOL_SIZE {:.0}: {}); {at}",
                pct(in_use / b.servers.max(1.0)),
                b.servers,
                b.servers / s.worker_count().max(1) as f64,
                b.source
            ))
            .evidence(format!(
                "database time D {d:.3} s per execution{}",
                s.measured.db_time.as_ref().map(|t| format!(" ({})", t.source)).unwrap_or_default()
            ))
            .evidence(format!(
                "{} worker slots ÷ S {:.2} s would allow {:.2} req/s; {:.0} pool connection(s) ÷ D allow {:.2}",
                n.cap.slots(),
                ceiling.s,
                n.cap.worker_bound(),
                b.servers,
                b.per_s()
            ))
            .figure("db_pool_connections", b.servers)
            .figure("db_time_s", d)
            .figure("db_connections_in_use", in_use)
            .figure("db_pool_bound_per_s", b.per_s())
            .why("Executions hold a worker slot while they wait for a connection: more workers or slots add waiters, not throughput; n8n's database health ping waits in the same queue and can declare a healthy database dead.")
            .fix(format!(
                "raise DB_POSTGRESDB_POOL_SIZE on the workers to at least {wanted:.0}{now} and keep Σ pools (main, webhook processors and every worker, at their autoscaler maxima) within Postgres max_connections − superuser_reserved_connections; set DB_PING_TIMEOUT_MS above the pool's acquire p99",
            )),
        );
        Verdict {
            limit: Some(Limit::DbPool.into()),
            text: format!(
                "The database pool caps throughput: {at}; {:.0} connection(s) ÷ D {d:.3} s = {:.2} req/s, while {} worker slots would allow {:.2} req/s.",
                b.servers,
                b.per_s(),
                n.cap.slots(),
                n.cap.worker_bound()
            ),
            cpu: None,
        }
    }

    /// Every workflow that runs saves its execution: the pool is not shared out by kind.
    fn shared_as(&self) -> Option<Share> {
        None
    }

    /// The pool per worker so that, at the next ceiling (the smallest other bound), it is at
    /// most 2/3 busy: ⌈next × D × 1.5 ÷ workers⌉, never below today's + 1.
    fn raise(&self, d: &Diagnosis, current: &Settings, job: Job) -> Result<Settings, NoPlan> {
        let dt = current
            .measured
            .db_time
            .as_ref()
            .map(|t| t.value)
            .filter(|t| *t > 0.0)
            .ok_or(
                "the database pool caps, but its database time per execution was not measured",
            )?;
        let now = current
            .db_pool_size
            .as_ref()
            .map_or(n8n_defaults::DB_POOL_SIZE, |p| p.value);
        let others = super::capacity(current, job.overhead_s)
            .map(|c| {
                c.bounds
                    .iter()
                    .filter(|b| b.limit != Limit::DbPool)
                    .map(|b| b.per_s())
                    .filter(|v| v.is_finite())
                    .fold(f64::INFINITY, f64::min)
            })
            .filter(|v| v.is_finite());
        let measured = d.measured_ceiling.as_ref().map(|m| m.mean).unwrap_or(0.0);
        let next = others.unwrap_or(measured * 1.5);
        let per_worker = (next * dt * 1.5 / current.worker_count() as f64).ceil() as u32;
        Ok(current.clone().propose(
            |s| &mut s.db_pool_size,
            per_worker.max(now + 1),
            format!(
                "at most 2/3 busy at the next ceiling {next:.2} req/s × {dt:.3} s of database time"
            ),
        ))
    }

    fn lines(&self, plan: &Settings, dialect: Dialect) -> Vec<SettingLine> {
        const VAR: &str = "DB_POSTGRESDB_POOL_SIZE";
        let Some(pool) = plan.db_pool_size.as_ref().map(|p| p.value) else {
            return Vec::new();
        };
        let on = if plan.is_regular() {
            Process::Main
        } else {
            Process::Worker
        };
        let key = match dialect {
            // The community chart renders one pool size for every process.
            Dialect::HelmCommunity => Key::Value("db.postgresdb.poolSize"),
            Dialect::Compose | Dialect::HelmOfficial | Dialect::K8s => Key::Env(VAR),
        };
        vec![SettingLine::new(on, key, pool)]
    }
}

// Postgres out of connections, from what is really there. A real n8n 2.41.1 whose pools asked
// more than `max_connections − superuser_reserved_connections` answered its callers HTTP 500
// `{"message":"Error in workflow"}` and HTTP 200 "…the last node did not return any data": no
// answer names Postgres. The cause shows in n8n's logs ("Problem with execution N: remaining
// connection slots are reserved … Aborting.", read through the Docker API), in Postgres itself
// (every usable slot open, a new client refused: read through a DSN), and in a body that carries
// Postgres' words (a proxy or another tool's answer). Any of them names the cause; the verdict
// leads with it and its budget, and still judges the stages that stayed valid.

/// What one stage shows of Postgres refusing connections.
#[derive(Default)]
struct Seen {
    /// Answers whose body carries Postgres' refusal.
    bodies: u64,
    /// n8n's (or Postgres') log lines naming the refusal; n8n's "Problem with execution"
    /// lines among the logs.
    lines: u64,
    problems: u64,
    /// Rounds whose own connection Postgres refused; the stage's Postgres at its limit.
    pg_refused: u32,
    pg_full: bool,
    /// Answers that failed (HTTP ≥ 500, or a broken connection) and good-status answers
    /// without the last node's data.
    failed: u64,
    no_data: u64,
}

impl Seen {
    fn of(st: &StageResult) -> Seen {
        let failed = st
            .errors
            .http_status
            .iter()
            .filter(|(s, _)| **s >= 500)
            .map(|(_, n)| n)
            .sum::<u64>();
        let mut seen = Seen {
            bodies: st.errors.db_refused,
            failed,
            no_data: st.errors.no_data,
            ..Seen::default()
        };
        if let Some(db) = &st.database {
            seen.lines = db.refusal_lines;
            // n8n's "Problem with execution" names its cause in the same line; without a
            // refusal in the stage's logs it is another problem's.
            seen.problems = if db.refusal_lines > 0 {
                db.problem_lines
            } else {
                0
            };
            if let Some(pg) = &db.postgres {
                seen.pg_refused = pg.refused;
                seen.pg_full = pg.exhausted();
            }
        }
        seen
    }

    /// Postgres is named: by its words (a body, a log line), by refusing n8ncap's own
    /// connection, or by every slot open while answers failed.
    fn names_postgres(&self) -> bool {
        self.bodies > 0
            || self.lines > 0
            || self.pg_refused > 0
            || (self.pg_full && self.failed + self.no_data > 0)
    }
}

/// The busiest Postgres reading of the run.
fn busiest(stages: &[StageResult]) -> Option<&PostgresSampled> {
    stages
        .iter()
        .filter_map(|st| st.database.as_ref()?.postgres.as_ref())
        .filter(|p| p.samples > 0)
        .max_by_key(|p| p.open_max)
}

/// Each naming stage's figures, one line as logged, and who held Postgres' connections.
fn stage_evidence(
    mut f: Finding,
    stages: &[StageResult],
    named: &[(&StageResult, Seen)],
) -> Finding {
    for (st, n) in named {
        f = f.evidence(format!(
            "stage {} ({}): {} of {} answers failed ({}), {} answered 200 without the last node's data; {} log line(s) name the refusal, {} \"Problem with execution … Aborting.\"{}",
            st.index,
            st.level().words(),
            n.failed.max(n.bodies),
            st.requests,
            pct(n.failed.max(n.bodies) as f64 / st.requests.max(1) as f64),
            n.no_data,
            n.lines,
            n.problems,
            if n.pg_refused > 0 || n.pg_full {
                format!("; Postgres at its limit ({} refusal(s) of n8ncap's connection)", n.pg_refused)
            } else {
                String::new()
            }
        ));
    }
    if let Some(example) = stages
        .iter()
        .filter_map(|st| st.database.as_ref()?.example.as_deref())
        .next()
    {
        f = f.evidence(format!("as logged: {example}"));
    }
    if let Some(pg) = busiest(stages).filter(|p| !p.by_application.is_empty()) {
        let by: Vec<String> = pg
            .by_application
            .iter()
            .take(8)
            .map(|(a, n)| format!("{} {n}", if a.is_empty() { "(unnamed)" } else { a }))
            .collect();
        f = f.evidence(format!(
            "connections by application at the busiest reading: {}",
            by.join(", ")
        ));
    }
    f
}

/// Σ pools × processes against the usable slots, as far as they are known.
fn budget(stages: &[StageResult], s: &Settings) -> (String, Vec<(&'static str, f64)>) {
    let mut figures = Vec::new();
    let mut words = Vec::new();
    let processes = s.worker_count() + 1;
    if let Some(pool) = &s.db_pool_size {
        let asked = pool.value.saturating_mul(processes);
        figures.push(("pool_size", pool.value as f64));
        figures.push(("processes", processes as f64));
        figures.push(("connections_asked", asked as f64));
        words.push(format!(
            "DB_POSTGRESDB_POOL_SIZE {} ({}) × {processes} process(es) (main and {} worker(s)) = up to {asked} connections",
            pool.value,
            pool.source,
            s.worker_count()
        ));
    }
    if let Some(pg) = busiest(stages) {
        if let Some(usable) = pg.usable() {
            figures.push(("max_connections", pg.max_connections as f64));
            figures.push(("reserved_connections", pg.reserved as f64));
            figures.push(("usable_connections", usable as f64));
            figures.push(("open_at_most", pg.open_max as f64));
            words.push(format!(
                "Postgres allows {usable} (max_connections {} − {} reserved); {} were open at the busiest reading",
                pg.max_connections, pg.reserved, pg.open_max
            ));
        }
    }
    let text = if words.is_empty() {
        "the pools together exceed max_connections − superuser_reserved_connections".into()
    } else {
        words.join("; ")
    };
    (text, figures)
}

/// Postgres out of connections, when anything named it: its finding first, and the words that
/// lead the verdict.
fn refused_leads(
    stages: &[StageResult],
    s: &Settings,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let named: Vec<(&StageResult, Seen)> = stages
        .iter()
        .map(|st| (st, Seen::of(st)))
        .filter(|(_, seen)| seen.names_postgres())
        .collect();
    if named.is_empty() {
        return None;
    }
    let sum = |f: fn(&Seen) -> u64| {
        named
            .iter()
            .fold(0u64, |acc, (_, n)| acc.saturating_add(f(n)))
    };
    let (bodies, lines, problems) = (sum(|n| n.bodies), sum(|n| n.lines), sum(|n| n.problems));
    let (failed, no_data) = (sum(|n| n.failed), sum(|n| n.no_data));
    let pg_refused = sum(|n| n.pg_refused as u64);
    let requests: u64 = named.iter().map(|(st, _)| st.requests).sum();
    let mut how = Vec::new();
    if lines > 0 {
        how.push(format!(
            "{lines} line(s) of the logs name Postgres' refusal"
        ));
    }
    if pg_refused > 0 {
        how.push(format!(
            "Postgres refused n8ncap's own connection {pg_refused} time(s)"
        ));
    }
    if bodies > 0 {
        how.push(format!("{bodies} answer(s) carry SQLSTATE 53300"));
    }
    if how.is_empty() {
        how.push("every usable slot of Postgres was open while answers failed".into());
    }
    let (budget, budget_figures) = budget(stages, s);
    let mut f = Finding::new(
        FindingId::PostgresConnectionsExhausted,
        format!(
            "Postgres refused connections: {} of {requests} answers failed in {} stage(s) ({})",
            failed.max(bodies),
            named.len(),
            how.join("; ")
        ),
    )
    .figure("refused_responses", bodies as f64)
    .figure("failed_responses", failed as f64)
    .figure("no_data_responses", no_data as f64)
    .figure("log_refusal_lines", lines as f64)
    .figure("log_problem_lines", problems as f64)
    .figure("postgres_refused_rounds", pg_refused as f64)
    .figure("requests_in_those_stages", requests as f64);
    for (k, v) in budget_figures {
        f = f.figure(k, v);
    }
    f = stage_evidence(f, stages, &named);
    findings.insert(
        0,
        f.why("Each n8n process opens up to DB_POSTGRESDB_POOL_SIZE connections; past max_connections − superuser_reserved_connections Postgres refuses the next one (SQLSTATE 53300) and the execution that needed it fails — its caller gets n8n's generic HTTP 500 \"Error in workflow\" (or a 200 without the last node's data), never Postgres' words, and the execution may stay `running` in n8n's list for good.")
            .fix("keep Σ DB_POSTGRESDB_POOL_SIZE × processes (main, webhook processors, every worker at its autoscaler maximum) within max_connections − superuser_reserved_connections: lower the pools, raise max_connections, or put PgBouncer (transaction mode) in front"),
    );
    Some(format!(
        "Postgres refused connections ({} of {requests} answers failed in {} stage(s); {}): {budget}.",
        failed.max(bodies),
        named.len(),
        how.join("; ")
    ))
}
