//! An arrival curve for `replay`: executions arriving each second, from a Prometheus history
//! (each window's completions plus its backlog's growth, over its length), from a k6 run (its
//! requests by the second they started, with the iterations k6 dropped), or from a CSV of
//! `seconds,rate` points (each rate held until the next point). Every rate is checked: a
//! negative, non-finite or impossible one is a counted gap, not an arrival.

use crate::error::BadInput;
use std::path::Path;

/// The curve and what was left out of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Arrivals {
    /// Executions arriving in each second from the start.
    pub per_s: Vec<f64>,
    /// Where it came from, for the report.
    pub from: String,
    /// Points left out, with the reason of each kind.
    pub gaps: Vec<String>,
}

/// The most arrivals a second n8ncap takes from a file (a webhook's intake is far below).
const MOST_PER_S: f64 = 1e6;
/// The longest curve replayed, s (a week).
const LONGEST_S: f64 = 7.0 * 86_400.0;

fn rate_ok(r: f64) -> bool {
    r.is_finite() && (0.0..=MOST_PER_S).contains(&r)
}

/// A history's windows (`diagnose --prometheus --out DIR`'s history.json).
pub fn from_history(h: &crate::record::history::History, from: &str) -> Result<Arrivals, BadInput> {
    let mut gaps = 0u32;
    let Some(t0) = h
        .windows
        .iter()
        .map(|w| w.start)
        .filter(|s| s.is_finite())
        .reduce(f64::min)
    else {
        return Err(BadInput(format!(
            "{from}: the history has no window to replay"
        )));
    };
    let mut per_s: Vec<f64> = Vec::new();
    for w in &h.windows {
        let len = w.end - w.start;
        let rate = (w.completions + (w.waiting_end - w.waiting_start)) / len;
        // Both ends within a week of the first window: a far end would be gigabytes of seconds.
        if !(len > 0.0 && rate_ok(rate) && w.end - t0 <= LONGEST_S) {
            gaps += 1;
            continue;
        }
        let (a, b) = (
            (w.start - t0).round() as usize,
            (w.end - t0).round() as usize,
        );
        if per_s.len() < b {
            per_s.resize(b, 0.0);
        }
        per_s[a..b].iter_mut().for_each(|x| *x = rate);
    }
    checked(
        per_s,
        from,
        gaps,
        "windows whose arrivals were negative, not a number or beyond 1e6/s, or that end more \
         than a week after the first",
    )
}

/// A k6 run's requests by the second they started, and the iterations it dropped.
pub fn from_k6(path: &Path) -> Result<Arrivals, BadInput> {
    let s = super::k6series::read_file(path)?;
    let starts = s
        .reqs
        .iter()
        .map(|r| r.start())
        .chain(s.dropped.iter().map(|d| d.0));
    let t0 = starts
        .clone()
        .filter(|t| t.is_finite())
        .reduce(f64::min)
        .unwrap_or(0.0)
        .floor();
    let mut per_s: Vec<f64> = Vec::new();
    let mut gaps = 0u32;
    let mut add = |t: f64, n: f64| {
        let at = t - t0;
        // A time not a number or beyond a week of the first: not a second to allocate up to.
        if !(at.is_finite() && at <= LONGEST_S && n.is_finite() && n >= 0.0) {
            gaps = gaps.saturating_add(1);
            return;
        }
        let i = at.max(0.0) as usize;
        if per_s.len() <= i {
            per_s.resize(i + 1, 0.0);
        }
        per_s[i] += n;
    };
    for r in &s.reqs {
        add(r.start(), 1.0);
    }
    for (t, _, n) in &s.dropped {
        add(*t, *n);
    }
    checked(
        per_s,
        &path.display().to_string(),
        gaps,
        "requests whose time is not a number or more than a week after the first",
    )
}

/// `seconds,rate` lines (a header line and `#` comments skipped).
pub fn from_csv(path: &Path, text: &str) -> Result<Arrivals, BadInput> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut gaps = 0u32;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split(',').map(str::trim);
        let (t, r) = (
            f.next().and_then(|v| v.parse::<f64>().ok()),
            f.next().and_then(|v| v.parse::<f64>().ok()),
        );
        match (t, r) {
            (Some(t), Some(r)) if t.is_finite() && (0.0..=LONGEST_S).contains(&t) && rate_ok(r) => {
                points.push((t, r))
            }
            (None, _) if n == 0 => {}
            _ => gaps += 1,
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some(last) = points.last().copied() else {
        return Err(BadInput(format!(
            "{}: no `seconds,rate` line to replay (e.g. `0,2` then `60,10`)",
            path.display()
        )));
    };
    let len = last.0.ceil() as usize + 1;
    // One walk over the sorted points: each second takes the rate of the last point at or
    // before it (of equal times, the last line's).
    let mut next = 0;
    let mut rate = 0.0;
    let per_s = (0..len)
        .map(|s| {
            while next < points.len() && points[next].0 <= s as f64 {
                rate = points[next].1;
                next += 1;
            }
            rate
        })
        .collect();
    checked(
        per_s,
        &path.display().to_string(),
        gaps,
        "lines that are not two numbers, a time within a week and a rate from 0 to 1e6/s",
    )
}

