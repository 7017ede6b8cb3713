//! Durations as k6 writes them ("500ms", "30s", "1m30s"), bounded to 30 days, and sizes
//! ("10MB").

use super::text::truncate;
use crate::error::BadInput;
use std::time::Duration;

/// Parses "250ms", "30s", "2m", "1h", "1m30s", or a bare number of seconds ("1.5").
pub fn parse_duration(text: &str) -> Result<Duration, BadInput> {
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
            return Err(format!("'{text}' is not a duration: write e.g. 30s, 500ms, 2m").into());
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
                return Err(
                    format!("'{text}': unknown unit '{other}' (use ms, s, m, h or d)").into(),
                )
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

fn secs_to_duration(secs: f64, text: &str) -> Result<Duration, BadInput> {
    let text = truncate(text, 40);
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("'{text}' is not a non-negative duration").into());
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("'{text}' is longer than 30 days").into()),
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

/// "10MB" (10⁷ bytes), "512KiB" (512 × 1024), "1GB", "1000" → bytes. Decimal units for KB/MB/GB
/// as file sizes are usually written; binary ones with the "i".
pub fn parse_size(text: &str) -> Result<u64, BadInput> {
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
            )
            .into())
        }
    };
    let bytes = (n * mult).round();
    if bytes.is_finite() && (0.0..9e15).contains(&bytes) {
        Ok(bytes as u64)
    } else {
        Err(format!("{text:?} is not a size n8ncap can send").into())
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
}
