//! Kubernetes manifests — what `helm template` renders from the n8n charts — read into the same
//! [`Facts`] as compose files and running containers, so the same rules run on them. What a
//! container really gets is resolved the way the kubelet does: `command` + `args` (with
//! `$(VAR)` expanded), `envFrom` (ConfigMaps and Secrets, in order) overridden by `env` (the
//! last duplicate wins), `valueFrom` references, native sidecars (init containers with
//! `restartPolicy: Always`), replicas from `spec.replicas` or the HPA / KEDA ScaledObject whose
//! `scaleTargetRef` names the workload. A value from a Secret is known to exist and never read:
//! not its plaintext, not its base64.
//!
//! Live clusters are not read here; a collector reading pods through the Kubernetes API would
//! produce the same [`Facts`] (with [`K8sFacts`]) and reuse everything after this module.

use super::autoscaler;
use super::compose::{parse_memory, Project, Service};
use super::manifest::{s, scalar, Doc};
use crate::error::BadInput;
use crate::topology::{Autoscaler, Facts, K8sFacts, Probe, ProbeKind};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Largest manifest read (a rendered chart is a few hundred KB).
pub const MAX_MANIFEST: u64 = 16 << 20;

/// True when `text` holds Kubernetes objects (a document with `apiVersion` and `kind`) rather
/// than a compose file.
pub fn looks_like_kubernetes(text: &str) -> bool {
    let mut api = false;
    let mut kind = false;
    for line in text.lines() {
        if line.starts_with("---") {
            if api && kind {
                return true;
            }
            api = false;
            kind = false;
        }
        api |= line.starts_with("apiVersion:");
        kind |= line.starts_with("kind:");
    }
    api && kind
}

pub(super) fn split_docs(origin: &str, text: &str) -> Result<Vec<Doc>, BadInput> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    let mut flush = |cur: &mut String, start: usize| -> Result<(), BadInput> {
        if cur.trim().is_empty() {
            cur.clear();
            return Ok(());
        }
        let value: Value = serde_saphyr::from_str(cur)
            .map_err(|e| BadInput(crate::util::yaml_error_at(origin, &e, start - 1)))?;
        match value {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
                for item in o
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    docs.push(Doc {
                        value: item.clone(),
                        line: start,
                        text: cur.clone(),
                    });
                }
            }
            Value::Object(_) => docs.push(Doc {
                value,
                line: start,
                text: cur.clone(),
            }),
            _ => {
                return Err(BadInput(format!(
                    "{origin}:{start}: a Kubernetes document is a mapping with apiVersion and kind"
                )))
            }
        }
        cur.clear();
        Ok(())
    };
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            flush(&mut cur, start)?;
            start = i + 2;
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    flush(&mut cur, start)?;
    Ok(docs)
}

/// An object's name, control characters escaped (a Kubernetes name is a DNS label; a manifest
/// that says otherwise cannot forge output lines).
fn name_of(v: &Value) -> String {
    crate::util::escape_control(s(v, "/metadata/name").unwrap_or("")).into_owned()
}

/// The resources of the input that containers refer to.
#[derive(Default)]
struct Index {
    config_maps: BTreeMap<String, Map<String, Value>>,
    /// Secret name → its keys (values never read).
    secrets: BTreeMap<String, Vec<String>>,
    /// Service name → its selector.
    services: Vec<(String, Map<String, Value>)>,
    autoscalers: Vec<(String, String, Autoscaler)>,
    /// TriggerAuthentication name → the parameters it gives.
    trigger_auths: BTreeMap<String, Vec<String>>,
    namespace: Option<String>,
}

