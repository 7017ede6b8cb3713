//! k6 outputs merged as one distributed run, as a hostile user brings them: a stray `vus`
//! sample years away, clocks further apart than the alignment searches, the same file given
//! twice or a byte-identical copy. Each is refused at once, naming the file — never a search
//! that spins, a shift to the search's edge, or a doubled ceiling. The files are written by the
//! test: a closed run of 2, 8, 12 and 16 users held 20 s each against a stack that answers at
//! most 12 a second.

use crate::common::*;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, UNIX_EPOCH};

fn stamp(t: f64) -> String {
    let whole = t.floor();
    let s = n8ncap::util::utc_rfc3339(UNIX_EPOCH + Duration::from_secs(whole as u64));
    format!(
        "{}{}Z",
        s.trim_end_matches('Z'),
        &format!("{:.6}", t - whole)[1..]
    )
}

fn point(metric: &str, t: f64, value: f64) -> String {
    format!(
        r#"{{"type":"Point","metric":"{metric}","data":{{"time":"{}","value":{value},"tags":{{"scenario":"default","status":"200"}}}}}}"#,
        stamp(t)
    )
}

/// A closed run from `t0`: each user sends, waits for the answer (N ÷ 12 s, at least 0.25 s:
/// 12 answers a second at most), sends again.
fn closed_run(t0: f64) -> String {
    let mut lines = Vec::new();
    for (k, n) in [2u32, 8, 12, 16].into_iter().enumerate() {
        let (from, to) = (t0 + 20.0 * k as f64, t0 + 20.0 * (k + 1) as f64);
        let r = (n as f64 / 12.0).max(0.25);
        let mut s = from;
        while s < to {
            lines.push(point("vus", s, n as f64));
            s += 1.0;
        }
        for u in 0..n {
            let mut start = from + 0.01 * u as f64;
            while start + r <= to {
                let end = start + r;
                lines.push(point("http_req_duration", end, r * 1000.0));
                lines.push(point("http_req_failed", end, 0.0));
                lines.push(point("iteration_duration", end, r * 1000.0));
                start = end;
            }
        }
    }
    lines.join("\n") + "\n"
}

const T0: f64 = 1_795_000_000.0;

fn diagnose(files: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.arg("diagnose");
    for f in files {
        c.args(["--k6-json", f]);
    }
    c.args(["--body", r#"{"sleep_ms":200}"#, "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn written(name: &str, text: &str) -> String {
    let d = scratch().join(format!("n8ncap-hostile-k6-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn refused(o: &Output, names: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in names {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
    err
}

fn ceiling(o: &Output) -> f64 {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    v["diagnosis"]["measured_ceiling"]["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}", v["diagnosis"]["levels"]))
}

#[test]
fn the_synthetic_run_reads_alone_and_merged_with_a_second_generator() {
    let a = written("alone-a.json", &closed_run(T0));
    let one = diagnose(&[&a]);
    let x1 = ceiling(&one);
    assert!((x1 - 12.0).abs() < 0.5, "{x1}");
    // A second generator whose clock runs 30 s ahead: aligned, and the load is two runs'.
    let b = written("alone-b.json", &closed_run(T0 + 30.0));
    let two = diagnose(&[&a, &b]);
    let x2 = ceiling(&two);
    assert!((x2 - 24.0).abs() < 1.0, "{x2}");
}

#[test]
fn a_stray_vus_sample_years_away_is_refused_not_searched() {
    let text = closed_run(T0);
    let stray = format!("{text}{}\n", point("vus", T0 - 5.0 * 365.0 * 86_400.0, 3.0));
    let a = written("stray-a.json", &stray);
    let b = written("stray-b.json", &closed_run(T0));
    let err = refused(&diagnose(&[&a, &b]), &["stray-a.json", "vus sample"]);
    assert!(err.contains("hours outside"), "{err}");
}

#[test]
fn clocks_further_apart_than_the_search_are_refused_naming_the_file() {
    let a = written("far-a.json", &closed_run(T0));
    for ahead in [122.0, 300.0, -500.0] {
        let b = written("far-b.json", &closed_run(T0 + ahead));
        refused(&diagnose(&[&a, &b]), &["far-b.json", "±120 s"]);
    }
}

#[test]
fn the_same_output_given_twice_or_copied_is_refused() {
    let text = closed_run(T0);
    let a = written("twice-a.json", &text);
    let copy = written("twice-copy.json", &text);
    refused(&diagnose(&[&a, &a]), &["twice-a.json", "given twice"]);
    refused(&diagnose(&[&a, &copy]), &["twice-copy.json", "given twice"]);
}

/// k6's `--out json=FILE.gz` writes gzip: read as the same run as the plain file.
#[test]
fn a_gzipped_k6_output_reads_as_its_plain_text() {
    use std::io::Write;
    let text = closed_run(T0);
    let plain = written("plain.json", &text);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    let d = scratch().join(format!("n8ncap-hostile-k6-{}", std::process::id()));
    let zipped = d.join("run.json.gz");
    std::fs::write(&zipped, gz.finish().unwrap()).unwrap();
    let (a, b) = (
        ceiling(&diagnose(&[&plain])),
        ceiling(&diagnose(&[zipped.to_str().unwrap()])),
    );
    assert_eq!(a, b);
    // A gzip stream cut short is an error naming the file, not a panic.
    let bytes = std::fs::read(&zipped).unwrap();
    let cut = d.join("cut.json.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    refused(&diagnose(&[cut.to_str().unwrap()]), &["cut.json.gz"]);
}
