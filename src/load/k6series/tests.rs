use super::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

/// A stack of `slots` servers of `job` s each, FIFO (the simulator's runner in miniature).
struct Pool {
    free: Vec<f64>,
    job: f64,
}

impl Pool {
    fn new(slots: usize, job: f64) -> Pool {
        Pool {
            free: vec![0.0; slots],
            job,
        }
    }
    /// Response end of a request arriving at `t` (arrivals come in time order).
    fn serve(&mut self, t: f64) -> f64 {
        let (k, f) = self
            .free
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let end = t.max(f) + self.job;
        self.free[k] = end;
        end + 0.002
    }
}

const T0: f64 = 1_796_022_000.0;

#[test]
fn points_centuries_apart_are_refused_not_judged() {
    let now = 1.8e9;
    let mut s = Series {
        reqs: (0..100).map(|i| req(now + i as f64 * 0.1, 0.05)).collect(),
        ..Series::default()
    };
    assert!(plausible_span(&s).is_ok());
    // One point in the year 9999.
    s.reqs.push(req(253_402_000_000.0, 0.05));
    let e = plausible_span(&s).unwrap_err();
    assert!(e.contains("9999-"), "{e}");
}

#[test]
fn a_request_longer_than_its_run_is_refused() {
    let now = 1.8e9;
    let mut s = Series {
        reqs: (0..100)
            .map(|i| req(now + 2.0 + i as f64 * 0.1, 0.05))
            .collect(),
        vus: (0..15).map(|i| (now + 1.0 + i as f64, 4.0)).collect(),
        ..Series::default()
    };
    assert!(plausible_span(&s).is_ok());
    // A minute-long request at the start is fine; one of 29 days is not.
    s.reqs.push(req(now + 61.0, 60.0));
    assert!(plausible_span(&s).is_ok());
    s.reqs.push(req(now + 9.0, 29.0 * 86_400.0));
    let e = plausible_span(&s).unwrap_err();
    assert!(e.contains("before the run"), "{e}");
}

fn req(end: f64, dur: f64) -> Req {
    Req {
        end,
        dur,
        failed: false,
        check_ok: true,
        status: 200,
        scenario: 0,
    }
}

/// A closed loop: VU `i` starts at `on[i]` (s from the start) and loops until `end`; k6's
/// `vus` gauge each second.
fn closed(on: &[f64], end: f64, pool: &mut Pool) -> Series {
    let mut s = Series {
        scenarios: vec!["default".into()],
        ..Series::default()
    };
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = on
        .iter()
        .enumerate()
        .map(|(i, t)| Reverse(((t * 1e6) as u64, i)))
        .collect();
    while let Some(Reverse((t_us, i))) = heap.pop() {
        let t = t_us as f64 / 1e6;
        if t >= end {
            continue;
        }
        let done = pool.serve(t);
        s.reqs.push(req(T0 + done, done - t));
        s.iters.push((T0 + done, done - t, 0));
        heap.push(Reverse(((done * 1e6).round() as u64, i)));
    }
    for sec in 0..=(end as usize) {
        let v = on.iter().filter(|t| **t <= sec as f64).count();
        s.vus.push((T0 + sec as f64, v as f64));
    }
    s.reqs.sort_by(|a, b| a.end.total_cmp(&b.end));
    s.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
    s
}

/// ramping-vus: 0→4 over 4 s, 4 held 14 s, →16 over 4 s, 16 held 14 s (the run).
fn ramp_on() -> Vec<f64> {
    let mut on: Vec<f64> = (0..4).map(|i| i as f64).collect();
    on.extend((0..12).map(|i| 18.0 + i as f64 / 3.0));
    on
}

fn held(stages: &[StageResult]) -> Vec<&StageResult> {
    stages.iter().filter(|s| s.ramp.is_none()).collect()
}

#[test]
fn a_ramp_with_two_held_steps_gives_two_levels_and_windows() {
    // 5 runner tasks of 0.4 s: 12.5/s at most; 4 users get 4 ÷ 0.402 ≈ 9.95/s.
    let s = closed(&ramp_on(), 36.0, &mut Pool::new(5, 0.4));
    let stages = stages(&s, Warmup(None)).unwrap();
    let levels = held(&stages);
    assert_eq!(
        levels.iter().map(|l| l.vus).collect::<Vec<_>>(),
        vec![Some(4), Some(16)]
    );
    assert!((levels[0].throughput_rps - 4.0 / 0.402).abs() < 0.35);
    assert!((levels[1].throughput_rps - 12.5).abs() < 0.5);
    // Each level's interval holds the truth and no level beats N ÷ R_min.
    let ci = levels[1].throughput_ci.unwrap();
    assert!(ci[0] <= 12.5 && 12.5 <= ci[1], "{ci:?}");
    for l in &levels {
        let lat = l.latency.as_ref().unwrap();
        let n = l.vus.unwrap() as f64;
        assert!(
            // A window's edges cut at most one response per user.
            l.request_rate <= n / (lat.min_ms / 1000.0) * (1.0 + n / l.requests as f64),
            "{} {:?}",
            l.request_rate,
            lat
        );
        assert!(crate::diagnose::levels::impossible(l).is_none());
    }
    // The ramps are windows, never levels: one before each held step.
    let ramps: Vec<_> = stages.iter().filter_map(|s| s.ramp).collect();
    assert!(!ramps.is_empty() && ramps.len() <= 3, "{ramps:?}");
    assert!(ramps.iter().any(|r| r.from == 4 && r.to == 16), "{ramps:?}");
    // Every request is counted at most once, in the window it started in; only the run's
    // last response or so per user (started after the last users stopped) is left out.
    let total: u64 = stages.iter().map(|s| s.requests + s.warmup_requests).sum();
    let all = s.reqs.len() as u64;
    assert!(total <= all && total + 16 >= all, "{total} of {all}");
}

