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

mod interpolate;
use interpolate::{interpolate, line_of};
pub use interpolate::{interpolate_str, InterpError};

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
        let doc = interpolate(doc, &vars, f, &text)?;
        let services = match doc.get("services") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(BadInput(format!(
                    "{}:{}: `services:` must be a mapping of service names to their settings",
                    f.display(),
                    line_of(&text, "services:")
                )))
            }
        };
        for (name, svc) in &services {
            if !svc.is_object() {
                return Err(BadInput(format!(
                    "{}:{}: service {name} must be a mapping of its settings (image, command, \
                     environment, …)",
                    f.display(),
                    service_line(&text, name)
                )));
            }
        }
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
        let facts = facts_of(&name, &svc, &file, line)?;
        // `deploy.replicas: 0` (or `scale: 0`): the service runs no container.
        if facts.replicas == 0 {
            continue;
        }
        services.push(Service { facts, file, line });
    }
    Ok(Project {
        services,
        files: files.to_vec(),
    })
}

fn read_yaml(path: &Path) -> Result<(Value, String), BadInput> {
    let text = crate::util::read_text_file(path, MAX_FILE, "compose file")?;
    let v: Value = serde_saphyr::from_str(&text)
        .map_err(|e| BadInput(crate::util::yaml_error(&path.display().to_string(), &e)))?;
    let Some(top) = v.as_object() else {
        return Err(BadInput(format!(
            "{}: a compose file is a mapping with a `services:` key",
            path.display()
        )));
    };
    // Compose refuses a top-level key it does not know (`service:` for `services:` would
    // otherwise audit as an empty project with no findings).
    if let Some(key) = top
        .keys()
        .find(|k| !TOP_LEVEL.contains(&k.as_str()) && !k.starts_with("x-"))
    {
        let near = TOP_LEVEL
            .iter()
            .min_by_key(|t| crate::util::edit_distance(key, t))
            .filter(|t| crate::util::edit_distance(key, t) <= 3)
            .map(|t| format!(" — did you mean `{t}:`?"))
            .unwrap_or_default();
        return Err(BadInput(format!(
            "{}:{}: `{}:` is not a compose top-level key{near} (Compose knows {}, and x-… \
             extensions)",
            path.display(),
            line_of(&text, &format!("{key}:")),
            crate::wire::url::truncate(&crate::util::escape_control(key), 40),
            TOP_LEVEL.join(", ")
        )));
    }
    Ok((v, text))
}

/// The top-level keys of the Compose specification.
const TOP_LEVEL: [&str; 8] = [
    "version", "name", "services", "networks", "volumes", "configs", "secrets", "include",
];

/// Largest compose or env file read (real ones are a few KB).
const MAX_FILE: u64 = 4 << 20;

/// The project's `.env`: absent is fine; present but unreadable or binary is an error.
fn read_dotenv(path: &Path) -> Result<Vars, BadInput> {
    if !path.exists() {
        return Ok(Vars::new());
    }
    parse_env_text(&crate::util::read_text_file(path, MAX_FILE, ".env file")?)
}

fn parse_env_text(text: &str) -> Result<Vars, BadInput> {
    let mut vars = Vars::new();
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

/// Names (and values of the kept variables) from an env_file. Compose refuses a missing one
/// unless it is marked `required: false`; so does the audit, naming the service and line.
fn read_env_file(
    path: &Path,
    required: bool,
    place: &str,
) -> Result<Vec<(String, Option<String>)>, BadInput> {
    if !path.exists() && !required {
        return Ok(Vec::new());
    }
    let text = crate::util::read_text_file(path, MAX_FILE, "env_file")
        .map_err(|e| BadInput(format!("{place}: {}", e.0)))?;
    Ok(parse_env_text(&text)?
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect())
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
            let (doc, text) = read_yaml(bf)?;
            let doc = interpolate(doc, vars, bf, &text)?;
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
    let bytes = n * mult;
    (bytes.is_finite() && bytes >= 1.0 && bytes < 2f64.powi(63)).then_some(bytes as u64)
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

/// A service name as the Compose specification allows it (`^[a-zA-Z0-9._-]+$`): anything else
/// Compose refuses, and a newline in one could forge lines of the output.
fn service_name_ok(name: &str, file: &Path, line: usize) -> Result<(), BadInput> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        return Ok(());
    }
    Err(BadInput(format!(
        "{}:{line}: service `{}` is not a compose service name (letters, digits, '.', '_' and \
         '-' only): Compose refuses it — rename the service",
        file.display(),
        crate::wire::url::truncate(&crate::util::escape_control(name), 40)
    )))
}

