//! The host's CPU beside n8n's history, when Prometheus scrapes node_exporter there: the cores
//! busy in each window (`node_cpu_seconds_total` outside idle, iowait and steal) and the cores
//! the host has (its CPUs' idle series). n8n exposes its processes' CPU only; whether they
//! filled the host, or other work took it from them, is the host's reading. The node is the
//! node_exporter whose host is an n8n target's (the one hosting most of n8n's processes), else
//! the only node_exporter there is; each window's reading is checked (finite, at most the
//! host's cores) and what fails is a counted gap.

use crate::observe::prometheus::Api;
use crate::record::history::{History, HistoryGap, HostCpu};
use std::collections::BTreeMap;

/// The most cores a host reading may claim.
const MAX_CORES: f64 = 1024.0;

/// Windows read per range query (Prometheus answers at most 11 000 points a series).
const PER_QUERY: usize = 10_000;

/// The host part of an `instance` label: `host:port`, `[v6]:port`, or a bare host.
fn host_of(instance: &str) -> &str {
    if let Some(rest) = instance.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match instance.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => instance,
    }
}

/// Loopback names one host by several spellings.
fn same_host(a: &str, b: &str) -> bool {
    let local = |h: &str| matches!(h, "127.0.0.1" | "localhost" | "::1");
    a == b || (local(a) && local(b))
}

/// The node_exporter instance to read, and why it is that one; None when there is none, or
/// several and none on n8n's hosts.
pub fn choose(nodes: &BTreeMap<String, f64>, h: &History) -> Option<(String, String)> {
    let on_host = |node: &str| {
        h.processes
            .iter()
            .filter(|p| same_host(host_of(&p.instance), host_of(node)))
            .count()
    };
    // A label value is outside text: its control characters escaped before it is said.
    let shown = |n: &str| crate::util::escape_control(n).into_owned();
    let best = nodes
        .keys()
        .map(|n| (on_host(n), n))
        .filter(|(c, _)| *c > 0)
        .max_by_key(|(c, _)| *c);
    match best {
        Some((c, n)) => Some((
            n.clone(),
            format!(
                "node_exporter at {}, the host of {c} of n8n's scraped processes",
                shown(n)
            ),
        )),
        None if nodes.len() == 1 => nodes.keys().next().map(|n| {
            (
                n.clone(),
                format!("node_exporter at {}, the only one Prometheus scrapes (its host is not an n8n target's: it may be another machine)", shown(n)),
            )
        }),
        None => None,
    }
}

/// The cores each node_exporter's host has: its CPUs' idle series near the range's end.
async fn cores(src: &Api, end: f64, lookback: f64) -> BTreeMap<String, f64> {
    let expr = format!(
        "count by (instance) (last_over_time(node_cpu_seconds_total{{mode=\"idle\"}}[{:.0}s]))",
        lookback.max(60.0)
    );
    let Ok(found) = src.query(&expr, end).await else {
        return BTreeMap::new();
    };
    found
        .into_iter()
        .filter_map(|(labels, v)| {
            let ok = v.is_finite() && (1.0..=MAX_CORES).contains(&v) && v.fract() == 0.0;
            Some((labels.get("instance")?.clone(), v)).filter(|_| ok)
        })
        .collect()
}

/// Reads the host's busy cores for every window of `h` (when a node_exporter is there) and
/// says which one it read in `h.host_by`.
pub async fn attach(src: &Api, h: &mut History) {
    let Some(w) = h.windows.first() else { return };
    let span = w.end - w.start;
    if !(span.is_finite() && span > 0.0) {
        return;
    }
    let nodes = cores(src, h.end, (h.end - h.start).min(3600.0)).await;
    let Some((instance, why)) = choose(&nodes, h) else {
        return;
    };
    let total = nodes[&instance];
    let inst = instance.replace('\\', "\\\\").replace('"', "\\\"");
    let expr = format!(
        "sum(rate(node_cpu_seconds_total{{instance=\"{inst}\",mode!~\"idle|iowait|steal\"}}[{span:.0}s]))"
    );
    let mut read: Vec<(f64, f64)> = Vec::new();
    let ends: Vec<f64> = h.windows.iter().map(|w| w.end).collect();
    for part in ends.chunks(PER_QUERY) {
        let (first, last) = (part[0], part[part.len() - 1]);
        let Ok(found) = src.query_range(&expr, first, last.max(first), span).await else {
            continue;
        };
        read.extend(found.series.into_iter().flat_map(|s| s.points));
    }
    read.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut bad = 0u64;
    for w in &mut h.windows {
        // The evaluation at the window's end: Prometheus keeps times in milliseconds, so the
        // nearest point within a quarter of the window, not an exact match.
        let Some(busy) = nearest(&read, w.end, span / 4.0) else {
            continue;
        };
        if busy.is_finite() && busy >= 0.0 && busy <= total * 1.05 + 0.05 {
            w.host = Some(HostCpu {
                busy_cores: busy.min(total),
                cores: total,
                processes_only: false,
            });
        } else {
            bad += 1;
            if h.gaps.len() < 20 {
                h.gaps.push(HistoryGap {
                    series: "node_cpu_seconds_total".into(),
                    from: w.start,
                    to: w.end,
                    reason: format!(
                        "{busy} busy cores on a host of {total}: not a reading (negative, not finite or above its cores)"
                    ),
                });
            }
        }
    }
    h.gap_steps += bad;
    // Said only when a window holds its reading (or its refusal).
    if bad > 0 || h.windows.iter().any(|w| w.host.is_some()) {
        h.host_by = Some(why);
    }
}

/// The host's CPU from the cores given (`--host-cores`: one host for main and its workers, as a
/// compose VM, with no node_exporter scraped there): each window's scraped n8n processes' cores
/// against them, where node_exporter gave nothing.
pub fn given_host_cores(h: &mut History, cores: f64) {
    let mut read = false;
    for w in h.windows.iter_mut().filter(|w| w.host.is_none()) {
        if w.cpu.is_empty() {
            continue;
        }
        let busy: f64 = w.cpu.iter().map(|p| p.cores).sum();
        // The processes' cores, checked when read, may still add past the cores given: then
        // the flag is wrong for this window (or the processes are on several hosts).
        if busy.is_finite() && busy <= cores * 1.05 + 0.05 {
            w.host = Some(HostCpu {
                busy_cores: busy.min(cores),
                cores,
                processes_only: true,
            });
            read = true;
        }
    }
    if read && h.host_by.is_none() {
        h.host_by = Some(format!(
            "--host-cores {cores}: n8n's scraped processes' CPU against the host's cores (runners, Postgres and Redis not scraped)"
        ));
    }
}

/// The value of the point of `points` (sorted by time) nearest `t`, within `within` seconds.
fn nearest(points: &[(f64, f64)], t: f64, within: f64) -> Option<f64> {
    let i = points.partition_point(|p| p.0 < t);
    [i.checked_sub(1), Some(i)]
        .into_iter()
        .flatten()
        .filter_map(|j| points.get(j))
        .filter(|p| (p.0 - t).abs() <= within)
        .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
        .map(|p| p.1)
}

#[cfg(test)]
mod tests;