impl Index {
    fn of(docs: &[Doc]) -> Result<Index, BadInput> {
        let mut ix = Index::default();
        for d in docs {
            let v = &d.value;
            let name = name_of(v);
            if ix.namespace.is_none() {
                ix.namespace = s(v, "/metadata/namespace").map(str::to_string);
            }
            match s(v, "/kind").unwrap_or("") {
                "ConfigMap" => {
                    let data = v
                        .get("data")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    ix.config_maps.insert(name, data);
                }
                "Secret" => {
                    let mut keys: Vec<String> = ["data", "stringData"]
                        .iter()
                        .filter_map(|k| v.get(*k).and_then(Value::as_object))
                        .flat_map(|m| m.keys().cloned())
                        .collect();
                    keys.sort();
                    keys.dedup();
                    ix.secrets.insert(name, keys);
                }
                "Service" => {
                    if let Some(sel) = v.pointer("/spec/selector").and_then(Value::as_object) {
                        ix.services.push((name, sel.clone()));
                    }
                }
                "HorizontalPodAutoscaler" => ix.autoscalers.push(autoscaler::hpa(d, &name)?),
                "ScaledObject" => ix.autoscalers.push(autoscaler::scaled_object(d, &name)?),
                "ScaledJob" => ix.autoscalers.push(autoscaler::scaled_job(d, &name)?),
                "TriggerAuthentication" | "ClusterTriggerAuthentication" => {
                    // The parameters it gives (names only: secrets stay where they are).
                    let params = ["/spec/secretTargetRef", "/spec/env"]
                        .iter()
                        .filter_map(|p| v.pointer(p).and_then(Value::as_array))
                        .flatten()
                        .filter_map(|e| s(e, "/parameter").map(str::to_string))
                        .collect();
                    ix.trigger_auths.insert(name, params);
                }
                _ => {}
            }
        }
        for (_, _, a) in &mut ix.autoscalers {
            for t in &mut a.triggers {
                if let Some((name, found)) = &mut t.auth_ref {
                    *found = ix
                        .trigger_auths
                        .get(name.as_str())
                        .is_some_and(|p: &Vec<String>| p.iter().any(|p| p == "password"));
                }
            }
        }
        Ok(ix)
    }

    /// Names by which other pods reach a pod with these labels: the Services selecting it.
    fn hostnames(&self, labels: &Map<String, Value>) -> Vec<String> {
        let mut out = Vec::new();
        for (svc, sel) in &self.services {
            if !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                out.push(svc.clone());
                if let Some(ns) = &self.namespace {
                    out.push(format!("{svc}.{ns}"));
                    out.push(format!("{svc}.{ns}.svc"));
                    out.push(format!("{svc}.{ns}.svc.cluster.local"));
                }
            }
        }
        out
    }
}

/// The autoscalers of a manifest (HPAs and ScaledObjects): the workload each scales (kind,
/// name) and what it is.
pub fn autoscalers(
    origin: &str,
    text: &str,
) -> Result<Vec<(String, String, Autoscaler)>, BadInput> {
    let mut out = Vec::new();
    for d in split_docs(origin, text)? {
        let name = s(&d.value, "/metadata/name").unwrap_or("").to_string();
        match s(&d.value, "/kind") {
            Some("HorizontalPodAutoscaler") => out.push(autoscaler::hpa(&d, &name)?),
            Some("ScaledObject") => out.push(autoscaler::scaled_object(&d, &name)?),
            Some("ScaledJob") => out.push(autoscaler::scaled_job(&d, &name)?),
            _ => {}
        }
    }
    Ok(out)
}

/// A ScaledObject n8ncap built (typed, never written as text and parsed back) read by the same
/// reader as a deployed one: the workload it scales and its control loop.
pub fn scaled_object_of(
    o: &crate::record::kube::ScaledObject,
) -> Result<(String, String, Autoscaler), BadInput> {
    let value = serde_json::to_value(o)
        .map_err(|e| BadInput(format!("the generated ScaledObject: {e}")))?;
    let name = s(&value, "/metadata/name").unwrap_or("").to_string();
    let d = super::manifest::Doc {
        value,
        line: 1,
        text: String::new(),
    };
    autoscaler::scaled_object(&d, &name)
}

/// Reads a manifest (several documents, `List`s flattened) into services, one per container
/// of each Deployment and StatefulSet.
pub fn load(file: &Path, text: &str) -> Result<Project, BadInput> {
    load_all(&[(text.to_string(), file.to_path_buf())])
}

/// Reads several manifest files as one input: a ConfigMap, Secret or autoscaler in one file
/// applies to the workloads of another (as `kubectl apply -f a.yaml -f b.yaml` deploys them).
pub fn load_all(files: &[(String, PathBuf)]) -> Result<Project, BadInput> {
    let mut per_file = Vec::new();
    for (text, file) in files {
        per_file.push((file, split_docs(&file.display().to_string(), text)?));
    }
    let all: Vec<Doc> = per_file
        .iter()
        .flat_map(|(_, d)| d.iter().cloned())
        .collect();
    let ix = Index::of(&all)?;
    let mut services = Vec::new();
    for (file, docs) in &per_file {
        for d in docs {
            let kind = s(&d.value, "/kind").unwrap_or("");
            if !matches!(kind, "Deployment" | "StatefulSet" | "ScaledJob") {
                continue;
            }
            services.extend(workload(file, d, kind, &ix)?);
        }
    }
    Ok(Project {
        services,
        files: files.iter().map(|(_, f)| f.clone()).collect(),
    })
}

