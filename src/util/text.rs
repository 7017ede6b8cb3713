//! Text shown to people: control characters escaped, truncation, YAML errors without values,
//! edit distance for "did you mean".

/// A YAML parser error as a user should read it: `origin:line:column: what`, without the
/// snippet of the file the parser draws (it could show a secret), without quoted values, and
/// without the library's own wording.
pub fn yaml_error(origin: &str, e: &serde_saphyr::Error) -> String {
    yaml_error_at(origin, e, 0)
}

/// [`yaml_error`] for a document that starts `line_offset` lines into its file.
pub fn yaml_error_at(origin: &str, e: &serde_saphyr::Error, line_offset: usize) -> String {
    let msg = e.to_string();
    let mut first = msg
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string();
    // "line 6 column 5: …": the location is given once, in front.
    if let Some((head, rest)) = first.split_once(": ") {
        if head.starts_with("line ") && head.contains(" column ") {
            first = rest.to_string();
        }
    }
    let what = if let Some(rest) = first.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or("").trim();
        format!(
            "the key `{}` appears twice in one mapping: keep one of them",
            truncate(key, 60)
        )
    } else if let Some(w) = unknown_field(&first) {
        w
    } else {
        truncate(&unquote(&first), 160)
    };
    let loc = e
        .location()
        .map(|l| format!(":{}:{}", l.line() as usize + line_offset, l.column()))
        .unwrap_or_default();
    format!("{origin}{loc}: not valid YAML for this file: {what}")
}

/// "unknown field `stagess`, expected one of …": a key of the file is no secret (a value is):
/// it is named, with the nearest field the file may hold.
fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let key_like = !field.is_empty()
        && field.len() <= 60
        && field
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !key_like {
        return None;
    }
    let expected: Vec<&str> = rest
        .split_once("expected one of ")
        .or_else(|| rest.split_once("expected "))
        .map(|(_, list)| {
            list.split(',')
                .map(|f| f.trim().trim_matches('`'))
                .filter(|f| !f.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let nearest = expected
        .iter()
        .map(|f| (edit_distance(field, f), *f))
        .min()
        .filter(|(d, f)| *d <= 2.max(f.len() / 3));
    Some(match nearest {
        Some((_, f)) => format!(
            "unknown field `{field}`: did you mean `{f}`? (it may hold {})",
            expected.join(", ")
        ),
        None if !expected.is_empty() => format!(
            "unknown field `{field}`: it may hold {}",
            expected.join(", ")
        ),
        None => format!("unknown field `{field}`"),
    })
}

/// `text` with every quoted part ("…", '…', `…`) replaced by an ellipsis: parser messages
/// quote values, and a value may be a secret.
pub fn unquote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut open: Option<char> = None;
    for c in text.chars() {
        match open {
            Some(q) if c == q => {
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`') => {
                out.push(c);
                out.push('…');
                open = Some(c);
            }
            None => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `text` (on a character boundary), with `…` when cut: what a
/// message quotes of input it did not expect.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Human output for a terminal: every control character but the line breaks the output itself
/// is laid out with escaped (see [`escape_control`]), so whatever a table or message quotes from
/// outside cannot drive the terminal.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split('\n') {
        if !out.is_empty() || text.starts_with('\n') {
            out.push('\n');
        }
        out.push_str(&escape_control(line));
    }
    std::borrow::Cow::Owned(out)
}

/// `text` with every control character (C0, DEL, C1: escape sequences, carriage returns, bells)
/// written as a visible escape, so a string from outside — a container name, an image tag, a
/// compose key — can never clear the screen, set the title or forge a line of a table.
pub fn escape_control(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Levenshtein distance of two short strings (a key and the one it resembles).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(escape_control("worker-1"), "worker-1");
        assert_eq!(
            escape_control("a\u{1b}[2Jb\u{7}\r\u{9b}"),
            "a\\u{1b}[2Jb\\u{7}\\r\\u{9b}"
        );
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("service", "services"), 1);
        assert_eq!(edit_distance("servces", "services"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("volumes", "volumes"), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_field_is_named_with_the_nearest_known_one_and_a_value_is_not() {
        let w = unknown_field(
            "unknown field `stagess`, expected one of `name`, `model`, `stages`, `warmup`",
        )
        .unwrap();
        assert!(
            w.contains("`stagess`") && w.contains("did you mean `stages`"),
            "{w}"
        );
        // Nothing near: the known fields are listed.
        let w = unknown_field("unknown field `zzz`, expected one of `name`, `model`").unwrap();
        assert!(
            !w.contains("did you mean") && w.contains("name, model"),
            "{w}"
        );
        // A key that could be a value (spaces, quotes) is not quoted back.
        assert_eq!(
            unknown_field("unknown field `my s3cr3t`, expected `a`"),
            None
        );
    }
}
