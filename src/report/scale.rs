//! `n8ncap scale`'s table and prose: the ceiling at each worker count with what the added
//! workers gained, the verdict, the fitted law and the plan for a target rate.

use super::table::{fitted, laid_out};
use crate::record::scaling::{ScaleSweep, Scaling};

pub fn scaling_table(s: &Scaling) -> String {
    let mut t = fitted();
    t.set_header(vec![
        "workers",
        "ceiling /s (95 %)",
        "limit that caps",
        "added workers gained",
        "run",
    ]);
    for p in &s.points {
        t.add_row(vec![
            p.workers.to_string(),
            p.ceiling.map_or("not reached".into(), |c| {
                format!("{:.2} ({:.2}–{:.2})", c[0], c[1], c[2])
            }),
            p.limit.clone().unwrap_or_else(|| "—".into()),
            p.efficiency
                .map_or("—".into(), |e| format!("{:.0} % of linear", e * 100.0)),
            p.run.clone(),
        ]);
    }
    let width = super::width::output_width();
    let mut out = laid_out(&mut t);
    out.push_str(&format!(
        "\n{}\n",
        super::width::fold(&format!("Scale-out: {}", s.verdict), width)
    ));
    if let Some(f) = &s.fit {
        let mut line = format!(
            "  law: X(N) = {:.2} N ÷ (1 + σ (N − 1) + κ N (N − 1)), σ {:.4} ({:.4}–{:.4}), κ {:.5} ({:.5}–{:.5}), fit within {:.1} %",
            f.lambda_per_s, f.sigma, f.sigma_range[0], f.sigma_range[1], f.kappa, f.kappa_range[0], f.kappa_range[1], f.rms_error * 100.0
        );
        if let Some(n) = f.diminishing_from {
            line.push_str(&format!(
                "; from {n} workers on one more adds under 10 % of a worker"
            ));
        }
        if let (Some(p), Some(c)) = (f.peak_workers, f.ceiling_per_s) {
            line.push_str(&format!("; peak {c:.1}/s at {p:.0} workers, fewer beyond"));
        } else if let Some(c) = f.ceiling_per_s.filter(|_| f.sigma_range[0] > 0.0) {
            line.push_str(&format!("; approaches {c:.1}/s"));
        }
        out.push_str(&super::width::fold(&line, width));
        out.push('\n');
    }
    if let Some(p) = &s.plan {
        let head = match p.workers {
            Some(n) => format!("  plan for {:.1}/s: {n} workers", p.target_per_s),
            None => format!("  plan for {:.1}/s: none", p.target_per_s),
        };
        out.push_str(&super::width::fold(&format!("{head} — {}", p.note), width));
        out.push('\n');
        let w = &p.per_worker;
        let mut each = Vec::new();
        if let Some(c) = w.worker_concurrency {
            each.push(format!("concurrency {c}"));
        }
        match (w.runners, w.runner_limit) {
            (Some(r), Some(l)) => each.push(format!("{r} runner(s) of limit {l}")),
            (None, Some(l)) => each.push(format!("runner limit {l}")),
            _ => {}
        }
        each.push(format!(
            "DB_POSTGRESDB_POOL_SIZE {} ({})",
            w.db_pool_size, w.db_pool_source
        ));
        out.push_str(&super::width::fold(
            &format!("    each worker: {}", each.join(", ")),
            width,
        ));
        out.push('\n');
        if let Some(n) = p.webhook_processors {
            out.push_str(&format!("    webhook processors: {n}\n"));
        }
        if let Some(c) = p.postgres_connections {
            out.push_str(&super::width::fold(
                &format!(
                    "    Postgres connections at the pools' most: {c} (max_connections must \
                     allow them beside the reserved 3; Postgres' default is 100)"
                ),
                width,
            ));
            out.push('\n');
        }
    }
    out
}

/// A scale sweep: each step of the scale command, then the runs judged together.
pub fn scale_sweep_table(s: &ScaleSweep) -> String {
    let width = super::width::output_width();
    let mut out = String::new();
    for step in &s.steps {
        let what = if step.restore {
            format!("returned to {}", workers(step.workers))
        } else {
            format!("scaled to {}", workers(step.workers))
        };
        let how = match &step.failure {
            Some(f) => format!("FAILED: the command {f}"),
            None => format!(
                "in {:.1} s, then {:.0} s settle",
                step.seconds, step.settle_s
            ),
        };
        out.push_str(&super::width::fold(
            &format!("{what} ({}) {how}", step.command),
            width,
        ));
        out.push('\n');
        if step.failure.is_some() {
            for line in step
                .output
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(&format!(
        "scale sweep {} (found at {}, {})\n\n",
        s.ended,
        workers(s.original_workers),
        s.original_source
    ));
    match &s.scaling {
        Some(sc) => out.push_str(&scaling_table(sc)),
        None => out.push_str("Fewer than two worker counts were measured: no scale-out verdict.\n"),
    }
    out
}

fn workers(n: u32) -> String {
    format!("{n} worker{}", if n == 1 { "" } else { "s" })
}
