//! The shape of the code around its limit kinds, checked from its text: each kind's one name,
//! file and type, the recipe for adding one, no catch-all over `Limit`, inference and capacity
//! in one place each, provenance as a type, typed refusals, every way in an evidence source.
//! The rooms and sizes are `structure.rs`'s.

use crate::structure::{code, is_test_module, rel, room_of, root, sources};

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
            "observe: AtWorkers",
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

/// The recipe for a limit kind is what adding one took: the commits that added main's intake
/// (`src/limits/main_intake.rs`) and Redis' one thread (`src/limits/redis.rs`, a kind one for
/// the deployment, added after the shared limits became kinds) each touched the recipe's files
/// and their tests, nothing else, and every file of the recipe but a set kind's settings (both
/// are measured, not set). It reads the repository's history: a copy without it cannot judge,
/// and under `CI` fails.
#[test]
fn the_recipe_is_the_list_of_files_adding_a_kind_touched() {
    for own in ["src/limits/main_intake.rs", "src/limits/redis.rs"] {
        recipe_touched_by_adding(own);
    }
}

fn recipe_touched_by_adding(own: &str) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
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
        // The recipe's example kind file (main's intake's) is "its file": the commit's own.
        .filter(|p| *p == "src/limits/mod.rs" || !p.starts_with("src/limits/"))
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
    // Where a setting's value and a bound's servers figure came from: a type, not words.
    for (file, def) in [
        ("src/model/settings.rs", "pub struct Sourced<T>"),
        ("src/model/bound.rs", "pub struct Bound {"),
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let at = &text[text
            .find(def)
            .unwrap_or_else(|| panic!("{def} is defined in {file}"))..];
        let at = &at[..at.find('}').unwrap()];
        assert!(at.contains("pub source: Provenance,"), "{file}: {at}");
    }
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
