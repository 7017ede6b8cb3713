//! What a container's environment is, resolved as the kubelet resolves it: `envFrom`
//! (ConfigMaps and Secrets, in order) overridden by `env` (the last duplicate wins), values
//! from references, and `$(VAR)` in `command` and `args`. A Secret's value is known to exist
//! and never read.

use super::*;

/// The environment the container gets: `envFrom` in order, then `env` (the last duplicate
/// wins). Values of kept variables are recorded with their source; secrets by reference only.
/// Returns the plain values known (for `$(VAR)` in args).
pub(super) fn resolve_env(
    c: &Value,
    ix: &Index,
    origin: &str,
    f: &mut Facts,
) -> BTreeMap<String, String> {
    // name → (value if known and not secret, source, secret reference)
    let mut env: BTreeMap<String, (Option<String>, String, Option<String>)> = BTreeMap::new();
    for from in c
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = s(from, "/prefix").unwrap_or("");
        if let Some(cm) = s(from, "/configMapRef/name") {
            match ix.config_maps.get(cm) {
                Some(data) => {
                    for (k, v) in data {
                        env.insert(
                            format!("{prefix}{k}"),
                            (
                                Some(scalar(v)),
                                format!("ConfigMap {cm} key {k} via envFrom"),
                                None,
                            ),
                        );
                    }
                }
                None => {
                    f.env_sources.insert(
                        format!("(envFrom ConfigMap {cm})"),
                        "not in the input: its variables are unknown".into(),
                    );
                }
            }
        }
        if let Some(sec) = s(from, "/secretRef/name") {
            for k in ix.secrets.get(sec).into_iter().flatten() {
                env.insert(
                    format!("{prefix}{k}"),
                    (
                        None,
                        format!("Secret {sec} key {k} via envFrom (value not read)"),
                        Some(format!("{sec}/{k}")),
                    ),
                );
            }
        }
    }
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = s(e, "/name") else { continue };
        env.insert(name.to_string(), env_item(e, ix, origin));
    }
    let mut plain = BTreeMap::new();
    let mut items: Vec<(String, Option<String>)> = Vec::new();
    for (k, (v, source, secret)) in env {
        f.env_sources.insert(k.clone(), source);
        match secret {
            Some(reference) => f.set_secret_reference(&k, &reference),
            None => {
                if let Some(v) = &v {
                    plain.insert(k.clone(), v.clone());
                }
                items.push((k, v));
            }
        }
    }
    f.set_env(items.iter().map(|(k, v)| (k.as_str(), v.as_deref())));
    plain
}

/// `$(VAR)` in command and args, as the kubelet expands it (`$$` escapes; unknown stays).
pub(super) fn expand_vars(arg: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match env.get(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// One `env` item: its value when known and not secret, where it came from, and the Secret
/// it references.
fn env_item(e: &Value, ix: &Index, origin: &str) -> (Option<String>, String, Option<String>) {
    if let Some(v) = e.get("value") {
        (Some(scalar(v)), format!("env of {origin}"), None)
    } else if let Some(r) = e.pointer("/valueFrom/configMapKeyRef") {
        let (cm, key) = (s(r, "/name").unwrap_or(""), s(r, "/key").unwrap_or(""));
        match ix.config_maps.get(cm).and_then(|d| d.get(key)) {
            Some(v) => (
                Some(scalar(v)),
                format!("ConfigMap {cm} key {key} via valueFrom"),
                None,
            ),
            None => (
                None,
                format!("ConfigMap {cm} key {key} via valueFrom (not in the input)"),
                None,
            ),
        }
    } else if let Some(r) = e.pointer("/valueFrom/secretKeyRef") {
        let (sec, key) = (s(r, "/name").unwrap_or(""), s(r, "/key").unwrap_or(""));
        (
            None,
            format!("Secret {sec} key {key} via valueFrom (value not read)"),
            Some(format!("{sec}/{key}")),
        )
    } else if let Some(r) = e.pointer("/valueFrom/fieldRef/fieldPath") {
        (None, format!("fieldRef {}", scalar(r)), None)
    } else if e.pointer("/valueFrom/resourceFieldRef").is_some() {
        (None, "resourceFieldRef".to_string(), None)
    } else {
        (Some(String::new()), format!("env of {origin}"), None)
    }
}