#[test]
fn a_step_too_short_to_settle_is_a_ramp() {
    // 2 users for 10 s, 8 users for 2 s, 12 users for 12 s; 1 s jobs on 20 slots.
    let mut on = vec![0.0, 0.0];
    on.extend([10.0; 6]);
    on.extend([12.0; 4]);
    let s = closed(&on, 24.0, &mut Pool::new(20, 1.0));
    let stages = stages(&s, Warmup(None)).unwrap();
    let vus: Vec<_> = held(&stages).iter().map(|l| l.vus).collect();
    assert_eq!(vus, vec![Some(2), Some(12)]);
    // 2 s at 8 users cannot hold 3 responses each after a warm-up: inside a ramp window.
    assert!(stages
        .iter()
        .any(|s| s.ramp.is_some_and(|r| r.from == 2 && r.to == 12)));
}

#[test]
fn a_request_straddling_a_step_change_belongs_to_the_step_it_started_in() {
    // 1 user, 3 s jobs; at 12 s a second user joins. The request that started at 9 s ends
    // at 12 s — stamped in the second step, started in the first.
    let s = closed(&[0.0, 12.0], 30.0, &mut Pool::new(4, 3.0));
    let st = stages(&s, Warmup(Some(0.0))).unwrap();
    let first = st.iter().find(|x| x.vus == Some(1) && x.ramp.is_none());
    let first = first.expect("a held step at 1 user");
    // Starts 0, 3, 6, 9 (s): four requests, none of them counted again later.
    assert_eq!(first.requests + first.warmup_requests, 4);
    let total: u64 = st.iter().map(|x| x.requests + x.warmup_requests).sum();
    let all = s.reqs.len() as u64;
    assert!(total <= all && total + 2 >= all, "{total} of {all}");
}

#[test]
fn a_run_that_dropped_iterations_is_open_whatever_its_timing() {
    // Closed executors never drop an iteration: a closed-looking run that did is k6's
    // arrival-rate executor with too few VUs, its starts waiting for a VU to end.
    let mut s = closed(&ramp_on(), 36.0, &mut Pool::new(5, 0.4));
    assert_eq!(closed_scenarios(&s), vec![true]);
    s.dropped.push((T0 + 1.0, 0, 1.0));
    assert_eq!(closed_scenarios(&s), vec![false]);
}

/// An arrival-rate executor: `rate(t)` arrivals per second, each one request.
fn open(rate: impl Fn(f64) -> f64, end: f64, pool: &mut Pool) -> Series {
    let mut s = Series {
        scenarios: vec!["default".into()],
        ..Series::default()
    };
    let mut t = 0.0;
    while t < end {
        let done = pool.serve(t);
        s.reqs.push(req(T0 + done, done - t));
        s.iters.push((T0 + done, done - t, 0));
        t += 1.0 / rate(t);
    }
    s.reqs.sort_by(|a, b| a.end.total_cmp(&b.end));
    s.iters.sort_by(|a, b| a.0.total_cmp(&b.0));
    sample_vus(&mut s, 0..=(end as usize));
    s
}

/// k6's `vus` gauge once a second: the requests in flight at each second.
fn sample_vus(s: &mut Series, secs: std::ops::RangeInclusive<usize>) {
    for sec in secs {
        let at = T0 + sec as f64;
        let busy = s
            .reqs
            .iter()
            .filter(|r| r.start() <= at && r.end > at)
            .count();
        s.vus.push((at, busy as f64));
    }
}

