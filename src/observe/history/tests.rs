use super::*;
use crate::model::settings::Provenance;

fn empty_history() -> History {
    let q = Query {
        start: 0.0,
        end: 0.0,
        matchers: Vec::new(),
        step: None,
        window: None,
    };
    History::empty(
        String::new(),
        &q,
        Sourced::new(1.0, Provenance::Assumed("t".into())),
        None,
    )
}

#[test]
fn impossible_samples_are_gaps_and_a_falling_counter_gives_no_increase() {
    let s = Series {
        labels: BTreeMap::new(),
        points: vec![
            (0.0, 10.0),
            (1.0, 12.0),
            (2.0, f64::NAN),
            (3.0, 15.0),
            (4.0, 2.0),
            (5.0, 4.0),
            (7.0, 5.0),
        ],
    };
    let mut h = empty_history();
    let mut g = grid(&s, "c".into(), 0.0, 1.0, 8);
    check(&mut g, false, 0.0, 1.0, &mut h);
    // The NaN and the missing step at 6 are gaps.
    assert_eq!(h.gap_steps, 2);
    let inc = increases(&g, 0.0, 1.0, &mut h);
    // The rises across the NaN (12 → 15) and the missing step (4 → 5) are no figures:
    // the gaps shorten the time counted, they add no completions.
    assert_eq!(
        inc,
        vec![None, Some(2.0), None, None, None, Some(2.0), None, None]
    );
    // The fall from 15 to 2 is a reset: its step counts nothing.
    assert_eq!(h.resets.len(), 1);
    assert_eq!((h.resets[0].from, h.resets[0].to), (15.0, 2.0));
}

#[test]
fn missing_and_nan_samples_shorten_the_time_and_never_inflate_the_rate() {
    // A true 20/s, scraped every second, every third sample NaN and every seventh missing.
    let points: Vec<(f64, f64)> = (0..300)
        .filter(|i| i % 7 != 6)
        .map(|i| {
            (
                i as f64,
                if i % 3 == 2 {
                    f64::NAN
                } else {
                    20.0 * i as f64
                },
            )
        })
        .collect();
    let s = Series {
        labels: BTreeMap::new(),
        points,
    };
    let mut h = empty_history();
    let mut g = grid(&s, "c".into(), 0.0, 1.0, 300);
    check(&mut g, false, 0.0, 1.0, &mut h);
    let inc = increases(&g, 0.0, 1.0, &mut h);
    let (sum, steps) = inc
        .iter()
        .flatten()
        .fold((0.0, 0), |(a, k), x| (a + x, k + 1));
    assert!(steps > 50, "{steps}");
    assert_eq!(sum / steps as f64, 20.0);
}

#[test]
fn gauges_beyond_any_queue_are_gaps() {
    let s = Series {
        labels: BTreeMap::new(),
        points: vec![
            (0.0, 3.0),
            (1.0, 1e308),
            (2.0, -100.0),
            (3.0, f64::INFINITY),
        ],
    };
    let mut h = empty_history();
    let mut g = grid(&s, "g".into(), 0.0, 1.0, 4);
    check(&mut g, true, 0.0, 1.0, &mut h);
    assert_eq!(g.values, vec![Some(3.0), None, None, None]);
    assert_eq!(h.gaps.len(), 1);
}

#[test]
fn the_refresh_is_how_often_the_counter_moved() {
    // Scraped every second, moving every 20 s.
    let values = (0..200).map(|i| Some((i / 20) as f64 * 7.0)).collect();
    let g = Grid {
        name: "c".into(),
        values,
    };
    assert_eq!(refresh_of(&g, 1.0), Some(20.0));
}

#[test]
fn a_window_reads_the_slots_where_a_job_waited_step_by_step() {
    // 15 slots, gauges every step: the queue ran dry at two steps (fewer taken), one step
    // lost its waiting gauge (not paired, not read).
    let grid = |v: Vec<Option<f64>>| Grid {
        name: "g".into(),
        values: v,
    };
    let a = grid(vec![
        Some(15.0),
        Some(11.0),
        Some(15.0),
        Some(13.0),
        Some(9.0),
    ]);
    let w = grid(vec![Some(3.0), Some(0.0), Some(1.0), None, Some(0.0)]);
    let done: Vec<Option<f64>> = vec![Some(10.0); 5];
    let s = Series5 {
        a: Some(&a),
        w: Some(&w),
        done: Some(&done),
        ticks: None,
        fail: None,
        dsum: None,
        dcnt: None,
    };
    let win = window(&s, 0, 5, 0.0, 1.0, 1.0).unwrap();
    assert_eq!(win.active_while_waiting, Some(15.0));
    assert_eq!(win.waited_samples, 2);
    assert!((win.active_mean - 12.6).abs() < 1e-9);
    // No step where a job waited: nothing read.
    let w = grid(vec![Some(0.0); 5]);
    let s = Series5 { w: Some(&w), ..s };
    let win = window(&s, 0, 5, 0.0, 1.0, 1.0).unwrap();
    assert_eq!((win.active_while_waiting, win.waited_samples), (None, 0));
}

#[test]
fn a_count_s_first_window_after_a_step_is_left_out_when_it_has_steady_ones() {
    // Workers by window: unknown, 1, 1, unknown (the step), 2 (the step's wake: the backlog of
    // one worker draining at a lower rate), 2, 2; then 4 in one window only.
    let g = Grid {
        name: "g".into(),
        values: vec![Some(1.0); 2],
    };
    let done: Vec<Option<f64>> = vec![Some(1.0); 2];
    let s = Series5 {
        a: Some(&g),
        w: Some(&g),
        done: Some(&done),
        ticks: None,
        fail: None,
        dsum: None,
        dcnt: None,
    };
    let base = window(&s, 0, 2, 0.0, 1.0, 1.0).unwrap();
    let mut h = empty_history();
    let counts = [
        None,
        Some(1),
        Some(1),
        None,
        Some(2),
        Some(2),
        Some(2),
        None,
        Some(4),
    ];
    h.windows = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| Window {
            start: i as f64 * 5.0,
            end: i as f64 * 5.0 + 5.0,
            workers: n,
            ..base.clone()
        })
        .collect();
    let starts = |n: u32| -> Vec<f64> {
        split(&h)
            .into_iter()
            .find(|(c, _)| *c == n)
            .map(|(_, p)| p.windows.iter().map(|w| w.start).collect())
            .unwrap()
    };
    assert_eq!(starts(1), [10.0]);
    assert_eq!(starts(2), [25.0, 30.0]);
    // A count seen only in a step's wake keeps it: nothing better was read.
    assert_eq!(starts(4), [40.0]);
}