fn facts_of(name: &str, svc: &Value, file: &Path, line: usize) -> Result<Facts, BadInput> {
    service_name_ok(name, file, line)?;
    let place = format!("{}:{line}: service {name}", file.display());
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
    if let Some(Err(bad)) = crate::topology::concurrency_flag(&f.command) {
        return Err(BadInput(format!(
            "{place}: --concurrency {:?} is not a positive whole number: n8n would refuse it",
            crate::wire::url::truncate(&bad.0, 20)
        )));
    }
    let env = environment(svc, file, &place)?;
    f.set_env(env.iter().map(|(k, v)| (k.as_str(), v.as_deref())));
    f.replicas = match svc.pointer("/deploy/replicas").or_else(|| svc.get("scale")) {
        None | Some(Value::Null) => 1,
        Some(v) => match scalar(v).trim().parse::<u32>() {
            Ok(n) if n <= MAX_REPLICAS => n,
            _ => {
                return Err(BadInput(format!(
                    "{place}: deploy.replicas (or scale) must be a whole number from 0 to \
                     {MAX_REPLICAS}"
                )))
            }
        },
    };
    let memory = |key: &str, v: Option<&Value>| -> Result<Option<u64>, BadInput> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(v) => parse_memory(v).map(Some).ok_or_else(|| {
                BadInput(format!(
                    "{place}: {key} is not a memory size: write e.g. 512m or 1g (a positive size)"
                ))
            }),
        }
    };
    f.memory_limit_bytes = match memory(
        "deploy.resources.limits.memory",
        svc.pointer("/deploy/resources/limits/memory"),
    )? {
        Some(m) => Some(m),
        None => memory("mem_limit", svc.get("mem_limit"))?,
    };
    f.restart = restart_of(svc);
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

/// A service's variables as Compose reads them: its `env_file`s first (each path relative to
/// the compose file, a missing one refused when required), then `environment`, which wins.
fn environment(
    svc: &Value,
    file: &Path,
    place: &str,
) -> Result<Vec<(String, Option<String>)>, BadInput> {
    // env_file first: `environment` wins over it, as in Compose.
    let mut env: Vec<(String, Option<String>)> = Vec::new();
    let env_files: Vec<(String, bool)> = match svc.get("env_file") {
        Some(Value::String(s)) => vec![(s.clone(), true)],
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::Object(o) => (
                    o.get("path").map(scalar).unwrap_or_default(),
                    o.get("required").and_then(Value::as_bool).unwrap_or(true),
                ),
                other => (scalar(other), true),
            })
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => {
            return Err(BadInput(format!(
                "{place}: env_file must be a path or a list of paths"
            )))
        }
    };
    for (ef, required) in env_files {
        let p = file.parent().unwrap_or(Path::new(".")).join(&ef);
        env.extend(read_env_file(&p, required, place)?);
    }
    if let Some(Value::Object(m)) = svc.get("environment") {
        for (k, v) in m {
            env.retain(|(n, _)| n != k);
            env.push((k.clone(), (!v.is_null()).then(|| scalar(v))));
        }
    }
    Ok(env)
}

