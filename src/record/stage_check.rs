//! What a saved stage may hold: the checks `load_summary` runs on every stage read back, so a
//! summary edited or damaged is refused with the field named, never judged.

use super::stage::{LoadModel, StageResult, MAX_IN_FLIGHT};
use crate::error::BadInput;

/// More requests a second than any load generator sends.
const MOST_REQUESTS_PER_S: f64 = 1e7;
/// More CPU than any process uses, percent of one core (1024 cores).
const MOST_CPU_PERCENT: f64 = 102_400.0;

/// `v` as a figure a measurement can have: finite and at least 0, else the field named.
fn nonneg(at: &str, name: &str, v: f64) -> Result<(), BadInput> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{at}.{name} is {v}: it must be a number of at least 0").into())
    }
}

impl StageResult {
    /// Refuses figures a measurement cannot have (a saved summary edited or damaged): negative
    /// or non-finite times and rates, shares outside 0–1, more good answers than requests,
    /// in-flight levels beyond [`MAX_IN_FLIGHT`]. The error names the field.
    pub fn check(&self, at: &str) -> Result<(), BadInput> {
        let nonneg = |name: &str, v: f64| nonneg(at, name, v);
        let share = |name: &str, v: f64| -> Result<(), BadInput> {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("{at}.{name} is {v}: it must be a share from 0 to 1").into())
            }
        };
        for (name, v) in [
            ("duration_s", self.duration_s),
            ("warmup_s", self.warmup_s),
            ("window_s", self.window_s),
            ("throughput_rps", self.throughput_rps),
            ("request_rate", self.request_rate),
            ("new_conns_per_request", self.new_conns_per_request),
            ("client_cpu_percent", self.client_cpu_percent),
        ] {
            nonneg(name, v)?;
        }
        for (name, v) in [
            ("throughput_rps", self.throughput_rps),
            ("request_rate", self.request_rate),
        ] {
            if v > MOST_REQUESTS_PER_S {
                return Err(format!(
                    "{at}.{name} is {v:e}: more than ten million a second, a rate no load generator reaches"
                ).into());
            }
        }
        share("error_rate", self.error_rate)?;
        share("check_pass_rate", self.check_pass_rate)?;
        for (name, v) in [
            ("rate", self.rate),
            ("ramp_to", self.ramp_to),
            ("host_cpu_percent", self.host_cpu_percent),
        ] {
            if let Some(v) = v {
                nonneg(name, v)?;
            }
        }
        for (name, v) in [("vus", self.vus), ("max_vus", self.max_vus)] {
            if v.is_some_and(|n| n > MAX_IN_FLIGHT) {
                return Err(format!("{at}.{name} is above {MAX_IN_FLIGHT}").into());
            }
        }
        if self.ok > self.requests {
            return Err(format!(
                "{at}.ok ({}) is more than {at}.requests ({})",
                self.ok, self.requests
            )
            .into());
        }
        self.check_observed(at)?;
        for (i, c) in self.scenarios.iter().enumerate() {
            let name = |f: &str| format!("scenarios[{i}].{f}");
            nonneg(&name("throughput_rps"), c.throughput_rps)?;
            nonneg(&name("request_rate"), c.request_rate)?;
            share(&name("share"), c.share)?;
            share(&name("error_rate"), c.error_rate)?;
            share(&name("check_pass_rate"), c.check_pass_rate)?;
            if c.ok > c.requests || c.requests > self.requests {
                return Err(format!(
                    "{at}.{}: ok {} of {} requests in a stage of {}: figures a measurement cannot have",
                    name("requests"),
                    c.ok,
                    c.requests,
                    self.requests
                ).into());
            }
        }
        self.check_counts(at)?;
        self.check_database(at)?;
        self.check_host_processes(at)
    }

    /// What the stage saw of the database, as Postgres and n8n's pools can have it: Postgres'
    /// rounds (at most one a second, `observe::db_watch`) no more than the stage's seconds,
    /// `max_connections` within Postgres' own limit, the reserved and the open within it; log
    /// lines no more than ten million a second; a pool's figures finite, at least 0, within
    /// [`MOST_POOL`].
    fn check_database(&self, at: &str) -> Result<(), BadInput> {
        let seconds = self.duration_s + self.warmup_s;
        if let Some(db) = &self.database {
            let most = MOST_REQUESTS_PER_S * (seconds + 1.0);
            for (name, n) in [
                ("refusal_lines", db.refusal_lines),
                ("problem_lines", db.problem_lines),
            ] {
                if n as f64 > most {
                    return Err(format!(
                        "{at}.database.{name} is {n} in a stage of {seconds:.0} s: more log lines than requests any load sends"
                    )
                    .into());
                }
            }
            if let Some(pg) = &db.postgres {
                check_postgres(at, pg, seconds)?;
            }
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            let Some(p) = &e.db_pool else { continue };
            let figures = [
                ("max", p.max),
                ("active_mean", p.active_mean),
                ("active_max", p.active_max),
                ("pending_mean", p.pending_mean),
                ("pending_max", p.pending_max),
                ("acquires", p.acquires),
            ];
            for (name, v) in figures {
                if !(v.is_finite() && (0.0..=MOST_POOL).contains(&v)) {
                    return Err(format!(
                        "{at}.endpoints[{i}].db_pool.{name} is {v}: a pool's figure is a number from 0 to {MOST_POOL:e}"
                    )
                    .into());
                }
            }
            if p.active_max > p.max + 1e-6 || p.active_mean > p.active_max + 1e-6 {
                return Err(format!(
                    "{at}.endpoints[{i}].db_pool: {} in use of a pool of {} (mean {}): more than the pool holds",
                    p.active_max, p.max, p.active_mean
                )
                .into());
            }
        }
        Ok(())
    }

    /// The host's processes: cores used that one host can have (finite, at least 0, at most
    /// 4 096); whether they fit the host's own cores is `record::dir`'s check, which knows them.
    fn check_host_processes(&self, at: &str) -> Result<(), BadInput> {
        for (i, p) in self.host_processes.iter().enumerate() {
            if !(p.cores.is_finite() && (0.0..=MOST_CPU_PERCENT / 100.0).contains(&p.cores)) {
                return Err(format!(
                    "{at}.host_processes[{i}].cores is {}: cores used are a number from 0 to {}",
                    p.cores,
                    MOST_CPU_PERCENT / 100.0
                )
                .into());
            }
        }
        Ok(())
    }

    /// Each endpoint's URL on one line, its CPU and memory figures a process can have, its
    /// version a version.
    fn check_endpoints(&self, at: &str) -> Result<(), BadInput> {
        for (i, e) in self.endpoints.iter().enumerate() {
            // A URL is one line: a control character in it would write lines of its own into
            // the text and the page.
            if e.url.chars().any(char::is_control)
                || e.last_error
                    .as_deref()
                    .is_some_and(|l| l.contains(['\n', '\r']))
            {
                return Err(format!(
                    "{at}.endpoints[{i}]: its url or last_error holds a line break or a control \
                     character, which no scrape writes"
                )
                .into());
            }
            for (name, v) in [
                ("cpu_percent_mean", e.cpu_percent_mean),
                ("rss_mean_bytes", e.rss_mean_bytes),
                ("rss_max_bytes", e.rss_max_bytes),
                ("eventloop_lag_mean_s", e.eventloop_lag_mean_s),
                ("eventloop_lag_max_s", e.eventloop_lag_max_s),
            ] {
                nonneg(at, &format!("endpoints[{i}].{name}"), v)?;
            }
            if e.cpu_percent_mean > MOST_CPU_PERCENT {
                return Err(format!(
                    "{at}.endpoints[{i}].cpu_percent_mean is {:e}: more than {} cores, which no \
                     process uses",
                    e.cpu_percent_mean,
                    MOST_CPU_PERCENT / 100.0
                )
                .into());
            }
            if let Some(v) = &e.n8n_version {
                let ok = v.len() <= 32
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
                if !ok {
                    return Err(format!(
                        "{at}.endpoints[{i}].n8n_version is not a version (digits, letters, '.', '-', '+'; at most 32)"
                    ).into());
                }
            }
        }
        Ok(())
    }

    /// The latency, the queue and a history's figures: numbers of at least 0, in the order
    /// their meaning gives them.
    fn check_observed(&self, at: &str) -> Result<(), BadInput> {
        self.check_endpoints(at)?;
        let nonneg = |name: &str, v: f64| nonneg(at, name, v);
        if let Some(l) = &self.latency {
            for (name, v) in [
                ("mean_ms", l.mean_ms),
                ("min_ms", l.min_ms),
                ("p50_ms", l.p50_ms),
                ("p90_ms", l.p90_ms),
                ("p95_ms", l.p95_ms),
                ("p99_ms", l.p99_ms),
                ("max_ms", l.max_ms),
            ] {
                nonneg(&format!("latency.{name}"), v)?;
            }
            // Percentiles rise with their rank, and a mean lies between the extremes (a
            // thousandth of slack for rounding).
            let ranked = [l.min_ms, l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms];
            let slack = |a: f64| a * 1e-3 + 1e-6;
            if ranked.windows(2).any(|w| w[0] > w[1] + slack(w[1]))
                || l.mean_ms + slack(l.mean_ms) < l.min_ms
                || l.mean_ms > l.max_ms + slack(l.max_ms)
            {
                return Err(format!(
                    "{at}.latency: min {} ≤ p50 {} ≤ p90 {} ≤ p95 {} ≤ p99 {} ≤ max {} (mean {} between min and max) does not hold: figures no measurement has",
                    l.min_ms, l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms, l.mean_ms
                ).into());
            }
        }
        if let Some(q) = &self.queue {
            for (name, v) in [
                ("active_mean", q.active_mean),
                ("active_max", q.active_max),
                ("waiting_mean", q.waiting_mean),
                ("waiting_max", q.waiting_max),
            ] {
                nonneg(&format!("queue.{name}"), v)?;
            }
            if q.active_mean > q.active_max + 1e-6 || q.waiting_mean > q.waiting_max + 1e-6 {
                return Err(format!(
                    "{at}.queue: a mean above its max (active {} > {}, or waiting {} > {})",
                    q.active_mean, q.active_max, q.waiting_mean, q.waiting_max
                )
                .into());
            }
            // Readings of slots taken while jobs waited are some of the readings: no more than
            // the most taken.
            if let Some(full) = q.active_while_waiting {
                nonneg("queue.active_while_waiting", full)?;
                if full > q.active_max + 1e-6 {
                    return Err(format!(
                        "{at}.queue: active_while_waiting {full} above active_max {}: a mean of some readings above their max",
                        q.active_max
                    ).into());
                }
            }
        }
        if let Some(h) = &self.history {
            let ok = h.slot_time_s.is_none_or(|t| t.is_finite() && t >= 0.0)
                && h.executions.is_finite()
                && h.executions >= 0.0;
            if !ok {
                return Err(format!(
                    "{at}.history: slot_time_s {:?} and executions {} must be numbers of at least 0",
                    h.slot_time_s, h.executions
                ).into());
            }
        }
        Ok(())
    }

    /// The counts behind the rates: no more answers per second than were counted, a window
    /// for every rate, users for every closed request, an interval that is one.
    fn check_counts(&self, at: &str) -> Result<(), BadInput> {
        if let Some(r) = self.ramp {
            if r.from.max(r.to) > MAX_IN_FLIGHT {
                return Err(format!("{at}.ramp is above {MAX_IN_FLIGHT}").into());
            }
        }
        // A rate is a count over the window: no more answers per second than were counted (a
        // window's rate may also count answers to requests sent in the warm-up, one per user).
        // No load generator sends ten million requests a second: counts beyond that are
        // damage (and near 2^64 would wrap the sums below).
        let seconds = self.duration_s.max(self.window_s) + self.warmup_s + 1.0;
        let most = MOST_REQUESTS_PER_S * seconds;
        for (name, n) in [
            ("requests", self.requests),
            ("warmup_requests", self.warmup_requests),
            ("ok", self.ok),
        ] {
            if n as f64 > most {
                return Err(format!(
                    "{at}.{name} is {n} in a stage of {seconds:.0} s: more than ten million a second, figures a measurement cannot have"
                ).into());
            }
        }
        let sent = self
            .requests
            .saturating_add(self.warmup_requests)
            .saturating_add(u64::from(self.vus.unwrap_or(0)));
        let answered = self.flow.map_or(sent, |f| f.completions.max(sent));
        if self.throughput_rps > 0.0 && self.window_s <= 0.0 {
            return Err(format!(
                "{at}.throughput_rps is {} over a window_s of 0: a rate needs a window",
                self.throughput_rps
            )
            .into());
        }
        let counted = self.request_rate.max(self.throughput_rps) * self.window_s;
        if counted > answered as f64 * 1.01 + 1.0 {
            return Err(format!(
                "{at}: {:.2} req/s over {:.1} s is {counted:.0} answers, but {answered} were counted: figures a measurement cannot have",
                self.request_rate.max(self.throughput_rps),
                self.window_s
            ).into());
        }
        if self.model == LoadModel::Closed && self.vus == Some(0) && self.requests > 0 {
            return Err(format!(
                "{at}.vus is 0, yet {} requests were sent: a closed stage needs at least 1 user",
                self.requests
            )
            .into());
        }
        if let Some(ci) = self.throughput_ci {
            if !(ci[0].is_finite() && ci[1].is_finite() && 0.0 <= ci[0] && ci[0] <= ci[1]) {
                return Err(format!(
                    "{at}.throughput_ci is {ci:?}: it must be two finite rates, low ≤ high"
                )
                .into());
            }
        }
        Ok(())
    }
}

