//! Diagnosis and recommendation in words, for the terminal.

use crate::findings::Finding;
use crate::model::proposal::{Dialect, Key, Process};
use crate::record::diagnosis::{BreakPointKind, CpuSite};
use crate::record::recommendation::MemoryPlan;
use crate::record::{Diagnosis, Recommendation};
use std::fmt::Write as _;

/// A CPU site is shown in words from this share of its usable cores (or when saturated).
const CPU_SHOWN_SHARE: f64 = 0.5;

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
    if let Some(v) = &d.service_time {
        known.push(format!("service time S {:.3} s ({})", v.value, v.source));
    }
    if !known.is_empty() {
        let _ = writeln!(s, "  settings: {}", known.join("; "));
    }
    if let Some(c) = &d.capacity {
        let _ = writeln!(
            s,
            "  model: worker-bound {:.2} req/s, runner-bound {:.2} req/s → ceiling {:.2} req/s ({})",
            c.worker_bound(),
            c.runner_bound(),
            c.ceiling,
            c.capping.words()
        );
    }
    if let (Some(x), Some(e)) = (&d.measured_ceiling, d.effective_concurrency) {
        let _ = writeln!(
            s,
            "  capacity: {} measured at the saturated levels; {e:.1} executions in progress (X × S)",
            x.describe("req/s")
        );
    }
    cpu_lines(&mut s, &d.cpu);
    for b in d.failure_point.iter().chain(d.knee.iter()) {
        let kind = match b.kind {
            BreakPointKind::Failure => "failure break point",
            BreakPointKind::Knee => "saturation knee",
        };
        let _ = writeln!(s, "  {kind}: {} ({})", b.level.words(), b.reason);
    }
    if !d.comparison.is_empty() {
        let pts: Vec<String> = d
            .comparison
            .iter()
            .map(|c| {
                format!(
                    "{}: {:.2} vs {:.2}",
                    c.level.words(),
                    c.measured,
                    c.predicted
                )
            })
            .collect();
        let _ = writeln!(s, "  measured vs model (req/s): {}", pts.join(", "));
    }
    if !d.findings.is_empty() {
        let _ = writeln!(s, "Findings:");
        s.push_str(&findings(&d.findings));
    }
    s
}

/// The CPU sites near their cores, one line each; the others counted (their figures stay in
/// the JSON).
fn cpu_lines(out: &mut String, cpu: &[crate::record::diagnosis::CpuUse]) {
    // The sites near their cores say something here; the others' figures stay in the JSON.
    let busy = |u: &&crate::record::diagnosis::CpuUse| {
        u.saturated || u.cores_used >= CPU_SHOWN_SHARE * u.usable_cores.value
    };
    let quiet = cpu.iter().filter(|u| !busy(u)).count();
    if quiet > 0 {
        let _ = writeln!(
            out,
            "  CPU: {quiet} site(s) under {:.0} % of their usable cores (figures in --json)",
            CPU_SHOWN_SHARE * 100.0
        );
    }
    for u in cpu.iter().filter(busy) {
        let _ = writeln!(
            out,
            "  CPU {}: {:.2} cores, {:.3} CPU s per execution, allows {:.2}/s of {:.1} usable cores{}",
            match u.site {
                CpuSite::Host => "host".to_string(),
                // Two runners are two lines: each says which container it is.
                CpuSite::Process => format!(
                    "{} {}",
                    u.role.map(|r| r.word()).unwrap_or("process"),
                    u.name
                ),
            },
            u.cores_used,
            u.cpu_s_per_execution,
            u.bound_per_s,
            u.usable_cores.value,
            if u.saturated { " — saturated" } else { "" }
        );
    }
}

