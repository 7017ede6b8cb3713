//! Request bodies, built once per scenario before the load starts: inline JSON, the bytes of a
//! file (`body_file`), or a `multipart/form-data` upload of files read from disk or generated
//! (`files:` with a `size`) plus form fields — the shape of n8n's binary-data webhooks.
//!
//! Not here: sending (`client`), what a body means to the workflow (`model::settings`).

use crate::error::BadInput;
pub use crate::record::summary::{BodyInfo, FileInfo};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Largest body n8ncap builds: it is held in memory once per scenario and sent by every
/// virtual user.
pub const MAX_BODY: u64 = 512 * 1024 * 1024;

/// One file of a multipart upload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The form field the file goes in (n8n's webhook names the binary property after it).
    #[serde(default = "default_field")]
    pub field: String,
    /// A file to send; relative to the profile's directory.
    #[serde(default)]
    pub path: Option<String>,
    /// Or generated content of this size ("10MB", "512KiB", "1000"): random bytes, so no proxy
    /// or store compresses them away.
    #[serde(default)]
    pub size: Option<String>,
    /// The file name sent (default: the path's name, or `upload-<size>.bin`).
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default = "default_content_type")]
    pub content_type: String,
}

fn default_field() -> String {
    "file".into()
}
fn default_content_type() -> String {
    "application/octet-stream".into()
}

/// A body ready to send, with its content type.
#[derive(Debug, Clone, Default)]
pub struct Body {
    pub bytes: Bytes,
    pub content_type: Option<String>,
    pub info: BodyInfo,
}

/// What a request says about its body (one of the three, or none).
pub struct BodySource<'a> {
    pub json: Option<&'a serde_json::Value>,
    pub file: Option<&'a str>,
    pub files: &'a [FileSpec],
    pub fields: &'a BTreeMap<String, String>,
    /// Where relative paths start (the profile's directory).
    pub base: &'a Path,
    /// "profile x.yaml: scenarios[1].request", for messages.
    pub at: &'a str,
}

pub fn build(src: &BodySource<'_>) -> Result<Body, BadInput> {
    let at = src.at;
    let given = [
        src.json.is_some(),
        src.file.is_some(),
        !src.files.is_empty(),
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(BadInput(format!(
            "{at}: give one of body, body_file or files, not several"
        )));
    }
    if !src.fields.is_empty() && src.files.is_empty() {
        return Err(BadInput(format!(
            "{at}: fields are form fields of a multipart upload: add files, or put them in body"
        )));
    }
    if let Some(v) = src.json {
        let bytes = serde_json::to_vec(v).map_err(|e| BadInput(format!("{at}: body: {e}")))?;
        return Ok(Body {
            info: BodyInfo {
                bytes: bytes.len() as u64,
                files: Vec::new(),
            },
            bytes: Bytes::from(bytes),
            content_type: Some("application/json".into()),
        });
    }
    if let Some(f) = src.file {
        let bytes = read_file(&src.base.join(f), &format!("{at}: body_file"))?;
        return Ok(Body {
            info: BodyInfo {
                bytes: bytes.len() as u64,
                files: Vec::new(),
            },
            bytes: Bytes::from(bytes),
            content_type: None,
        });
    }
    if src.files.is_empty() {
        return Ok(Body::default());
    }
    multipart(src)
}