/// A pod's containers, each with whether it is a sidecar: a second container, or an init
/// container with `restartPolicy: Always` (a native sidecar).
fn pod_containers(pod: &Value) -> Vec<(&Value, bool)> {
    let mut containers: Vec<(&Value, bool)> = pod
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (c, i > 0))
        .collect();
    containers.extend(
        pod.get("initContainers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| s(c, "/restartPolicy") == Some("Always"))
            .map(|c| (c, true)),
    );
    containers
}

/// A container's liveness, readiness and startup probes, with their HTTP paths.
fn probes(c: &Value) -> Vec<Probe> {
    ProbeKind::ALL
        .iter()
        .filter_map(|k| {
            c.get(k.field()).map(|p| {
                let num = |f: &str, d: f64| {
                    p.get(f)
                        .and_then(Value::as_f64)
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .unwrap_or(d)
                };
                Probe {
                    kind: *k,
                    http_path: s(p, "/httpGet/path").map(str::to_string),
                    acts_after_s: Some(num("failureThreshold", 3.0) * num("periodSeconds", 10.0)),
                }
            })
        })
        .collect()
}

/// A workload's pod spec and labels; a KEDA ScaledJob's pods come from its Job template.
fn pod_template(v: &Value, kind: &str) -> (Value, Map<String, Value>) {
    let template = if kind == "ScaledJob" {
        "/spec/jobTargetRef/template"
    } else {
        "/spec/template"
    };
    let pod = v
        .pointer(&format!("{template}/spec"))
        .cloned()
        .unwrap_or_default();
    let labels = v
        .pointer(&format!("{template}/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    (pod, labels)
}

/// The autoscaler on workload `kind`/`name`. Two on one workload fight (KEDA's webhook refuses
/// a second ScaledObject, two HPAs stop at AmbiguousSelector): the first is read, the others
/// named with it.
fn autoscaler_of(ix: &Index, kind: &str, name: &str) -> Option<Autoscaler> {
    let mut on_it = ix
        .autoscalers
        .iter()
        .filter(|(k, n, _)| n == name && k == kind)
        .map(|(_, _, a)| a);
    on_it.next().map(|a| {
        let mut a = a.clone();
        a.also = on_it.map(|o| o.by.clone()).collect();
        a
    })
}

fn workload(file: &Path, d: &Doc, kind: &str, ix: &Index) -> Result<Vec<Service>, BadInput> {
    let v = &d.value;
    let name = name_of(v);
    let (pod, labels) = pod_template(v, kind);
    let declared = autoscaler::int32_at(
        v,
        "/spec/replicas",
        (0, i64::MAX),
        &format!("{kind} {name}"),
        d.line,
    )?;
    let autoscaler = autoscaler_of(ix, kind, &name);
    let replicas = most_replicas(autoscaler.as_ref(), declared).map_err(|replicas| {
        BadInput(format!(
            "{}:{}: {kind} {name}: {replicas} replicas is beyond any deployment",
            file.display(),
            d.line
        ))
    })?;
    let grace = pod
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_u64);
    let containers = pod_containers(&pod);
    let hostnames = ix.hostnames(&labels);
    let mut out = Vec::new();
    for (c, sidecar) in containers {
        // Kubernetes names are DNS labels; a manifest that says otherwise is escaped, so a
        // newline cannot forge output lines.
        let cname = crate::util::escape_control(s(c, "/name").unwrap_or("")).into_owned();
        let origin = format!("container {cname} of {kind} {name}");
        let mut f = Facts {
            // Unique within the input: the workload, or workload/container for a second one.
            name: if cname == name {
                name.clone()
            } else {
                format!("{name}/{cname}")
            },
            service: Some(name.clone()),
            image: s(c, "/image").unwrap_or("").to_string(),
            origin: origin.clone(),
            replicas,
            hostnames: hostnames.clone(),
            ..Facts::default()
        };
        let env = resolve_env(c, ix, &origin, &mut f);
        f.command = ["command", "args"]
            .iter()
            .filter_map(|k| c.get(*k).and_then(Value::as_array))
            .flatten()
            .map(|a| expand_vars(&scalar(a), &env))
            .collect();
        let limits = c.pointer("/resources/limits");
        f.memory_limit_bytes = limits
            .and_then(|l| l.get("memory"))
            .and_then(parse_quantity_bytes);
        f.cpu_limit_cores = limits.and_then(|l| l.get("cpu")).and_then(parse_cpu);
        let probes = probes(c);
        // A Deployment's or StatefulSet's pods restart their containers (restartPolicy Always,
        // the only value those accept).
        f.restart = Some(super::facts::RestartPolicy::new(
            "Always",
            &format!("the pod's restartPolicy ({kind} {name})"),
        ));
        f.k8s = Some(K8sFacts {
            workload_kind: kind.to_string(),
            workload: name.clone(),
            namespace: s(v, "/metadata/namespace").map(str::to_string),
            container: cname.clone(),
            sidecar,
            replicas_declared: declared.is_some(),
            autoscaler: autoscaler.clone(),
            termination_grace_period_s: grace,
            probes,
            resources: c.get("resources").map(resources_text),
        });
        let line = line_in(&d.text, &format!("name: {cname}"))
            .map(|l| d.line + l - 1)
            .unwrap_or(d.line);
        out.push(Service {
            facts: f,
            file: file.to_path_buf(),
            line,
        });
    }
    Ok(out)
}

/// Replicas counted at the most the workload can run (Σ pools at max replicas is what the
/// database must allow; the autoscaler's range is kept for the findings that need it); the
/// count refused past 10 000, which no deployment runs.
fn most_replicas(autoscaler: Option<&Autoscaler>, declared: Option<u32>) -> Result<u32, u32> {
    let replicas = match autoscaler {
        Some(a) => a.max.max(a.min),
        None => declared.unwrap_or(1),
    };
    if replicas <= 10_000 {
        Ok(replicas)
    } else {
        Err(replicas)
    }
}

/// The 1-based line (within a document) of the first line containing `needle`.
fn line_in(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// A Kubernetes memory quantity ("512Mi", "1Gi", "1G", "1e9", "1048576") in bytes.
pub fn parse_quantity_bytes(v: &Value) -> Option<u64> {
    let t = scalar(v);
    let t = t.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match unit {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "m" => 1e-3,
        // Compose-style sizes ("512m" as bytes would be nonsense): fall back to that reader.
        _ => return parse_memory(&Value::String(t.to_string())),
    };
    let b = n * mult;
    (b.is_finite() && b >= 1.0 && b < 2f64.powi(63)).then_some(b as u64)
}

/// CPU cores from "500m", "2", "1.5".
fn parse_cpu(v: &Value) -> Option<f64> {
    let t = scalar(v);
    let t = t.trim();
    let cores = match t.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok()? / 1000.0,
        None => t.parse::<f64>().ok()?,
    };
    (cores.is_finite() && cores > 0.0).then_some(cores)
}

fn resources_text(r: &Value) -> String {
    let part = |k: &str| {
        r.get(k).and_then(Value::as_object).map(|m| {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k} {}", scalar(v)))
                .collect();
            format!("{k}: {}", items.join(", "))
        })
    };
    [part("requests"), part("limits")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads `-f` inputs: a path, or `-` for standard input (as `helm template … | n8ncap audit
/// -f -`). Returns the text and the name to show for it.
pub fn read_input(path: &Path) -> Result<(String, PathBuf), BadInput> {
    if path == Path::new("-") {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_MANIFEST + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| BadInput(format!("cannot read standard input: {e}")))?;
        if bytes.len() as u64 > MAX_MANIFEST {
            return Err(BadInput(format!(
                "standard input is larger than {} MiB: is it a rendered manifest?",
                MAX_MANIFEST >> 20
            )));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| BadInput("standard input is not UTF-8 text".into()))?;
        return Ok((text, PathBuf::from("<stdin>")));
    }
    Ok((
        crate::util::read_text_file(path, MAX_MANIFEST, "compose file or manifest")?,
        path.to_path_buf(),
    ))
}

mod env;
use env::{expand_vars, resolve_env};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_vars() {
        let q = |t: &str| parse_quantity_bytes(&Value::String(t.into()));
        assert_eq!(q("512Mi"), Some(512 << 20));
        assert_eq!(q("1Gi"), Some(1 << 30));
        assert_eq!(q("1G"), Some(1_000_000_000));
        assert_eq!(q("2e9"), Some(2_000_000_000));
        assert_eq!(q("-1Gi"), None);
        assert_eq!(parse_cpu(&Value::String("500m".into())), Some(0.5));
        let env: BTreeMap<String, String> = [("C".to_string(), "7".to_string())].into();
        assert_eq!(expand_vars("--concurrency=$(C)", &env), "--concurrency=7");
        assert_eq!(expand_vars("$(X) $$(C)", &env), "$(X) $(C)");
    }

    #[test]
    fn documents_split_with_their_lines() {
        let text = "# c\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
        assert!(looks_like_kubernetes(text));
        assert!(!looks_like_kubernetes("services:\n  n8n: {image: x}\n"));
        let docs = split_docs("t", text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[0].line, docs[1].line), (1, 7));
        let err = split_docs("t.yaml", "a: 1\n---\nkind: [\n").err().unwrap();
        assert!(err.0.starts_with("t.yaml:3"), "{}", err.0);
    }

    #[test]
    fn env_resolves_as_the_kubelet_does() {
        let text = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {EXECUTIONS_MODE: queue, N8N_RUNNERS_MODE: internal, C: "12"}
---
apiVersion: v1
kind: Secret
metadata: {name: sec}
data: {N8N_ENCRYPTION_KEY: c2VjcmV0}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: w}
spec:
  template:
    spec:
      initContainers:
        - name: runner
          image: n8nio/runners:2.41.1
          restartPolicy: Always
          env: [{name: N8N_RUNNERS_TASK_BROKER_URI, value: "http://localhost:5679"}]
        - name: migrate
          image: busybox
      containers:
        - name: w
          image: n8nio/n8n:2.41.1
          args: ["worker", "--concurrency=$(C)"]
          envFrom: [{configMapRef: {name: cm}}, {secretRef: {name: sec}}]
          env:
            - {name: N8N_RUNNERS_MODE, value: external}
            - {name: N8N_RUNNERS_MAX_CONCURRENCY, value: "3"}
            - {name: N8N_RUNNERS_MAX_CONCURRENCY, value: "4"}
            - {name: C, valueFrom: {configMapKeyRef: {name: cm, key: C}}}
