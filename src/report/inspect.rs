//! `n8ncap inspect`'s tables: the deployment as the Docker API shows it (with each container's
//! memory and CPU) or as compose files and manifests describe it, each setting's source cited
//! by number under the table.

use super::table::{fitted, laid_out, wrapped};
use comfy_table::Table;

/// Sources cited by number in a table's cells and listed under it: the cells stay short.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn cite(&mut self, text: &str) -> String {
        let i = match self.0.iter().position(|n| n == text) {
            Some(i) => i,
            None => {
                self.0.push(text.to_string());
                self.0.len() - 1
            }
        };
        format!("[{}]", i + 1)
    }

    fn render(&self, table: &Table) -> String {
        self.0
            .iter()
            .enumerate()
            .map(|(i, n)| wrapped(table, &format!("[{}] {n}", i + 1), 4))
            .collect()
    }
}

fn regular(n: &crate::topology::Node) -> bool {
    n.executions_mode
        .as_ref()
        .is_some_and(|m| m.value == crate::model::settings::ExecutionsMode::Regular)
}

/// Each node's notes as warning lines under a topology table.
fn node_warnings(table: &Table, t: &crate::topology::Topology) -> String {
    t.nodes
        .iter()
        .flat_map(|n| n.notes.iter().map(move |note| (n, note)))
        .map(|(n, note)| wrapped(table, &format!("warning: {}: {note}", n.facts.name), 4))
        .collect()
}

/// Under a topology table: main's executions mode and where binary data goes, when known.
fn mode_lines(table: &Table, t: &crate::topology::Topology) -> String {
    use crate::model::settings::ExecutionsMode;
    use crate::topology::Role;
    let mut out = String::new();
    for n in t.nodes.iter().filter(|n| n.role == Role::Main) {
        if let Some(m) = n.executions_mode.as_ref() {
            let line = match m.value {
                ExecutionsMode::Regular => format!(
                    "note: {}: regular mode ({}): main runs every execution itself; production limit {}",
                    n.facts.name,
                    m.source,
                    n.production_limit
                        .as_ref()
                        .map(|l| format!("{} ({})", l.value, l.source))
                        .unwrap_or_else(|| "none (N8N_CONCURRENCY_PRODUCTION_LIMIT -1)".into())
                ),
                ExecutionsMode::Queue => format!("note: {}: queue mode ({})", n.facts.name, m.source),
            };
            out.push_str(&wrapped(table, &line, 4));
        }
        if let Some(b) = n.binary_data_mode.as_ref() {
            use crate::model::settings::BinaryDataMode;
            let why = match b.value {
                BinaryDataMode::Database => ": uploads are written to the database and read back by the process that runs the execution",
                BinaryDataMode::Filesystem => ": uploads are files under N8N_BINARY_DATA_STORAGE_PATH (not shared between processes)",
                BinaryDataMode::S3 => ": uploads go to S3",
                BinaryDataMode::Default => ": uploads are held in the process's memory",
            };
            out.push_str(&wrapped(
                table,
                &format!(
                    "note: {}: binary data mode {} ({}){why}",
                    n.facts.name, b.value, b.source
                ),
                4,
            ));
        }
    }
    out
}

/// `n8ncap inspect`: one row per container with its role, capacity settings and their sources.
pub fn topology_table(
    t: &crate::topology::Topology,
    stats: &[Option<crate::record::stage::ContainerStats>],
) -> String {
    use crate::topology::Role;
    let mut table = fitted();
    table.set_header(vec![
        "container",
        "role",
        "image",
        "worker concurrency",
        "runner limit / capacity",
        "runners mode",
        "memory limit",
        "memory",
        "CPU %",
    ]);
    let mib = |b: f64| format!("{:.0} MiB", b / 1024.0 / 1024.0);
    let mut notes = Notes::default();
    for (i, n) in t.nodes.iter().enumerate() {
        let conc = n
            .worker_concurrency
            .as_ref()
            .map(|c| format!("{} {}", c.value, notes.cite(&c.source.words())))
            .unwrap_or_default();
        let runner = runner_cell(n, &mut notes);
        let mode = n
            .runners_mode
            .as_ref()
            .map(|m| m.value.word().to_string())
            .unwrap_or_default();
        let limit = n
            .facts
            .memory_limit_bytes
            .map(|b| mib(b as f64))
            .unwrap_or_else(|| "none".into());
        let (mem, cpu) = match stats.get(i).and_then(|s| s.as_ref()) {
            Some(s) => (
                mib(s.memory_bytes as f64),
                s.cpu_percent.map(|c| format!("{c:.1}")).unwrap_or_default(),
            ),
            None => ("—".into(), "—".into()),
        };
        table.add_row(vec![
            n.facts.name.replace('/', "/\n"),
            n.role.word().to_string(),
            n.facts.image.clone(),
            conc,
            runner,
            mode,
            limit,
            mem,
            cpu,
        ]);
    }
    let mut out = laid_out(&mut table);
    out.push_str(&notes.render(&table));
    out.push_str(&mode_lines(&table, t));
    out.push_str(&node_warnings(&table, t));
    for n in &t.nodes {
        if n.role == Role::Runner && n.facts.memory_limit_bytes.is_none() {
            out.push_str(&format!(
                "\nwarning: {}: no memory limit on this runner — Code-node memory (Buffers) lands here",
                n.facts.name
            ));
        }
    }
    out
}

