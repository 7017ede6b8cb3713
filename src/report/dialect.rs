//! A plan's settings in each config dialect: a docker-compose snippet, values for the two Helm
//! charts, a strategic merge patch. The settings themselves are the plan's proposed changes
//! (`Recommendation::proposal`, the limit kinds' lines made with the plan); here they are
//! placed in each dialect's document, beside the pairing every worker needs with its runner.

use crate::model::proposal::{Dialect, Key, Process, SettingLine};
use crate::record::recommendation::{MemoryPlan, PlanTarget, Recommendation};
use std::fmt::Write as _;

/// The settings of `r` in `dialect`, for the deployment `to` names (its services and
/// containers; n8n's own names where it names none).
pub fn settings(r: &Recommendation, dialect: Dialect, to: &PlanTarget) -> String {
    let lines = r.proposal.lines(dialect);
    if r.settings.is_regular() {
        return match dialect {
            Dialect::Compose => compose_main(lines),
            Dialect::HelmOfficial | Dialect::HelmCommunity | Dialect::K8s => main_env(lines),
        };
    }
    match dialect {
        Dialect::Compose => compose(r, lines, to),
        Dialect::HelmOfficial => helm_official(r, lines),
        Dialect::HelmCommunity => helm_community(r, lines),
        Dialect::K8s => k8s_patch(r, lines, to),
    }
}

/// A YAML scalar double-quoted (compose and Kubernetes take environment values as strings):
/// every character that could end the scalar, the line or the document — a quote, a backslash,
/// a line break, any control character, and the line and paragraph separators U+2028/U+2029
/// and U+0085 that YAML 1.1 parsers (Kubernetes' among them) break lines at — escaped, so any
/// string reads back as itself and nothing else.
pub(crate) fn quoted(v: &str) -> String {
    format!("\"{}\"", escaped(v, true))
}

/// `text` with line breaks and every character [`breaks_yaml`] names as escapes, and within
/// quotes the quote and the backslash too.
fn escaped(text: &str, in_quotes: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '"' if in_quotes => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if breaks_yaml(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Characters a YAML document may not hold raw, or that a YAML 1.1 parser reads as a line
/// break (all in the Basic Multilingual Plane: `\uXXXX` escapes each).
fn breaks_yaml(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}'
        )
}

/// Text for a YAML comment: on one line whatever it holds (line breaks and everything
/// [`quoted`] escapes written as escapes), so it cannot end the comment and start YAML.
pub(crate) fn comment(text: &str) -> String {
    escaped(text, false)
}

fn on(lines: &[SettingLine], p: Process) -> impl Iterator<Item = &SettingLine> {
    lines.iter().filter(move |l| l.on == p)
}

fn env_of(lines: &[SettingLine], p: Process) -> Vec<(&'static str, &str)> {
    on(lines, p)
        .filter_map(|l| match l.key {
            Key::Env(v) => Some((v, l.value.as_str())),
            Key::Arg(_) | Key::Value(_) | Key::Replicas => None,
        })
        .collect()
}

fn args_of(lines: &[SettingLine], p: Process) -> Vec<String> {
    on(lines, p)
        .filter_map(|l| match l.key {
            Key::Arg(a) => Some(format!("{a}{}", l.value)),
            Key::Env(_) | Key::Value(_) | Key::Replicas => None,
        })
        .collect()
}

/// The replicas a plan proposes, when it proposes a count.
fn replicas_of(lines: &[SettingLine], p: Process) -> Option<String> {
    on(lines, p)
        .find(|l| l.key == Key::Replicas)
        .map(|l| l.value.clone())
}

