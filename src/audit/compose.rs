//! Compose files read the way Docker Compose reads them: YAML with anchors and merge keys
//! (serde-saphyr applies `<<` natively), several `-f` files merged in order, `extends`,
//! `${VAR}` / `${VAR:-default}` / `${VAR:?error}` interpolation from the process environment and
//! the project's `.env`, `environment` as map or list, `env_file`, `deploy.replicas` / `scale`,
//! `mem_limit` / `deploy.resources.limits.memory`, `command` as string or list.
//! The result is one [`Facts`] per service: secrets are dropped on the way in.

use crate::error::BadInput;
use crate::topology::Facts;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A service as the audit needs it, with where it is written.
#[derive(Debug, Clone)]
pub struct Service {
    pub facts: Facts,
    /// The compose file and line of the service's key, for SARIF and messages.
    pub file: PathBuf,
    pub line: usize,
}

pub struct Project {
    pub services: Vec<Service>,
    pub files: Vec<PathBuf>,
}

type Vars = BTreeMap<String, String>;

/// Loads and merges compose files. Errors are [`BadInput`] naming file, line and column.
pub fn load(files: &[PathBuf]) -> Result<Project, BadInput> {
    if files.is_empty() {
        return Err(BadInput("give at least one compose file with -f".into()));
    }
    let project_dir = files[0]
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut vars = read_dotenv(&project_dir.join(".env"))?;
    // The shell's environment wins over .env, as in Compose.
    for (k, v) in std::env::vars() {
        vars.insert(k, v);
    }
    let mut merged: Map<String, Value> = Map::new();
    let mut where_: BTreeMap<String, (PathBuf, usize)> = BTreeMap::new();
    for f in files {
        let (doc, text) = read_yaml(f)?;
        let doc = interpolate(doc, &vars, f)?;
        let services = doc
            .get("services")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (name, svc) in &services {
            let svc = resolve_extends(name, svc, &services, f, &vars, 0)?;
            let svc = normalize(svc);
            match merged.get_mut(name) {
                Some(existing) => merge(existing, svc),
                None => {
                    merged.insert(name.clone(), svc);
                }
            }
            where_
                .entry(name.clone())
                .or_insert_with(|| (f.clone(), service_line(&text, name)));
        }
    }
    let mut services = Vec::new();
    for (name, svc) in merged {
        let (file, line) = where_.get(&name).cloned().unwrap_or_default();
        let facts = facts_of(&name, &svc, &file)?;
        services.push(Service { facts, file, line });
    }
    Ok(Project {
        services,
        files: files.to_vec(),
    })
}

fn read_yaml(path: &Path) -> Result<(Value, String), BadInput> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    let v: Value = serde_saphyr::from_str(&text)
        .map_err(|e| BadInput(crate::util::yaml_error(&path.display().to_string(), &e)))?;
    if !v.is_object() {
        return Err(BadInput(format!(
            "{}: a compose file is a mapping with a `services:` key",
            path.display()
        )));
    }
    Ok((v, text))
}

fn read_dotenv(path: &Path) -> Result<Vars, BadInput> {
    let mut vars = Vars::new();
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(vars);
    };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
                .unwrap_or(v);
            vars.insert(k.trim().to_string(), v.to_string());
        }
    }
    Ok(vars)
}

/// Names (and values of the kept variables) from an env_file.
fn read_env_file(path: &Path) -> Vec<(String, Option<String>)> {
    read_dotenv(path)
        .map(|m| m.into_iter().map(|(k, v)| (k, Some(v))).collect())
        .unwrap_or_default()
}

/// The line of `  name:` under `services:` (1 when not found).
fn service_line(text: &str, name: &str) -> usize {
    let mut in_services = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("services:") {
            in_services = true;
            continue;
        }
        if in_services
            && !line.starts_with(' ')
            && !line.trim().is_empty()
            && !line.starts_with('#')
        {
            in_services = false;
        }
        if in_services {
            let t = line.trim_start();
            let key = t
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(['"', '\'']);
            if key == name && t.contains(':') && line.len() - t.len() <= 4 {
                return i + 1;
            }
        }
    }
    1
}

