//! Small parsers shared by the commands: durations as k6 writes them ("500ms", "30s", "1m30s")
//! and typed environment variables whose errors name the variable.

use crate::error::BadInput;
use std::time::Duration;

/// Parses "250ms", "30s", "2m", "1h", "1m30s", or a bare number of seconds ("1.5").
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs, text);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("'{text}' lacks a unit: write e.g. 30s, 500ms, 2m"))?;
        if num_len == 0 {
            return Err(format!(
                "'{text}' is not a duration: write e.g. 30s, 500ms, 2m"
            ));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("'{text}' is not a duration: write e.g. 30s, 500ms, 2m"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "us" | "µs" => 0.000_001,
            other => {
                return Err(format!(
                    "'{text}': unknown unit '{other}' (use ms, s, m, h or d)"
                ))
            }
        };
        total += value * factor;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total, text)
}

/// The longest duration n8ncap takes anywhere (30 days): longer values are typing errors, and
/// clock arithmetic on them would overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

fn secs_to_duration(secs: f64, text: &str) -> Result<Duration, String> {
    let text = truncate(text, 40);
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("'{text}' is not a non-negative duration"));
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("'{text}' is longer than 30 days")),
    }
}

/// Formats a duration the way users write it ("1.5s", "250ms", "2m").
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{}ms", trim_float(ms))
    } else if ms < 120_000.0 {
        format!("{}s", trim_float(ms / 1000.0))
    } else {
        format!("{}m", trim_float(ms / 60_000.0))
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Reads an environment variable through `lookup` (so tests and containers can pass their own
/// environment) and parses it, naming the variable in the error.
pub fn env_parse<T: std::str::FromStr>(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    what: &str,
) -> Result<T, BadInput> {
    match lookup(name) {
        None => Ok(default),
        Some(v) if v.trim().is_empty() => Ok(default),
        Some(v) => v.trim().parse::<T>().map_err(|_| {
            BadInput(format!(
                "{name}={:?} is not {what}: set it to {what} or unset it to use the default",
                truncate(&v, 40)
            ))
        }),
    }
}

/// Reads a boolean variable the way n8n does ("true"/"false", case-insensitive; "1"/"0" too).
pub fn env_bool(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: bool,
) -> Result<bool, BadInput> {
    match lookup(name) {
        None => Ok(default),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(default),
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(BadInput(format!(
                "{name}={:?} is not a boolean: set it to true or false",
                truncate(&v, 40)
            ))),
        },
    }
}

/// Waits for a signal that asks the process to stop — SIGINT (Ctrl-C), SIGTERM (`docker stop`,
/// Kubernetes, `timeout`) or SIGHUP (the terminal closed, an SSH session dropped) — and returns
/// the shell's exit code for it (130, 143, 129).
pub async fn stop_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let wait = |kind: SignalKind| async move {
            match signal(kind) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => crate::error::EXIT_INTERRUPTED,
            _ = wait(SignalKind::terminate()) => crate::error::EXIT_TERMINATED,
            _ = wait(SignalKind::hangup()) => crate::error::EXIT_HANGUP,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        crate::error::EXIT_INTERRUPTED
    }
}

/// The signals that end a run early: Ctrl-C (SIGINT), SIGTERM (`timeout`, `docker stop`,
/// Kubernetes) and SIGHUP (a closed terminal). Installed once, at the start of a command, so a signal that arrives while the
/// run is still being prepared is kept and ends the first stage at once.
#[derive(Clone)]
pub struct Interrupt {
    rx: tokio::sync::watch::Receiver<Option<i32>>,
}

impl Interrupt {
    /// Starts listening (needs a tokio runtime).
    pub fn install() -> Interrupt {
        let (tx, rx) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let code = stop_signal().await;
            let _ = tx.send(Some(code));
            // A second signal ends the process at once, as the shells' convention has it.
            let _ = stop_signal().await;
            std::process::exit(code);
        });
        Interrupt { rx }
    }

    /// Resolves when a signal has arrived (at once if one already did).
    pub async fn wait(mut self) {
        let _ = self.rx.wait_for(|c| c.is_some()).await;
    }

    /// The exit code of the signal that arrived: 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
    pub fn exit_code(&self) -> i32 {
        (*self.rx.borrow()).unwrap_or(crate::error::EXIT_INTERRUPTED)
    }
}

