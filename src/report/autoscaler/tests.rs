//! Every generated YAML document parses to exactly the objects intended, whatever string
//! reaches the output: each value reads back as itself, no comment ends early, no document
//! splits.

use super::*;
use crate::model::settings::{Provenance, Sourced};
use crate::record::autoscaler::{AutoscalerTarget, QueueAddress};
use proptest::prelude::*;
use serde_json::Value;

/// Strings a YAML writer gets wrong: line breaks, a document marker, a comment, quotes,
/// backslashes, control characters, YAML 1.1's line separators, a BOM; and anything else.
fn hostile() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\n".to_string()),
        Just("\n---\n".to_string()),
        Just("\n#".to_string()),
        Just(" # ".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\\".to_string()),
        Just(": ".to_string()),
        Just("- ".to_string()),
        Just("\r".to_string()),
        Just("\t".to_string()),
        Just("\u{0}".to_string()),
        Just("\u{1b}".to_string()),
        Just("\u{7f}".to_string()),
        Just("\u{85}".to_string()),
        Just("\u{2028}".to_string()),
        Just("\u{2029}".to_string()),
        Just("\u{feff}".to_string()),
        Just("{{}}[&*!|>%@`".to_string()),
        "[a-z0-9-]{0,8}",
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

fn src(words: String) -> Provenance {
    Provenance::Deployment(words)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(s: [String; 12], inline: bool) -> AutoscalerPlan {
    let [workload, ns, container, image, token, prefix, host, node, pw, user, existing, words] = s;
    AutoscalerPlan {
        target: AutoscalerTarget {
            workload,
            namespace: Some(ns),
            container,
            runner_sidecar: None,
            image,
            runner_limit: Some(5),
            auth_token_secret: Some(format!("{token}/{token}")),
            queue: QueueAddress {
                prefix: Sourced::new(prefix, src(words.clone())),
                database: Sourced::new(0, src(words.clone())),
                host: Sourced::new(host, src(words.clone())),
                port: Sourced::new(6379, src(words.clone())),
                tls: Sourced::new(true, src(words.clone())),
                cluster_nodes: if inline { vec![node] } else { Vec::new() },
                password_secret: (!inline).then(|| format!("{pw}/{pw}")),
                username_secret: Some(user),
                password_inline: inline,
                username_inline: false,
            },
            graceful_shutdown_s: Sourced::new(30.0, src(words.clone())),
            runner_shutdown_s: Sourced::new(15.0, src(words.clone())),
            termination_grace_s: Sourced::new(45.0, src(words.clone())),
            worker_pool: Sourced::new(2, src(words.clone())),
            other_connections: 2,
            existing: Some(existing),
        },
        per_replica: Sourced::new(10.4, src(words.clone())),
        min_replicas: Sourced::new(1, src(words.clone())),
        max_replicas: Sourced::new(47, src(words.clone())),
        polling_s: Sourced::new(15, src(words.clone())),
        scale_down_s: Sourced::new(300, src(words.clone())),
        graceful_shutdown_s: Sourced::new(30, src(words.clone())),
        termination_grace_s: Sourced::new(45, src(words.clone())),
        job_p99_s: Sourced::new(1.1, src(words.clone())),
        notes: vec![words],
    }
}

/// The documents of `text`, split where kubectl splits them (a line starting `---`).
fn documents(text: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    for line in text.split('\n') {
        if line.starts_with("---") {
            docs.push(std::mem::take(&mut cur));
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    docs.push(cur);
    docs.iter()
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}\n{d}")))
        .collect()
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) => &v[i],
        Err(_) => &v[k],
    })
}

fn same(v: &Value, path: &str, want: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(at(v, path).as_str(), Some(want), "{} in {}", path, v);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn every_string_reads_back_as_itself_in_its_own_document(
        s in proptest::array::uniform12(hostile()),
        inline in any::<bool>(),
    ) {
        let p = plan(s, inline);
        let t = &p.target;
        let keda = documents(&keda(&p));
        prop_assert_eq!(keda.len(), 3);
        let kinds: Vec<_> = keda.iter().map(|d| d["kind"].as_str().unwrap_or("")).collect();
        prop_assert_eq!(kinds, vec!["ScaledObject", "TriggerAuthentication", "Deployment"]);
        for d in &keda {
            same(d, "metadata.namespace", t.namespace.as_deref().unwrap())?;
        }
        let so = &keda[0];
        same(so, "metadata.name", &t.workload)?;
        same(so, "spec.scaleTargetRef.name", &t.workload)?;
        let q = &t.queue;
        for (i, list) in ["wait", "active"].into_iter().enumerate() {
            let m = at(so, &format!("spec.triggers.{i}.metadata"));
            same(m, "listName", &q.list(list))?;
            if inline {
                same(m, "addresses", &q.cluster_nodes[0])?;
            } else {
                same(m, "address", &format!("{}:{}", q.host.value, q.port.value))?;
            }
        }
        let refs = at(&keda[1], "spec.secretTargetRef");
        prop_assert_eq!(refs.as_array().map(Vec::len), Some(2));
        let user = q.username_secret.as_deref().unwrap();
        let (un, uk) = user.split_once('/').unwrap_or((user, "username"));
        same(refs, "1.name", un)?;
        same(refs, "1.key", uk)?;
        if !inline {
            let pw = q.password_secret.as_deref().unwrap();
            let (pn, pk) = pw.split_once('/').unwrap();
            same(refs, "0.name", pn)?;
            same(refs, "0.key", pk)?;
        }
        let patch = &keda[2];
        same(patch, "metadata.name", &t.workload)?;
        same(patch, "spec.template.spec.containers.0.name", &t.container)?;
        let token = t.auth_token_secret.as_deref().unwrap();
        let (tn, tk) = token.split_once('/').unwrap();
        let runner = at(patch, "spec.template.spec.containers.1");
        same(runner, "env.2.valueFrom.secretKeyRef.name", tn)?;
        same(runner, "env.2.valueFrom.secretKeyRef.key", tk)?;
        let hpa = documents(&hpa(&p));
        prop_assert_eq!(hpa.len(), 2);
        same(&hpa[0], "kind", "HorizontalPodAutoscaler")?;
        same(&hpa[0], "metadata.name", &t.workload)?;
        same(&hpa[0], "spec.scaleTargetRef.name", &t.workload)?;
        same(&hpa[1], "spec.template.spec.containers.0.name", &t.container)?;
    }
}
