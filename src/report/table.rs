//! The end-of-sweep table: one row per stage, validity first. An invalid stage's latency is
//! never printed as a figure (the fast-failure trap): its cells say why instead.

use crate::record::StageResult;
use comfy_table::{presets, Cell, CellAlignment, ContentArrangement, Table};

/// A table that fits the output's width (see [`super::width`]): the terminal's, `COLUMNS`, or
/// 100 columns when piped; long cells wrap inside their column.
pub(super) fn fitted() -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(super::width::output_width().min(u16::MAX as usize) as u16);
    t
}

/// The table as text, no column narrower than its longest word or number, and no column whose
/// cells wrap narrower than [`MIN_WRAPPED_COLUMN`]: comfy-table wraps a cell inside its column,
/// and without this a narrow terminal splits "12.50" or "waiting" across two lines, or reads a
/// message a word a line. A table that cannot fit so is a list (see [`listed`]).
pub(super) fn laid_out(t: &mut Table) -> String {
    laid_out_at(t, super::width::output_width())
}

/// The narrowest a column whose cells wrap may be.
pub(super) const MIN_WRAPPED_COLUMN: usize = 24;

fn laid_out_at(t: &mut Table, width: usize) -> String {
    use comfy_table::{ColumnConstraint, Width};
    let mut need = vec![0usize; t.column_count()];
    let rows = t.header().into_iter().chain(t.row_iter());
    for (r, row) in rows.enumerate() {
        for (i, cell) in row.cell_iter().enumerate() {
            let text = cell.content();
            // Words break at spaces only (a no-break space holds "95 %" together, as the
            // table's own wrapping does).
            let word = text
                .split(|c: char| c.is_whitespace() && c != '\u{a0}')
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0);
            // A header may wrap between its words; a cell only down to MIN_WRAPPED_COLUMN.
            let line = match r {
                0 if t.header().is_some() => word,
                _ => text.lines().map(|l| l.chars().count()).max().unwrap_or(0),
            };
            if let Some(n) = need.get_mut(i) {
                *n = (*n).max(word).max(line.min(MIN_WRAPPED_COLUMN));
            }
        }
    }
    let total = need.iter().map(|w| w + 3).sum::<usize>() + 1;
    if total > width && t.row_count() > 0 {
        return listed(t, width);
    }
    for (col, n) in t.column_iter_mut().zip(need) {
        col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
            (n + 2).min(u16::MAX as usize) as u16,
        )));
    }
    t.to_string()
}

/// A table too wide for the output as a list: each row's first cell as its heading, then
/// `· header: value` for each other cell that says something, folded at the width.
fn listed(t: &Table, width: usize) -> String {
    let flat = |s: String| s.replace("/\n", "/").replace('\n', " ");
    let heads: Vec<String> = t
        .header()
        .map(|h| h.cell_iter().map(|c| flat(c.content())).collect())
        .unwrap_or_default();
    let mut out = String::new();
    for row in t.row_iter() {
        let cells: Vec<String> = row.cell_iter().map(|c| flat(c.content())).collect();
        let Some((first, rest)) = cells.split_first() else {
            continue;
        };
        out.push_str(&super::width::fold(first, width));
        out.push('\n');
        for (i, c) in rest.iter().enumerate() {
            if c.trim().is_empty() {
                continue;
            }
            let head = heads.get(i + 1).map(String::as_str).unwrap_or("");
            out.push_str(&super::width::fold(&format!("  · {head}: {c}"), width));
            out.push('\n');
        }
    }
    out
}

