//! Redis' one thread saturated: named as itself (`redis-caps`), never as "CPU" or the host, with
//! its figures, and no plan of workers or slots raises it.

use super::*;

/// Redis at 0.95 of its one core at 12.5/s: 76 ms of Redis CPU per execution, 13.2/s at most;
/// the workers and main have CPU to spare. Redis caps, as Redis.
#[test]
fn redis_at_its_one_core_is_named_as_redis() {
    let hi = with_cpu(
        closed(1, 20, 12.5),
        &[(Role::Worker, 0.5), (Role::Main, 0.3), (Role::Redis, 0.95)],
    );
    let stages = vec![closed(0, 1, 1.0 / 0.08), hi];
    let d = run(&stages, settings(0.01, Some(15), Some(20)));
    assert_eq!(d.capping_limit, Some(Limit::Redis.into()), "{}", d.verdict);
    let f = finding(&d, "redis-caps");
    assert!((f.get("cpu_s_per_execution").unwrap() - 0.076).abs() < 1e-9);
    assert!((f.get("redis_bound_per_s").unwrap() - 1.0 / 0.076).abs() < 1e-6);
    assert!(d.findings.iter().all(|f| f.id.as_str() != "cpu-limit-caps"));
    assert_eq!(d.cpu_limit.as_ref().unwrap().role, Some(Role::Redis));
    // No worker, slot or runner setting raises it.
    let job = d.settings.job(0.0).unwrap();
    assert!(crate::limits::of(Limit::Redis)
        .raise(&d, &d.settings, job)
        .is_err());
}
