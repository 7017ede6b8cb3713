//! The shape of the code, checked from its text: the rooms' imports against the table in
//! docs/ARCHITECTURE.md (no arrow up, hence no circle), no circle between the files of one
//! room, and no function over 100 lines in src/.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("src"), &mut out);
    out.retain(|p| !is_test_module(p));
    out.sort();
    out
}

/// A `tests.rs` declared `#[cfg(test)] mod tests;` by its parent (`mod.rs`, or `x.rs` for
/// `x/tests.rs`): test code, as a trailing test module is.
pub(crate) fn is_test_module(p: &Path) -> bool {
    if p.file_name().is_none_or(|n| n != "tests.rs") {
        return false;
    }
    // The declaring file: the folder's mod.rs, or the file the folder is named after.
    let dir = p.parent().unwrap();
    let Ok(parent) = std::fs::read_to_string(dir.join("mod.rs"))
        .or_else(|_| std::fs::read_to_string(dir.with_extension("rs")))
    else {
        return false;
    };
    let lines: Vec<&str> = parent.lines().collect();
    lines.windows(2).any(|w| {
        w[0].trim() == "#[cfg(test)]"
            && w[1].trim_start().trim_start_matches("pub(crate) ") == "mod tests;"
    })
}

/// The file's path under src/, with `/`.
pub(crate) fn rel(p: &Path) -> String {
    p.strip_prefix(root().join("src"))
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// The room a file belongs to: its top-level module (`main` for main.rs).
pub(crate) fn room_of(rel: &str) -> String {
    rel.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

/// The code of a file without its inline test module (a trailing `#[cfg(test)]` at column 0
/// before `mod tests {`) and without line comments.
pub(crate) fn code(text: &str) -> String {
    // An inline test module ends the code; `#[cfg(test)] mod tests;` (a file of its own) does not.
    let inline = text.match_indices("\n#[cfg(test)]\n").find(|(i, m)| {
        text[i + m.len()..]
            .lines()
            .next()
            .is_some_and(|l| l.trim_end().ends_with('{'))
    });
    let text = match inline {
        Some((i, _)) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            // `//` inside a string ("http://") is not a comment: keep lines with a quote
            // before it whole.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a` (or `n8ncap::a` in main.rs), including `crate::{a, b::c}`.
fn imported_rooms(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The table of docs/ARCHITECTURE.md: rooms top to bottom, each with what it may import.
fn table() -> Vec<(String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let ticked = |cell: &str| -> BTreeSet<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    doc.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() == 5 && cells[1].starts_with('`')).then(|| {
                let room = ticked(cells[1]).into_iter().next().unwrap();
                (room, ticked(cells[3]))
            })
        })
        .collect()
}

#[test]
fn every_room_imports_only_what_the_architecture_table_allows_and_only_downwards() {
    let table = table();
    assert!(table.len() >= 15, "the table has {} rows", table.len());
    let row: BTreeMap<&str, usize> = table
        .iter()
        .enumerate()
        .map(|(i, (r, _))| (r.as_str(), i))
        .collect();
    // The table itself points down: a row may import only rows under it.
    for (i, (room, allowed)) in table.iter().enumerate() {
        for a in allowed {
            let at = *row
                .get(a.as_str())
                .unwrap_or_else(|| panic!("{room} may import {a}, which has no row"));
            assert!(at > i, "{room} may import {a}, which is above it");
        }
    }
    let mut seen_rooms = BTreeSet::new();
    let mut broken = Vec::new();
    for file in sources() {
        let rel = rel(&file);
        if rel == "lib.rs" {
            continue;
        }
        let room = room_of(&rel);
        seen_rooms.insert(room.clone());
        let (_, allowed) = table
            .iter()
            .find(|(r, _)| *r == room)
            .unwrap_or_else(|| panic!("src/{rel}: room {room} has no row in ARCHITECTURE.md"));
        let text = std::fs::read_to_string(&file).unwrap();
        let prefix = if rel == "main.rs" {
            "n8ncap::"
        } else {
            "crate::"
        };
        for used in imported_rooms(&code(&text), prefix) {
            if used != room && !allowed.contains(&used) {
                broken.push(format!("src/{rel} ({room}) imports {used}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports the table does not allow:\n{}",
        broken.join("\n")
    );
    // Every row is a room that exists.
    for (r, _) in &table {
        assert!(
            seen_rooms.contains(r),
            "ARCHITECTURE.md names {r}, which src/ has not"
        );
    }
}

#[test]
fn the_files_of_a_room_import_each_other_in_no_circle() {
    // file → the sibling files it names (`super::x` or `crate::room::x`), mod.rs left out
    // (a folder's mod.rs holds what its files share).
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let files: Vec<String> = sources().iter().map(|p| rel(p)).collect();
    for rel in &files {
        let Some((dir, name)) = rel.rsplit_once('/') else {
            continue;
        };
        if name == "mod.rs" {
            continue;
        }
        let text = code(&std::fs::read_to_string(root().join("src").join(rel)).unwrap());
        let module_path = format!("crate::{}::", dir.replace('/', "::"));
        let mut names = imported_rooms(&text, "super::");
        names.extend(imported_rooms(&text, &module_path));
        for n in names {
            let sibling = format!("{dir}/{n}.rs");
            let sibling_dir = format!("{dir}/{n}/mod.rs");
            for s in [sibling, sibling_dir] {
                if files.contains(&s) && s != *rel {
                    edges.entry(rel.clone()).or_default().insert(s);
                }
            }
        }
    }
    // Depth-first search for a back edge.
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let from = path.iter().position(|p| p == n).unwrap();
                let mut c = path[from..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, &edges, &mut state, &mut Vec::new()) {
            panic!("a circle between the files of one room: {}", c.join(" → "));
        }
    }
    assert!(edges.len() > 20, "{} files name siblings", edges.len());
}

/// Functions of src/ by length: (lines, file, name), from the `fn` line to its closing brace
/// at the same indent (rustfmt's layout).
fn function_lengths() -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for file in sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let indent = &l[..l.len() - t.len()];
            let t = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
            let t = ["async ", "const ", "unsafe "]
                .iter()
                .fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
            let Some(sig) = t.strip_prefix("fn ") else {
                continue;
            };
            let name: String = sig
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // The signature ends at the first line ending in `{` (a body), `;` (a
            // declaration) or `}` (a one-line body).
            let Some(open) = (i..lines.len()).find(|&j| {
                let e = lines[j].trim_end();
                e.ends_with('{') || e.ends_with(';') || e.ends_with('}')
            }) else {
                continue;
            };
            if !lines[open].trim_end().ends_with('{') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) {
                out.push((end - i + 1, rel(&file), name));
            }
        }
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[test]
fn no_function_in_src_is_over_100_lines() {
    let all = function_lengths();
    assert!(all.len() > 500, "{} functions found", all.len());
    let long: Vec<String> = all
        .iter()
        .filter(|(n, _, _)| *n > 100)
        .map(|(n, f, name)| format!("src/{f}: {name} ({n} lines)"))
        .collect();
    assert!(long.is_empty(), "over 100 lines:\n{}", long.join("\n"));
}

/// The command files: each subcommand's (a directory holds one command and its parts);
/// `input.rs` is no command (what several read from their arguments), nor `mod.rs`.
fn command_names() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("src/commands"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "mod" && stem != "input").then_some(stem)
        })
        .collect();
    out.sort();
    out
}

