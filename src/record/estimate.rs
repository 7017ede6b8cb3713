//! Estimates from repeated stages: mean and a 95 % confidence interval (Student's t).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

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
}
