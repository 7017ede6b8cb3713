//! The simulated webhook's intake: what one call asks the workflow behind its path to do.
//! A path's workflow has defaults (`sim --workflow orders='{"sleep_ms":200,"code":false}'`);
//! the body's JSON fields — or a multipart upload's form fields — are laid over them, and a
//! multipart upload's files are counted as the binary data the execution carries.
//!
//! Not here: queueing or running the job (`main_role`, `worker`, `regular`).

use super::wire::JobSpec;
use serde_json::{Map, Value};

/// A webhook call turned into a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Intake {
    pub spec: JobSpec,
    /// Files the upload carried, and their bytes.
    pub files: u64,
    pub binary_bytes: u64,
}

/// Why a call cannot become a job: n8n answers such a call with HTTP 400 at once.
pub type Refusal = String;

pub fn parse(
    content_type: Option<&str>,
    body: &[u8],
    defaults: &Map<String, Value>,
) -> Result<Intake, Refusal> {
    let mut fields = defaults.clone();
    let (mut files, mut binary_bytes) = (0u64, 0u64);
    let ct = content_type.unwrap_or("").to_ascii_lowercase();
    if ct.starts_with("multipart/form-data") {
        let boundary =
            boundary(content_type.unwrap_or("")).ok_or("multipart/form-data without a boundary")?;
        for part in parts(body, boundary.as_bytes())? {
            match part.filename {
                Some(_) => {
                    files += 1;
                    binary_bytes += part.content.len() as u64;
                }
                None => {
                    let text = String::from_utf8_lossy(part.content);
                    // Form fields are text; numbers and booleans are read as such.
                    let v = serde_json::from_str::<Value>(&text)
                        .ok()
                        .filter(|v| !v.is_object() && !v.is_array())
                        .unwrap_or(Value::String(text.into_owned()));
                    fields.insert(part.name, v);
                }
            }
        }
    } else if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => fields.extend(m),
            Ok(_) => {}
            Err(e) => return Err(format!("Unexpected token in JSON: {e}")),
        }
    }
    // Set from the files, never from the body.
    fields.remove("binary_bytes");
    let mut spec: JobSpec = serde_json::from_value(Value::Object(fields))
        .map_err(|e| format!("the workflow cannot read the body: {e}"))?;
    spec.binary_bytes = binary_bytes;
    Ok(Intake {
        spec,
        files,
        binary_bytes,
    })
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

struct Part<'a> {
    name: String,
    filename: Option<String>,
    content: &'a [u8],
}

/// Splits a multipart body (RFC 7578) into its parts.
fn parts<'a>(body: &'a [u8], boundary: &[u8]) -> Result<Vec<Part<'a>>, Refusal> {
    let delimiter = [b"--", boundary].concat();
    let next_delimiter = [b"\r\n--", boundary].concat();
    let finder = memchr::memmem::Finder::new(&next_delimiter);
    let start =
        memchr::memmem::find(body, &delimiter).ok_or("no multipart boundary in the body")?;
    let mut at = start + delimiter.len();
    let mut out = Vec::new();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(out);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("a multipart boundary is not followed by a line break")?;
        let head_end = memchr::memmem::find(rest, b"\r\n\r\n").ok_or("a part has no header end")?;
        let head = String::from_utf8_lossy(&rest[..head_end]);
        let content_start = head_end + 4;
        let len = finder
            .find(&rest[content_start..])
            .ok_or("a part is not closed by the boundary")?;
        let (name, filename) = disposition(&head).ok_or("a part has no form-data name")?;
        out.push(Part {
            name,
            filename,
            content: &rest[content_start..content_start + len],
        });
        if out.len() > 1000 {
            return Err("more than 1000 parts".into());
        }
        at = body.len() - rest.len() + content_start + len + next_delimiter.len();
    }
}

/// `Content-Disposition: form-data; name="x"; filename="y"` → (x, Some(y)).
fn disposition(head: &str) -> Option<(String, Option<String>)> {
    let line = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))?;
    let param = |key: &str| {
        line.split(';').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
    };
    Some((param("name")?, param("filename")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_default_is_overlaid_by_the_body() {
        let defaults: Map<String, Value> =
            serde_json::from_str(r#"{"sleep_ms": 200, "code": false}"#).unwrap();
        let i = parse(None, br#"{"sleep_ms": 50, "binary_bytes": 99}"#, &defaults).unwrap();
        assert_eq!(i.spec.sleep_ms, 50);
        assert!(!i.spec.code);
        assert_eq!(i.spec.binary_bytes, 0);
        assert!(parse(None, b"{nope", &Map::new()).is_err());
        assert!(parse(None, br#"{"sleep_ms": "soon"}"#, &Map::new()).is_err());
    }

    #[test]
    fn a_multipart_upload_counts_its_files_and_reads_its_fields() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"sleep_ms\"\r\n\r\n30\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\
Content-Type: application/octet-stream\r\n\r\n\x00\r\n--Xy\x01\x02\r\n--XyZ--\r\n";
        let i = parse(
            Some("multipart/form-data; boundary=\"XyZ\""),
            body,
            &Map::new(),
        )
        .unwrap();
        assert_eq!(i.spec.sleep_ms, 30);
        assert_eq!(i.files, 1);
        assert_eq!(i.binary_bytes, 9);
        assert_eq!(i.spec.binary_bytes, 9);
        let cut = &body[..body.len() - 12];
        assert!(parse(Some("multipart/form-data; boundary=XyZ"), cut, &Map::new()).is_err());
        assert!(parse(Some("multipart/form-data"), body, &Map::new()).is_err());
    }
}
