//! How throughput grows with workers: the Universal Scalability Law (Gunther), fitted to the
//! ceilings measured at several worker counts.
//!
//! X(N) = λ N ÷ (1 + σ (N − 1) + κ N (N − 1)): λ is one worker's ceiling, σ the contention
//! (a share of each execution that waits for something every worker shares: main's intake,
//! Postgres, Redis, the host), κ the coherency cost (work that grows with every pair of
//! workers). With λ = X(1) it is linear in σ and κ: N ÷ (X(N) ÷ λ) − 1 = σ (N − 1) + κ N (N − 1),
//! fitted by least squares (both held ≥ 0). Each measured ceiling carries an interval; the
//! fit's interval is the envelope of the fits with each ceiling moved to its interval's ends.

/// One measured point: a worker count and the ceiling measured there (mean, low, high), /s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub workers: u32,
    pub ceiling: f64,
    pub low: f64,
    pub high: f64,
}

/// The fitted law, with the range each coefficient keeps when the ceilings move within their
/// intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// One worker's ceiling, /s (the 1-worker point's, else X(Nmin) ÷ Nmin).
    pub lambda: f64,
    pub sigma: f64,
    pub sigma_range: [f64; 2],
    pub kappa: f64,
    pub kappa_range: [f64; 2],
    /// Root-mean-square of the fit's error against the measured ceilings, as a share of them.
    pub rms_error: f64,
}

impl Fit {
    /// The law's throughput at `n` workers, /s.
    pub fn at(&self, n: f64) -> f64 {
        usl(self.lambda, self.sigma, self.kappa, n)
    }