/// A command calls lower rooms (and `commands/input.rs`), never another command: a path from
/// one command's files into a sibling's (`super::audit::…`, `crate::commands::recommend::…`)
/// is refused.
#[test]
fn no_command_calls_another_command() {
    let commands = command_names();
    assert!(commands.len() >= 15, "{commands:?}");
    // The check finds what it looks for, from a file and from a command's directory.
    let planted = "let x = super::audit::measured_run(p);";
    assert_eq!(sibling_paths("recommend.rs", planted, &commands).len(), 1);
    let deeper = "use super::super::recommend::plan_for;";
    assert_eq!(sibling_paths("sweep/scale.rs", deeper, &commands).len(), 1);
    assert!(sibling_paths("sweep/scale.rs", "use super::sweep_once;", &commands).is_empty());
    let mut found = Vec::new();
    for p in sources() {
        let r = rel(&p);
        let Some(rest) = r.strip_prefix("commands/") else {
            continue;
        };
        let text = code(&std::fs::read_to_string(&p).unwrap());
        for path in sibling_paths(rest, &text, &commands) {
            found.push(format!("src/{r} → {path}"));
        }
    }
    assert!(
        found.is_empty(),
        "commands calling commands:\n{}",
        found.join("\n")
    );
}

/// The paths into a sibling command that `text`, the file `rest` under `src/commands/`, holds.
fn sibling_paths(rest: &str, text: &str, commands: &[String]) -> Vec<String> {
    let own = rest.split(['/', '.']).next().unwrap_or_default();
    // A file in a command's directory reaches its own command through one more `super`.
    let depth = rest.matches('/').count();
    commands
        .iter()
        .filter(|c| c.as_str() != own)
        .flat_map(|c| {
            [
                format!("crate::commands::{c}::"),
                format!("{}{c}::", "super::".repeat(depth + 1)),
            ]
        })
        .filter(|path| text.contains(path.as_str()))
        .collect()
}