pub fn recommendation(r: &Recommendation) -> String {
    let mut s = String::new();
    let basis = match r.break_point_kind {
        BreakPointKind::Failure => format!("⌊2/3 × failure break point {}⌋", r.break_point.value),
        BreakPointKind::Knee => "the executions in progress at the measured ceiling".to_string(),
    };
    if let Some(d) = &r.doubt {
        let _ = writeln!(
            s,
            "Doubt: this plan rests on a verdict the measurements question — {d} (model-mismatch); the predicted ceiling is an upper bound until that cost is found."
        );
    }
    let _ = writeln!(
        s,
        "Recommendation: plan for {} executions in flight ({basis}; {}).",
        r.operating_concurrency, r.break_point.source
    );
    let _ = writeln!(
        s,
        "  {} worker(s) × concurrency {}; per worker {} runner(s) × N8N_RUNNERS_MAX_CONCURRENCY={} (runner capacity {})",
        r.settings.worker_count(), r.settings.worker_concurrency_or_default(), r.settings.runners_per_worker_count(), r.settings.runner_limit_or_default(), r.settings.runner_capacity_or_default()
    );
    // Every other setting a limit kind proposes (the database pool's, on main and the workers).
    for l in r.proposal.beyond_headline(Dialect::Compose) {
        if let Key::Env(var) = &l.key {
            let on = match l.on {
                Process::Main => "main",
                Process::Worker => "each worker",
                Process::Runner => "each runner",
            };
            let _ = writeln!(s, "  {var}={} on {on}", l.value);
        }
    }
    if let Some(m) = &r.runner_memory_limit_mb {
        let _ = writeln!(s, "  runner memory limit: {} MiB ({})", m.value, m.source);
    }
    let bound = r.predicted_bound.as_plan_bound();
    let _ = writeln!(
        s,
        "  predicted: ceiling {:.2} req/s ({:.0}/min, bound by {bound}{}), mean response {} at {} in flight{}",
        r.predicted_throughput,
        r.predicted_throughput * 60.0,
        if r.cpu_measured { "" } else { "; upper bound: no CPU bound known" },
        r.predicted_response_s
            .map(|v| format!("{v:.2} s"))
            .unwrap_or_else(|| "unknown".into()),
        r.operating_concurrency,
        match (r.current_ceiling, r.measured_capacity) {
            (Some(c), Some(m)) => format!("; today: {m:.2} req/s measured, the settings alone allow {c:.2}"),
            (Some(c), None) => format!("; today's settings allow {c:.2} req/s"),
            (None, Some(m)) => format!("; today: {m:.2} req/s measured"),
            (None, None) => String::new(),
        }
    );
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// The runner's memory limit, from what its tasks used (or from the runner that was killed).
pub fn memory_plan(p: &MemoryPlan) -> String {
    let mut s = String::new();
    let who = p.runner.as_deref().unwrap_or("each runner");
    let _ = writeln!(
        s,
        "Runner memory{}: set the memory limit of {who} to at least {} MiB — {} tasks × {:.0} MiB per task ({}) + {:.0} MiB base ({}), +{:.0} % headroom.",
        if p.oom_killed { " (it was OOM-killed: start here)" } else { "" },
        p.memory_limit_mib,
        p.tasks,
        p.per_task_mib.value,
        p.per_task_mib.source,
        p.base_mib.value,
        p.base_mib.source,
        (p.headroom - 1.0) * 100.0
    );
    if let (Some(c), Some(t)) = (p.current_limit_mib, p.tasks_within_current_limit) {
        let _ = writeln!(
            s,
            "  or keep {c} MiB and set N8N_RUNNERS_MAX_CONCURRENCY={} on it{}",
            t.max(1),
            if t == 0 {
                " (not even one task fits in it with headroom: raise the limit)"
            } else {
                ""
            }
        );
    }
    s
}

/// The adaptive sweep's search: each level chosen and why, and why each stage ended.
pub fn search(summary: &crate::record::Summary) -> String {
    use crate::record::stage::StageEnd;
    let mut s = String::from("Search (adaptive):\n");
    let mut stages = summary.stages.iter();
    for step in &summary.search {
        match step.in_flight {
            Some(n) => {
                let ended = stages.next().and_then(|st| st.ended_by).map(|e| match e {
                    StageEnd::Steady { half_width } => {
                        format!("steady (±{:.1} %)", half_width * 100.0)
                    }
                    StageEnd::Settled {
                        half_width,
                        threshold_rps,
                    } => format!(
                        "settled (±{:.1} %, wholly on one side of {threshold_rps:.2} req/s)",
                        half_width * 100.0
                    ),
                    StageEnd::SlotsCounted => "once the queue gauges had counted the slots".into(),
                    StageEnd::MaxLength { half_width } => format!(
                        "at its maximum length{}",
                        half_width
                            .map(|h| format!(" (±{:.1} %)", h * 100.0))
                            .unwrap_or_default()
                    ),
                    StageEnd::Budget => "the budget ran out".into(),
                    StageEnd::Interrupted => "interrupted".into(),
                    StageEnd::Duration => "its duration".into(),
                });
                let _ = writeln!(
                    s,
                    "  → {n} in flight: {}{}",
                    step.why,
                    ended.map(|e| format!("; ended {e}")).unwrap_or_default()
                );
            }
            None => {
                let _ = writeln!(s, "  ■ {}", step.why);
            }
        }
    }
    s
}

/// Everything a run prints for a person, in order: the stage table, the k6-style end-of-run
/// block, the search trace, the diagnosis and the recommendation (or why there is none),
/// folded to the output's width.
pub fn run(
    summary: &crate::record::Summary,
    d: &Diagnosis,
    rec: &Result<Recommendation, crate::error::NoPlan>,
) -> String {
    let mut s = super::table::stages_table(&summary.stages);
    s.push('\n');
    s.push_str(&k6_block(summary));
    for m in &summary.merged_from {
        let _ = write!(
            s,
            "\nk6 file {}: {} requests{}{}",
            m.file,
            m.requests,
            if m.aligned {
                format!(
                    ", its clock {:+.1} s from the first file's: moved back by that much",
                    m.clock_ahead_s
                )
            } else {
                format!(
                    ", its clock {:+.1} s from the first file's (under k6's 1 s sampling: left as is)",
                    m.clock_ahead_s
                )
            },
            if m.cut_requests > 0 {
                format!(
                    ", {} outside the span every file covers left out",
                    m.cut_requests
                )
            } else {
                String::new()
            }
        );
    }
    if !summary.search.is_empty() {
        let _ = write!(s, "\n{}", search(summary));
    }
    let _ = write!(s, "\n\n{}", diagnosis(d));
    // A runner killed at its memory limit: the plan starts there.
    let memory = summary.memory_plan.as_ref().map(memory_plan);
    if let Some(m) = memory
        .as_ref()
        .filter(|_| summary.memory_plan.as_ref().is_some_and(|p| p.oom_killed))
    {
        s.push_str(m);
    }
    match rec {
        Ok(r) => s.push_str(&recommendation(r)),
        Err(why) => {
            let _ = writeln!(s, "No recommendation: {why}");
        }
    }
    if let Some(m) = memory
        .as_ref()
        .filter(|_| summary.memory_plan.as_ref().is_some_and(|p| !p.oom_killed))
    {
        s.push_str(m);
    }
    super::width::fold(s.trim_end(), super::width::output_width())
}

/// The end-of-run figures k6 users look for: each threshold ✓/✗, each named check with its
/// passes and fails, the response-time distribution per stage (avg, min, med, max, p90, p95),
/// requests (iterations) and data sent and received.
pub fn k6_block(summary: &crate::record::Summary) -> String {
    let stages = &summary.stages;
    let mut s = String::new();
    for t in &summary.thresholds {
        let _ = writeln!(
            s,
            "  {} {} {} (observed {})",
            if t.passed { "✓" } else { "✗" },
            t.metric.name(),
            t.expr,
            t.observed
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "nothing".into())
        );
    }
    let mut checks: Vec<(String, u64, u64)> = Vec::new();
    for c in stages.iter().flat_map(|st| st.checks.iter()) {
        match checks.iter_mut().find(|(n, _, _)| *n == c.name) {
            Some(e) => {
                e.1 += c.passes;
                e.2 += c.fails;
            }
            None => checks.push((c.name.clone(), c.passes, c.fails)),
        }
    }
    for (name, passes, fails) in &checks {
        let total = (passes + fails).max(1) as f64;
        let _ = writeln!(
            s,
            "  {} check {} — {:.2} % ✓ {passes} ✗ {fails}",
            if *fails == 0 { "✓" } else { "✗" },
            crate::util::escape_control(name),
            100.0 * *passes as f64 / total
        );
    }
    for st in stages {
        if let Some(l) = &st.latency {
            let _ = writeln!(
                s,
                "  http_req_duration stage {}{}: avg={} min={} med={} max={} p(90)={} p(95)={}",
                st.index + 1,
                if st.valid { "" } else { " (invalid)" },
                dur(l.mean_ms),
                dur(l.min_ms),
                dur(l.p50_ms),
                dur(l.max_ms),
                dur(l.p90_ms),
                dur(l.p95_ms)
            );
        }
        if let Some(f) = &st.flow {
            let _ = writeln!(s, "    {}", flow_line(st, f));
        }
    }
    let requests: u64 = stages
        .iter()
        .map(|st| st.requests + st.warmup_requests)
        .sum();
    let window: u64 = stages.iter().map(|st| st.requests).sum();
    let failed: u64 = stages.iter().map(|st| st.requests - st.ok).sum();
    let sent: u64 = stages.iter().map(|st| st.bytes_sent).sum();
    let received: u64 = stages.iter().map(|st| st.bytes_received).sum();
    let _ = writeln!(
        s,
        "  iterations {requests} ({window} in steady windows, {failed} failed) · data sent {} · received {}",
        bytes(sent),
        bytes(received)
    );
    s
}