    /// Where the curve peaks (κ > 0): √((1 − σ) ÷ κ) workers; beyond it a worker costs
    /// throughput.
    pub fn peak(&self) -> Option<f64> {
        (self.kappa > 0.0 && self.sigma < 1.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// The ceiling the law approaches or peaks at: λ ÷ σ with κ = 0, else X at the peak.
    pub fn ceiling(&self) -> Option<f64> {
        match self.peak() {
            Some(p) => Some(self.at(p)),
            None if self.sigma > 0.0 => Some(self.lambda / self.sigma),
            None => None,
        }
    }

    /// The first worker count from which one more worker adds less than `share` of one
    /// worker's ceiling (`share` = 0.1: "adds less than 10 %"), looked for up to `max`.
    pub fn diminishing_from(&self, share: f64, max: u32) -> Option<u32> {
        (1..max).find(|&n| self.at(n as f64 + 1.0) - self.at(n as f64) < share * self.lambda)
    }

    /// The fewest workers whose ceiling is at least `rate`, up to `max` (none when the law
    /// never gets there).
    pub fn workers_for(&self, rate: f64, max: u32) -> Option<u32> {
        (1..=max).find(|&n| self.at(n as f64) >= rate)
    }
}

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// Least squares of y = σ a + κ b through the origin, both coefficients held ≥ 0.
fn least_squares(rows: &[(f64, f64, f64)]) -> (f64, f64) {
    let (mut aa, mut ab, mut bb, mut ay, mut by) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(a, b, y) in rows {
        aa += a * a;
        ab += a * b;
        bb += b * b;
        ay += a * y;
        by += b * y;
    }
    let only_sigma = || ((ay / aa).max(0.0), 0.0);
    let only_kappa = || (0.0, (by / bb).max(0.0));
    let det = aa * bb - ab * ab;
    if det.abs() < 1e-12 * aa.max(1.0) * bb.max(1.0) {
        return if aa > 0.0 { only_sigma() } else { (0.0, 0.0) };
    }
    let sigma = (ay * bb - by * ab) / det;
    let kappa = (by * aa - ay * ab) / det;
    match (sigma >= 0.0, kappa >= 0.0) {
        (true, true) => (sigma, kappa),
        // The unconstrained optimum left the quadrant: the best on its edges.
        _ => {
            let cost = |(s, k): (f64, f64)| {
                rows.iter()
                    .map(|&(a, b, y)| (y - s * a - k * b).powi(2))
                    .sum::<f64>()
            };
            let (s, k) = (only_sigma(), only_kappa());
            if cost(s) <= cost(k) {
                s
            } else {
                k
            }
        }
    }
}

fn fit_means(lambda: f64, points: &[(u32, f64)]) -> (f64, f64) {
    let rows: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|(n, x)| *n > 1 && *x > 0.0)
        .map(|&(n, x)| {
            let n = n as f64;
            (n - 1.0, n * (n - 1.0), n / (x / lambda) - 1.0)
        })
        .collect();
    least_squares(&rows)
}

/// Fits the law to the points (at least two worker counts, one of them above 1); None when
/// they cannot say how throughput grows (one count, or no positive ceiling).
pub fn fit(points: &[Point]) -> Option<Fit> {
    let mut pts: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.workers > 0 && p.ceiling.is_finite() && p.ceiling > 0.0)
        .collect();
    pts.sort_by_key(|p| p.workers);
    pts.dedup_by_key(|p| p.workers);
    if pts.len() < 2 {
        return None;
    }
    let first = pts[0];
    // One worker's ceiling: measured at 1, else what the smallest count gives per worker.
    let lambda = first.ceiling / first.workers as f64;
    let means: Vec<(u32, f64)> = pts.iter().map(|p| (p.workers, p.ceiling)).collect();
    let (sigma, kappa) = fit_means(lambda, &means);
    // Each ceiling moved to its interval's ends, one at a time (λ with the first point's).
    let (mut s_range, mut k_range) = ([sigma, sigma], [kappa, kappa]);
    for i in 0..pts.len() {
        for end in [pts[i].low, pts[i].high] {
            if !(end.is_finite() && end > 0.0) {
                continue;
            }
            let mut moved = means.clone();
            moved[i].1 = end;
            let l = moved[0].1 / moved[0].0 as f64;
            let (s, k) = fit_means(l, &moved);
            s_range = [s_range[0].min(s), s_range[1].max(s)];
            k_range = [k_range[0].min(k), k_range[1].max(k)];
        }
    }
    let rms = (pts
        .iter()
        .map(|p| ((usl(lambda, sigma, kappa, p.workers as f64) - p.ceiling) / p.ceiling).powi(2))
        .sum::<f64>()
        / pts.len() as f64)
        .sqrt();
    Some(Fit {
        lambda,
        sigma,
        sigma_range: s_range,
        kappa,
        kappa_range: k_range,
        rms_error: rms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(lambda: f64, sigma: f64, kappa: f64, ns: &[u32]) -> Vec<Point> {
        ns.iter()
            .map(|&n| {
                let x = usl(lambda, sigma, kappa, n as f64);
                Point {
                    workers: n,
                    ceiling: x,
                    low: x * 0.98,
                    high: x * 1.02,
                }
            })
            .collect()
    }

    #[test]
    fn the_law_is_recovered_from_points_it_made() {
        let f = fit(&exact(10.0, 0.05, 0.002, &[1, 2, 4, 8, 16])).unwrap();
        assert!((f.lambda - 10.0).abs() < 1e-9);
        assert!((f.sigma - 0.05).abs() < 1e-6, "{f:?}");
        assert!((f.kappa - 0.002).abs() < 1e-7, "{f:?}");
        assert!(f.rms_error < 1e-9);
        // Intervals hold the truth and have width.
        assert!(f.sigma_range[0] < 0.05 && 0.05 < f.sigma_range[1]);
        assert!(f.kappa_range[0] < 0.002 && 0.002 < f.kappa_range[1]);
        // Peak: √(0.95 ÷ 0.002) ≈ 21.8 workers.
        assert!((f.peak().unwrap() - (0.95f64 / 0.002).sqrt()).abs() < 1e-3);
    }

    /// A shared bound that every worker waits on (main's intake at 37/s) behind 5/s workers:
    /// linear to 4 workers, flat from 8 on. The fit says where adding stops paying.
    #[test]
    fn a_shared_bound_bends_the_curve_and_the_fit_says_where() {
        let pts: Vec<Point> = [(1, 5.0), (2, 10.0), (4, 19.6), (8, 33.0), (16, 36.5)]
            .iter()
            .map(|&(n, x)| Point {
                workers: n,
                ceiling: x,
                low: x * 0.97,
                high: x * 1.03,
            })
            .collect();
        let f = fit(&pts).unwrap();
        assert!(f.sigma > 0.0 || f.kappa > 0.0, "{f:?}");
        let ceiling = f.ceiling().unwrap();
        assert!(ceiling > 33.0 && ceiling < 60.0, "{ceiling}");
        // A worker past ~10 adds less than half a worker's ceiling (2.5/s)...
        let from = f.diminishing_from(0.5, 200).unwrap();
        assert!((6..=14).contains(&from), "{from}");
        // ... and 30/s takes about 7 workers, 100/s none.
        let w = f.workers_for(30.0, 200).unwrap();
        assert!((6..=8).contains(&w), "{w}");
        assert_eq!(f.workers_for(100.0, 200), None);
    }

    #[test]
    fn linear_growth_fits_no_contention_and_one_count_fits_nothing() {
        let f = fit(&exact(5.0, 0.0, 0.0, &[1, 2, 4])).unwrap();
        assert!(f.sigma.abs() < 1e-9 && f.kappa.abs() < 1e-9);
        assert_eq!(f.peak(), None);
        assert_eq!(f.ceiling(), None);
        assert_eq!(f.workers_for(50.0, 200), Some(10));
        assert!(fit(&exact(5.0, 0.1, 0.0, &[2])).is_none());
        // Without a 1-worker point, λ is the smallest count's ceiling per worker.
        let f = fit(&exact(5.0, 0.0, 0.0, &[2, 4])).unwrap();
        assert!((f.lambda - 5.0).abs() < 1e-9);
    }
}
