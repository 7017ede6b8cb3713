//! Markdown for a pull request: GitHub-flavoured tables (pipes escaped in cells), headings, and
//! nothing a renderer could take for markup it was not meant as.

/// A table: a header row, the alignment row (numbers right-aligned), then the rows.
pub fn table(header: &[&str], numeric: &[bool], rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    s.push_str(&row(header.iter().map(|h| h.to_string())));
    s.push_str(&row(header.iter().enumerate().map(|(i, _)| {
        if numeric.get(i).copied().unwrap_or(false) {
            "---:".to_string()
        } else {
            "---".to_string()
        }
    })));
    for r in rows {
        s.push_str(&row(r.iter().cloned()));
    }
    s
}

fn row(cells: impl Iterator<Item = String>) -> String {
    let cells: Vec<String> = cells.map(|c| cell(&c)).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// A cell's text: one line, pipes and markup characters escaped, control characters dropped.
pub fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '|' | '\\' | '*' | '_' | '`' | '<' | '>' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `compare` for a pull request: the runs' table, then each later run's changes.
pub fn comparison(c: &crate::record::comparison::RunComparison) -> String {
    let mut rows = vec![vec![
        c.baseline.label.clone(),
        c.baseline.limit_words().into(),
        c.baseline.ceiling_words(),
        "baseline".into(),
        c.baseline.knee_words(),
    ]];
    for v in &c.versus {
        rows.push(vec![
            v.run.label.clone(),
            v.run.limit_words().into(),
            v.run.ceiling_words(),
            v.ceiling.as_ref().map_or("—".into(), |ch| ch.words()),
            v.run.knee_words(),
        ]);
    }
    let mut s = String::from("## n8ncap compare\n\n");
    s.push_str(&table(
        &[
            "run",
            "limit that caps",
            "ceiling req/s (95 %)",
            "ceiling change",
            "knee",
        ],
        &[false, false, true, true, false],
        &rows,
    ));
    s.push_str(&format!(
        "\nBaseline {}: recommendation {}\n",
        cell(&c.baseline.label),
        cell(&c.baseline.recommendation)
    ));
    for v in &c.versus {
        s.push_str(&format!("\n### {}\n\n", cell(&v.run.label)));
        if let Some(w) = &v.verdict_changed {
            s.push_str(&format!("**Another limit caps now: {}.**\n\n", cell(w)));
        }
        if !v.settings_differ.is_empty() {
            s.push_str(&format!(
                "Settings: {}\n\n",
                cell(&v.settings_differ.join("; "))
            ));
        }
        if !v.levels.is_empty() {
            let rows: Vec<Vec<String>> = v
                .levels
                .iter()
                .map(|l| {
                    let [a, b, ch] = l.p95_words();
                    vec![
                        l.level.words(),
                        format!("{a} → {b}"),
                        ch,
                        format!(
                            "{:.1} → {:.1}",
                            l.error_rate[0] * 100.0,
                            l.error_rate[1] * 100.0
                        ),
                    ]
                })
                .collect();
            s.push_str(&table(
                &["level", "p95 ms", "p95 change", "err %"],
                &[false, true, true, true],
                &rows,
            ));
            s.push('\n');
        }
        s.push_str(&format!(
            "Recommendation: {}\n",
            cell(&v.run.recommendation)
        ));
        for f in &v.failed {
            s.push_str(&format!("\n**FAILED** {}\n", cell(f)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_the_table_or_inject_markup() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(cell("<script>"), "\\<script\\>");
        assert_eq!(cell("x\u{1b}[31m"), "x\\[31m");
        let t = table(
            &["run", "req/s"],
            &[false, true],
            &[vec!["a|b".into(), "1.5".into()]],
        );
        assert_eq!(t, "| run | req/s |\n| --- | ---: |\n| a\\|b | 1.5 |\n");
    }
}