/// An open stage's books on one line: offered, completed, backlog and its growth.
fn flow_line(st: &crate::record::StageResult, f: &crate::record::stage::Flow) -> String {
    format!(
        "open model: offered {:.2}/s ({} arrivals{}) · completed {:.2}/s ({}) · backlog {} → {} ({:+.2}/s){}{}",
                f.offered_per_s,
                f.arrivals,
                if st.dropped_iterations > 0 {
                    format!(", {} dropped", st.dropped_iterations)
                } else {
                    String::new()
                },
                st.request_rate,
                f.completions,
                f.backlog_start,
                f.backlog_end,
                f.backlog_growth_per_s,
                if f.late > 0 {
                    format!(
                        " · the percentiles include {} answered after the window, or never",
                        f.late
                    )
                } else {
                    String::new()
                },
                if f.inherited > 0 {
                    format!(
                        " · began with {} of the last stage still unanswered",
                        f.inherited
                    )
                } else {
                    String::new()
                }
    )
}

fn dur(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2}s", ms / 1000.0)
    } else {
        format!("{ms:.1}ms")
    }
}

fn bytes(b: u64) -> String {
    match b as f64 {
        v if v >= 1e9 => format!("{:.1} GB", v / 1e9),
        v if v >= 1e6 => format!("{:.1} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.1} kB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

/// The history read from Prometheus: where from, the step and its reason, the gauge refresh,
/// the processes, and the busy windows with what each shows.
pub fn history(h: &crate::record::history::History) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Prometheus history: {} ({} window(s) of {:.0} s; step {:.0} s: {})",
        h.source,
        h.windows.len(),
        h.window_s,
        h.step_s.value,
        h.step_s.source
    );
    if let Some(r) = h.queue_refresh_s {
        let _ = writeln!(s, "  queue gauges refreshed every ≈ {r:.0} s");
    }
    for p in &h.processes {
        let _ = writeln!(s, "  {}: {} ({})", p.name(), p.role.word(), p.role_by);
    }
    let busy: Vec<_> = h.windows.iter().filter(|w| w.busy).collect();
    if !busy.is_empty() {
        let _ = writeln!(
            s,
            "  {:<20} {:>16} {:>8} {:>8}  evidence",
            "busy window (UTC)", "completions/s", "slots", "waiting"
        );
    }
    for w in busy.iter().take(40) {
        let t = crate::util::clock(w.start.max(0.0));
        let ev: Vec<&str> = w.evidence.iter().map(|e| e.words()).collect();
        let cpu: Vec<String> = w
            .cpu
            .iter()
            .filter(|c| c.cores >= 0.05)
            .map(|c| format!("{} {:.2} cores", c.role.word(), c.cores))
            .collect();
        let x = format!(
            "{:.2} ({:.2}–{:.2})",
            w.throughput_per_s, w.throughput_interval[0], w.throughput_interval[1]
        );
        let _ = writeln!(
            s,
            "  {:<20} {x:>16} {:>8.1} {:>8.1}  {}{}",
            t.trim_end_matches('Z'),
            w.active_mean,
            w.waiting_mean,
            if ev.is_empty() {
                "—".to_string()
            } else {
                ev.join("; ")
            },
            if cpu.is_empty() {
                String::new()
            } else {
                format!(" · CPU {}", cpu.join(", "))
            }
        );
    }
    if busy.len() > 40 {
        let _ = writeln!(
            s,
            "  … {} more busy windows (--json lists them all)",
            busy.len() - 40
        );
    }
    s
}

/// Prose for the terminal: folded to the output's width (100 columns when piped).
pub fn folded(text: &str) -> String {
    super::width::fold(text.trim_end(), super::width::output_width())
}

/// Prints human output, control characters escaped (a container's name or a file's content
/// cannot move the terminal's cursor).
pub fn print(text: &str) -> anyhow::Result<()> {
    let safe = crate::util::for_terminal(text);
    if super::width::colour() {
        println!("{}", super::width::paint(&safe));
    } else {
        println!("{safe}");
    }
    Ok(())
}
