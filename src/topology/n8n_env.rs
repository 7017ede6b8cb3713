//! n8n's own reading of an environment variable, so a setting means here what it means to the
//! process that reads it. n8n's config classes (`@n8n/config`, `src/decorators.ts`, the `@Env`
//! decorator's factory) read a number field with JavaScript's `Number(value)` and keep the
//! default when that is NaN, and a boolean field as `true`/`1` or `false`/`0` after
//! `toLowerCase()`, keeping the default (with a warning) for anything else. A variable set to
//! the empty string is read too (`envName in process.env`): `Number("")` is 0.

/// JavaScript's `Number(text)` for a string: white space trimmed; the empty string is 0;
/// `0x`, `0o` and `0b` integers (no sign); `Infinity` with an optional sign; else a decimal
/// literal (`5`, `-5.`, `.5`, `1e3`, `1e309` = Infinity). None where JavaScript gives NaN.
pub fn number(text: &str) -> Option<f64> {
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return Some(0.0);
    }
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(digits) = t
            .get(..2)
            .filter(|p| p.eq_ignore_ascii_case(prefix))
            .and_then(|_| t.get(2..))
        {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            return Some(
                digits
                    .chars()
                    .filter_map(|c| c.to_digit(radix))
                    .fold(0.0, |v, d| v * radix as f64 + d as f64),
            );
        }
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => (-1.0, &t[1..]),
        b'+' => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return Some(sign * f64::INFINITY);
    }
    decimal(body)
        .then(|| body.parse::<f64>().ok())
        .flatten()
        .map(|v| sign * v)
}

/// A decimal literal without sign: digits with at most one point (at least one digit on some
/// side), then an optional exponent with its own sign. Rust's parser accepts more ("inf",
/// "nan"): this is the grammar JavaScript's `Number` accepts.
fn decimal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// A whole number as n8n reads it (`number`), when it is one: what a count of slots, tasks or
/// connections can be. None for NaN, a fraction, or beyond `i64`.
pub fn whole(text: &str) -> Option<i64> {
    number(text)
        .filter(|v| v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15)
        .map(|v| v as i64)
}

/// n8n's boolean: `true`/`1` and `false`/`0`, any case; None for anything else (n8n keeps
/// its default then).
pub fn boolean(text: &str) -> Option<bool> {
    match text.to_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_javascript_reads_them() {
        for (text, want) in [
            ("30", Some(30.0)),
            (" 30 ", Some(30.0)),
            ("0", Some(0.0)),
            ("-5", Some(-5.0)),
            ("", Some(0.0)),
            ("0x1E", Some(30.0)),
            ("0X1e", Some(30.0)),
            ("0o17", Some(15.0)),
            ("0b11", Some(3.0)),
            ("1e309", Some(f64::INFINITY)),
            ("Infinity", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("5.", Some(5.0)),
            (".5", Some(0.5)),
            ("+2.5e1", Some(25.0)),
            ("-0x1E", None),
            ("30s", None),
            ("inf", None),
            ("NaN", None),
            ("infinity", None),
            ("1_000", None),
            (".", None),
            ("1e", None),
            ("0x", None),
            ("--5", None),
        ] {
            assert_eq!(number(text), want, "{text:?}");
        }
    }

    #[test]
    fn whole_numbers_are_numbers_with_no_fraction() {
        assert_eq!(whole("0x0A"), Some(10));
        assert_eq!(whole(" 20 "), Some(20));
        assert_eq!(whole("-1"), Some(-1));
        assert_eq!(whole("2.5"), None);
        assert_eq!(whole("1e309"), None);
        assert_eq!(whole("ten"), None);
    }

    #[test]
    fn booleans_read_as_n8n_reads_them() {
        for (text, want) in [
            ("true", Some(true)),
            ("TRUE", Some(true)),
            ("True", Some(true)),
            ("1", Some(true)),
            ("false", Some(false)),
            ("0", Some(false)),
            ("yes", None),
            (" true", None),
            ("", None),
        ] {
            assert_eq!(boolean(text), want, "{text:?}");
        }
    }
}
