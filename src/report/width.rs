//! The width human output is laid out for, and text folded to it: the terminal's width when
//! standard output is one, `COLUMNS` when set, else 100 columns (a file, a pager, a CI log).
//! Tables are fitted by comfy-table; prose (diagnoses, findings, notes) is folded here.

/// Columns when nothing says otherwise (piped into a file or a pager).
pub const DEFAULT_WIDTH: usize = 100;

static WIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--wide`: tables as wide as their content, prose unfolded, for the rest of the process.
pub fn set_wide() {
    WIDE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The width to lay human output out for.
pub fn output_width() -> usize {
    if WIDE.load(std::sync::atomic::Ordering::Relaxed) {
        return u16::MAX as usize;
    }
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| *w >= 40)
    {
        return w;
    }
    terminal_width().unwrap_or(DEFAULT_WIDTH)
}

#[cfg(unix)]
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize for a terminal descriptor; `size` is one.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col >= 40).then_some(size.ws_col as usize)
}

#[cfg(not(unix))]
fn terminal_width() -> Option<usize> {
    None
}

/// Colour for people: standard output is a terminal, `NO_COLOR` is unset (no-color.org) and
/// the terminal is not `dumb`. Pipes, files and CI logs get plain text.
pub fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// `text` (already escaped for the terminal) with its severities and verdict words coloured:
/// error red, warning yellow, info cyan, a failed gate red, the verdict's opening bold.
pub fn paint(text: &str) -> String {
    const RESET: &str = "\u{1b}[0m";
    let words: [(&str, &str); 8] = [
        ("│ error ", "\u{1b}[1;31m"),
        ("│ warning ", "\u{1b}[33m"),
        ("│ info ", "\u{1b}[36m"),
        ("[error]", "\u{1b}[1;31m"),
        ("[warning]", "\u{1b}[33m"),
        ("[info]", "\u{1b}[36m"),
        ("FAILED", "\u{1b}[1;31m"),
        ("Diagnosis:", "\u{1b}[1m"),
    ];
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut line = line.to_string();
        // An audit laid out as a list starts each finding with its severity.
        for (word, code) in [
            ("error ", "\u{1b}[1;31m"),
            ("warning ", "\u{1b}[33m"),
            ("info ", "\u{1b}[36m"),
        ] {
            if line.starts_with(word) {
                let bare = word.trim_end();
                line.replace_range(..bare.len(), &format!("{code}{bare}{RESET}"));
            }
        }
        for (word, code) in words {
            // A table's severity cell keeps its border; only the word is painted.
            let bare = word.trim_start_matches("│ ").trim_end();
            if let Some(at) = line.find(word) {
                let start = at + word.find(bare).unwrap_or(0);
                line.replace_range(start..start + bare.len(), &format!("{code}{bare}{RESET}"));
            }
        }
        out.push_str(&line);
    }
    out
}

/// Each line of `text` longer than `width` folded at spaces; a continuation line is indented
/// under the first word after the line's own indent and bullet (`· `, `- `, `[x] `). Table
/// lines (box drawing) and words longer than a line are left whole.
pub fn fold(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.chars().count() <= width || is_table_line(line) {
            out.push_str(line);
            continue;
        }
        fold_line(line, width, &mut out);
    }
    out
}

fn is_table_line(line: &str) -> bool {
    line.trim_start()
        .starts_with(['│', '┌', '├', '└', '╞', '╭', '╰', '|', '+'])
}

fn fold_line(line: &str, width: usize, out: &mut String) {
    let body = line.trim_start_matches(' ');
    let lead = line.len() - body.len();
    let bullet = ["· ", "- ", "* ", "• "]
        .iter()
        .find(|b| body.starts_with(**b))
        .map_or(0, |b| b.chars().count());
    let indent = " ".repeat((lead + bullet.max(2)).min(width / 2));
    let mut current = " ".repeat(lead);
    let mut fresh = true;
    for word in body.split(' ').filter(|w| !w.is_empty()) {
        let len = current.chars().count();
        if !fresh && len + 1 + word.chars().count() > width {
            out.push_str(current.trim_end());
            out.push('\n');
            current = indent.clone();
            fresh = true;
        }
        if !fresh {
            current.push(' ');
        }
        current.push_str(word);
        fresh = false;
    }
    out.push_str(current.trim_end());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_fold_under_their_indent_and_tables_stay() {
        let text = format!(
            "Diagnosis: {}\n  · {}\n│ a │ {} │",
            "word ".repeat(40),
            "evidence ".repeat(20),
            "x".repeat(120)
        );
        let folded = fold(&text, 60);
        for line in folded.lines().filter(|l| !l.starts_with('│')) {
            assert!(line.chars().count() <= 60, "{line:?}");
        }
        assert!(folded.contains(&format!("│ a │ {} │", "x".repeat(120))));
        let ev: Vec<&str> = folded.lines().filter(|l| l.contains("evidence")).collect();
        assert!(ev[0].starts_with("  · evidence"));
        assert!(ev[1].starts_with("    evidence"), "{:?}", ev[1]);
        // Nothing is lost or reordered.
        let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&folded), words(&text));
    }
}
