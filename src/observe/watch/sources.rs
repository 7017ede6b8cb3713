//! What one reading becomes: a scrape (or its failure), Redis's queue lengths, a container's
//! stats; and the role an endpoint plays, read from what it exposes.

use super::rates::{counter_rate, cpu_rate, most_cores};
use super::*;
use crate::error::Implausible;

pub(super) async fn read_redis(
    src: &Sources,
    conn: &mut Option<Conn>,
) -> Option<anyhow::Result<(f64, f64)>> {
    let (url, prefix) = src.redis.as_ref()?;
    // A Redis that accepts and never answers (AUTH, SELECT) must not stall the other readings.
    let mut why = None;
    if conn.is_none() {
        match tokio::time::timeout(REDIS_WAIT, Conn::open(url)).await {
            Ok(Ok(c)) => *conn = Some(c),
            Ok(Err(e)) => why = Some(format!("{e:#}")),
            Err(_) => {
                why = Some(format!(
                    "Redis at {} accepted but did not answer within {} s",
                    url.shown(),
                    REDIS_WAIT.as_secs()
                ))
            }
        }
    }
    let got = match conn.as_mut() {
        Some(c) => redis_queue_lengths(c, prefix).await,
        None => Err(anyhow::anyhow!(why.unwrap_or_else(|| format!(
            "cannot reach Redis at {}",
            url.shown()
        )))),
    };
    if got.is_err() {
        *conn = None;
    }
    Some(got)
}

/// A scrape that failed: a gap in the timeline, and in the stage's figures when steady (main's
/// also leaves the queue gauges with a gap).
pub(super) fn scrape_failed(
    st: &mut State,
    url: &str,
    role: Option<Role>,
    err: &anyhow::Error,
    at: &Moment,
) {
    let msg = format!("{err:#}");
    st.timeline.write(&Event::Gap {
        t: at.t,
        unix: at.unix,
        source: url.to_string(),
        error: msg.clone(),
        gone: false,
    });
    if at.steady {
        let acc = st.acc.endpoints.entry(url.to_string()).or_default();
        acc.role = role;
        acc.gaps += 1;
        acc.last_error = Some(msg);
        if role.is_none_or(|r| r == Role::Main) {
            st.acc.queue_gaps += 1;
        }
    }
}

pub(super) fn record_scrape(
    st: &mut State,
    rates: &mut Rates,
    src: &Sources,
    i: usize,
    got: anyhow::Result<Exposition>,
    at: &Moment,
) {
    let e = &src.endpoints[i];
    let prefix = &src.prefix;
    let exp = match got {
        Ok(exp) => exp,
        Err(err) => return scrape_failed(st, &e.url, rates.roles[i], &err, at),
    };
    if rates.roles[i].is_none() {
        rates.roles[i] = Some(role_of(&exp, prefix));
    }
    let v = |n: &str| exp.value(&format!("{prefix}{n}"));
    let cpu = match cpu_rate(
        &mut rates.cpu[i],
        v("process_cpu_seconds_total"),
        at.now,
        most_cores(&e.url),
    ) {
        Ok(c) => c,
        Err(why) => {
            // A CPU reading that cannot be true is a gap with its reason, never a figure.
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: format!("{} (process CPU)", e.url),
                error: why.0.clone(),
                gone: false,
            });
            if at.steady {
                let acc = st.acc.endpoints.entry(e.url.clone()).or_default();
                acc.gaps += 1;
                acc.last_error = Some(why.0);
            }
            None
        }
    };
    let req = counter_rate(
        &mut rates.requested[i],
        v("runner_task_requested_total"),
        at.now,
    );
    let q = match queue_gauges_checked(&exp, prefix) {
        Ok(q) => q,
        Err(why) => {
            // An impossible gauge is a gap with its reason, never a figure.
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: format!("{} (queue gauges)", e.url),
                error: why.0,
                gone: false,
            });
            if at.steady {
                st.acc.queue_gaps += 1;
            }
            None
        }
    };
    if let Some(q) = q {
        let done = v("scaling_mode_queue_jobs_completed").unwrap_or(-1.0);
        st.refresh.saw([q.active, q.waiting, done], at.now);
    }
    st.timeline.write(&Event::Metrics {
        t: at.t,
        unix: at.unix,
        url: e.url.clone(),
        role: rates.roles[i],
        rss_bytes: v("process_resident_memory_bytes"),
        heap_used_bytes: v("nodejs_heap_size_used_bytes"),
        external_bytes: v("nodejs_external_memory_bytes"),
        eventloop_lag_s: v("nodejs_eventloop_lag_seconds"),
        cpu_percent: cpu.map(|c| c * 100.0),
        queue_active: q.map(|q| q.active),
        queue_waiting: q.map(|q| q.waiting),
    });
    if at.steady {
        steady_scrape(st, (&e.url, rates.roles[i]), &v, (cpu, req), q);
        if let Some(version) = version_of(&exp, prefix) {
            st.acc.endpoints.entry(e.url.clone()).or_default().version = Some(version);
        }
        record_pool(st, &e.url, super::scrape::db_pool_checked(&exp, prefix), at);
    }
}

