//! UTC timestamps (RFC 3339 and compact) without a date crate.

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

/// Seconds since the epoch from an RFC 3339 timestamp (k6's "2026-11-30T07:38:23.463212645Z",
/// Docker's `StartedAt`, a flag's `--start`).
pub fn parse_rfc3339(t: &str) -> Option<f64> {
    let (date, rest) = t.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, mo, da) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    if !((1..=9999).contains(&y) && (1..=12).contains(&mo) && (1..=31).contains(&da)) {
        return None;
    }
    let (clock, offset_s) = match rest.find(['Z', '+']).or_else(|| rest.rfind('-')) {
        Some(i) => {
            let off = &rest[i..];
            let secs = if off == "Z" {
                0
            } else {
                let sign = if off.starts_with('-') { -1 } else { 1 };
                let hm: Vec<i64> = off[1..]
                    .split(':')
                    .filter_map(|x| x.parse().ok())
                    .filter(|x| (0..100).contains(x))
                    .collect();
                sign * (hm.first().copied().unwrap_or(0) * 3600
                    + hm.get(1).copied().unwrap_or(0) * 60)
            };
            (&rest[..i], secs)
        }
        None => (rest, 0),
    };
    let mut c = clock.split(':');
    let (h, mi) = (
        c.next()?.parse::<i64>().ok()?,
        c.next()?.parse::<i64>().ok()?,
    );
    let s: f64 = c.next()?.parse().ok()?;
    if !((0..=24).contains(&h) && (0..=59).contains(&mi) && (0.0..62.0).contains(&s)) {
        return None;
    }
    // days from civil (Howard Hinnant).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 - offset_s) as f64 + s)
}

/// Unix seconds as RFC 3339 UTC; a time no calendar here holds (before 1970, after 9999) as
/// its number.
pub fn clock(t: f64) -> String {
    if !(0.0..253_402_300_800.0).contains(&t) {
        return format!("{t:.0}");
    }
    utc_rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t))
}

/// Seconds since the Unix epoch now, whole (0 if the clock is before it).
pub fn unix_now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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