/// One door: a saved run is read through `record` (its evidence source, `SavedRun`), never by
/// calling `load_summary` from another room (its unit tests aside).
#[test]
fn a_saved_run_is_read_only_inside_record() {
    let dir = std::fs::read_to_string(root().join("src/record/dir.rs")).unwrap();
    assert!(code(&dir).contains("load_summary("), "the reader moved");
    let mut found = Vec::new();
    for p in sources() {
        let r = rel(&p);
        if r.starts_with("record/") || r.ends_with("tests.rs") || r.contains("/tests/") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&p).unwrap());
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        if text.contains("load_summary(") {
            found.push(format!("src/{r}"));
        }
    }
    assert!(found.is_empty(), "load_summary called from {found:?}");
}

/// Commands parse and dispatch: no function in `src/commands/` is over 60 lines.
#[test]
fn no_function_in_the_commands_is_over_60_lines() {
    let long: Vec<String> = function_lengths()
        .iter()
        .filter(|(n, f, _)| *n > 60 && f.starts_with("commands/"))
        .map(|(n, f, name)| format!("src/{f}: {name} ({n} lines)"))
        .collect();
    assert!(long.is_empty(), "over 60 lines:\n{}", long.join("\n"));
}

#[test]
fn no_file_in_src_is_over_800_lines() {
    let files = sources();
    assert!(files.len() > 100, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > 800).then(|| format!("src/{}: {n} lines", rel(p)))
        })
        .collect();
    assert!(long.is_empty(), "over 800 lines:\n{}", long.join("\n"));
}

/// Every file under the repository (relative, with `/`), build output and VCS left out.
fn repository_files() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name == "target" || name == ".git" {
                continue;
            }
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(
                    p.strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &root(), &mut out);
    out
}

/// The file paths a doc comment names in backticks (`x/y.rs`, `README.md`) that no file of the
/// repository has, and every path that climbs out of it (`../`).
fn doc_paths_outside(text: &str, files: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if !(t.starts_with("///") || t.starts_with("//!")) {
            continue;
        }
        if t.contains("../") {
            out.push(t.to_string());
            continue;
        }
        for (i, part) in t.split('`').enumerate() {
            let is_path = i % 2 == 1
                && !part.contains(' ')
                && part.contains('.')
                && [
                    ".rs", ".md", ".yml", ".yaml", ".json", ".sh", ".toml", ".txt", ".js",
                ]
                .iter()
                .any(|x| part.ends_with(x))
                && part
                    .chars()
                    .all(|c| c.is_alphanumeric() || "._-/<>".contains(c));
            // What a run writes into its results directory is named, not a file of the repository.
            if !is_path || part.contains('<') || ["summary.json"].contains(&part) {
                continue;
            }
            let known = files
                .iter()
                .any(|f| f == part || f.ends_with(&format!("/{part}")));
            if !known {
                out.push(format!("{part} in: {t}"));
            }
        }
    }
    out
}