/// The n8n version a process reports (`n8n_version_info{version="v2.41.1",…} 1`), checked: a
/// short version string of digits, dots and a leading v, else nothing.
fn version_of(exp: &Exposition, prefix: &str) -> Option<String> {
    let name = format!("{prefix}version_info");
    let v = exp.series(&name).next()?.label("version")?;
    let ok = v.len() <= 32
        && v.trim_start_matches('v')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
    ok.then(|| v.trim_start_matches('v').to_string())
}

/// The database pool's reading inside the steady window: a figure, or a gap with its reason.
fn record_pool(
    st: &mut State,
    url: &str,
    got: Result<Option<super::scrape::PoolReading>, Implausible>,
    at: &Moment,
) {
    match got {
        Ok(Some(r)) => st
            .acc
            .endpoints
            .entry(url.to_string())
            .or_default()
            .pool
            .push(r),
        Ok(None) => {}
        Err(why) => {
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: format!("{url} (database pool)"),
                error: why.0,
                gone: false,
            });
            st.acc
                .endpoints
                .entry(url.to_string())
                .or_default()
                .pool_gaps += 1;
        }
    }
}

/// A scrape inside the stage's steady window, added to its readings.
pub(super) fn steady_scrape(
    st: &mut State,
    (url, role): (&str, Option<Role>),
    v: &dyn Fn(&str) -> Option<f64>,
    (cpu, req): (Option<f64>, Option<f64>),
    q: Option<super::scrape::QueueGauges>,
) {
    let acc = st.acc.endpoints.entry(url.to_string()).or_default();
    acc.role = role;
    acc.rss.extend(v("process_resident_memory_bytes"));
    acc.heap.extend(v("nodejs_heap_size_used_bytes"));
    acc.external.extend(v("nodejs_external_memory_bytes"));
    acc.lag.extend(v("nodejs_eventloop_lag_seconds"));
    acc.cpu_rate.extend(cpu);
    acc.runner_requested_rate.extend(req);
    // A gauge read before main refreshed it inside this stage's window describes what came
    // before: not evidence for this stage.
    let fresh = st
        .refresh
        .changed_at
        .zip(st.steady_from)
        .is_some_and(|(c, f)| c >= f);
    if let Some(q) = q.filter(|_| fresh) {
        st.acc.queue_active.push(q.active);
        st.acc.queue_waiting.push(q.waiting);
    }
}

