//! An existing alerting setup read for `audit --rules FILE`: a Prometheus rules file (`groups:`)
//! or prometheus-operator's PrometheusRule (`spec.groups`), several YAML documents allowed. Each
//! alerting rule is kept with its expression and where it was written; recording rules are
//! read for nothing (an alert on a recorded series names that series, not n8n's).

use crate::error::BadInput;
use serde_json::Value;

/// An alerting rule as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingAlert {
    pub name: String,
    pub expr: String,
    /// The file and group it is in.
    pub origin: String,
}

/// The alerting rules of `text` (read from `origin`); refused when it holds no rule group.
pub fn read(origin: &str, text: &str) -> Result<Vec<ExistingAlert>, BadInput> {
    // The manifest reader's documents: its limits on aliases and size hold here too.
    let docs: Vec<Value> = super::k8s::split_docs(origin, text)?
        .into_iter()
        .map(|d| d.value)
        .collect();
    let mut out = Vec::new();
    let mut groups_seen = false;
    for d in &docs {
        let groups = d
            .get("groups")
            .or_else(|| d.pointer("/spec/groups"))
            .and_then(Value::as_array);
        let Some(groups) = groups else { continue };
        groups_seen = true;
        for g in groups {
            let group = g.get("name").and_then(Value::as_str).unwrap_or("?");
            for r in g
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(name), Some(expr)) = (r.get("alert"), r.get("expr")) else {
                    continue;
                };
                let expr = match expr {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push(ExistingAlert {
                    name: crate::util::escape_control(
                        &name
                            .as_str()
                            .map_or_else(|| name.to_string(), str::to_string),
                    )
                    .into_owned(),
                    expr,
                    origin: format!("{origin}, group {}", crate::util::escape_control(group)),
                });
            }
        }
    }
    if !groups_seen {
        return Err(BadInput(format!(
            "{origin}: no rule groups (a rules file's `groups:` or a PrometheusRule's \
             `spec.groups`): give the file Prometheus loads, or the PrometheusRule manifest"
        )));
    }
    Ok(out)
}

/// The number an alert compares its expression above (`> N` or `>= N`, outside label
/// matchers and strings), when it has one.
pub fn threshold_above(expr: &str) -> Option<f64> {
    let (mut depth, mut quoted) = (0i32, false);
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => quoted = !quoted,
            b'{' if !quoted => depth += 1,
            b'}' if !quoted => depth -= 1,
            b'>' if !quoted && depth == 0 => {
                let rest = expr[i + 1..].trim_start_matches('=').trim_start();
                let rest = rest.strip_prefix("bool").map_or(rest, str::trim_start);
                let end = rest
                    .find(|c: char| {
                        !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
                    })
                    .unwrap_or(rest.len());
                if let Ok(v) = rest[..end].parse::<f64>() {
                    return Some(v).filter(|v| v.is_finite());
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests;