/// Opens `path` for reading if it is a regular file (not a directory, a device such as
/// /dev/zero, or a FIFO); `what` names it in the error.
pub fn open_regular_file(path: &std::path::Path, what: &str) -> Result<std::fs::File, BadInput> {
    let shown = path.display();
    // A kernel or device file (`/proc/self/environ`, `/dev/stdin` …) is never an input: a
    // profile that names one would send the process's secrets as a body.
    if let Ok(real) = std::fs::canonicalize(path) {
        if ["/proc", "/sys", "/dev"]
            .iter()
            .any(|k| real.starts_with(k))
        {
            return Err(BadInput(format!(
                "{what} {shown} is not a regular file but a kernel or device file (under {}): \
                 n8ncap reads no file under /proc, /sys or /dev — give the path of a regular file",
                real.iter()
                    .take(2)
                    .collect::<std::path::PathBuf>()
                    .display()
            )));
        }
    }
    let file = std::fs::File::open(path)
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(BadInput(format!(
            "{what} {shown} is not a regular file: give the path of a file"
        )));
    }
    Ok(file)
}

/// Reads a UTF-8 text file of at most `max` bytes; larger, binary or unreadable input is
/// refused with the file named.
pub fn read_text_file(path: &std::path::Path, max: u64, what: &str) -> Result<String, BadInput> {
    use std::io::Read;
    let shown = path.display();
    let file = open_regular_file(path, what)?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BadInput(format!("cannot read {what} {shown}: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(BadInput(format!(
            "{what} {shown} is larger than {} KiB: is it the right file?",
            max / 1024
        )));
    }
    if bytes.contains(&0) {
        return Err(BadInput(format!(
            "{what} {shown} is binary, not text: is it the right file?"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        BadInput(format!(
            "{what} {shown} is not UTF-8 text (byte {}): save it as UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}

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
    } else {
        truncate(&unquote(&first), 160)
    };
    let loc = e
        .location()
        .map(|l| format!(":{}:{}", l.line() as usize + line_offset, l.column()))
        .unwrap_or_default();
    format!("{origin}{loc}: not valid YAML for this file: {what}")
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

/// The process environment as a lookup function.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// At most `max` characters of `text` (on a character boundary), with `…` when cut: what a
/// message quotes of input it did not expect.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_k6_writes_them() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn env_errors_name_the_variable() {
        let env = |k: &str| (k == "N8N_RUNNERS_MAX_CONCURRENCY").then(|| "abc".to_string());
        let err = env_parse::<u32>(&env, "N8N_RUNNERS_MAX_CONCURRENCY", 10, "a whole number")
            .unwrap_err();
        assert!(err.0.contains("N8N_RUNNERS_MAX_CONCURRENCY"), "{}", err.0);
        assert_eq!(
            env_parse::<u32>(&env, "OTHER", 7, "a whole number").unwrap(),
            7
        );
        let envb = |_: &str| Some("maybe".to_string());
        assert!(env_bool(&envb, "N8N_METRICS", false).is_err());
    }
}

/// UTC time as RFC 3339 ("2026-11-30T06:20:00Z").
pub fn utc_rfc3339(t: std::time::SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// UTC time for directory names ("20261130-062000").
pub fn utc_compact(t: std::time::SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

fn civil(t: std::time::SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod time_tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn civil_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_016_738);
        assert_eq!(utc_rfc3339(t), "2026-11-30T05:32:18Z");
        assert_eq!(utc_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            utc_compact(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "20000229-000000"
        );
    }
}

/// CPU seconds (user + system) this process has used, from /proc/self/stat (0 where absent).
pub fn own_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// CPU seconds every core of this machine spent busy (all but idle and I/O wait) since boot,
/// from the first line of /proc/stat (USER_HZ = 100, as for [`own_cpu_seconds`]); None where
/// the file is absent or unreadable.
pub fn host_busy_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    if ticks.len() < 5 || ticks.iter().any(|t| !t.is_finite() || *t < 0.0) {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is inside user already).
    let busy: f64 = ticks.iter().take(8).sum::<f64>() - ticks[3] - ticks[4];
    Some(busy.max(0.0) / 100.0)
}

/// Cores this process may run on (1 when unknown).
pub fn cores() -> f64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}

/// "10MB" (10⁷ bytes), "512KiB" (512 × 1024), "1GB", "1000" → bytes. Decimal units for KB/MB/GB
/// as file sizes are usually written; binary ones with the "i".
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..end]
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write e.g. 10MB, 512KiB or 1000"))?;
    let mult = match s[end..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}: use B, KB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    let bytes = (n * mult).round();
    if bytes.is_finite() && (0.0..9e15).contains(&bytes) {
        Ok(bytes as u64)
    } else {
        Err(format!("{text:?} is not a size n8ncap can send"))
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