/// The service's restart policy: Swarm's `deploy.restart_policy` (its `condition`, `any` when
/// not written) wins where it is present, as `docker stack deploy` reads it; else `restart`.
fn restart_of(svc: &Value) -> Option<super::facts::RestartPolicy> {
    use super::facts::RestartPolicy;
    match svc.pointer("/deploy/restart_policy") {
        Some(Value::Object(p)) => Some(match p.get("condition") {
            Some(c) if !c.is_null() => {
                RestartPolicy::new(&scalar(c), "deploy.restart_policy.condition")
            }
            _ => RestartPolicy::new("any", "deploy.restart_policy (condition not written: any)"),
        }),
        _ => match svc.get("restart") {
            None | Some(Value::Null) => None,
            Some(v) => Some(RestartPolicy::new(&scalar(v), "restart")),
        },
    }
}

/// Most replicas a service may declare (beyond it, a typing error).
const MAX_REPLICAS: u32 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Compose's `restart`, and Swarm's `deploy.restart_policy` where present (its condition
    /// `any` when not written), as what starts an exited n8n again.
    #[test]
    fn a_restart_policy_is_read_as_compose_and_swarm_write_it() {
        let svc = |y: &str| -> Value { serde_saphyr::from_str(y).unwrap() };
        let r = |y: &str| restart_of(&svc(y)).map(|p| (p.written, p.restarts));
        assert_eq!(r("image: x"), None);
        assert_eq!(r("restart: always"), Some(("always".into(), true)));
        assert_eq!(
            r("restart: unless-stopped"),
            Some(("unless-stopped".into(), true))
        );
        assert_eq!(
            r("restart: on-failure:3"),
            Some(("on-failure:3".into(), true))
        );
        assert_eq!(r("restart: \"no\""), Some(("no".into(), false)));
        assert_eq!(
            r("restart: always\ndeploy: {restart_policy: {condition: none}}"),
            Some(("none".into(), false))
        );
        assert_eq!(
            r("deploy: {restart_policy: {max_attempts: 3}}"),
            Some(("any".into(), true))
        );
    }

    #[test]
    fn interpolation_follows_compose() {
        let vars: Vars = [("A", "1"), ("E", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let i = |s: &str| interpolate_str(s, &vars).unwrap();
        assert_eq!(i("${A}"), "1");
        assert_eq!(i("$A-x"), "1-x");
        assert_eq!(i("${B:-dflt}"), "dflt");
        assert_eq!(i("${E:-dflt}"), "dflt");
        assert_eq!(i("${E-dflt}"), "");
        assert_eq!(i("${A:+yes}"), "yes");
        assert_eq!(i("$$A"), "$A");
        assert_eq!(i("n8nio/n8n:${V:-2.41.1}"), "n8nio/n8n:2.41.1");
        assert_eq!(i("${A:-${B:-7}}"), "1");
        assert_eq!(i("${B:-${C:-7}}"), "7");
        assert_eq!(i("${B:-${A}x}"), "1x");
        assert_eq!(
            interpolate_str("${B:?set B}", &vars),
            Err(InterpError::Required { name: "B".into() })
        );
        assert_eq!(
            interpolate_str("pre ${B:-x", &vars),
            Err(InterpError::Unterminated)
        );
        // A required variable inside an unused default is not an error (Compose).
        assert_eq!(i("${A:-${B:?x}}"), "1");
    }

    #[test]
    fn memory_and_commands() {
        assert_eq!(
            parse_memory(&Value::String("512m".into())),
            Some(512 * 1024 * 1024)
        );
        assert_eq!(parse_memory(&Value::String("1GiB".into())), Some(1 << 30));
        assert_eq!(parse_memory(&serde_json::json!(1024)), Some(1024));
        for bad in ["-1g", "0", "1e400", "lots", "99999999999t"] {
            assert_eq!(parse_memory(&Value::String(bad.into())), None, "{bad}");
        }
        assert_eq!(
            split_command("worker --concurrency=5 'a b'"),
            vec!["worker", "--concurrency=5", "a b"]
        );
    }
}
