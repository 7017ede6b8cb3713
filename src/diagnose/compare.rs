//! Runs compared: a later run's verdict, ceiling, knee, latency and errors against the
//! baseline's, each difference judged against the runs' own intervals — "no difference beyond
//! noise" where they overlap — and the thresholds a CI gate sets (`--fail-if`).

use crate::error::BadInput;
use crate::error::Incomparable;
use crate::model::settings::{Settings, Sourced};
use crate::record::comparison::{
    Change, LevelChange, RunBrief, RunComparison, Versus, P95_INTERVAL_ANSWERS,
};
use crate::record::diagnosis::Level;
use crate::record::{Diagnosis, Estimate, Recommendation, Summary};

/// A judged run, as `compare` reads it.
pub struct Judged<'a> {
    pub label: String,
    pub summary: &'a Summary,
    pub diagnosis: &'a Diagnosis,
    pub recommendation: &'a Result<Recommendation, crate::error::NoPlan>,
}

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The measured ceiling's change, in %.
    Ceiling,
    /// p95's change at any level both runs measured, in %.
    P95,
    /// The error rate's change at any such level, in percentage points.
    ErrorRate,
    /// Another limit caps.
    Verdict,
}

/// One `--fail-if`: `ceiling<-5%`, `p95>+10%`, `error-rate>+1`, `verdict`.
#[derive(Debug, Clone, PartialEq)]
pub struct FailIf {
    pub text: String,
    pub metric: Metric,
    /// True for `>`, false for `<`.
    pub above: bool,
    pub value: f64,
}

impl FailIf {
    pub fn parse(text: &str) -> Result<FailIf, BadInput> {
        let t = text.trim();
        let usage = || {
            format!(
                "--fail-if {t:?}: write METRIC<VALUE or METRIC>VALUE with METRIC one of ceiling, \
                 p95 (changes in %, e.g. ceiling<-5% or p95>+10%), error-rate (a change in \
                 percentage points, e.g. error-rate>+1), or the word verdict (another limit caps)"
            )
        };
        if t == "verdict" {
            return Ok(FailIf {
                text: t.into(),
                metric: Metric::Verdict,
                above: true,
                value: 0.0,
            });
        }
        let (at, above) = match (t.find('<'), t.find('>')) {
            (Some(i), None) => (i, false),
            (None, Some(i)) => (i, true),
            _ => return Err(usage().into()),
        };
        let metric = match t[..at].trim() {
            "ceiling" => Metric::Ceiling,
            "p95" => Metric::P95,
            "error-rate" => Metric::ErrorRate,
            _ => return Err(usage().into()),
        };
        let v = t[at + 1..].trim();
        let number = v.strip_suffix('%');
        if number.is_some() == (metric == Metric::ErrorRate) {
            return Err(usage().into());
        }
        let number = number.unwrap_or(v);
        let value: f64 = number
            .strip_prefix('+')
            .unwrap_or(number)
            .parse()
            .map_err(|_| usage())?;
        if !value.is_finite() || value.abs() > 1000.0 {
            return Err(usage().into());
        }
        Ok(FailIf {
            text: t.into(),
            metric,
            above,
            value,
        })
    }

    fn passes_line(&self, change: f64) -> bool {
        if self.above {
            change > self.value
        } else {
            change < self.value
        }
    }

