//! The `role=URL` (or `URL`) an endpoint is given as.

use super::*;
use crate::error::BadInput;

/// A `/metrics` endpoint and the role it plays (given as `role=URL`, else read from content).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub role: Option<Role>,
}

impl Endpoint {
    /// Parses `URL` or `role=URL` (role: main, worker, webhook).
    pub fn parse(text: &str) -> Result<Endpoint, BadInput> {
        match text.split_once('=') {
            Some((role, url)) if !role.contains(':') && !role.contains('/') => {
                let role = match role.parse::<Role>() {
                    Ok(r @ (Role::Main | Role::Worker | Role::Webhook)) => r,
                    _ => {
                        return Err(format!(
                        "--metrics {}: unknown role {:?} (use main=URL, worker=URL or webhook=URL)",
                        crate::wire::url::redact(text),
                        crate::wire::url::truncate(role, 40)
                    )
                        .into())
                    }
                };
                crate::wire::url::HttpUrl::parse(url, "--metrics").map_err(|e| e.0)?;
                Ok(Endpoint {
                    url: url.to_string(),
                    role: Some(role),
                })
            }
            _ => {
                crate::wire::url::HttpUrl::parse(text, "--metrics").map_err(|e| e.0)?;
                Ok(Endpoint {
                    url: text.to_string(),
                    role: None,
                })
            }
        }
    }
}

/// main's `/metrics` for a command that reads a series only main has (n8n's queue counters):
/// `URL` or `main=URL`, the forms `sweep --metrics` takes; a worker's or a webhook processor's
/// endpoint is refused, since it would be read as main's and say nothing.
pub fn main_metrics(text: &str, what: &str) -> Result<String, BadInput> {
    let e = Endpoint::parse(text)?;
    match e.role {
        None | Some(Role::Main) => Ok(e.url),
        Some(role) => Err(BadInput(format!(
            "--metrics {}: {what} is on main's /metrics only, not a {role}'s: give main=URL \
             (or main's URL alone)",
            crate::wire::url::redact(text),
            role = role.word()
        ))),
    }
}
