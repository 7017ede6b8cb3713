use super::*;
use crate::model::autoscaler::Rules;

fn generated() -> Policy {
    Policy {
        name: "ScaledObject w (generated)".into(),
        poll_s: 15,
        signals: vec![(Metric::Held, 10.4)],
        min: 1,
        max: 20,
        up: Rules::default_up(),
        down: Rules::default_down(),
    }
}

fn workload() -> Workload {
    Workload {
        per_worker_per_s: 28.86,
        job_s: 0.545,
        pod_start_s: 30,
        window_s: 24.0,
    }
}

/// 2/s, a burst of `burst`/s for 5 minutes at 10 minutes, 2/s again.
fn arrivals(burst: f64) -> Vec<f64> {
    (0..1800)
        .map(|t| if (600..900).contains(&t) { burst } else { 2.0 })
        .collect()
}

fn plan() -> AutoscalerPlan {
    crate::report::autoscaler::tests::plan(std::array::from_fn(|_| "w".to_string()), false)
}

/// A burst above one worker's ceiling: the wait stays within the bound, the maximum is what the
/// peak needs at 2/3 and one more, and each value says which replay chose it.
#[test]
fn a_burst_is_held_within_the_wait_by_the_fewest_worker_hours() {
    for burst in [40.0, 70.0, 130.0] {
        let a = arrivals(burst);
        let t = Tuning {
            arrivals: &a,
            from: "burst.csv",
            workload: workload(),
            max_wait_s: 5.0,
        };
        let mut p = plan();
        tune(&mut p, &generated(), None, &t);
        let needed = (burst / (OPERATING_SHARE * 28.86)).ceil() as u32;
        assert!(
            p.max_replicas.value <= needed + 1,
            "{burst}: {:?}",
            p.max_replicas
        );
        let mut written = generated();
        written.min = p.min_replicas.value;
        written.max = p.max_replicas.value;
        written.signals = vec![(Metric::Held, p.per_replica.value)];
        let r = replay(&a, &written, &workload());
        assert!(r.peak_wait_s.0 <= 5.0, "{burst}: {r:?}");
        assert_eq!(r.lost, 0.0);
        assert!(p.min_replicas.source.words().contains("burst.csv"));
        // Nothing cheaper kept the wait: one fewer at the minimum lets it run past the bound.
        if p.min_replicas.value > 1 {
            let mut fewer = written.clone();
            fewer.min -= 1;
            let f = replay(&a, &fewer, &workload());
            assert!(
                f.peak_wait_s.0 > 5.0 || f.replica_s >= r.replica_s,
                "{burst}"
            );
        }
    }
}

/// A deployed object that does better on the arrivals is kept, and said so.
#[test]
fn a_better_deployed_object_is_kept() {
    let a = arrivals(40.0);
    let t = Tuning {
        arrivals: &a,
        from: "steady.csv",
        workload: workload(),
        max_wait_s: 5.0,
    };
    let mut deployed = generated();
    deployed.name = "ScaledObject w (deployed)".into();
    // Two workers hold 40/s; a waiting-only trigger never scales them (no job waits).
    deployed.min = 2;
    deployed.max = 2;
    deployed.signals = vec![(Metric::Waiting, 5.0)];
    let mut p = plan();
    tune(&mut p, &generated(), Some((&deployed, 24.0)), &t);
    let d = replay(&a, &deployed, &workload());
    let mut written = generated();
    written.min = p.min_replicas.value;
    written.max = p.max_replicas.value;
    written.signals = vec![(Metric::Held, p.per_replica.value)];
    let g = replay(&a, &written, &workload());
    assert!(g.peak_wait_s.0 <= d.peak_wait_s.0.max(5.0));
    assert!(
        g.replica_s <= 1.25 * d.replica_s,
        "{} against {}",
        g.replica_s,
        d.replica_s
    );
}

#[test]
fn minimums_are_every_count_then_a_coarser_grid() {
    assert_eq!(minimums(3), vec![1, 2, 3]);
    let m = minimums(1000);
    assert_eq!(m.last(), Some(&1000));
    assert!(m.len() < 70, "{}", m.len());
    assert!(m.windows(2).all(|w| w[0] < w[1]));
}

/// A week of arrivals: the candidates are replayed over the two hours around the peak, said.
#[test]
fn long_arrivals_are_tuned_over_the_stretch_around_the_peak() {
    let mut a = vec![2.0; 7 * 86_400];
    a[400_000] = 50.0;
    let (s, start) = stretch(&a);
    assert_eq!((s.len(), start), (TUNED_OVER_S, 400_000 - TUNED_OVER_S / 2));
    assert_eq!(s[TUNED_OVER_S / 2], 50.0);
    let short = vec![1.0; 600];
    assert_eq!(stretch(&short).0.len(), 600);
    let mut end = vec![1.0; 10_000];
    end[9_999] = 9.0;
    assert_eq!(stretch(&end).1, 10_000 - TUNED_OVER_S);
}