/// Compose interpolation on every string of the document.
fn interpolate(v: Value, vars: &Vars, file: &Path) -> Result<Value, BadInput> {
    Ok(match v {
        Value::String(s) => Value::String(interpolate_str(&s, vars, file)?),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .map(|x| interpolate(x, vars, file))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, x) in o {
                out.insert(k, interpolate(x, vars, file)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

pub fn interpolate_str(s: &str, vars: &Vars, file: &Path) -> Result<String, BadInput> {
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
                let Some(close) = chars[i + 2..].iter().position(|c| *c == '}') else {
                    return Err(BadInput(format!(
                        "{}: unterminated ${{...}} in {s:?}",
                        file.display()
                    )));
                };
                let body: String = chars[i + 2..i + 2 + close].iter().collect();
                out.push_str(&expand(&body, vars, file)?);
                i += close + 3;
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

fn expand(body: &str, vars: &Vars, file: &Path) -> Result<String, BadInput> {
    let ops = [":-", "-", ":?", "?", ":+", "+"];
    let split = body
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, _)| i);
    let Some(at) = split else {
        return Ok(vars.get(body).cloned().unwrap_or_default());
    };
    let (name, rest) = body.split_at(at);
    let op = ops
        .iter()
        .find(|o| rest.starts_with(**o))
        .ok_or_else(|| BadInput(format!("{}: cannot read ${{{body}}}", file.display())))?;
    let arg = interpolate_str(&rest[op.len()..], vars, file)?;
    let val = vars.get(name);
    let set = val.is_some();
    let non_empty = val.is_some_and(|v| !v.is_empty());
    Ok(match *op {
        ":-" => {
            if non_empty {
                val.cloned().unwrap_or_default()
            } else {
                arg
            }
        }
        "-" => {
            if set {
                val.cloned().unwrap_or_default()
            } else {
                arg
            }
        }
        ":+" => {
            if non_empty {
                arg
            } else {
                String::new()
            }
        }
        "+" => {
            if set {
                arg
            } else {
                String::new()
            }
        }
        ":?" | "?" => {
            let ok = if *op == ":?" { non_empty } else { set };
            if !ok {
                return Err(BadInput(format!(
                    "{}: required variable {name} is not set ({arg})",
                    file.display()
                )));
            }
            val.cloned().unwrap_or_default()
        }
        _ => unreachable!(),
    })
}

fn resolve_extends(
    name: &str,
    svc: &Value,
    siblings: &Map<String, Value>,
    file: &Path,
    vars: &Vars,
    depth: usize,
) -> Result<Value, BadInput> {
    if depth > 10 {
        return Err(BadInput(format!(
            "{}: `extends` of {name} loops",
            file.display()
        )));
    }
    let Some(ext) = svc.get("extends") else {
        return Ok(svc.clone());
    };
    let (base_name, base_file) = match ext {
        Value::String(s) => (s.clone(), None),
        Value::Object(o) => (
            o.get("service")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            o.get("file")
                .and_then(Value::as_str)
                .map(|f| file.parent().unwrap_or(Path::new(".")).join(f)),
        ),
        _ => {
            return Err(BadInput(format!(
                "{}: `extends` of {name} is not readable",
                file.display()
            )))
        }
    };
    let base = match &base_file {
        Some(bf) => {
            let (doc, _) = read_yaml(bf)?;
            let doc = interpolate(doc, vars, bf)?;
            let others = doc
                .get("services")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let b = others.get(&base_name).ok_or_else(|| {
                BadInput(format!(
                    "{}: {name} extends {base_name}, which {} does not define",
                    file.display(),
                    bf.display()
                ))
            })?;
            resolve_extends(&base_name, b, &others, bf, vars, depth + 1)?
        }
        None => {
            let b = siblings.get(&base_name).ok_or_else(|| {
                BadInput(format!(
                    "{}: {name} extends {base_name}, which is not defined",
                    file.display()
                ))
            })?;
            resolve_extends(&base_name, b, siblings, file, vars, depth + 1)?
        }
    };
    let mut out = normalize(base);
    let mut own = svc.clone();
    if let Some(o) = own.as_object_mut() {
        o.remove("extends");
    }
    merge(&mut out, normalize(own));
    Ok(out)
}

/// `environment` as a map of name → value (null when only named).
fn normalize(mut svc: Value) -> Value {
    if let Some(o) = svc.as_object_mut() {
        if let Some(env) = o.get("environment").cloned() {
            let mut m = Map::new();
            match env {
                Value::Array(items) => {
                    for it in items {
                        let s = scalar(&it);
                        match s.split_once('=') {
                            Some((k, v)) => m.insert(k.to_string(), Value::String(v.to_string())),
                            None => m.insert(s, Value::Null),
                        };
                    }
                }
                Value::Object(map) => {
                    for (k, v) in map {
                        let v = if v.is_null() {
                            Value::Null
                        } else {
                            Value::String(scalar(&v))
                        };
                        m.insert(k, v);
                    }
                }
                _ => {}
            }
            o.insert("environment".into(), Value::Object(m));
        }
    }
    svc
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Compose merge: mappings merge key by key, the later file wins on scalars and sequences.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// "512m", "1g", "2GiB", "1073741824" → bytes.
pub fn parse_memory(v: &Value) -> Option<u64> {
    let s = scalar(v).trim().to_ascii_lowercase();
    if s.is_empty() {
        return None;
    }
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..digits_end].parse().ok()?;
    let unit = s[digits_end..]
        .trim()
        .trim_end_matches("ib")
        .trim_end_matches('b');
    let mult = match unit {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        "t" => 1024f64.powi(4),
        _ => return None,
    };
    Some((n * mult) as u64)
}

/// Splits a command string as a shell would for simple cases (quotes, no expansions).
pub fn split_command(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn command_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => split_command(s),
        Some(Value::Array(a)) => a.iter().map(scalar).collect(),
        _ => Vec::new(),
    }
}

fn facts_of(name: &str, svc: &Value, file: &Path) -> Result<Facts, BadInput> {
    let mut f = Facts {
        name: name.to_string(),
        service: Some(name.to_string()),
        image: svc.get("image").map(scalar).unwrap_or_default(),
        origin: format!("service {name} ({})", file.display()),
        ..Facts::default()
    };
    let mut cmd = command_of(svc.get("entrypoint"));
    cmd.extend(command_of(svc.get("command")));
    f.command = cmd;
    // env_file first: `environment` wins over it, as in Compose.
    let mut env: Vec<(String, Option<String>)> = Vec::new();
    let env_files: Vec<String> = match svc.get("env_file") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::Object(o) => o.get("path").map(scalar).unwrap_or_default(),
                other => scalar(other),
            })
            .collect(),
        _ => Vec::new(),
    };
    for ef in env_files {
        let p = file.parent().unwrap_or(Path::new(".")).join(&ef);
        env.extend(read_env_file(&p));
    }
    if let Some(Value::Object(m)) = svc.get("environment") {
        for (k, v) in m {
            env.retain(|(n, _)| n != k);
            env.push((k.clone(), (!v.is_null()).then(|| scalar(v))));
        }
    }
    f.set_env(env.iter().map(|(k, v)| (k.as_str(), v.as_deref())));
    f.replicas = svc
        .pointer("/deploy/replicas")
        .or_else(|| svc.get("scale"))
        .and_then(|v| scalar(v).parse().ok())
        .unwrap_or(1);
    f.memory_limit_bytes = svc
        .pointer("/deploy/resources/limits/memory")
        .and_then(parse_memory)
        .or_else(|| svc.get("mem_limit").and_then(parse_memory));
    f.hostnames.push(name.to_string());
    for key in ["container_name", "hostname"] {
        if let Some(h) = svc.get(key).map(scalar).filter(|h| !h.is_empty()) {
            f.hostnames.push(h);
        }
    }
    if let Some(Value::Object(nets)) = svc.get("networks") {
        for n in nets.values() {
            if let Some(Value::Array(aliases)) = n.get("aliases") {
                f.hostnames.extend(aliases.iter().map(scalar));
            }
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_follows_compose() {
        let vars: Vars = [("A", "1"), ("E", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let f = Path::new("x.yml");
        let i = |s: &str| interpolate_str(s, &vars, f).unwrap();
        assert_eq!(i("${A}"), "1");
        assert_eq!(i("$A-x"), "1-x");
        assert_eq!(i("${B:-dflt}"), "dflt");
        assert_eq!(i("${E:-dflt}"), "dflt");
        assert_eq!(i("${E-dflt}"), "");
        assert_eq!(i("${A:+yes}"), "yes");
        assert_eq!(i("$$A"), "$A");
        assert_eq!(i("n8nio/n8n:${V:-2.41.1}"), "n8nio/n8n:2.41.1");
        let err = interpolate_str("${B:?set B}", &vars, f).unwrap_err();
        assert!(err.0.contains("B") && err.0.contains("set B"));
    }

    #[test]
    fn memory_and_commands() {
        assert_eq!(
            parse_memory(&Value::String("512m".into())),
            Some(512 * 1024 * 1024)
        );
        assert_eq!(parse_memory(&Value::String("1GiB".into())), Some(1 << 30));
        assert_eq!(parse_memory(&serde_json::json!(1024)), Some(1024));
        assert_eq!(
            split_command("worker --concurrency=5 'a b'"),
            vec!["worker", "--concurrency=5", "a b"]
        );
    }
}
