//! Memory as a capacity, pure: a process's resident memory against the executions it holds,
//! fitted as a base and a slope per execution (ordinary least squares, the slope's 95 % interval
//! from Student's t), and the memory a concurrency needs from it. As a real n8n 2.41.1 was
//! measured (the project's reference facts, third lab): a Code node's memory lands in the runner,
//! about 14 MB an execution holding a 10 MB Buffer over a base of about 124 MB; the worker holds
//! 370–440 MB whatever the Code does. `Buffer` memory is outside V8's heap: only the container's
//! limit bounds it.

/// Headroom over the need at the planned concurrency (KRR sizes memory from peak usage plus
/// 15 %).
pub const HEADROOM: f64 = 1.15;

/// A limit is written in whole MiB blocks of this size.
const ROUND_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// A line fitted through (executions held, bytes) points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub base: f64,
    pub slope: f64,
    /// The slope's 95 % interval.
    pub slope_interval: [f64; 2],
    pub points: usize,
}

/// Student's t for a two-sided 95 % interval at `dof` degrees of freedom.
pub fn t95(dof: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        d if d <= 30 => T[d - 1],
        _ => 1.96,
    }
}

/// The least-squares line through `points`; None with fewer than three, or fewer than two
/// distinct x (no slope to fit), or a figure that is not finite.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len();
    if n < 3 || points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 1e-12 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let base = my - slope * mx;
    let sse: f64 = points
        .iter()
        .map(|p| (p.1 - base - slope * p.0).powi(2))
        .sum();
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    let half = t95(n - 2) * se;
    Some(Fit {
        base,
        slope,
        slope_interval: [slope - half, slope + half],
        points: n,
    })
}

impl Fit {
    /// Whether memory grows with what the process holds: the slope's interval above 0.
    pub fn grows(&self) -> bool {
        self.slope_interval[0] > 0.0
    }

    /// The memory `held` executions need: the base and the measured slope (never below the
    /// base). The slope's interval is said beside it: with few stages it is wide (three give one
    /// degree of freedom, t = 12.7), and sizing from its upper bound would put a limit far over
    /// what the executions use — the headroom of [`Fit::limit`] covers the spread a run shows,
    /// as KRR's does.
    pub fn need(&self, held: f64) -> f64 {
        self.base.max(0.0) + self.slope.max(0.0) * held.max(0.0)
    }

    /// The need with the slope's upper bound: what the interval allows at most.
    pub fn need_at_most(&self, held: f64) -> f64 {
        self.base.max(0.0) + self.slope_interval[1].max(0.0) * held.max(0.0)
    }

    /// The limit to set for `held`: the need with [`HEADROOM`], in whole 64 MiB blocks.
    pub fn limit(&self, held: f64) -> f64 {
        (self.need(held) * HEADROOM / ROUND_BYTES).ceil() * ROUND_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    /// The third lab's runner at 10 MB an execution (1, 5, 10 in flight: 143, 193, 264 MB): about
    /// 13 MB an execution over about 128 MB — the reference's "≈ 14 MB over ≈ 124 MB".
    #[test]
    fn the_real_runner_s_memory_per_execution() {
        let f = fit(&[(1.0, 143.0 * MB), (5.0, 193.0 * MB), (10.0, 264.0 * MB)]).unwrap();
        assert!((f.slope / MB - 13.4).abs() < 0.1, "{f:?}");
        assert!((f.base / MB - 127.9).abs() < 0.5, "{f:?}");
        assert!(f.slope_interval[0] < f.slope && f.slope < f.slope_interval[1]);
        // The worker: no growth with what it holds (368, 430 MB at 5 and 10; 409, 389, 435 at
        // 1, 5, 10 with 10 MB each).
        let w = fit(&[(1.0, 409.0 * MB), (5.0, 389.0 * MB), (10.0, 435.0 * MB)]).unwrap();
        assert!(!w.grows(), "{w:?}");
    }

    #[test]
    fn an_exact_line_is_recovered_and_the_limit_rounds_up() {
        let f = fit(&[(0.0, 100.0 * MB), (2.0, 140.0 * MB), (4.0, 180.0 * MB)]).unwrap();
        assert!((f.slope - 20.0 * MB).abs() < 1.0 && (f.base - 100.0 * MB).abs() < 1.0);
        assert!(f.grows());
        // 100 + 20 × 10 = 300 MB, × 1.15 = 345 MB → 384 MiB (6 × 64 MiB).
        assert_eq!(f.limit(10.0), 6.0 * ROUND_BYTES);
        assert!(
            fit(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]).is_none(),
            "one x"
        );
        assert!(fit(&[(1.0, 1.0), (2.0, f64::NAN), (3.0, 3.0)]).is_none());
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(200), 1.96);
    }
}
