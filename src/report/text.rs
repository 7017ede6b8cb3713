//! Diagnosis and recommendation in words, for the terminal.

use crate::diagnose::Diagnosis;
use crate::findings::Finding;
use crate::recommend::Recommendation;
use std::fmt::Write as _;

pub fn findings(list: &[Finding]) -> String {
    let mut s = String::new();
    for f in list {
        let _ = writeln!(s, "  [{}] {} — {}", f.severity.word(), f.id, f.title);
        for e in &f.evidence {
            let _ = writeln!(s, "      · {e}");
        }
        if let Some(w) = &f.why {
            let _ = writeln!(s, "      why: {w}");
        }
        if let Some(x) = &f.fix {
            let _ = writeln!(s, "      change: {x}");
        }
    }
    s
}

pub fn diagnosis(d: &Diagnosis) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Diagnosis: {}", d.verdict);
    let st = &d.settings;
    let mut known = Vec::new();
    if let Some(v) = &st.worker_concurrency {
        known.push(format!("worker concurrency {} ({})", v.value, v.source));
    }
    if let Some(v) = &st.runner_limit {
        known.push(format!("runner limit {} ({})", v.value, v.source));
    }
    if let Some(v) = &st.job_time {
        known.push(format!("job time {:.2} s ({})", v.value, v.source));
    }
    if !known.is_empty() {
        let _ = writeln!(s, "  settings: {}", known.join("; "));
    }
    if let Some(c) = &d.capacity {
        let _ = writeln!(
            s,
            "  model: worker-bound {:.2} req/s, runner-bound {:.2} req/s → ceiling {:.2} req/s ({})",
            c.worker_bound,
            c.runner_bound,
            c.ceiling,
            c.capping.words()
        );
    }
    if let Some(o) = d.fixed_overhead_s {
        let _ = writeln!(
            s,
            "  fixed overhead at 1 in flight: {:.0} ms above job time",
            o * 1000.0
        );
    }
    if let Some(b) = &d.break_point {
        let _ = writeln!(s, "  break point: {} in flight ({})", b.in_flight, b.reason);
    }
    if !d.comparison.is_empty() {
        let pts: Vec<String> = d
            .comparison
            .iter()
            .map(|c| format!("{}: {:.2} vs {:.2}", c.in_flight, c.measured, c.predicted))
            .collect();
        let _ = writeln!(
            s,
            "  measured vs model (req/s by in flight): {}",
            pts.join(", ")
        );
    }
    if !d.findings.is_empty() {
        let _ = writeln!(s, "Findings:");
        s.push_str(&findings(&d.findings));
    }
    s
}

pub fn recommendation(r: &Recommendation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Recommendation: plan for {} executions in flight (⌊2/3 × break point {}⌋; {}).",
        r.operating_concurrency, r.break_point.value, r.break_point.source
    );
    let _ = writeln!(
        s,
        "  {} worker(s) × concurrency {}; per worker {} runner(s) × N8N_RUNNERS_MAX_CONCURRENCY={} (runner capacity {})",
        r.workers, r.worker_concurrency, r.runners_per_worker, r.runner_limit, r.runner_capacity_per_worker
    );
    if let Some(m) = &r.runner_memory_limit_mb {
        let _ = writeln!(s, "  runner memory limit: {} MiB ({})", m.value, m.source);
    }
    let _ = writeln!(
        s,
        "  predicted: ceiling {:.2} req/s ({:.0}/min), mean response {:.2} s at {} in flight{}",
        r.predicted_throughput,
        r.predicted_throughput * 60.0,
        r.predicted_response_s,
        r.operating_concurrency,
        r.current_ceiling
            .map(|c| format!("; today's ceiling {c:.2} req/s"))
            .unwrap_or_default()
    );
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}