/// `text` as lines of at most the table's width (when known), continuation lines indented by
/// `indent` spaces; each line starts with a newline.
pub(super) fn wrapped(table: &Table, text: &str, indent: usize) -> String {
    let Some(width) = table.width().map(usize::from).filter(|w| *w > indent + 20) else {
        return format!("\n{text}");
    };
    let body = text.trim_start_matches(' ');
    let mut out = String::new();
    let mut line = " ".repeat(text.len() - body.len());
    let mut fresh = true;
    for word in body.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if !fresh && len + 1 + word.chars().count() > width {
            out.push('\n');
            out.push_str(&line);
            line = " ".repeat(indent);
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push('\n');
    out.push_str(&line);
    out
}

/// Milliseconds as a bare number, for a column whose header carries the unit.
fn bare_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn ms(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

pub fn stages_table(stages: &[StageResult]) -> String {
    let has_queue = stages.iter().any(|s| s.queue.is_some());
    let open = stages.iter().any(|s| s.rate.is_some());
    // Uploads: what each request carried.
    let per_request = |s: &StageResult| s.bytes_sent as f64 / s.requests.max(1) as f64;
    let uploads = stages.iter().any(|s| per_request(s) >= 10_000.0);
    // Columns a narrow terminal may go without, dropped in this order while the table would
    // not fit: what they say is elsewhere too (the k6-style block, the validity notes, JSON).
    let churn = stages.iter().any(|s| s.new_conns_per_request >= 0.5);
    let all_valid = stages.iter().all(|s| s.valid);
    let all_checked = stages.iter().all(|s| s.check_pass_rate >= 0.9995);
    let mut cols: Vec<Column> = vec![
        Column::new("stage", None, |s| {
            format!(
                "{}{}",
                s.index + 1,
                if s.partial { " (partial)" } else { "" }
            )
        }),
        // The load, compact: a ramp's ends, an offered rate, the users in flight (the label,
        // with k6's scenario names, is in the run block and summary.json).
        Column::new(
            if open { "arrivals/s" } else { "in flight" },
            None,
            |s| match (s.ramp, s.rate, s.vus) {
                (Some(r), _, _) => format!("{}→{}", r.from, r.to),
                (None, Some(rate), _) => format!("{rate:.1}"),
                (None, None, Some(v)) => v.to_string(),
                (None, None, None) => s.label.clone(),
            },
        ),
        Column::new("valid", all_valid.then_some(3), |s| {
            (if s.valid { "yes" } else { "NO" }).into()
        }),
        Column::new("check %", all_checked.then_some(4), |s| {
            format!("{:.1}", s.check_pass_rate * 100.0)
        }),
        Column::new("err %", None, |s| format!("{:.1}", s.error_rate * 100.0)),
        Column::new("req/s", None, |s| format!("{:.2}", s.throughput_rps)),
        Column::new("p50 ms", None, |s| latency(s, |l| l.p50_ms)),
        Column::new("p95 ms", None, |s| latency(s, |l| l.p95_ms)),
        Column::new("p99 ms", Some(2), |s| latency(s, |l| l.p99_ms)),
        Column::new("conns/req", (!churn).then_some(1), |s| {
            format!("{:.2}", s.new_conns_per_request)
        }),
    ];
    if open {
        cols.push(Column::new("dropped", None, |s| {
            s.dropped_iterations.to_string()
        }));
    }
    if uploads {
        cols.push(Column::new("sent/req", None, move |s| {
            bytes(per_request(s))
        }));
    }
    if has_queue {
        cols.push(Column::new("slots", None, |s| {
            queue_cell(s, |q| q.active_mean)
        }));
        cols.push(Column::new("waiting", None, |s| {
            queue_cell(s, |q| q.waiting_mean)
        }));
    }
    let rows: Vec<Vec<String>> = stages
        .iter()
        .map(|s| cols.iter().map(|c| (c.value)(s)).collect())
        .collect();
    let keep = fitting(&cols, &rows, super::width::output_width());
    let mut t = fitted();
    t.set_header(keep.iter().map(|i| cols[*i].header).collect::<Vec<_>>());
    for row in &rows {
        t.add_row(keep.iter().map(|i| Cell::new(&row[*i])).collect::<Vec<_>>());
    }
    for i in 1..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = laid_out(&mut t);
    out.push_str(&scenarios_table(stages));
    for n in stage_notes(stages) {
        out.push('\n');
        out.push_str(&n);
    }
    out
}

/// A column of the stage table: its header, when it may be dropped (lower goes first; None:
/// never), and its cell for a stage.
struct Column {
    header: &'static str,
    drop_rank: Option<u8>,
    value: Box<dyn Fn(&StageResult) -> String>,
}

impl Column {
    fn new(
        header: &'static str,
        drop_rank: Option<u8>,
        value: impl Fn(&StageResult) -> String + 'static,
    ) -> Column {
        Column {
            header,
            drop_rank,
            value: Box::new(value),
        }
    }
}

/// The columns kept: all, less the droppable ones (lowest rank first) while the table's
/// narrowest layout — each column as wide as its longest word or number, three characters of
/// border each — is wider than `width`.
fn fitting(cols: &[Column], rows: &[Vec<String>], width: usize) -> Vec<usize> {
    let word = |t: &str| {
        t.split_whitespace()
            .map(|w| w.chars().count())
            .max()
            .unwrap_or(0)
    };
    let narrowest: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|x| word(x))
                .max()
                .unwrap_or(0)
                .max(word(c.header))
        })
        .collect();
    let mut keep: Vec<usize> = (0..cols.len()).collect();
    let mut ranks: Vec<(u8, usize)> = cols
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.drop_rank.map(|r| (r, i)))
        .collect();
    ranks.sort_unstable();
    let total = |k: &[usize]| k.iter().map(|i| narrowest[*i] + 3).sum::<usize>() + 1;
    for (_, i) in ranks {
        if total(&keep) <= width {
            break;
        }
        keep.retain(|k| *k != i);
    }
    keep
}

