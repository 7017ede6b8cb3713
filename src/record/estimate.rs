//! Estimates from repeated stages: mean and a 95 % confidence interval (Student's t).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The 95 % upper bound of a Poisson mean when no event was counted (−ln 0.025).
const POISSON_ZERO_UPPER: f64 = 3.689;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean: f64,
    /// 95 % interval; equal to the mean when there is one sample.
    pub low: f64,
    pub high: f64,
    pub n: usize,
    pub samples: Vec<f64>,
}

impl Estimate {
    pub fn of(xs: &[f64]) -> Estimate {
        let n = xs.len();
        if n == 0 {
            return Estimate {
                mean: 0.0,
                low: 0.0,
                high: 0.0,
                n: 0,
                samples: Vec::new(),
            };
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let half = if n < 2 {
            0.0
        } else {
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|d| d.inverse_cdf(0.975))
                .unwrap_or(f64::NAN);
            t * (var / n as f64).sqrt()
        };
        Estimate {
            mean,
            low: mean - half,
            high: mean + half,
            n,
            samples: xs.to_vec(),
        }
    }

    /// One sample with the 95 % interval measured inside it (a window's batch means).
    pub fn with_interval(x: f64, [low, high]: [f64; 2]) -> Estimate {
        Estimate {
            mean: x,
            low: low.min(x),
            high: high.max(x),
            n: 1,
            samples: vec![x],
        }
    }

    /// Widened to at least the counting (Poisson) interval of `events` counted over `seconds`:
    /// N/T ± 1.96 √N / T, whatever the number of repeats — two stages that read the same rate
    /// still counted a finite number of answers. With no event counted, the 95 % upper bound
    /// is 3.69 ÷ T. Nothing changes when no time was counted.
    pub fn with_counting(mut self, events: f64, seconds: f64) -> Estimate {
        if seconds.is_nan() || seconds <= 0.0 || !events.is_finite() || events < 0.0 {
            return self;
        }
        let half = if events < 1.0 {
            POISSON_ZERO_UPPER / seconds
        } else {
            1.96 * events.sqrt() / seconds
        };
        self.low = self.low.min((self.mean - half).max(0.0));
        self.high = self.high.max(self.mean + half);
        self
    }

    /// "3.33 req/s", "3.33 req/s (95 % CI 3.30–3.36, 3 stages)" or, for one window with its
    /// own interval, "3.33 req/s (95 % CI 3.30–3.36)".
    pub fn describe(&self, unit: &str) -> String {
        if self.n < 2 && self.high - self.low > 1e-9 {
            format!(
                "{:.2} {unit} (95 % CI {:.2}–{:.2})",
                self.mean, self.low, self.high
            )
        } else if self.n < 2 {
            format!("{:.2} {unit}", self.mean)
        } else {
            format!(
                "{:.2} {unit} (95 % CI {:.2}–{:.2}, {} stages)",
                self.mean, self.low, self.high, self.n
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_uses_students_t() {
        let e = Estimate::of(&[10.0, 12.0, 14.0]);
        assert_eq!(e.mean, 12.0);
        // s = 2, t(0.975, 2) = 4.3027, half = 4.3027 × 2 / √3 = 4.968.
        assert!((e.high - 16.968).abs() < 0.01, "{}", e.high);
        let one = Estimate::of(&[5.0]);
        assert_eq!((one.low, one.high), (5.0, 5.0));
        assert!(one.describe("req/s").starts_with("5.00"));
    }

    #[test]
    fn a_counted_rate_has_its_counting_interval_whatever_the_repeats() {
        // 160 answers in 8 s: 20/s ± 1.96 × √160 ÷ 8 = ± 3.10.
        let one = Estimate::of(&[20.0]).with_counting(160.0, 8.0);
        assert!((one.high - 23.099).abs() < 0.01, "{one:?}");
        assert!((one.low - 16.901).abs() < 0.01, "{one:?}");
        // Two repeats that read the same rate keep the counting width, not zero.
        let two = Estimate::of(&[20.0, 20.0]).with_counting(320.0, 16.0);
        assert!(two.high - two.low > 3.0, "{two:?}");
        // A wide repeat interval is kept.
        let wide = Estimate::of(&[10.0, 30.0]).with_counting(320.0, 16.0);
        assert!(wide.high > 100.0, "{wide:?}");
        // Nothing counted: [0, 3.69 ÷ T].
        let none = Estimate::of(&[0.0]).with_counting(0.0, 10.0);
        assert_eq!(none.low, 0.0);
        assert!((none.high - 0.3689).abs() < 1e-9);
        // No time: unchanged.
        assert_eq!(Estimate::of(&[5.0]).with_counting(10.0, 0.0).high, 5.0);
    }
}
