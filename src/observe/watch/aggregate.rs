//! A stage's readings, accumulated in its steady window, and the figures they become.

use super::*;

#[derive(Default)]
pub(super) struct EndpointAcc {
    pub(super) role: Option<Role>,
    pub(super) rss: Vec<f64>,
    pub(super) heap: Vec<f64>,
    pub(super) external: Vec<f64>,
    pub(super) lag: Vec<f64>,
    pub(super) cpu_rate: Vec<f64>,
    pub(super) runner_requested_rate: Vec<f64>,
    /// The database pool's readings (n8n's `db_pool_*`), and those that could not be true.
    pub(super) pool: Vec<crate::observe::scrape::PoolReading>,
    pub(super) pool_gaps: u32,
    pub(super) gaps: u32,
    pub(super) last_error: Option<String>,
    /// `n8n_version_info`'s `version` label, as the process last said it.
    pub(super) version: Option<String>,
}

#[derive(Default)]
pub(super) struct ContainerAcc {
    pub(super) role: Option<Role>,
    pub(super) cpu_limit_cores: Option<f64>,
    pub(super) memory: Vec<f64>,
    pub(super) cpu: Vec<f64>,
    pub(super) gaps: u32,
    pub(super) gone: bool,
    /// The whole stage's readings, warm-up included (the peak before a death).
    pub(super) peak: f64,
    pub(super) last: f64,
    pub(super) events: Vec<LifecycleEvent>,
}

/// Each role's memory over the stage: Σ of its containers per reading, with their baselines.
pub(super) fn role_memory(acc: &StageAcc, baselines: &BTreeMap<String, f64>) -> Vec<RoleMemory> {
    let roles_of: BTreeMap<Role, (u32, f64)> = {
        let mut m: BTreeMap<Role, (u32, f64)> = BTreeMap::new();
        for (name, a) in &acc.containers {
            if let Some(r) = a.role {
                let e = m.entry(r).or_default();
                e.0 += 1;
                e.1 += baselines.get(name).copied().unwrap_or(0.0);
            }
        }
        m
    };
    acc.role_totals
        .iter()
        .map(|(role, v)| {
            let (n, base) = roles_of.get(role).copied().unwrap_or_default();
            RoleMemory {
                role: *role,
                containers: n,
                baseline_bytes: base,
                mean_bytes: mean(v),
                max_bytes: max(v).max(0.0),
            }
        })
        .collect()
}

/// The queue over the stage: from Redis when it was read (it is read directly and at the
/// scrape interval, so it wins over n8n's gauges), else from n8n's queue gauges.
pub(super) fn queue_observed(acc: &StageAcc, coarse: bool, refresh: &RefreshSeen) -> QueueObserved {
    // Redis is read directly and at the scrape interval: it wins over n8n's gauges.
    let from_redis = !acc.redis_active.is_empty() || acc.redis_gaps > 0;
    let (active, waiting, gaps, source) = if from_redis {
        (
            &acc.redis_active,
            &acc.redis_waiting,
            acc.redis_gaps,
            QueueSource::Redis,
        )
    } else {
        (
            &acc.queue_active,
            &acc.queue_waiting,
            acc.queue_gaps,
            QueueSource::Metrics,
        )
    };
    QueueObserved {
        source,
        active_mean: mean(active),
        active_max: max(active).max(0.0),
        waiting_mean: mean(waiting),
        waiting_max: max(waiting).max(0.0),
        active_while_waiting: while_waiting(active, waiting),
        samples: active.len() as u32,
        gaps,
        coarse: (coarse || refresh.too_few) && !from_redis,
        refresh_s: refresh.period_s,
        refresh_contradicts_flag: !coarse && refresh.too_few && !from_redis,
    }
}

/// The mean of `active` over the readings (paired by index) where at least one job waited.
fn while_waiting(active: &[f64], waiting: &[f64]) -> Option<f64> {
    let full: Vec<f64> = active
        .iter()
        .zip(waiting)
        .filter(|(_, w)| **w >= 1.0)
        .map(|(a, _)| *a)
        .collect();
    (!full.is_empty()).then(|| mean(&full))
}

#[derive(Default)]
pub(super) struct StageAcc {
    pub(super) redis_active: Vec<f64>,
    pub(super) redis_waiting: Vec<f64>,
    pub(super) redis_gaps: u32,
    /// Per role: the sum of its containers' memory at each reading.
    pub(super) role_totals: BTreeMap<Role, Vec<f64>>,
    pub(super) queue_active: Vec<f64>,
    pub(super) queue_waiting: Vec<f64>,
    pub(super) queue_gaps: u32,
    pub(super) endpoints: BTreeMap<String, EndpointAcc>,
    pub(super) containers: BTreeMap<String, ContainerAcc>,
}

/// A stage's pool readings as figures: the gauges' means and peaks, and the mean wait for a
/// connection from the acquire histogram's first and last readings (none when it did not move
/// or went back: a restarted process).
pub(super) fn db_pool(
    readings: &[crate::observe::scrape::PoolReading],
    gaps: u32,
) -> Option<crate::record::stage::DbPoolObserved> {
    let (first, last) = (readings.first()?, readings.last()?);
    let g = |f: fn(&crate::observe::scrape::PoolReading) -> f64| -> Vec<f64> {
        readings.iter().map(f).collect()
    };
    let (active, pending) = (g(|r| r.active), g(|r| r.pending));
    let p99 = p99(&first.buckets, &last.buckets);
    let moved = first
        .acquire
        .zip(last.acquire)
        .map(|((s0, c0), (s1, c1))| (s1 - s0, c1 - c0))
        .filter(|(ds, dc)| *ds >= 0.0 && *dc >= 0.0);
    Some(crate::record::stage::DbPoolObserved {
        max: max(&g(|r| r.max)),
        active_mean: mean(&active),
        active_max: max(&active),
        pending_mean: mean(&pending),
        pending_max: max(&pending),
        acquire_mean_s: moved.filter(|(_, dc)| *dc > 0.0).map(|(ds, dc)| ds / dc),
        acquire_p99_s: p99.map(|(v, _)| v),
        acquire_p99_above: p99.is_some_and(|(_, above)| above),
        acquires: moved.map_or(0.0, |(_, dc)| dc),
        samples: readings.len() as u32,
        gaps,
    })
}

/// The upper bound of the first bucket holding 99 % of the acquisitions between two readings of
/// a histogram with the same buckets (none when it did not move or its buckets changed), and
/// whether that was only the +Inf bucket (then the last finite bound, which the p99 is above).
fn p99(first: &[(f64, f64)], last: &[(f64, f64)]) -> Option<(f64, bool)> {
    if first.len() != last.len() || first.iter().zip(last).any(|(a, b)| a.0 != b.0) {
        return None;
    }
    let total = last.last()?.1 - first.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let le = first
        .iter()
        .zip(last)
        .find(|(a, b)| b.1 - a.1 >= 0.99 * total)
        .map(|(_, b)| b.0)?;
    if le.is_finite() {
        Some((le, false))
    } else {
        let finite = last.iter().rev().find(|b| b.0.is_finite())?.0;
        Some((finite, true))
    }
}

pub(super) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub(super) fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NAN, f64::max)
}