#[test]
fn held_arrival_rates_are_levels_and_the_moving_rate_is_a_window() {
    // 8/s for 15 s, a ramp to 20/s over 5 s, 20/s for 15 s; 12.5/s of capacity.
    let rate = |t: f64| {
        if t < 15.0 {
            8.0
        } else if t < 20.0 {
            8.0 + (t - 15.0) / 5.0 * 12.0
        } else {
            20.0
        }
    };
    let s = open(rate, 35.0, &mut Pool::new(5, 0.4));
    assert_eq!(closed_scenarios(&s), vec![false]);
    let st = stages(&s, Warmup(None)).unwrap();
    let levels = held(&st);
    assert_eq!(
        levels.len(),
        2,
        "{:?}",
        st.iter().map(|x| &x.label).collect::<Vec<_>>()
    );
    assert!((levels[0].rate.unwrap() - 8.0).abs() < 0.5);
    assert!((levels[0].throughput_rps - 8.0).abs() < 0.5);
    assert!((levels[1].rate.unwrap() - 20.0).abs() < 1.0);
    // Past the ceiling: completions are the capacity, the rest is backlog growth.
    assert!((levels[1].throughput_rps - 12.5).abs() < 0.5);
    let f = levels[1].flow.unwrap();
    assert!(f.backlog_growth_per_s > 5.0, "{f:?}");
    assert_eq!(
        f.arrivals as i64 - f.completions as i64,
        f.backlog_end as i64 - f.backlog_start as i64
    );
    assert!(st.iter().any(|x| x.ramp.is_some()));
}

#[test]
fn the_drain_after_the_arrivals_stop_is_no_level() {
    // 20/s for 15 s against 12.5/s of capacity: the backlog drains for about 9 s after the
    // last arrival, with one stray count in it (a dropped iteration k6 wrote late).
    let mut s = open(|_| 20.0, 15.0, &mut Pool::new(5, 0.4));
    let last = s.reqs.last().unwrap().end;
    assert!(last - T0 > 22.0, "{}", last - T0);
    // k6 samples its VUs through the drain (gracefulStop) too.
    sample_vus(&mut s, 16..=((last - T0).ceil() as usize));
    s.dropped.push((last - 2.5, 0, 1.0));
    let st = stages(&s, Warmup(None)).unwrap();
    let levels = held(&st);
    assert_eq!(
        levels.len(),
        1,
        "{:?}",
        st.iter().map(|x| &x.label).collect::<Vec<_>>()
    );
    assert!((levels[0].rate.unwrap() - 20.0).abs() < 1.0);
}

/// k6's JSON lines and CSV (unix_milli) of one series.
fn write_both(s: &Series, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let iso = |t: f64| {
        let off = t - T0;
        let (m, sec) = ((off / 60.0).floor(), off - (off / 60.0).floor() * 60.0);
        format!("2026-11-30T07:{:02}:{:09.6}Z", m as u32, sec)
    };
    let mut j = String::new();
    let mut c = String::from("metric_name,timestamp,metric_value,check,error,error_code,expected_response,group,method,name,proto,scenario,service,status,subproto,tls_version,url,extra_tags,metadata\n");
    let mut point = |metric: &str, t: f64, v: f64, status: &str| {
        j.push_str(&format!(
            "{{\"type\":\"Point\",\"metric\":\"{metric}\",\"data\":{{\"time\":\"{}\",\"value\":{v},\"tags\":{{\"scenario\":\"default\",\"status\":\"{status}\"}}}}}}\n",
            iso(t)
        ));
        c.push_str(&format!(
            "{metric},{},{v},,,,true,,POST,http://x/,HTTP/1.1,default,,{status},,,http://x/,,\n",
            (t * 1000.0).round() as u64
        ));
    };
    for r in &s.reqs {
        point(
            "http_req_duration",
            r.end,
            (r.dur * 1e6).round() / 1e3,
            "200",
        );
        point("http_req_failed", r.end, 0.0, "200");
    }
    for i in &s.iters {
        point("iteration_duration", i.0, (i.1 * 1e6).round() / 1e3, "");
    }
    for v in &s.vus {
        point("vus", v.0, v.1, "");
    }
    let (jp, cp) = (dir.join("run.json"), dir.join("run.csv"));
    std::fs::write(&jp, j).unwrap();
    std::fs::write(&cp, c).unwrap();
    (jp, cp)
}

#[test]
fn the_csv_and_the_json_of_one_run_give_the_same_levels() {
    let s = closed(&ramp_on(), 36.0, &mut Pool::new(5, 0.4));
    let dir = std::env::temp_dir().join(format!("n8ncap-k6series-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (jp, cp) = write_both(&s, &dir);
    let (a, b) = (read(&jp).unwrap(), read(&cp).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(a.reqs.len(), s.reqs.len());
    assert_eq!(b.reqs.len(), s.reqs.len());
    let (sa, sb) = (
        stages(&a, Warmup(None)).unwrap(),
        stages(&b, Warmup(None)).unwrap(),
    );
    let key = |v: &[StageResult]| {
        v.iter()
            .map(|x| (x.vus, x.ramp.is_some(), x.requests))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&sa), key(&sb));
    for (x, y) in sa.iter().zip(&sb) {
        assert!((x.throughput_rps - y.throughput_rps).abs() < 0.05);
    }
    assert_eq!(held(&sa).len(), 2);
}