/// A pool's size, use and waits above this are no pool's (n8n's pool is `DB_POSTGRESDB_POOL_SIZE`
/// connections; a million is past any).
const MOST_POOL: f64 = 1e6;

/// Postgres' connections as one server can have them: at most `MAX_BACKENDS` (2^18 − 1), the
/// reserved no more than the maximum, the open no more than it; rounds of the watch (one a
/// second at most) no more than the stage's seconds allow.
fn check_postgres(at: &str, pg: &super::db::PostgresSampled, seconds: f64) -> Result<(), BadInput> {
    const MAX_BACKENDS: u32 = (1 << 18) - 1;
    let rounds = u64::from(pg.samples) + u64::from(pg.refused) + u64::from(pg.gaps);
    if rounds as f64 > seconds + 2.0 {
        return Err(format!(
            "{at}.database.postgres: {rounds} rounds (samples {}, refused {}, gaps {}) in a stage of {seconds:.0} s: Postgres is read once a second at most",
            pg.samples, pg.refused, pg.gaps
        )
        .into());
    }
    let open_by_app: u64 = pg.by_application.iter().map(|(_, n)| u64::from(*n)).sum();
    if pg.max_connections > MAX_BACKENDS
        || pg.reserved > pg.max_connections
        || pg.open_max > pg.max_connections
        || open_by_app > u64::from(pg.max_connections)
    {
        return Err(format!(
            "{at}.database.postgres: max_connections {}, reserved {}, open {} ({open_by_app} by application): Postgres allows at most {MAX_BACKENDS} connections, and reserves and opens no more than its maximum",
            pg.max_connections, pg.reserved, pg.open_max
        )
        .into());
    }
    if pg.samples > 0 && pg.max_connections == 0 {
        return Err(format!(
            "{at}.database.postgres: {} samples read no max_connections: a Postgres that answered says it",
            pg.samples
        )
        .into());
    }
    Ok(())
}