pub(super) fn record_redis(st: &mut State, got: anyhow::Result<(f64, f64)>, at: &Moment) {
    let got = got.and_then(|(waiting, active)| {
        for (what, v) in [
            ("LLEN of the wait list", waiting),
            ("LLEN of the active list", active),
        ] {
            if let Some(why) = super::scrape::implausible_jobs(what, v) {
                anyhow::bail!("Redis answered {why}");
            }
        }
        Ok((waiting, active))
    });
    match got {
        Ok((waiting, active)) => {
            st.timeline.write(&Event::Redis {
                t: at.t,
                unix: at.unix,
                waiting,
                active,
            });
            if at.steady {
                st.acc.redis_waiting.push(waiting);
                st.acc.redis_active.push(active);
            }
        }
        Err(e) => {
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: "redis".into(),
                error: format!("{e:#}"),
                gone: false,
            });
            if at.steady {
                st.acc.redis_gaps += 1;
            }
        }
    }
}

pub(super) fn record_container(
    st: &mut State,
    rates: &mut Rates,
    c: &WatchedContainer,
    got: Result<RawStats, docker::StatsError>,
    at: &Moment,
    totals: &mut BTreeMap<Role, f64>,
) {
    if st.restarted.remove(&c.id) {
        // A restart starts the container's counters again: no rate spans it.
        rates.stats.0.remove(&c.id);
    }
    match got {
        Ok(raw) => {
            let cpu = rates
                .stats
                .0
                .get(&c.id)
                .and_then(|p| docker::cpu_percent(p, &raw));
            rates.stats.0.insert(c.id.clone(), raw);
            st.baselines
                .entry(c.name.clone())
                .or_insert(raw.memory_bytes as f64);
            st.timeline.write(&Event::Container {
                t: at.t,
                unix: at.unix,
                name: c.name.clone(),
                role: c.role,
                memory_bytes: raw.memory_bytes,
                memory_limit_bytes: raw.memory_limit,
                cpu_percent: cpu,
            });
            *totals.entry(c.role).or_insert(0.0) += raw.memory_bytes as f64;
            st.last_memory
                .insert(c.name.clone(), raw.memory_bytes as f64);
            let in_stage = st.stage.is_some();
            let acc = st.acc.containers.entry(c.name.clone()).or_default();
            acc.role = Some(c.role);
            acc.cpu_limit_cores = c.cpu_limit_cores;
            if in_stage {
                acc.peak = acc.peak.max(raw.memory_bytes as f64);
                acc.last = raw.memory_bytes as f64;
            }
            if at.steady {
                acc.memory.push(raw.memory_bytes as f64);
                acc.cpu.extend(cpu);
            }
        }
        Err(err) => {
            if matches!(err, docker::StatsError::NotRunning) {
                // A stopped container's stats are empty: its counters start again with it.
                rates.stats.0.remove(&c.id);
            }
            let gone = matches!(err, docker::StatsError::Gone);
            st.timeline.write(&Event::Gap {
                t: at.t,
                unix: at.unix,
                source: c.name.clone(),
                error: err.to_string(),
                gone,
            });
            if at.steady {
                let acc = st.acc.containers.entry(c.name.clone()).or_default();
                acc.role = Some(c.role);
                acc.gaps += 1;
                acc.gone |= gone;
            }
        }
    }
}

/// The longest one Redis reading may take.
pub(super) const REDIS_WAIT: Duration = Duration::from_secs(2);

pub(super) async fn redis_queue_lengths(c: &mut Conn, prefix: &str) -> anyhow::Result<(f64, f64)> {
    tokio::time::timeout(REDIS_WAIT, queue_lengths(c, prefix))
        .await
        .map_err(|_| anyhow::anyhow!("Redis did not answer within 2 s"))?
}

#[derive(Default)]
pub(super) struct HashMapStats(std::collections::HashMap<String, RawStats>);

/// Main shows the queue gauges (or the leader gauge); a worker does not.
pub fn role_of(e: &Exposition, prefix: &str) -> Role {
    if queue_gauges(e, prefix).is_some()
        || e.family(&format!("{prefix}instance_role_leader")).is_some()
    {
        Role::Main
    } else {
        Role::Worker
    }
}
