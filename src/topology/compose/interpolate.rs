//! `${VAR}`, `${VAR:-default}`, `${VAR:?error}` and `$$` in compose files, expanded as Docker
//! Compose expands them; an error names the variable, never the text around it.

use super::Vars;
use crate::error::BadInput;
use serde_json::{Map, Value};
use std::path::Path;

/// Why `${...}` could not be expanded. Messages name the variable, never the text around it.
#[derive(Debug, PartialEq)]
pub enum InterpError {
    Unterminated,
    UnknownOperator { name: String },
    Required { name: String },
}

impl InterpError {
    fn message(&self) -> String {
        match self {
            InterpError::Unterminated => "a ${ without its closing }".into(),
            InterpError::UnknownOperator { name } => format!(
                "${{{name}…}} uses an operator Compose does not know (use :-, -, :?, ?, :+ or +)"
            ),
            InterpError::Required { name } => {
                format!("required variable {name} is not set (set it in the shell or in .env)")
            }
        }
    }
}

/// The 1-based line of the first occurrence of `needle` in `text` (0 when absent).
pub(super) fn line_of(text: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    text.find(needle)
        .map(|at| text[..at].matches('\n').count() + 1)
        .unwrap_or(0)
}

/// Compose interpolation on every string of the document; errors carry file:line.
pub(super) fn interpolate(
    v: Value,
    vars: &Vars,
    file: &Path,
    text: &str,
) -> Result<Value, BadInput> {
    Ok(match v {
        Value::String(s) => Value::String(interpolate_str(&s, vars).map_err(|e| {
            let needle = match &e {
                InterpError::Unterminated => s.lines().next().unwrap_or(""),
                InterpError::UnknownOperator { name } | InterpError::Required { name } => name,
            };
            let line = match line_of(text, needle) {
                0 => String::new(),
                n => format!(":{n}"),
            };
            BadInput(format!("{}{line}: {}", file.display(), e.message()))
        })?),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .map(|x| interpolate(x, vars, file, text))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, x) in o {
                out.insert(k, interpolate(x, vars, file, text)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

/// Expands `$VAR`, `${VAR}` and `${VAR<op>arg}` (arguments may nest: `${A:-${B:-7}}`).
pub fn interpolate_str(s: &str, vars: &Vars) -> Result<String, InterpError> {
    interpolate_depth(s, vars, 0)
}

pub(super) fn interpolate_depth(s: &str, vars: &Vars, depth: usize) -> Result<String, InterpError> {
    if depth > 16 {
        return Err(InterpError::Unterminated);
    }
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '$' {
            out.push(c);
            i += 1;
            continue;
        }
        match chars.get(i + 1) {
            Some('$') => {
                out.push('$');
                i += 2;
            }
            Some('{') => {
                // The matching brace: nested ${...} in a default count.
                let mut level = 1usize;
                let mut close = None;
                for (k, ch) in chars.iter().enumerate().skip(i + 2) {
                    match ch {
                        '{' => level += 1,
                        '}' => {
                            level -= 1;
                            if level == 0 {
                                close = Some(k);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let close = close.ok_or(InterpError::Unterminated)?;
                let body: String = chars[i + 2..close].iter().collect();
                out.push_str(&expand(&body, vars, depth)?);
                i = close + 1;
            }
            Some(c2) if c2.is_ascii_alphabetic() || *c2 == '_' => {
                let len = chars[i + 1..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
                    .unwrap_or(chars.len() - i - 1);
                let name: String = chars[i + 1..i + 1 + len].iter().collect();
                out.push_str(vars.get(&name).map(String::as_str).unwrap_or(""));
                i += 1 + len;
            }
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    Ok(out)
}

pub(super) fn expand(body: &str, vars: &Vars, depth: usize) -> Result<String, InterpError> {
    let ops = [":-", "-", ":?", "?", ":+", "+"];
    let split = body
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, _)| i);
    let Some(at) = split else {
        return Ok(vars.get(body).cloned().unwrap_or_default());
    };
    let (name, rest) = body.split_at(at);
    let Some(op) = ops.iter().find(|o| rest.starts_with(**o)) else {
        return Err(InterpError::UnknownOperator {
            name: crate::wire::url::truncate(name, 60),
        });
    };
    let val = vars.get(name);
    let set = val.is_some();
    let non_empty = val.is_some_and(|v| !v.is_empty());
    // The argument is expanded only when it is used, as Compose does.
    let arg = || interpolate_depth(&rest[op.len()..], vars, depth + 1);
    Ok(match *op {
        ":-" if non_empty => val.cloned().unwrap_or_default(),
        ":-" => arg()?,
        "-" if set => val.cloned().unwrap_or_default(),
        "-" => arg()?,
        ":+" if non_empty => arg()?,
        "+" if set => arg()?,
        ":+" | "+" => String::new(),
        _ => {
            let ok = if *op == ":?" { non_empty } else { set };
            if !ok {
                return Err(InterpError::Required {
                    name: name.to_string(),
                });
            }
            val.cloned().unwrap_or_default()
        }
    })
}