/// Chart values at dotted paths, as nested YAML in the order first seen; `extra` adds lines
/// under a top-level key after its values.
fn values(pairs: &[(&str, String)], extra: &[(&str, String)]) -> String {
    let mut tops: Vec<&str> = Vec::new();
    for (p, _) in pairs.iter().chain(extra) {
        let top = p.split('.').next().unwrap_or(p);
        if !tops.contains(&top) {
            tops.push(top);
        }
    }
    let mut s = String::new();
    for top in tops {
        let _ = writeln!(s, "{top}:");
        let under: Vec<(Vec<&str>, &String)> = pairs
            .iter()
            .filter_map(|(p, v)| {
                let (t, rest) = p.split_once('.')?;
                (t == top).then(|| (rest.split('.').collect(), v))
            })
            .collect();
        nested(&mut s, &under, 1);
        for (t, block) in extra {
            if *t == top {
                s.push_str(block);
            }
        }
    }
    s
}

/// Keys at `depth` (two spaces each), grouping the paths that share their first segment.
fn nested(s: &mut String, paths: &[(Vec<&str>, &String)], depth: usize) {
    let indent = "  ".repeat(depth);
    let mut seen: Vec<&str> = Vec::new();
    for (p, v) in paths {
        let head = p[0];
        if p.len() == 1 {
            let _ = writeln!(s, "{indent}{head}: {v}");
        } else if !seen.contains(&head) {
            seen.push(head);
            let _ = writeln!(s, "{indent}{head}:");
            let deeper: Vec<(Vec<&str>, &String)> = paths
                .iter()
                .filter(|(q, _)| q.len() > 1 && q[0] == head)
                .map(|(q, v)| (q[1..].to_vec(), *v))
                .collect();
            nested(s, &deeper, depth + 1);
        }
    }
}

fn value_pairs(lines: &[SettingLine]) -> Vec<(&'static str, String)> {
    lines
        .iter()
        .filter_map(|l| match l.key {
            Key::Value(p) => Some((p, l.value.clone())),
            Key::Env(_) | Key::Arg(_) | Key::Replicas => None,
        })
        .collect()
}

fn yaml_env(vars: &[(&str, &str)], indent: &str) -> String {
    vars.iter()
        .map(|(k, v)| format!("{indent}- name: {k}\n{indent}  value: \"{v}\"\n"))
        .collect()
}

/// Regular mode has no worker to configure: main's variables, as an env list.
fn main_env(lines: &[SettingLine]) -> String {
    format!(
        "# regular mode: no workers — set on the n8n (main) container's env\n{}",
        yaml_env(&env_of(lines, Process::Main), "")
    )
}

fn compose_main(lines: &[SettingLine]) -> String {
    let mut s =
        "# n8n main, regular mode: it runs every execution\nservices:\n  n8n:\n    environment:\n"
            .to_string();
    for (k, v) in env_of(lines, Process::Main) {
        let _ = writeln!(s, "      {k}: {}", quoted(v));
    }
    s
}

/// The settings as a compose override file (`docker compose -f docker-compose.yml -f this.yml`):
/// the worker's command and environment, and its runner's, under `services:`.
fn compose(r: &Recommendation, lines: &[SettingLine], to: &PlanTarget) -> String {
    let worker = to.worker.as_deref().unwrap_or("n8n-worker");
    let runner = to.runner.as_deref().unwrap_or("n8n-worker-runner");
    let workers = r.settings.worker_count();
    let mut s = format!(
        "# an override file: docker compose -f docker-compose.yml -f this.yml up -d\n\
         # {workers} worker(s), each with its own runner (N8N_RUNNERS_TASK_BROKER_URI names its worker){}\n\
         services:\n  {worker}:\n    command: worker {}\n    environment:\n      N8N_RUNNERS_MODE: \"external\"\n      N8N_RUNNERS_BROKER_LISTEN_ADDRESS: \"0.0.0.0\"\n",
        if workers > 1 {
            ": copy the worker and runner services once per worker, since compose replicas cannot pair a runner with each"
        } else {
            ""
        },
        args_of(lines, Process::Worker).join(" ")
    );
    for (k, v) in env_of(lines, Process::Worker) {
        let _ = writeln!(s, "      {k}: {}", quoted(v));
    }
    s.push_str(&one_runner_per_pod(r).replace("sidecar per pod", "per worker"));
    let _ = write!(
        s,
        "  {runner}:\n    environment:\n      N8N_RUNNERS_TASK_BROKER_URI: \"http://{worker}:5679\"\n"
    );
    for (k, v) in env_of(lines, Process::Runner) {
        let _ = writeln!(s, "      {k}: {}", quoted(v));
    }
    if let Some(m) = &r.runner_memory_limit_mb {
        let _ = writeln!(s, "    mem_limit: {}m", m.value);
    }
    s
}