#[test]
fn no_doc_comment_points_to_a_file_outside_the_repository() {
    let files = repository_files();
    assert!(
        files.iter().any(|f| f == "src/main.rs"),
        "{} files",
        files.len()
    );
    // The check finds what it looks for.
    assert_eq!(
        doc_paths_outside("/// see `../shared/DESIGN.md`\n//! `sim/bull.rs`", &files).len(),
        1
    );
    assert_eq!(doc_paths_outside("/// `nowhere/gone.rs`", &files).len(), 1);
    let mut found = Vec::new();
    for file in sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        for bad in doc_paths_outside(&text, &files) {
            found.push(format!("src/{}: {bad}", rel(&file)));
        }
    }
    let arch = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let as_doc: String = arch.lines().map(|l| format!("/// {l}\n")).collect();
    for bad in doc_paths_outside(&as_doc, &files) {
        found.push(format!("docs/ARCHITECTURE.md: {bad}"));
    }
    assert!(
        found.is_empty(),
        "paths no reader of the repository can open:\n{}",
        found.join("\n")
    );
}

/// `commands/` parses and dispatches: its `mod.rs` holds the dispatch alone, and a summary's
/// judgement (`recommend::analyze`) and the Docker side of a run (`observe::watch::discover`)
/// live in the rooms that own them.
#[test]
fn the_commands_room_dispatches_and_does_no_other_work() {
    let text = code(&std::fs::read_to_string(root().join("src/commands/mod.rs")).unwrap());
    let fns: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains("fn "))
        .collect();
    assert_eq!(
        fns,
        ["pub async fn run(cmd: Command) -> anyhow::Result<i32> {"]
    );
    assert!(
        !text.contains("struct ") && !text.contains("impl "),
        "{text}"
    );
}

/// What changes a deployment in `text` (code only): a Docker call that creates, starts, stops,
/// kills, restarts or removes a container, or the operator's command run through `run_shell`.
fn changes_a_deployment(text: &str) -> Vec<&'static str> {
    [
        "create_container(",
        "start_container(",
        "stop_container(",
        "kill_container(",
        "restart_container(",
        "remove_container(",
        "run_shell(",
    ]
    .into_iter()
    .filter(|call| text.contains(call))
    .collect()
}

/// One room changes a deployment: every Docker call that makes, starts, stops or removes a
/// container and every operator's command n8ncap runs is in `src/actuate/` (the runner of
/// commands itself, `util/shell.rs`, and tests aside), and each actuator there answers the one
/// trait, `Actuator`.
#[test]
fn only_the_actuators_change_a_deployment_and_each_answers_the_trait() {
    // The detector finds a planted change.
    assert_eq!(
        changes_a_deployment("docker.stop_container(&name, None).await"),
        ["stop_container("]
    );
    let mut outside = Vec::new();
    let mut inside = 0;
    for p in sources() {
        let r = rel(&p);
        let text = code(&std::fs::read_to_string(&p).unwrap());
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let found = changes_a_deployment(text);
        let exempt =
            r.starts_with("util/shell") || r.contains("/tests/") || r.ends_with("tests.rs");
        if r.starts_with("actuate/") {
            inside += found.len();
        } else if !exempt && !found.is_empty() {
            outside.push(format!("src/{r}: {found:?}"));
        }
    }
    assert!(inside >= 5, "the actuators' calls moved: {inside}");
    assert!(
        outside.is_empty(),
        "changes a deployment outside src/actuate/:\n{}",
        outside.join("\n")
    );
    for (file, actuator) in [
        ("stop.rs", "Stopper"),
        ("scale.rs", "Scaler"),
        ("outage.rs", "Outager"),
    ] {
        let text = std::fs::read_to_string(root().join("src/actuate").join(file)).unwrap();
        assert!(
            text.contains(&format!("pub enum {actuator} {{"))
                && text.contains(&format!("impl Actuator for {actuator} {{")),
            "src/actuate/{file}: {actuator} answers Actuator"
        );
    }
}