/// A node's runner cell: a runner's limit and the worker it serves, a worker's runner
/// capacity, main's (every execution in regular mode, manual ones in queue mode).
fn runner_cell(n: &crate::topology::Node, notes: &mut Notes) -> String {
    use crate::topology::Role;
    match n.role {
        Role::Runner => {
            let l = n
                .runner_limit
                .as_ref()
                .map(|l| format!("{} {}", l.value, notes.cite(&l.source.words())))
                .unwrap_or_default();
            match &n.attached_to {
                Some(w) => format!("{l} → {w}"),
                None => format!("{l} → attached to nothing"),
            }
        }
        Role::Worker => n
            .runner_capacity
            .map(|c| format!("capacity {c}"))
            .unwrap_or_default(),
        Role::Main if regular(n) => n
            .runner_capacity
            .map(|c| format!("capacity {c} (every execution: regular mode)"))
            .unwrap_or_default(),
        // Main runs only manual executions' Code (and none when they go to workers).
        Role::Main => match n.runner_capacity {
            Some(0) => "no runner (manual executions only)".into(),
            Some(c) => format!("capacity {c} (manual executions)"),
            None => String::new(),
        },
        _ => String::new(),
    }
}

/// `n8ncap inspect -f`: the topology a compose file or manifest describes — roles, replicas
/// (fixed, or min–max from an autoscaler), worker concurrency, runner pairing, runners mode,
/// resources — with each setting's source as a numbered note under the table.
pub fn manifest_table(t: &crate::topology::Topology) -> String {
    let mut table = fitted();
    table.set_header(vec![
        "container",
        "role",
        "replicas",
        "worker concurrency",
        "runners",
        "mode",
        "resources",
    ]);
    let mut notes = Notes::default();
    for n in &t.nodes {
        let k = n.facts.k8s.as_ref();
        let replicas = match k.and_then(|k| k.autoscaler.as_ref()) {
            Some(a) => format!("{}–{} {}", a.min, a.max, notes.cite(&a.by)),
            None if k.is_some_and(|k| !k.replicas_declared) => {
                format!(
                    "{} {}",
                    n.facts.replicas,
                    notes.cite("replicas not set: Kubernetes runs 1")
                )
            }
            None => n.facts.replicas.to_string(),
        };
        let conc = n
            .worker_concurrency
            .as_ref()
            .map(|c| format!("{} {}", c.value, notes.cite(&c.source.words())))
            .unwrap_or_default();
        let runners = manifest_runners(n, &mut notes);
        let mode = n
            .runners_mode
            .as_ref()
            .map(|m| format!("{} {}", m.value.word(), notes.cite(&m.source.words())))
            .unwrap_or_default();
        let resources = k
            .and_then(|k| k.resources.clone())
            .or_else(|| {
                n.facts
                    .memory_limit_bytes
                    .map(|b| format!("memory limit {} MiB", b >> 20))
            })
            .unwrap_or_else(|| "none".into());
        table.add_row(vec![
            // A pod's container ("pod/container") breaks after its pod.
            n.facts.name.replace('/', "/\n"),
            n.role.word().to_string(),
            replicas,
            conc,
            runners,
            mode,
            resources,
        ]);
    }
    let mut out = laid_out(&mut table);
    out.push_str(&notes.render(&table));
    out.push_str(&mode_lines(&table, t));
    out.push_str(&node_warnings(&table, t));
    out
}

/// A manifest node's runners cell: a runner's limit and the worker it serves; a worker's runner
/// capacity per pod, counted as the audit counts (runners attached against replicas).
fn manifest_runners(n: &crate::topology::Node, notes: &mut Notes) -> String {
    use crate::topology::Role;
    let external = n
        .runners_mode
        .as_ref()
        .is_some_and(|m| m.value == crate::topology::RunnersMode::External);
    match n.role {
        Role::Runner => {
            let l = n
                .runner_limit
                .as_ref()
                .map(|l| format!("limit {} {}", l.value, notes.cite(&l.source.words())))
                .unwrap_or_default();
            format!(
                "{l} → {}",
                n.attached_to.as_deref().unwrap_or("attached to nothing")
            )
        }
        // Counted as the audit counts: runners attached against replicas; a paired pod
        // has its runners' share.
        Role::Worker => match n.runner_capacity {
            Some(c) if external && n.runners_attached < n.facts.replicas => format!(
                "{} runner(s) for {} replicas: {} without; capacity {} where paired",
                n.runners_attached,
                n.facts.replicas,
                n.facts.replicas - n.runners_attached,
                c / n.runners_attached.max(1)
            ),
            Some(c) => format!("capacity {} per pod", c / n.facts.replicas.max(1)),
            None => String::new(),
        },
        _ => String::new(),
    }
}