/// The charts run one runner sidecar per pod: its limit carries the runners proposed per worker.
fn one_runner_per_pod(r: &Recommendation) -> String {
    if r.settings.runners_per_worker_count() > 1 {
        format!(
            "# one runner sidecar per pod: N8N_RUNNERS_MAX_CONCURRENCY={} carries the {} runners × {} proposed\n",
            r.settings.runner_capacity_or_default(), r.settings.runners_per_worker_count(), r.settings.runner_limit_or_default()
        )
    } else {
        String::new()
    }
}

/// The runner's memory limit as a `resources:` block at `indent` (nothing when not proposed).
fn resources_block(r: &Recommendation, indent: &str) -> String {
    r.runner_memory_limit_mb
        .as_ref()
        .map(|m| {
            format!(
                "{indent}resources:\n{indent}  limits:\n{indent}    memory: {}Mi\n",
                m.value
            )
        })
        .unwrap_or_default()
}

/// Values for n8n's own chart (n8n-io/n8n-hosting charts/n8n): queue mode, worker replicas and
/// concurrency, a runner sidecar per pod with its limit (in `taskRunners.extraEnv`) and memory.
fn helm_official(r: &Recommendation, lines: &[SettingLine]) -> String {
    let mut pairs = vec![("queueMode.enabled", "true".to_string())];
    pairs.extend(value_pairs(lines));
    pairs.push(("taskRunners.enabled", "true".to_string()));
    let runner_env = env_of(lines, Process::Runner);
    let worker_env = env_of(lines, Process::Worker);
    let mut extra = Vec::new();
    if !worker_env.is_empty() {
        extra.push((
            "queueMode",
            format!("  workerExtraEnv:\n{}", yaml_env(&worker_env, "    ")),
        ));
    }
    if !runner_env.is_empty() {
        extra.push((
            "taskRunners",
            format!("  extraEnv:\n{}", yaml_env(&runner_env, "    ")),
        ));
    }
    extra.push(("taskRunners", resources_block(r, "  ")));
    format!(
        "# values for n8n-io/n8n-hosting charts/n8n (helm upgrade … -f this.yaml)\n{}{}",
        one_runner_per_pod(r),
        values(&pairs, &extra)
    )
}

/// Values for the community chart (community-charts/helm-charts charts/n8n): its
/// `worker.concurrency` renders both --concurrency and N8N_CONCURRENCY_PRODUCTION_LIMIT, and
/// `taskRunners.maxConcurrency` (default 5) is the runner limit.
fn helm_community(r: &Recommendation, lines: &[SettingLine]) -> String {
    let mut pairs = vec![("worker.mode", "queue".to_string())];
    let vals = value_pairs(lines);
    pairs.extend(
        vals.iter()
            .filter(|(p, _)| p.starts_with("worker."))
            .cloned(),
    );
    pairs.push(("taskRunners.mode", "external".to_string()));
    pairs.extend(vals.into_iter().filter(|(p, _)| !p.starts_with("worker.")));
    let extra = [("taskRunners", resources_block(r, "  "))];
    format!(
        "# values for community-charts/helm-charts charts/n8n\n{}{}",
        one_runner_per_pod(r),
        values(&pairs, &extra)
    )
}

