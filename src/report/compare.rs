//! `compare` for people: the runs' table, then each later run's changes and its levels side
//! by side, prose folded at the terminal's width.

use super::table::{fitted, laid_out};
use comfy_table::Cell;

/// `compare`: one row per run (the baseline first), then each later run's changes — a change of
/// verdict first — and its levels side by side.
pub fn comparison_table(c: &crate::record::comparison::RunComparison) -> String {
    let mut t = fitted();
    t.set_header(vec![
        "run",
        "limit that caps",
        // A no-break space: "(95" and "%)" never on two lines.
        "ceiling req/s (95\u{a0}%)",
        "ceiling change",
        "knee",
    ]);
    t.add_row(vec![
        Cell::new(&c.baseline.label),
        Cell::new(c.baseline.limit_words()),
        Cell::new(c.baseline.ceiling_words()),
        Cell::new("baseline"),
        Cell::new(c.baseline.knee_words()),
    ]);
    for v in &c.versus {
        t.add_row(vec![
            Cell::new(&v.run.label),
            Cell::new(v.run.limit_words()),
            Cell::new(v.run.ceiling_words()),
            Cell::new(v.ceiling.as_ref().map_or("—".into(), |ch| ch.words())),
            Cell::new(v.run.knee_words()),
        ]);
    }
    let mut out = laid_out(&mut t);
    // Prose lines fold at the terminal's width (the tables are laid out to it already).
    let fold = |line: String| format!("{}\n", super::text::folded(&line));
    out.push('\n');
    out.push_str(&fold(format!(
        "{}: plan {}",
        c.baseline.label, c.baseline.recommendation
    )));
    for v in &c.versus {
        out.push('\n');
        out.push_str(&fold(format!(
            "{} against {}:",
            v.run.label, c.baseline.label
        )));
        if let Some(w) = &v.verdict_changed {
            out.push_str(&fold(format!("  another limit caps now: {w}")));
        }
        if !v.settings_differ.is_empty() {
            out.push_str(&fold(format!(
                "  settings: {}",
                v.settings_differ.join("; ")
            )));
        }
        if !v.levels.is_empty() {
            let mut l = fitted();
            l.set_header(vec!["level", "p50 ms", "p95 ms", "p95 change", "err %"]);
            for lc in &v.levels {
                let [a, b, ch] = lc.p95_words();
                let p50 = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:.0}"));
                l.add_row(vec![
                    Cell::new(lc.level.words()),
                    Cell::new(format!("{} → {}", p50(lc.p50_ms[0]), p50(lc.p50_ms[1]))),
                    Cell::new(format!("{a} → {b}")),
                    Cell::new(ch),
                    Cell::new(format!(
                        "{:.1} → {:.1}",
                        lc.error_rate[0] * 100.0,
                        lc.error_rate[1] * 100.0
                    )),
                ]);
            }
            out.push_str(&laid_out(&mut l));
            out.push('\n');
        }
        out.push_str(&fold(format!("  plan: {}", v.run.recommendation)));
        for f in &v.failed {
            out.push_str(&fold(format!("  FAILED {f}")));
        }
    }
    out
}