/// Each integration test: (file, its attributes' lines, name, body up to the next test).
fn integration_tests() -> Vec<(String, String, String, String)> {
    let is_test = |l: &str| {
        let l = l.trim_start();
        l.starts_with("#[test]") || l.starts_with("#[tokio::test")
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("tests")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let file = p.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, _) in lines.iter().enumerate().filter(|(_, l)| is_test(l)) {
            let at_fn = (i..lines.len())
                .find(|&k| lines[k].contains("fn "))
                .expect("a test attribute before a fn");
            let attrs = lines[i..at_fn]
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join("\n");
            let name = lines[at_fn]
                .split("fn ")
                .nth(1)
                .and_then(|r| r.split('(').next())
                .unwrap_or_default()
                .to_string();
            let end = (at_fn..lines.len())
                .find(|&k| is_test(lines[k]))
                .unwrap_or(lines.len());
            out.push((file.clone(), attrs, name, lines[at_fn..end].join("\n")));
        }
    }
    out
}

/// The tiers are told apart by their ignore reasons and names, as the README's commands select
/// them: every ignored integration test is of the stack tier (`-- --ignored --skip in_real_time`)
/// or the real-time tier (`-- --ignored in_real_time`); a study that takes the scale studies'
/// turn is in the stack tier, and cargo-nextest's `scale-study` group (`.config/nextest.toml`,
/// which `.ci/run` uses) holds exactly those tests, so the two ways of running them one at a
/// time agree.
#[test]
fn each_ignored_test_names_its_tier_and_the_scale_studies_take_one_turn_in_both_runners() {
    let tests = integration_tests();
    assert!(tests.len() >= 300, "{} tests found", tests.len());
    let mut studies = std::collections::BTreeSet::new();
    let mut stack = 0;
    for (file, attrs, name, body) in &tests {
        let ignore = attrs
            .lines()
            .find(|l| l.starts_with("#[ignore"))
            .map(|l| l.trim_start_matches("#[ignore = \"").to_string());
        let real_time = name.contains("in_real_time");
        match &ignore {
            Some(r) if r.starts_with("stack tier (") => {
                stack += 1;
                assert!(
                    !real_time,
                    "{file}: {name} is of the stack tier but named as real-time"
                );
            }
            Some(r) if r.starts_with("real-time tier (") => {
                assert!(
                    real_time,
                    "{file}: {name}: a real-time test's name says in_real_time"
                );
            }
            Some(r) => panic!("{file}: {name}: an ignore that names no tier: {r}"),
            None => assert!(
                !real_time,
                "{file}: {name} is named real-time but not ignored"
            ),
        }
        // The call, written so that this test's own text does not contain it.
        let turn = ["one_scale_study_at_a_time", "().await", "_blocking()"];
        if body.contains(&(turn[0].to_owned() + turn[1]))
            || body.contains(&(turn[0].to_owned() + turn[2]))
        {
            assert!(
                ignore
                    .as_deref()
                    .is_some_and(|r| r.starts_with("stack tier (")),
                "{file}: {name} is a scale study outside the stack tier"
            );
            studies.insert(format!("{}::{name}", file.trim_end_matches(".rs")));
        }
    }
    assert!(stack >= 60, "{stack} tests in the stack tier");
    let nextest = std::fs::read_to_string(root().join(".config/nextest.toml")).unwrap();
    let grouped: std::collections::BTreeSet<String> = nextest
        .split("test(=")
        .skip(1)
        .filter_map(|r| r.split(')').next().map(str::to_string))
        .collect();
    assert_eq!(
        grouped, studies,
        "nextest's scale-study group against the tests that take the turn"
    );
}

/// The tests' shared helpers live once, in `tests/common` (the project's root among them), and
/// the fixtures in one folder (`fixtures/`): no test file defines its own `root()`, and there is
/// no second fixtures folder under `tests/`.
#[test]
fn test_helpers_are_shared_and_the_fixtures_are_one_folder() {
    let tests = crate::common::root().join("tests");
    let mut copies = Vec::new();
    for e in std::fs::read_dir(&tests).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            if text.lines().any(|l| l.trim_start().starts_with("fn root(")) {
                copies.push(p.display().to_string());
            }
        }
    }
    assert!(copies.is_empty(), "root() defined again in {copies:?}");
    assert!(
        !tests.join("fixtures").exists(),
        "tests/fixtures: keep fixtures in fixtures/"
    );
}