fn checked(per_s: Vec<f64>, from: &str, gaps: u32, why: &str) -> Result<Arrivals, BadInput> {
    if per_s.len() < 60 {
        return Err(BadInput(format!(
            "{from}: {} s of arrivals: an autoscaler's replay needs a minute at least",
            per_s.len()
        )));
    }
    Ok(Arrivals {
        per_s,
        from: from.to_string(),
        gaps: (gaps > 0)
            .then(|| format!("{gaps} {why} left out"))
            .into_iter()
            .collect(),
    })
}

/// Reads a results directory with history.json, a k6 output, or a CSV.
pub fn read(path: &Path) -> Result<Arrivals, BadInput> {
    let history = if path.is_dir() {
        path.join(crate::record::dir::HISTORY)
    } else {
        path.to_path_buf()
    };
    if history
        .file_name()
        .is_some_and(|n| n == crate::record::dir::HISTORY)
    {
        let text = crate::util::read_text_file(&history, 256 << 20, "a history")?;
        let h: crate::record::history::History = serde_json::from_str(&text).map_err(|e| {
            BadInput(format!(
                "{}: not a history n8ncap saved: {e}",
                history.display()
            ))
        })?;
        return from_history(&h, &history.display().to_string());
    }
    // The kind is read from the first bytes of a regular file only: a FIFO's open would wait
    // for a writer for ever.
    let mut head = Vec::new();
    {
        use std::io::Read;
        let f = crate::util::open_regular_file(path, "an arrival curve")?;
        let _ = f.take(64).read_to_end(&mut head);
    }
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let head = String::from_utf8_lossy(&head);
    if gzip || head.trim_start().starts_with('{') || head.starts_with("metric_name") {
        return from_k6(path);
    }
    let text = crate::util::read_text_file(path, 64 << 20, "an arrival curve")?;
    from_csv(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_holds_each_rate_until_the_next_point_and_counts_bad_lines() {
        let a = from_csv(
            Path::new("a.csv"),
            "seconds,rate\n0,2\n60,10\n90,x\n120,-1\n180,2\n",
        )
        .unwrap();
        assert_eq!(a.per_s.len(), 181);
        assert_eq!(
            (a.per_s[59], a.per_s[60], a.per_s[179], a.per_s[180]),
            (2.0, 10.0, 10.0, 2.0)
        );
        assert_eq!(a.gaps.len(), 1);
        assert!(a.gaps[0].starts_with("2 "));
        assert!(from_csv(Path::new("a.csv"), "0,1\n30,1\n").is_err());
    }

    /// k6's JSON lines: 2 requests a second for 30 s, then 6 a second for 40 s, each 0.1 s.
    #[test]
    fn a_k6_run_s_requests_are_counted_by_the_second_they_started() {
        let mut j = String::new();
        let mut point = |metric: &str, t: f64, v: f64| {
            let (m, sec) = ((t / 60.0).floor(), t - (t / 60.0).floor() * 60.0);
            j.push_str(&format!(
                "{{\"type\":\"Point\",\"metric\":\"{metric}\",\"data\":{{\"time\":\"2026-11-30T07:{:02}:{:09.6}Z\",\"value\":{v},\"tags\":{{\"scenario\":\"default\",\"status\":\"200\"}}}}}}\n",
                m as u32, sec
            ));
        };
        let mut starts: Vec<f64> = (0..60).map(|i| 0.25 + f64::from(i) * 0.5).collect();
        starts.extend((0..240).map(|i| 30.05 + f64::from(i) / 6.0));
        for t in &starts {
            point("http_req_duration", t + 0.1, 100.0);
            point("http_req_failed", t + 0.1, 0.0);
        }
        for s in 0..71 {
            point("vus", f64::from(s), 5.0);
        }
        let path =
            std::env::temp_dir().join(format!("n8ncap-arrivals-{}.json", std::process::id()));
        std::fs::write(&path, j).unwrap();
        let a = read(&path);
        let _ = std::fs::remove_file(&path);
        let a = a.unwrap();
        assert_eq!(a.per_s.len(), 70, "{:?}", a.per_s);
        assert!(a.per_s[..30].iter().all(|x| *x == 2.0), "{:?}", a.per_s);
        assert!(a.per_s[30..].iter().all(|x| *x == 6.0), "{:?}", a.per_s);
    }
}