/// A strategic merge patch for the worker Deployment (`kubectl patch deployment NAME
/// --patch-file …`); containers are matched by name — the deployment's when it was read, else
/// n8n's chart's. Replicas an autoscaler owns are left to it.
fn k8s_patch(r: &Recommendation, lines: &[SettingLine], to: &PlanTarget) -> String {
    let deployment = to.worker.as_deref().unwrap_or("n8n-worker");
    let container = to.worker_container.as_deref().unwrap_or(deployment);
    let runner = to.runner.as_deref().unwrap_or("task-runner");
    let mut worker_env = vec![
        ("N8N_RUNNERS_MODE", "external"),
        ("N8N_CONCURRENCY_PRODUCTION_LIMIT", "-1"),
    ];
    worker_env.extend(env_of(lines, Process::Worker));
    let mut runner_env = vec![("N8N_RUNNERS_TASK_BROKER_URI", "http://localhost:5679")];
    runner_env.extend(env_of(lines, Process::Runner));
    let args: Vec<String> = std::iter::once("\"worker\"".to_string())
        .chain(
            args_of(lines, Process::Worker)
                .into_iter()
                .map(|a| format!("\"{a}\"")),
        )
        .collect();
    // Replicas an autoscaler owns are its: said above the patch, never pinned in it.
    let (owned, replicas) = match (&to.autoscaler, replicas_of(lines, Process::Worker)) {
        (Some(a), Some(n)) => (
            format!("# replicas: {n} proposed, left to {a}, which owns them (set its minimum and maximum instead)\n"),
            String::new(),
        ),
        (None, Some(n)) => (String::new(), format!("  replicas: {n}\n")),
        (_, None) => (String::new(), String::new()),
    };
    let names = if to.worker.is_some() {
        String::new()
    } else {
        format!("# (containers are matched by name: rename {container} / {runner} to yours, or give -f with your manifests)\n")
    };
    format!(
        "# kubectl patch deployment {deployment} --patch-file worker-patch.yaml\n{names}{}{owned}spec:\n{replicas}  template:\n    spec:\n      containers:\n        - name: {container}\n          args: [{}]\n          env:\n{}        - name: {runner}\n          env:\n{}{}",
        one_runner_per_pod(r),
        args.join(", "),
        yaml_env(&worker_env, "            "),
        yaml_env(&runner_env, "            "),
        resources_block(r, "          ")
    )
}

/// The memory plan in the chosen dialect: compose `mem_limit`, Helm `resources`, or a k8s patch.
pub fn memory_plan(p: &MemoryPlan, dialect: Dialect) -> String {
    let svc = p.runner.as_deref().unwrap_or("n8n-worker-runner");
    let mib = p.memory_limit_mib;
    match dialect {
        Dialect::Compose => format!(
            "# task runner {svc}: {} tasks × {:.0} MiB + {:.0} MiB base, +{:.0} % (an override file)
services:
  {svc}:
    mem_limit: {mib}m
    environment:
      N8N_RUNNERS_MAX_CONCURRENCY: \"{}\"
",
            p.tasks,
            p.per_task_mib.value,
            p.base_mib.value,
            (p.headroom - 1.0) * 100.0,
            p.tasks
        ),
        Dialect::HelmOfficial => format!(
            "# values for n8n-io/n8n-hosting charts/n8n: the runner sidecar's memory
taskRunners:
  resources:
    limits:
      memory: {mib}Mi
"
        ),
        Dialect::HelmCommunity => format!(
            "# values for community-charts/helm-charts charts/n8n: the runner sidecar's memory
taskRunners:
  maxConcurrency: {}
  resources:
    limits:
      memory: {mib}Mi
",
            p.tasks
        ),
        Dialect::K8s => format!(
            "# strategic merge patch: the runner container's memory limit
spec:
  template:
    spec:
      containers:
        - name: task-runner
          resources:
            limits:
              memory: {mib}Mi
"
        ),
    }
}