fn latency(s: &StageResult, f: impl Fn(&crate::record::stage::Latency) -> f64) -> String {
    match (&s.latency, s.valid) {
        (Some(l), true) => bare_ms(f(l)),
        _ => "invalid".into(),
    }
}

fn queue_cell(s: &StageResult, f: impl Fn(&crate::record::stage::QueueObserved) -> f64) -> String {
    match &s.queue {
        Some(q) if q.samples > 0 => format!("{:.1}{}", f(q), if q.coarse { "*" } else { "" }),
        _ => "—".into(),
    }
}

/// The notes under the stage table: ramp rows, invalid stages, coarse gauges, what slots are.
fn stage_notes(stages: &[StageResult]) -> Vec<String> {
    let mut notes = Vec::new();
    if stages.iter().any(|s| s.ramp.is_some()) {
        notes.push(
            "ramp rows: measured while the virtual users moved — not load levels (their req/s is \
             completions ÷ window); only held steps are judged."
                .into(),
        );
    }
    for s in stages.iter().filter(|s| !s.valid) {
        notes.push(format!(
            "stage {} is invalid: {} — its latency is not a result.",
            s.index + 1,
            s.invalid_reasons.join("; ")
        ));
    }
    if stages
        .iter()
        .any(|s| s.queue.as_ref().is_some_and(|q| q.coarse))
    {
        notes.push(
            "* stage shorter than n8n's queue-metrics refresh (N8N_METRICS_QUEUE_METRICS_INTERVAL): \
             the gauges may lag."
                .into(),
        );
    }
    if stages.iter().any(|s| s.queue.is_some()) {
        notes.push(
            "slots = n8n_scaling_mode_queue_jobs_active: worker slots taken, not Code tasks running \
             in a runner; waiting = jobs in Redis."
                .into(),
        );
    }
    notes
}

fn bytes(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.1} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.1} kB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

/// A mix: each scenario's figures per stage (they add up to the stage's row above).
fn scenarios_table(stages: &[StageResult]) -> String {
    if stages.iter().all(|s| s.scenarios.len() < 2) {
        return String::new();
    }
    let mut t = fitted();
    t.set_header(vec![
        "stage",
        "scenario",
        "share %",
        "req/s",
        "p50",
        "p95",
        "error %",
        "check %",
        "sent/req",
        "received/req",
    ]);
    for s in stages {
        for c in &s.scenarios {
            let per = |b: u64| {
                bytes(if c.requests > 0 {
                    b as f64 / c.requests as f64
                } else {
                    0.0
                })
            };
            let (p50, p95) = match &c.latency {
                Some(l) if s.valid => (ms(l.p50_ms), ms(l.p95_ms)),
                _ => ("—".into(), "—".into()),
            };
            t.add_row(vec![
                (s.index + 1).to_string(),
                c.name.clone(),
                format!("{:.1}", c.share * 100.0),
                format!("{:.2}", c.throughput_rps),
                p50,
                p95,
                format!("{:.1}", c.error_rate * 100.0),
                format!("{:.1}", c.check_pass_rate * 100.0),
                per(c.bytes_sent),
                per(c.bytes_received),
            ]);
        }
    }
    for i in 2..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!("\nper scenario:\n{}", laid_out(&mut t))
}

/// Each rule's why and fix once, under the findings, with the services it names.
fn said_once(sorted: &[&crate::audit::Located], t: &Table) -> String {
    let mut out = String::new();
    let mut ids: Vec<crate::findings::FindingId> = Vec::new();
    for l in sorted {
        if !ids.contains(&l.finding.id) {
            ids.push(l.finding.id);
        }
    }
    for id in ids {
        let of: Vec<&crate::findings::Finding> = sorted
            .iter()
            .map(|l| &l.finding)
            .filter(|f| f.id == id)
            .collect();
        let subjects: Vec<String> = of.iter().filter_map(|f| f.subject.clone()).collect();
        out.push_str(&format!("\n{id} ({}):", subjects.join(", ")));
        if let Some(w) = of.iter().find_map(|f| f.why.as_ref()) {
            out.push_str(&wrapped(t, &format!("  why: {w}"), 7));
        }
        let mut fixes: Vec<&String> = of.iter().filter_map(|f| f.fix.as_ref()).collect();
        fixes.dedup();
        for x in fixes {
            out.push_str(&wrapped(t, &format!("  fix: {x}"), 7));
        }
    }
    out
}