    /// The words when `v` fails this threshold, else None. A change within the runs' noise
    /// never fails one; a threshold with nothing to judge fails ("cannot compare: …").
    fn failed_by(&self, v: &Versus) -> Option<String> {
        let cannot = |what: &str| Some(format!("cannot compare {what}"));
        match self.metric {
            // Another limit at a ceiling beyond noise above the baseline's is the bottleneck
            // fixed, not a regression: said, never failed. Sooner or no better, it fails.
            // A run that reached no ceiling but carried more than the baseline's, beyond noise,
            // is the fix working too: its new ceiling is above what it was driven to.
            Metric::Verdict => v.verdict_changed.as_ref().and_then(|w| {
                let up = |c: &Option<Change>| {
                    c.as_ref()
                        .is_some_and(|c| c.beyond_noise && c.change_pct > 0.0)
                };
                (!(up(&v.ceiling) || up(&v.carried))).then(|| w.clone())
            }),
            Metric::Ceiling => match &v.ceiling {
                None => cannot(&format!(
                    "the ceiling: {} reached none (no valid level at the ceiling)",
                    if v.run.ceiling.is_none() {
                        v.run.label.as_str()
                    } else {
                        "the baseline"
                    }
                )),
                Some(c) if !c.has_noise() => {
                    cannot("the ceiling: a run's ceiling has no interval (no time counted)")
                }
                Some(c) => (c.beyond_noise && self.passes_line(c.change_pct))
                    .then(|| format!("ceiling {:+.1} %", c.change_pct)),
            },
            Metric::P95 if v.levels.iter().all(|l| l.p95.is_none()) => {
                cannot("p95: no level passed its checks in both runs")
            }
            Metric::P95 => v.levels.iter().find_map(|l| {
                l.p95
                    .as_ref()
                    .filter(|c| c.beyond_noise && self.passes_line(c.change_pct))
                    .map(|c| format!("p95 {:+.1} % at {}", c.change_pct, l.level.words()))
            }),
            Metric::ErrorRate if v.levels.is_empty() => {
                cannot("the error rate: no level both runs measured")
            }
            Metric::ErrorRate => v.levels.iter().find_map(|l| {
                let points = (l.error_rate[1] - l.error_rate[0]) * 100.0;
                (l.error_beyond_noise && self.passes_line(points))
                    .then(|| format!("error rate {points:+.1} points at {}", l.level.words()))
            }),
        }
        .map(|what| format!("--fail-if {}: {what}", self.text))
    }
}

/// What a gate cannot judge whatever its thresholds: a run with no valid level, and a level
/// both runs measured that passed its checks in one of them only (its latency is compared
/// nowhere, and its failure is the regression or the fix the gate is there to see).
fn cannot_judge(base: &Judged, run: &Judged, v: &Versus) -> Vec<String> {
    let mut out: Vec<String> = [base, run]
        .iter()
        .filter(|j| !j.diagnosis.levels.iter().any(|l| l.valid))
        .map(|j| {
            format!(
                "cannot compare: {} has no valid level (every level failed its checks)",
                j.label
            )
        })
        .collect();
    out.extend(v.levels.iter().filter_map(|l| {
        let (valid, failed) = match l.valid {
            [true, false] => (&base.label, &run.label),
            [false, true] => (&run.label, &base.label),
            _ => return None,
        };
        Some(format!(
            "cannot compare at {}: it passed its checks in {valid} only ({failed}: {:.1} % errors)",
            l.level.words(),
            l.error_rate[usize::from(l.valid[0])] * 100.0
        ))
    }));
    out
}

/// Why two runs cannot be compared: another load model, another workflow body, another mix.
pub fn comparable(a: &Judged, b: &Judged) -> Result<(), Incomparable> {
    let (x, y) = (a.summary, b.summary);
    if x.model != y.model {
        return Err(format!(
            "{} ran the {} model and {} the {}: a closed run's levels are in flight, an open \
             run's are arrival rates — compare runs of one model",
            a.label,
            format!("{:?}", x.model).to_lowercase(),
            b.label,
            format!("{:?}", y.model).to_lowercase()
        )
        .into());
    }
    if x.body != y.body {
        return Err(format!(
            "{} and {} sent another request body: another workflow input is another job — \
             compare runs of the same body",
            a.label, b.label
        )
        .into());
    }
    let mix = |s: &Summary| {
        s.scenarios
            .iter()
            .map(|c| (c.name.clone(), (c.share * 1000.0).round() as i64))
            .collect::<Vec<_>>()
    };
    if mix(x) != mix(y) {
        return Err(format!(
            "{} and {} ran another mix of scenarios (names or shares differ): compare runs of \
             the same mix",
            a.label, b.label
        )
        .into());
    }
    Ok(())
}

/// `b` against `a`: the change in %, its range from the intervals' ends, and whether the
/// intervals leave each other (a degenerate interval, one sample, tells nothing of noise).
pub fn change(a: &Estimate, b: &Estimate) -> Change {
    let pct = |num: f64, den: f64| {
        if den > 0.0 {
            (num / den - 1.0) * 100.0
        } else {
            0.0
        }
    };
    let measured_noise = a.high > a.low && b.high > b.low;
    Change {
        baseline: a.clone(),
        candidate: b.clone(),
        change_pct: pct(b.mean, a.mean),
        interval_pct: [pct(b.low, a.high), pct(b.high, a.low)],
        beyond_noise: measured_noise && (b.low > a.high || b.high < a.low),
        answers: None,
    }
}

