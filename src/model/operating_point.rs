//! A run's operating point, read once from its judged levels (`recommend::operating_point`).

/// A run's operating point: what it measured of one execution's time and the ceiling, as
/// plain figures, for the time budget, the autoscaler and the alerts
/// (`recommend::operating_point` makes it from a judged run).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatingPoint {
    /// Where the figures come from ("results/run1").
    pub from: String,
    /// The longest p99 response of a level below the ceiling, s: an execution's time when
    /// nothing waits.
    pub job_p99_s: f64,
    /// The Code part of it, s, when the run knows it (`--code-time`, the request body).
    pub code_p99_s: Option<f64>,
    /// The workers' worst event-loop lag, s, when their metrics were scraped.
    pub worker_lag_max_s: Option<f64>,
    /// One worker's ceiling (executions/s) and the job time (s), when the run reached a ceiling.
    pub per_worker: Option<(f64, f64)>,
    /// The most workers that add throughput: the first shared bound the run measured ÷ one
    /// worker's ceiling, with what bounds it.
    pub useful_workers: Option<(u32, String)>,
    /// The deployment's measured ceiling (executions/s), when the run reached one.
    pub ceiling_per_s: Option<f64>,
}