/// `n8ncap audit`: severity, rule, service, message (a list when that cannot fit); each rule's
/// why and fix once under it.
pub fn audit_table(r: &crate::audit::Report) -> String {
    let width = super::width::output_width().max(40);
    let unchecked: String = r
        .unchecked
        .iter()
        .map(|u| {
            // Folded at the output's width, whole words, continued under the text.
            let mut lines = vec![String::from("note:")];
            for w in u.split_whitespace() {
                let last = lines.last_mut().expect("one line at least");
                if last.chars().count() + 1 + w.chars().count() > width && last.len() > 6 {
                    lines.push(format!("      {w}"));
                } else {
                    last.push(' ');
                    last.push_str(w);
                }
            }
            format!("\n{}", lines.join("\n"))
        })
        .collect();
    if r.findings.is_empty() {
        return format!(
            "{}: {} services, no findings.{unchecked}",
            r.input, r.services
        );
    }
    let mut sorted: Vec<&crate::audit::Located> = r.findings.iter().collect();
    sorted.sort_by_key(|l| std::cmp::Reverse(l.finding.severity));
    let place = |l: &crate::audit::Located| match (&l.file, l.line) {
        (Some(p), Some(n)) => format!(
            "{} ({}:{n})",
            l.finding.subject.clone().unwrap_or_default(),
            p.display()
        ),
        _ => l.finding.subject.clone().unwrap_or_default(),
    };
    let mut t = fitted();
    t.set_header(vec!["severity", "rule", "service", "message"]);
    for l in &sorted {
        let f = &l.finding;
        t.add_row(vec![
            f.severity.word().to_string(),
            f.id.to_string(),
            place(l),
            f.title.clone(),
        ]);
    }
    // A table whose message column would be narrower than 24 characters is a list instead.
    let widest = |f: &dyn Fn(&crate::audit::Located) -> usize| {
        sorted.iter().map(|l| f(l)).max().unwrap_or(0)
    };
    let beside = 8
        + widest(&|l| l.finding.id.to_string().len())
        + widest(&|l| place(l).chars().count())
        + 13;
    let body = if width.saturating_sub(beside) < MIN_WRAPPED_COLUMN {
        sorted
            .iter()
            .map(|l| {
                let f = &l.finding;
                let head = format!("{:<7} {} — {}", f.severity.word(), f.id, place(l));
                format!(
                    "{}\n{}",
                    super::width::fold(&head, width),
                    super::width::fold(&format!("        {}", f.title), width)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    } else {
        laid_out(&mut t)
    };
    let mut out = format!("{}: {} services\n{body}", r.input, r.services);
    out.push_str(&said_once(&sorted, &t));
    out.push_str(&unchecked);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_long_words_is_laid_out_at_any_width_splitting_no_number() {
        for width in [20, 40, 80, 100] {
            let mut t = fitted();
            t.set_header(vec!["container", "replicas", "worker concurrency"]);
            t.add_row(vec![
                "n8n-worker/n8n-task-runners-with-a-very-long-name-indeed",
                "12345",
                "fixtures/k8s/rendered/official-task-runners.yaml:123",
            ]);
            let text = laid_out_at(&mut t, width);
            // The number stands whole on one line.
            assert!(text.contains("12345"), "{width}: {text}");
            // No line past the width but a word longer than it, and no word split.
            for line in text.lines() {
                let long = line.split_whitespace().any(|w| w.chars().count() > width);
                assert!(long || line.chars().count() <= width, "{width}: {line}");
            }
            assert!(text.contains("n8n-worker/n8n-task-runners-with-a-very-long-name-indeed"));
        }
    }

    #[test]
    fn a_table_is_a_list_when_a_wrapping_column_would_be_under_24() {
        let row = [
            "n8n-worker",
            "worker",
            "3",
            "10 [1]",
            "1 runner(s) for 3 replicas: 2 without; capacity 10 where paired",
            "requests: cpu 500m, memory 1Gi; limits: cpu 2, memory 2Gi",
        ];
        let make = || {
            let mut t = fitted();
            t.set_header(vec![
                "container",
                "role",
                "replicas",
                "worker concurrency",
                "runners",
                "resources",
            ]);
            t.add_row(row.to_vec());
            t
        };
        // 10 + 6 + 8 + 18 + 24 + 24 and the borders: 109 columns.
        let wide = laid_out_at(&mut make(), 120);
        assert!(wide.contains('│'), "{wide}");
        let list = laid_out_at(&mut make(), 100);
        assert!(!list.contains('│'), "{list}");
        assert_eq!(
            list.lines().filter(|l| l.starts_with("  · ")).count(),
            5,
            "{list}"
        );
        for line in list.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
        for cell in row {
            for word in cell.split_whitespace() {
                assert!(
                    list.split_whitespace().any(
                        |w| w.trim_end_matches([',', ';']) == word.trim_end_matches([',', ';'])
                    ),
                    "{word} split: {list}"
                );
            }
        }
    }
}