fn setting<T: std::fmt::Display>(name: &str, o: &Option<Sourced<T>>) -> Option<(String, String)> {
    o.as_ref()
        .map(|v| (name.to_string(), format!("{} ({})", v.value, v.source)))
}

fn settings_of(s: &Settings) -> Vec<(String, String)> {
    [
        setting("workers", &s.workers),
        setting("worker concurrency", &s.worker_concurrency),
        setting("runner limit", &s.runner_limit),
        setting("runners per worker", &s.runners_per_worker),
        s.executions_mode.as_ref().map(|m| {
            (
                "executions mode".into(),
                format!("{:?} ({})", m.value, m.source).to_lowercase(),
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn brief(j: &Judged) -> RunBrief {
    let d = j.diagnosis;
    RunBrief {
        label: j.label.clone(),
        profile: j.summary.profile.clone(),
        capping_limit: d.capping_limit,
        settings: settings_of(&d.settings),
        ceiling: d.measured_ceiling.clone(),
        knee: d.knee.as_ref().map(|k| (k.in_flight, k.level.words())),
        recommendation: match j.recommendation {
            Ok(r) => format!(
                "{} worker(s), worker concurrency {}, runner limit {} × {} per worker: {:.2} req/s",
                r.settings.worker_count(),
                r.settings.worker_concurrency_or_default(),
                r.settings.runner_limit_or_default(),
                r.settings.runners_per_worker_count(),
                r.predicted_throughput
            ),
            Err(why) => format!("none: {why}"),
        },
        // By load, not in the order an adaptive search visited the levels: a curve, not a
        // zig-zag.
        throughput: {
            let mut points: Vec<(f64, f64)> = d
                .levels
                .iter()
                .filter(|l| l.valid)
                .map(|l| (l.level.magnitude(), l.throughput.mean))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            points
        },
    }
}

/// The levels both runs measured (arrival rates within 1 %), valid or not: errors are compared
/// at each, latency only where both passed their checks.
fn levels(a: &[Level], b: &[Level]) -> Vec<LevelChange> {
    a.iter()
        .filter_map(|la| {
            let lb = b.iter().find(|lb| {
                let (x, y) = (la.level.magnitude(), lb.level.magnitude());
                std::mem::discriminant(&la.level) == std::mem::discriminant(&lb.level)
                    && (x - y).abs() <= 0.01 * x.max(y)
            })?;
            let both = la.valid && lb.valid;
            let error_interval = [wilson(la), wilson(lb)];
            Some(LevelChange {
                level: la.level,
                valid: [la.valid, lb.valid],
                p50_ms: [la.p50_ms, lb.p50_ms],
                p95: la
                    .p95_ms
                    .as_ref()
                    .zip(lb.p95_ms.as_ref())
                    .filter(|_| both)
                    .map(|(x, y)| p95_change(x, y, [la.requests, lb.requests])),
                error_rate: [la.error_rate, lb.error_rate],
                error_beyond_noise: error_interval[1][0] > error_interval[0][1]
                    || error_interval[1][1] < error_interval[0][0],
                error_interval,
            })
        })
        .collect()
}

/// Two levels' p95s: beyond noise only where both have the answers for an interval (the p95's
/// upper order statistic needs [`P95_INTERVAL_ANSWERS`]; below, its interval is open above).
fn p95_change(a: &Estimate, b: &Estimate, answers: [u64; 2]) -> Change {
    let c = change(a, b);
    Change {
        beyond_noise: c.beyond_noise && answers[0].min(answers[1]) >= P95_INTERVAL_ANSWERS,
        answers: Some(answers),
        ..c
    }
}

/// A level's error rate's 95 % Wilson score interval over the requests it counted ([0, 1]
/// when it counted none).
fn wilson(l: &Level) -> [f64; 2] {
    let n = l.requests as f64;
    if n < 1.0 {
        return [0.0, 1.0];
    }
    let (p, z) = (l.error_rate.clamp(0.0, 1.0), 1.96f64);
    let den = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / den;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / den;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// The recorded settings that differ, in words ("runner limit 5 → 10").
fn settings_differ(a: &Settings, b: &Settings) -> Vec<String> {
    let value = |v: &[(String, String)], k: &str| {
        v.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.split(" (").next().unwrap_or(v).to_string())
    };
    let (x, y) = (settings_of(a), settings_of(b));
    let mut names: Vec<&String> = x.iter().chain(y.iter()).map(|(n, _)| n).collect();
    names.dedup();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| {
            let (u, v) = (value(&x, n), value(&y, n));
            (u != v).then(|| {
                format!(
                    "{n} {} → {}",
                    u.unwrap_or_else(|| "unknown".into()),
                    v.unwrap_or_else(|| "unknown".into())
                )
            })
        })
        .collect()
}

/// The first run is the baseline; each later one is compared with it.
pub fn compare(runs: &[Judged], fail_if: &[FailIf]) -> Result<RunComparison, Incomparable> {
    let (base, later) = runs
        .split_first()
        .filter(|(_, l)| !l.is_empty())
        .ok_or("give two runs or more: the baseline first, then each run to compare with it")?;
    let mut versus = Vec::new();
    for r in later {
        comparable(base, r)?;
        let (a, b) = (base.diagnosis, r.diagnosis);
        let ceiling = a
            .measured_ceiling
            .as_ref()
            .zip(b.measured_ceiling.as_ref())
            .map(|(x, y)| change(x, y));
        // No ceiling reached: the highest valid level carried, against the baseline's ceiling.
        let carried = match (&a.measured_ceiling, &b.measured_ceiling) {
            (Some(x), None) => b
                .levels
                .iter()
                .filter(|l| l.valid)
                .map(|l| &l.throughput)
                .max_by(|p, q| p.mean.total_cmp(&q.mean))
                .map(|t| change(x, t)),
            _ => None,
        };
        // The direction: another limit at a higher ceiling (the bottleneck moved on), or one
        // that caps sooner.
        let verdict_changed = (a.capping_limit != b.capping_limit).then(|| {
            let words =
                |l: Option<crate::model::Capping>| l.map_or("no limit named", |l| l.words());
            let direction = match (&ceiling, &carried) {
                (Some(c), _) if c.beyond_noise && c.change_pct > 0.0 => {
                    ", at a higher ceiling".to_string()
                }
                (Some(c), _) if c.beyond_noise => ", capping sooner".into(),
                (Some(_), _) => ", at the same ceiling within noise".into(),
                (None, Some(c)) if c.beyond_noise && c.change_pct > 0.0 => format!(
                    ": no ceiling reached, its top level carried {:.1}/s, {:+.0} % past the \
                     baseline's ceiling {:.1}/s beyond noise — the new ceiling is higher than \
                     the load it was given",
                    c.candidate.mean, c.change_pct, c.baseline.mean
                ),
                (None, Some(c)) => format!(
                    ": no ceiling reached, and its top level carried {:.1}/s, not beyond the \
                     baseline's ceiling {:.1}/s — drive it harder to tell",
                    c.candidate.mean, c.baseline.mean
                ),
                (None, None) => String::new(),
            };
            format!(
                "{} → {}{direction}",
                words(a.capping_limit),
                words(b.capping_limit)
            )
        });
        let mut v = Versus {
            run: brief(r),
            verdict_changed,
            ceiling,
            carried,
            levels: levels(&a.levels, &b.levels),
            settings_differ: settings_differ(&a.settings, &b.settings),
            failed: Vec::new(),
        };
        if !fail_if.is_empty() {
            let mut failed = cannot_judge(base, r, &v);
            failed.extend(fail_if.iter().filter_map(|f| f.failed_by(&v)));
            v.failed = failed;
        }
        versus.push(v);
    }
    Ok(RunComparison {
        baseline: brief(base),
        versus,
        fail_if: fail_if.iter().map(|f| f.text.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(mean: f64, half: f64) -> Estimate {
        Estimate {
            mean,
            low: mean - half,
            high: mean + half,
            n: 3,
            samples: vec![],
        }
    }

    #[test]
    fn overlapping_intervals_are_noise_and_apart_ones_a_change_with_its_range() {
        let same = change(&est(25.0, 0.4), &est(25.3, 0.4));
        assert!(!same.beyond_noise);
        assert!((same.change_pct - 1.2).abs() < 1e-9);
        let up = change(&est(25.0, 0.5), &est(50.0, 1.0));
        assert!(up.beyond_noise);
        assert!((up.change_pct - 100.0).abs() < 1e-9);
        // From 49 ÷ 25.5 − 1 to 51 ÷ 24.5 − 1.
        assert!((up.interval_pct[0] - (49.0 / 25.5 - 1.0) * 100.0).abs() < 1e-9);
        assert!((up.interval_pct[1] - (51.0 / 24.5 - 1.0) * 100.0).abs() < 1e-9);
        // One sample each: no interval, so nothing is beyond noise.
        assert!(!change(&est(10.0, 0.0), &est(20.0, 0.0)).beyond_noise);
    }

    #[test]
    fn thresholds_parse_and_fail_only_past_noise() {
        let f = FailIf::parse("ceiling<-5%").unwrap();
        assert_eq!((f.metric, f.above, f.value), (Metric::Ceiling, false, -5.0));
        let p = FailIf::parse(" p95>+10% ").unwrap();
        assert_eq!((p.metric, p.above, p.value), (Metric::P95, true, 10.0));
        assert_eq!(
            FailIf::parse("error-rate>1").unwrap().metric,
            Metric::ErrorRate
        );
        assert_eq!(FailIf::parse("verdict").unwrap().metric, Metric::Verdict);
        for bad in [
            "ceiling",
            "ceiling<-5",
            "error-rate>1%",
            "latency>5%",
            "ceiling<>5%",
            "p95>x%",
            "ceiling<NaN%",
            "p95>+10%%",
        ] {
            assert!(FailIf::parse(bad).is_err(), "{bad}");
        }
        let mut v = Versus {
            run: RunBrief {
                label: "b".into(),
                profile: "p".into(),
                capping_limit: None,
                settings: vec![],
                ceiling: None,
                knee: None,
                recommendation: String::new(),
                throughput: vec![],
            },
            verdict_changed: None,
            ceiling: Some(change(&est(25.0, 0.5), &est(22.0, 0.5))),
            carried: None,
            levels: vec![],
            settings_differ: vec![],
            failed: vec![],
        };
        assert!(
            f.failed_by(&v).is_some(),
            "−12 % beyond noise fails ceiling<-5%"
        );
        v.ceiling = Some(change(&est(25.0, 2.0), &est(22.0, 2.0)));
        assert!(f.failed_by(&v).is_none(), "within noise: no failure");
        v.ceiling = Some(change(&est(25.0, 0.5), &est(24.0, 0.2)));
        assert!(f.failed_by(&v).is_none(), "−4 % is not past −5 %");
        // Another limit caps: failed when it caps sooner or no better, not when the bottleneck
        // moved on to a higher ceiling.
        let verdict = FailIf::parse("verdict").unwrap();
        v.verdict_changed = Some("runner limit → worker concurrency".into());
        v.ceiling = Some(change(&est(25.0, 0.5), &est(50.0, 1.0)));
        assert!(verdict.failed_by(&v).is_none(), "a fix is not a regression");
        v.ceiling = Some(change(&est(25.0, 0.5), &est(20.0, 0.5)));
        assert!(verdict.failed_by(&v).is_some());
        v.ceiling = Some(change(&est(25.0, 2.0), &est(25.5, 2.0)));
        assert!(
            verdict.failed_by(&v).is_some(),
            "within noise: not shown better"
        );
        // No ceiling reached after the fix: its top level carried 30/s against 12.5/s.
        v.verdict_changed = Some("runner limit → no limit named".into());
        v.ceiling = None;
        v.carried = Some(change(&est(12.5, 0.3), &est(30.0, 0.5)));
        assert!(verdict.failed_by(&v).is_none(), "the fix carried more");
        v.carried = Some(change(&est(12.5, 0.3), &est(12.6, 0.5)));
        assert!(
            verdict.failed_by(&v).is_some(),
            "no more carried: not shown better"
        );
    }
}