fn read_file(path: &Path, what: &str) -> Result<Vec<u8>, BadInput> {
    let file = crate::util::open_regular_file(path, what)?;
    let mut bytes = Vec::new();
    file.take(MAX_BODY + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BadInput(format!("cannot read {what} {}: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_BODY {
        return Err(BadInput(format!(
            "{what} {} is larger than {} MiB, the most n8ncap sends in one request",
            path.display(),
            MAX_BODY >> 20
        )));
    }
    Ok(bytes)
}

/// The declared sizes (generated `size`, files' lengths on disk) add up within [`MAX_BODY`]
/// before a byte is generated or read: two uploads of 300 MB are refused in a millisecond.
fn declared_size(src: &BodySource<'_>) -> Result<(), BadInput> {
    let (mut total, mut largest) = (0u64, 0u64);
    for (i, f) in src.files.iter().enumerate() {
        let n = match (&f.path, &f.size) {
            (None, Some(s)) => crate::util::parse_size(s)
                .map_err(|e| BadInput(format!("{}: files[{i}].size: {e}", src.at)))?,
            (Some(p), None) => std::fs::metadata(src.base.join(p)).map_or(0, |m| m.len()),
            _ => 0,
        };
        total = total.saturating_add(n);
        largest = largest.max(n);
    }
    // One file too large on its own is refused by name where it is read.
    if total > MAX_BODY && largest <= MAX_BODY {
        return Err(BadInput(format!(
            "{}: the files add up to {} MiB, more than the {} MiB n8ncap sends in one request",
            src.at,
            total >> 20,
            MAX_BODY >> 20
        )));
    }
    Ok(())
}

/// Pseudo-random bytes (xorshift64*), the same for the same size: incompressible, repeatable.
pub fn generated(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ len as u64;
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

struct Part {
    field: String,
    filename: String,
    content_type: String,
    bytes: Vec<u8>,
}

/// The files of an upload, read or generated, with their total size.
fn read_parts(src: &BodySource<'_>) -> Result<(Vec<Part>, u64), BadInput> {
    let at = src.at;
    declared_size(src)?;
    let mut parts = Vec::new();
    let mut total = 0u64;
    for (i, f) in src.files.iter().enumerate() {
        let here = format!("{at}: files[{i}]");
        let (bytes, name) = match (&f.path, &f.size) {
            (Some(p), None) => {
                let path = src.base.join(p);
                let name = Path::new(p)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "upload.bin".into());
                (read_file(&path, &here)?, name)
            }
            (None, Some(s)) => {
                let n = crate::util::parse_size(s)
                    .map_err(|e| BadInput(format!("{here}.size: {e}")))?;
                if n > MAX_BODY {
                    return Err(BadInput(format!(
                        "{here}.size is {s}: at most {} MiB in one request",
                        MAX_BODY >> 20
                    )));
                }
                (generated(n as usize), format!("upload-{n}.bin"))
            }
            _ => {
                return Err(BadInput(format!(
                    "{here}: give either path (a file to send) or size (generated content)"
                )))
            }
        };
        for (what, v) in [("field", &f.field), ("content_type", &f.content_type)] {
            if v.is_empty() || v.contains(['"', '\r', '\n']) {
                return Err(BadInput(format!(
                    "{here}.{what} must be a non-empty name without quotes or line breaks"
                )));
            }
        }
        total += bytes.len() as u64;
        if total > MAX_BODY {
            return Err(BadInput(format!(
                "{at}: the files add up to more than {} MiB, the most n8ncap sends in one request",
                MAX_BODY >> 20
            )));
        }
        let filename = f
            .filename
            .clone()
            .unwrap_or(name)
            .replace(['"', '\r', '\n'], "_");
        parts.push(Part {
            field: f.field.clone(),
            filename,
            content_type: f.content_type.clone(),
            bytes,
        });
    }
    Ok((parts, total))
}

fn multipart(src: &BodySource<'_>) -> Result<Body, BadInput> {
    let at = src.at;
    let (parts, total) = read_parts(src)?;
    for k in src.fields.keys() {
        if k.is_empty() || k.contains(['"', '\r', '\n']) {
            return Err(BadInput(format!(
                "{at}: form field name {k:?} must be non-empty, without quotes or line breaks"
            )));
        }
    }
    let boundary = boundary_for(&parts, src.fields);
    let mut w = Vec::with_capacity(total as usize + 1024);
    for (k, v) in src.fields {
        w.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        w.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{k}\"\r\n\r\n").as_bytes(),
        );
        w.extend_from_slice(v.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    for p in &parts {
        w.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        w.extend_from_slice(
            format!(
                "Content-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
                p.field, p.filename, p.content_type
            )
            .as_bytes(),
        );
        w.extend_from_slice(&p.bytes);
        w.extend_from_slice(b"\r\n");
    }
    w.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok(Body {
        info: BodyInfo {
            bytes: w.len() as u64,
            files: parts
                .iter()
                .map(|p| FileInfo {
                    field: p.field.clone(),
                    filename: p.filename.clone(),
                    bytes: p.bytes.len() as u64,
                })
                .collect(),
        },
        bytes: Bytes::from(w),
        content_type: Some(format!("multipart/form-data; boundary={boundary}")),
    })
}

/// A boundary that occurs in no part (RFC 2046: the boundary must not appear in the content).
fn boundary_for(parts: &[Part], fields: &BTreeMap<String, String>) -> String {
    (0u32..)
        .map(|k| format!("n8ncap-boundary-{k:08x}"))
        .find(|b| {
            let needle = b.as_bytes();
            !parts.iter().any(|p| contains(&p.bytes, needle))
                && !fields.values().any(|v| contains(v.as_bytes(), needle))
        })
        .unwrap_or_default()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src<'a>(
        files: &'a [FileSpec],
        fields: &'a BTreeMap<String, String>,
        base: &'a Path,
    ) -> BodySource<'a> {
        BodySource {
            json: None,
            file: None,
            files,
            fields,
            base,
            at: "test",
        }
    }

    #[test]
    fn a_generated_upload_is_a_well_formed_multipart_body_of_the_asked_size() {
        let files = [FileSpec {
            field: "data".into(),
            path: None,
            size: Some("10MB".into()),
            filename: None,
            content_type: default_content_type(),
        }];
        let fields = BTreeMap::from([("note".to_string(), "hello".to_string())]);
        let b = build(&src(&files, &fields, Path::new("."))).unwrap();
        assert_eq!(b.info.files[0].bytes, 10_000_000);
        assert_eq!(b.info.files[0].filename, "upload-10000000.bin");
        assert_eq!(b.info.bytes, b.bytes.len() as u64);
        let ct = b.content_type.unwrap();
        let boundary = ct.split("boundary=").nth(1).unwrap();
        assert!(b.bytes.starts_with(format!("--{boundary}\r\n").as_bytes()));
        assert!(b.bytes.ends_with(format!("--{boundary}--\r\n").as_bytes()));
        // Overhead: two part heads and the closing line, well under 1 KiB.
        assert!(b.bytes.len() - 10_000_000 < 1024, "{}", b.bytes.len());
        assert_eq!(generated(1000), generated(1000));
    }

    #[test]
    fn bodies_that_cannot_be_built_are_refused_with_the_field() {
        let none = BTreeMap::new();
        let both = [FileSpec {
            field: "f".into(),
            path: Some("x".into()),
            size: Some("1".into()),
            filename: None,
            content_type: default_content_type(),
        }];
        let e = build(&src(&both, &none, Path::new("."))).unwrap_err();
        assert!(e.0.contains("files[0]"), "{}", e.0);
        let big = [FileSpec {
            size: Some("2GB".into()),
            path: None,
            ..both[0].clone()
        }];
        let e = build(&src(&big, &none, Path::new("."))).unwrap_err();
        assert!(e.0.contains("files[0].size"), "{}", e.0);
        let fields = BTreeMap::from([("a".to_string(), "b".to_string())]);
        let e = build(&src(&[], &fields, Path::new("."))).unwrap_err();
        assert!(e.0.contains("fields"), "{}", e.0);
        let missing = [FileSpec {
            size: None,
            path: Some("/no/such/file".into()),
            ..both[0].clone()
        }];
        assert!(build(&src(&missing, &none, Path::new("."))).is_err());
        // Two uploads of 300 MB: refused from their declared sizes, before either is made.
        let two = [
            FileSpec {
                size: Some("300MB".into()),
                path: None,
                ..both[0].clone()
            },
            FileSpec {
                size: Some("300MB".into()),
                path: None,
                ..both[0].clone()
            },
        ];
        let e = build(&src(&two, &none, Path::new("."))).unwrap_err();
        assert!(e.0.contains("add up to 572 MiB"), "{}", e.0);
        // A kernel file is no body, whatever its metadata says.
        let environ = [FileSpec {
            size: None,
            path: Some("/proc/self/environ".into()),
            ..both[0].clone()
        }];
        let e = build(&src(&environ, &none, Path::new("."))).unwrap_err();
        assert!(e.0.contains("kernel or device file"), "{}", e.0);
        let e = build(&BodySource {
            file: Some("/proc/self/environ"),
            ..src(&[], &none, Path::new("."))
        })
        .unwrap_err();
        assert!(e.0.contains("kernel or device file"), "{}", e.0);
    }
}