"#;
        let p = load(Path::new("t.yaml"), text).unwrap();
        let names: Vec<&str> = p.services.iter().map(|s| s.facts.name.as_str()).collect();
        // The native sidecar is a container of the pod; a plain init container is not.
        assert_eq!(names, ["w", "w/runner"]);
        let w = &p.services[0].facts;
        // env overrides envFrom; the last duplicate wins; $(C) expands from the env.
        assert_eq!(w.env["N8N_RUNNERS_MODE"], "external");
        assert_eq!(w.env["N8N_RUNNERS_MAX_CONCURRENCY"], "4");
        assert_eq!(w.env["EXECUTIONS_MODE"], "queue");
        assert_eq!(w.command, ["worker", "--concurrency=12"]);
        assert_eq!(
            w.env_sources["EXECUTIONS_MODE"],
            "ConfigMap cm key EXECUTIONS_MODE via envFrom"
        );
        // The secret is known by name and reference only.
        assert!(w.env_names.contains(&"N8N_ENCRYPTION_KEY".to_string()));
        assert!(!w.env.contains_key("N8N_ENCRYPTION_KEY"));
        assert!(w.secret_fingerprints.contains_key("N8N_ENCRYPTION_KEY"));
        let r = &p.services[1].facts;
        assert!(r.k8s.as_ref().unwrap().sidecar);
        // No replicas, no autoscaler: one pod, said so.
        assert_eq!(w.replicas, 1);
        assert!(!w.k8s.as_ref().unwrap().replicas_declared);
        let t = crate::topology::Topology::build(p.services.into_iter().map(|s| s.facts).collect());
        let runner = t.nodes.iter().find(|n| n.facts.name == "w/runner").unwrap();
        assert_eq!(runner.attached_to.as_deref(), Some("w"));
        let worker = t.nodes.iter().find(|n| n.facts.name == "w").unwrap();
        assert_eq!(worker.worker_concurrency.as_ref().unwrap().value, 12);
    }
}
