//! The shape of the code, checked from its text: the rooms' imports against the table in
//! docs/ARCHITECTURE.md (no arrow up, hence no circle), no circle between the files of one
//! room, and no function over 100 lines in src/.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sources() -> Vec<PathBuf> {
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
fn is_test_module(p: &Path) -> bool {
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
fn rel(p: &Path) -> String {
    p.strip_prefix(root().join("src"))
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// The room a file belongs to: its top-level module (`main` for main.rs).
fn room_of(rel: &str) -> String {
    rel.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

/// The code of a file without its inline test module (a trailing `#[cfg(test)]` at column 0
/// before `mod tests {`) and without line comments.
fn code(text: &str) -> String {
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

/// `match` blocks of a text whose arms name `Limit::` and which hold a catch-all arm (`_ =>` at
/// the arms' indent): (line, first line of the match). A new limit kind would go silently to
/// such an arm; without one, the compiler lists every place the new kind must answer.
fn catch_alls_over_limit(code: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let is_match = t.starts_with("match ")
            || t.contains(" = match ")
            || t.contains("(match ")
            || t.contains("=> match ")
            || t.starts_with("return match ");
        if !is_match || !l.trim_end().ends_with('{') {
            continue;
        }
        let indent = l.len() - t.len();
        // The block ends at the first `}` line at the match line's indent.
        let Some(end) = (i + 1..lines.len()).find(|&j| {
            let lj = lines[j];
            let tj = lj.trim_start();
            lj.len() - tj.len() == indent && tj.starts_with('}')
        }) else {
            continue;
        };
        let arm = indent + 4;
        let arms: Vec<&str> = lines[i + 1..end]
            .iter()
            .filter(|lj| lj.len() - lj.trim_start().len() == arm)
            .copied()
            .collect();
        let names_limit = arms.iter().any(|a| a.contains("Limit::"))
            || lines[i].contains("Limit::")
            || lines[i + 1..end]
                .iter()
                .take_while(|lj| !lj.contains("=>"))
                .any(|lj| lj.contains("Limit::"));
        let catch_all = arms.iter().any(|a| {
            let a = a.trim_start();
            a.starts_with("_ =>") || a.starts_with("_ if ")
        });
        if names_limit && catch_all {
            out.push((i + 1, lines[i].trim().to_string()));
        }
    }
    out
}

#[test]
fn no_match_over_limit_has_a_catch_all_arm() {
    // The check finds what it looks for.
    let sample = "fn f(l: Limit) -> u8 {\n    match l {\n        Limit::Cpu => 1,\n        _ => 0,\n    }\n}\n";
    assert_eq!(catch_alls_over_limit(sample).len(), 1);
    let exhaustive = sample.replace("_ =>", "Limit::MainIntake =>");
    assert!(catch_alls_over_limit(&exhaustive).is_empty());
    let mut found = Vec::new();
    let mut matches_over_limit = 0;
    for file in sources() {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        matches_over_limit += text.matches("Limit::").count();
        for (line, m) in catch_alls_over_limit(&text) {
            found.push(format!("src/{}:{line}: {m}", rel(&file)));
        }
    }
    assert!(
        matches_over_limit > 20,
        "{matches_over_limit} uses of Limit"
    );
    assert!(
        found.is_empty(),
        "a match over Limit with a catch-all arm (list every kind instead):\n{}",
        found.join("\n")
    );
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

#[test]
fn the_recipe_for_a_limit_kind_names_every_file_that_branches_on_one() {
    let arch = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let recipe = arch
        .split("- **A limit kind**")
        .nth(1)
        .and_then(|r| r.split("\n- **").next())
        .expect("docs/ARCHITECTURE.md has the recipe for a limit kind");
    let mut branching = Vec::new();
    for file in sources() {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        // A line that decides by a limit's kind: a match arm, `matches!`, or a comparison.
        let branches = text.lines().any(|l| {
            l.contains("Limit::")
                && (l.contains("=>")
                    || l.contains("matches!(")
                    || l.contains("== ")
                    || l.contains("!= "))
        });
        if branches {
            branching.push(format!("src/{}", rel(&file)));
        }
    }
    // The detector finds `of()` and the model's words at least; nothing outside the model and
    // the limits room decides by a limit's kind.
    assert!(branching.len() >= 2, "{branching:?}");
    let outside: Vec<&String> = branching
        .iter()
        .filter(|f| *f != "src/model/mod.rs" && !f.starts_with("src/limits/"))
        .collect();
    assert!(
        outside.is_empty(),
        "files outside model and limits that branch on Limit: {outside:?}"
    );
    // A kind's own file in src/limits/ is "its file" of the recipe.
    let missing: Vec<&String> = branching
        .iter()
        .filter(|f| !recipe.contains(f.as_str()))
        .filter(|f| !f.starts_with("src/limits/") || *f == "src/limits/mod.rs")
        .collect();
    assert!(
        missing.is_empty(),
        "files that branch on Limit, missing from the recipe: {missing:?}"
    );
    // And every file the recipe names exists.
    for part in recipe.split('`').skip(1).step_by(2) {
        if part.starts_with("src/") {
            assert!(
                root().join(part).exists(),
                "the recipe names {part}, which is gone"
            );
        }
    }
}

/// A kind's setting is known by its kind, not by its variable's name: nothing outside
/// `src/limits/` picks a setting line by the name it is written under.
#[test]
fn no_setting_line_is_chosen_by_its_variable_name_outside_the_limits() {
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|p| !rel(p).starts_with("limits/"))
        .filter(|p| {
            let text = code(&std::fs::read_to_string(p).unwrap());
            let flat: String = text.split_whitespace().collect();
            flat.contains("Key::Env(\"") || flat.contains("Key::Arg(\"")
        })
        .map(|p| format!("src/{}", rel(&p)))
        .collect();
    assert!(found.is_empty(), "{found:?}");
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

/// The verdict and the plan reach every kind through `limits::Kind`, CPU included: no file
/// outside `src/limits/` names CPU's file (a measured kind answers `saturated`,
/// `caps_measured` and `predicted`).
#[test]
fn cpu_is_reached_through_the_kind_trait_like_every_kind() {
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|p| !rel(p).starts_with("limits/"))
        .filter(|p| code(&std::fs::read_to_string(p).unwrap()).contains("limits::cpu"))
        .map(|p| format!("src/{}", rel(&p)))
        .collect();
    assert!(found.is_empty(), "{found:?}");
}

/// The diagnosis does not ask where its stages came from: their source says how their service
/// time is known (`diagnose::ServiceTime`), and levels say whether a run chose them.
#[test]
fn the_diagnosis_has_no_branch_on_where_its_stages_came_from() {
    let text = std::fs::read_to_string(root().join("src/diagnose/mod.rs")).unwrap();
    let fn_diagnose = &text[text.find("pub fn diagnose(").unwrap()..];
    let fn_diagnose = &fn_diagnose[..fn_diagnose.find("\n}").unwrap()];
    for needle in ["from_history", ".history.is_some()", ".history.is_none()"] {
        assert!(
            !fn_diagnose.contains(needle),
            "diagnose() branches on {needle}"
        );
    }
}

/// Evidence comes in through one seam: every way in (a sweep, k6's summary and time series, a
/// Prometheus range, a saved run) is a `record::evidence::Source`, each named in
/// ARCHITECTURE.md; no file of `src/diagnose/` makes a stage outside its tests — a source does.
#[test]
fn every_way_in_is_an_evidence_source_and_the_diagnosis_makes_no_stage() {
    let mut sources_in: Vec<String> = Vec::new();
    for p in sources() {
        let text = code(&std::fs::read_to_string(&p).unwrap());
        for l in text.lines().filter(|l| l.starts_with("impl")) {
            let Some((_, ty)) = l
                .split_once("evidence::Source for ")
                .or_else(|| l.split_once("EvidenceSource for "))
            else {
                continue;
            };
            let name: String = ty.chars().take_while(|c| c.is_alphanumeric()).collect();
            sources_in.push(format!("{}: {name}", room_of(&rel(&p))));
        }
        // `diagnose/tests/` is the tests' own folder.
        if rel(&p).starts_with("diagnose/") && !rel(&p).contains("/tests/") {
            for needle in ["StageResult::empty(", "StageResult {"] {
                assert!(
                    !text.contains(needle),
                    "src/{} makes a stage ({needle}): stages come from a source",
                    rel(&p)
                );
            }
        }
    }
    sources_in.sort();
    assert_eq!(
        sources_in,
        [
            "load: K6Series",
            "load: K6Summary",
            "load: LiveSweep",
            "observe: Range",
            "record: SavedRun"
        ]
    );
    let arch = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let seam = &arch[arch.find("- Evidence comes in through one seam").unwrap()..];
    let seam = &seam[..seam.find("\n- ").unwrap()];
    for s in &sources_in {
        let name = s.split(": ").nth(1).unwrap();
        assert!(
            seam.contains(&format!("::{name}`")),
            "ARCHITECTURE.md's seam omits {name}"
        );
    }
}

/// A setting the run did not give is inferred by its kind (`Kind::infer`, through
/// `limits::infer`), with its interval: no file of `src/diagnose/` writes a setting behind a
/// limit kind's bound.
#[test]
fn each_kind_infers_its_own_setting_and_the_diagnosis_none() {
    let fields = [
        "worker_concurrency",
        "runner_limit",
        "db_pool_size",
        "runners_per_worker",
    ];
    let mut found = Vec::new();
    for p in sources() {
        if !rel(&p).starts_with("diagnose/") || rel(&p).contains("/tests/") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&p).unwrap());
        for f in fields {
            if text.contains(&format!(".{f} = Some")) {
                found.push(format!("src/{}: {f}", rel(&p)));
            }
        }
    }
    assert!(found.is_empty(), "{found:?}");
    let verdict = code(&std::fs::read_to_string(root().join("src/diagnose/mod.rs")).unwrap());
    assert!(verdict.contains("crate::limits::infer("));
}

/// "The capacity" is one thing: the deployment's, with every kind's bound (`limits::capacity`).
/// The model's slots and runners, a run's measured ceiling and the search's ceiling found have
/// names of their own.
#[test]
fn one_function_is_named_capacity() {
    let named: Vec<String> = sources()
        .into_iter()
        .filter(|p| code(&std::fs::read_to_string(p).unwrap()).contains("fn capacity("))
        .map(|p| format!("src/{}", rel(&p)))
        .collect();
    assert_eq!(named, ["src/limits/mod.rs"]);
}

/// One name per kind, as hyperfine names an exporter once: `Limit::DbPool` is answered by
/// `pub struct DbPool` in `src/limits/db_pool.rs`, and `of()` says so; every other file of the
/// room is the dispatcher or what several kinds share (the readings, the setting lines, the
/// slot kinds' arithmetic). The verdict's two states that are no kind (`Capping::Both`,
/// `Capping::NoRunner`) are answered by `both.rs` and `no_runner.rs` the same way.
#[test]
fn each_limit_kind_has_one_name_for_its_variant_its_file_and_its_type() {
    let model = std::fs::read_to_string(root().join("src/model/mod.rs")).unwrap();
    // The unit variants of an enum of model/mod.rs.
    let variants_of = |name: &str| -> Vec<String> {
        let body = &model[model
            .find(&format!("pub enum {name} {{"))
            .unwrap_or_else(|| panic!("{name} in model/mod.rs"))..];
        let body = &body[..body.find('}').unwrap()];
        body.lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.starts_with("//") && !l.starts_with('#') && l.ends_with(','))
            .map(|l| l.trim_end_matches(',').to_string())
            .filter(|v| v.chars().all(char::is_alphanumeric))
            .collect()
    };
    let variants = variants_of("Limit");
    // The verdict's states that are no kind (both level, no runner) answer the same way.
    let states = variants_of("Capping");
    assert!(states.len() >= 2, "{states:?}");
    assert!(variants.len() >= 6, "{variants:?}");
    let snake = |v: &str| {
        let mut out = String::new();
        for (i, c) in v.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    };
    let dispatcher = code(&std::fs::read_to_string(root().join("src/limits/mod.rs")).unwrap());
    let mut wrong = Vec::new();
    let mut files = vec!["mod.rs".to_string(), "reading.rs".into(), "slots.rs".into()];
    let named = variants
        .iter()
        .map(|v| ("Limit", v))
        .chain(states.iter().map(|v| ("Capping", v)));
    for (of, v) in named {
        let file = format!("{}.rs", snake(v));
        let text =
            std::fs::read_to_string(root().join("src/limits").join(&file)).unwrap_or_default();
        if !text.contains(&format!("pub struct {v};"))
            || !text.contains(&format!("impl Kind for {v} {{"))
        {
            wrong.push(format!(
                "{of}::{v}: src/limits/{file} has no `pub struct {v};` implementing Kind"
            ));
        }
        if !dispatcher.contains(&format!("{of}::{v} => &{}::{v},", snake(v))) {
            wrong.push(format!(
                "{of}::{v}: no arm answers it with {}::{v}",
                snake(v)
            ));
        }
        files.push(file);
    }
    for e in std::fs::read_dir(root().join("src/limits")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if !files.contains(&name) {
            wrong.push(format!("src/limits/{name} is no kind's file"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The recipe for a limit kind is what adding one took: the commit that added main's intake
/// (`src/limits/main_intake.rs`) touched the recipe's files and its tests, nothing else, and
/// every file of the recipe but a set kind's settings (main's intake is measured, not set).
/// It reads the repository's history: a copy without it cannot judge, and under `CI` fails.
#[test]
fn the_recipe_is_the_list_of_files_adding_a_kind_touched() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let own = "src/limits/main_intake.rs";
    let adding = || {
        git(&["log", "--diff-filter=A", "--format=%H", "--", own])
            .and_then(|h| h.lines().last().map(str::to_string))
            .filter(|h| !h.is_empty())
    };
    // A shallow clone lacks the commit: its origin has it.
    if adding().is_none()
        && git(&["rev-parse", "--is-shallow-repository"]).as_deref() == Some("true")
    {
        let _ = git(&["fetch", "-q", "--unshallow"]);
    }
    let added = adding();
    let Some(commit) = added else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no history that adds {own}: clone the repository with its history (no --depth)"
        );
        eprintln!("skipped: no git history here");
        return;
    };
    let touched = git(&["show", "--name-only", "--format=", &commit]).unwrap();
    let is_test =
        |f: &str| f.starts_with("tests/") || f.ends_with("/tests.rs") || f.contains("/tests/");
    let mut touched: Vec<&str> = touched
        .lines()
        .filter(|f| !is_test(f) && *f != own)
        .collect();
    touched.sort();
    let arch = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let recipe = arch
        .split("- **A limit kind**")
        .nth(1)
        .and_then(|r| r.split("\n- **").next())
        .unwrap();
    let mut listed: Vec<&str> = recipe
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| p.contains('/') || p.ends_with(".md"))
        .filter(|p| root().join(p).is_file())
        .filter(|p| *p != own)
        .filter(|p| !p.ends_with("/settings.rs"))
        .collect();
    listed.push("docs/ARCHITECTURE.md");
    listed.sort();
    listed.dedup();
    assert_eq!(touched, listed, "commit {commit}");
}

/// Provenance is a type: `Sourced::source` is a `Provenance`, and no code outside tests reads
/// a source's words to decide anything (`.source.starts_with(`, `.source.contains(`, or the
/// same on its `words()`): it matches the variant.
#[test]
fn provenance_is_a_type_and_no_code_branches_on_its_words() {
    let settings = std::fs::read_to_string(root().join("src/model/settings.rs")).unwrap();
    let def = &settings[settings
        .find("pub struct Sourced<T>")
        .expect("Sourced is defined in model/settings.rs")..];
    let def = &def[..def.find('}').unwrap()];
    assert!(def.contains("pub source: Provenance,"), "{def}");
    let mut branches = Vec::new();
    for p in sources() {
        let text = code(&std::fs::read_to_string(&p).unwrap());
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join("");
        for needle in [
            ".source.starts_with(",
            ".source.contains(",
            ".source.words().starts_with(",
            ".source.words().contains(",
            ".source.ends_with(",
            ".source==\"",
        ] {
            if flat.contains(needle) {
                branches.push(format!("src/{}: {needle}", rel(&p)));
            }
        }
    }
    assert!(
        branches.is_empty(),
        "branches on words:\n{}",
        branches.join("\n")
    );
}

/// Refusals are typed (`error::BadInput`, `NoPlan`, `Incomparable`, `Implausible`, each with
/// its exit code or its gap): no function outside tests returns `Result<_, String>`.
#[test]
fn no_code_returns_a_refusal_as_a_bare_string() {
    let mut found = Vec::new();
    for p in sources() {
        let text = code(&std::fs::read_to_string(&p).unwrap());
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut rest = flat.as_str();
        while let Some(i) = rest.find("Result<") {
            rest = &rest[i + "Result<".len()..];
            // The Result's own arguments: up to its matching '>'.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '<' => depth += 1,
                        '>' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(rest.len(), |(j, _)| j);
            if rest[..end].ends_with(", String") {
                found.push(format!("src/{}: Result<{}>", rel(&p), &rest[..end]));
            }
        }
    }
    assert!(
        found.is_empty(),
        "bare-string refusals:\n{}",
        found.join("\n")
    );
}

/// A limit's kind is named in one place: no `Limit::` variant outside `src/limits/` (a file per
/// kind and its dispatcher), `src/model/` (the generic bound arithmetic and the enum's words)
/// and tests. Everything else asks the limits room.
#[test]
fn no_limit_variant_is_named_outside_the_limits_and_the_model() {
    let mut named = Vec::new();
    let mut seen = 0;
    for p in sources() {
        let r = rel(&p);
        let text = std::fs::read_to_string(&p).unwrap();
        seen += text.matches("Limit::").count();
        let test_code = is_test_module(&p) || r.contains("/tests/");
        if r.starts_with("limits/") || r.starts_with("model/") || test_code {
            continue;
        }
        for (i, l) in code(&text).lines().enumerate() {
            // `Limit::` as a path of its own (not `SharedLimit::` or `limits::`).
            let hits = l.match_indices("Limit::").any(|(j, _)| {
                !l[..j]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if hits {
                named.push(format!("src/{r}:{}: {}", i + 1, l.trim()));
            }
        }
    }
    // The detector reads the code that names the variants (the model and the limits do).
    assert!(seen > 20, "{seen}");
    assert!(
        named.is_empty(),
        "Limit variants named outside src/limits/ and src/model/:\n{}",
        named.join("\n")
    );
}
