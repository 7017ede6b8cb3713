use super::rates::{cpu_rate, most_cores};
use super::*;

#[test]
fn a_flood_of_dies_is_one_death_and_a_die_of_a_container_up_since_before_is_refuted() {
    let ev = |action, unix| docker::Lifecycle {
        id: "c".into(),
        action,
        exit_code: Some(1),
        unix,
    };
    let mut b = EventBooks::default();
    assert!(b.news(&ev(LifecycleAction::Die, 10.0)));
    for i in 0..10_000 {
        assert!(!b.news(&ev(LifecycleAction::Die, 11.0 + i as f64)));
    }
    assert!(b.news(&ev(LifecycleAction::Start, 20.0)));
    assert!(b.news(&ev(LifecycleAction::Die, 30.0)));
    // Running since 2026-12-01 (before the event): refuted; started after it: a restart.
    assert!(started_before(
        Some("2026-12-01T00:00:00Z"),
        1_800_000_000.0
    ));
    assert!(!started_before(
        Some("2027-12-01T00:00:00Z"),
        1_800_000_000.0
    ));
    assert!(!started_before(None, 1_800_000_000.0));
}

#[test]
fn the_refresh_is_measured_from_the_changes_the_scrapes_saw() {
    // Scraped every second, refreshed every 20 s (n8n's default) while a flag says 1 s.
    let t0 = Instant::now();
    let mut r = QueueRefresh::default();
    for i in 0..120u64 {
        let k = (i / 20) as f64;
        r.saw([4.0, 6.0, 100.0 + 160.0 * k], t0 + Duration::from_secs(i));
    }
    assert_eq!(r.period_s(), Some(20.0));
    // A gauge read after the last change at 100 s is fresh only for a stage whose window
    // opened before it.
    assert_eq!(r.changed_at, Some(t0 + Duration::from_secs(100)));
    // Until four changes are seen, nothing is claimed.
    let mut few = QueueRefresh::default();
    for i in 0..50u64 {
        few.saw([1.0, 0.0, (i / 20) as f64], t0 + Duration::from_secs(i));
    }
    assert_eq!(few.period_s(), None);
}

#[test]
fn cpu_counters_that_cannot_be_true_are_gaps() {
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let mut prev = None;
    // The first reading gives no rate; then 1.5 s of CPU in 1 s = 1.5 cores.
    assert_eq!(cpu_rate(&mut prev, Some(10.0), at(0.0), 2.75), Ok(None));
    let c = cpu_rate(&mut prev, Some(11.5), at(1.0), 2.75)
        .unwrap()
        .unwrap();
    assert!((c - 1.5).abs() < 1e-9);
    // Two processes behind one URL: the counter drops, then jumps back.
    let down = cpu_rate(&mut prev, Some(0.5), at(2.0), 2.75).unwrap_err();
    assert!(down.contains("fell"), "{down}");
    let up = cpu_rate(&mut prev, Some(13.0), at(3.0), 2.75).unwrap_err();
    assert!(up.contains("cores"), "{up}");
    // 50 cores on a 2-core host, a NaN counter.
    let mut prev = Some((0.0, at(0.0)));
    assert!(cpu_rate(&mut prev, Some(50.0), at(1.0), 2.75).is_err());
    assert!(cpu_rate(&mut prev, Some(f64::NAN), at(2.0), 2.75).is_err());
    assert!(most_cores("http://127.0.0.1:5678/metrics") < 256.0);
    assert_eq!(most_cores("http://n8n.example:5678/metrics"), 256.0);
}

#[test]
fn a_stage_pool_is_its_gauges_means_and_the_acquire_p99_between_its_first_and_last_readings() {
    use crate::observe::scrape::PoolReading;
    let reading = |active: f64, pending: f64, b: [f64; 3]| PoolReading {
        max: 2.0,
        active,
        pending,
        acquire: Some((b[2] * 0.01, b[2])),
        buckets: vec![(0.01, b[0]), (0.5, b[1]), (f64::INFINITY, b[2])],
    };
    // 100 acquisitions in the window: 50 within 10 ms, 99 within 0.5 s.
    let p = super::aggregate::db_pool(
        &[
            reading(1.0, 0.0, [10.0, 10.0, 10.0]),
            reading(2.0, 4.0, [60.0, 109.0, 110.0]),
        ],
        1,
    )
    .unwrap();
    assert_eq!(
        (p.active_mean, p.active_max, p.pending_mean),
        (1.5, 2.0, 2.0)
    );
    assert_eq!((p.acquires, p.samples, p.gaps), (100.0, 2, 1));
    assert_eq!((p.acquire_p99_s, p.acquire_p99_above), (Some(0.5), false));
    // Only the +Inf bucket reaches 99 %: the p99 is above the last finite bound.
    let p = super::aggregate::db_pool(
        &[
            reading(1.0, 0.0, [0.0, 0.0, 0.0]),
            reading(2.0, 4.0, [0.0, 50.0, 100.0]),
        ],
        0,
    )
    .unwrap();
    assert_eq!((p.acquire_p99_s, p.acquire_p99_above), (Some(0.5), true));
    // No readings: no pool.
    assert!(super::aggregate::db_pool(&[], 3).is_none());
}

#[test]
fn slots_while_jobs_waited_are_read_only_where_a_job_waited() {
    // 15 slots: full whenever a job waited; the queue ran dry twice, with fewer taken.
    let active = [15.0, 12.0, 15.0, 9.0, 15.0];
    let waiting = [2.0, 0.0, 1.0, 0.0, 4.0];
    let seen = RefreshSeen {
        period_s: None,
        too_few: false,
    };
    let mut acc = super::aggregate::StageAcc::default();
    acc.queue_active.extend(active);
    acc.queue_waiting.extend(waiting);
    let q = super::aggregate::queue_observed(&acc, false, &seen);
    assert_eq!(q.active_while_waiting, Some(15.0));
    assert!((q.active_mean - 13.2).abs() < 1e-9);
    // No job ever waited: nothing to read.
    acc.queue_waiting = vec![0.0; 5];
    let q = super::aggregate::queue_observed(&acc, false, &seen);
    assert_eq!(q.active_while_waiting, None);
}
