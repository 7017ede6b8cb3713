//! The drill room's shape: every drill listed once in `drill::DRILLS`, with its file in
//! `src/drill/`, its command and its results file; the drills' load is one engine; the judges of
//! drills live with their drills, not in `diagnose/`. And the results directory's: its files
//! named in `record/dir.rs` only.

use crate::structure::{code, rel, root, sources};
use n8ncap::drill::DRILLS;
use std::collections::BTreeSet;

/// A drill's file or folder under src/drill/ from its command's name.
fn module_of(name: &str) -> String {
    name.replace('-', "_")
}

/// The drill room's own parts: the engine and what the drills share.
const SHARED: [&str; 4] = ["mod", "engine", "fates", "stop_start"];

#[test]
fn each_drill_is_listed_once_with_its_file_its_command_and_its_results_file() {
    let names: BTreeSet<&str> = DRILLS.iter().map(|d| d.name).collect();
    assert_eq!(
        names.len(),
        DRILLS.len(),
        "a drill listed twice: {DRILLS:?}"
    );
    let files: BTreeSet<&str> = DRILLS.iter().map(|d| d.file.name()).collect();
    assert_eq!(files.len(), DRILLS.len(), "two drills share a results file");
    // Every file or folder of the room is a listed drill, or the engine's.
    let dir = root().join("src/drill");
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .filter(|s| !SHARED.contains(&s.as_str()))
        .collect();
    let listed: BTreeSet<String> = DRILLS.iter().map(|d| module_of(d.name)).collect();
    assert_eq!(found, listed, "src/drill/ against drill::DRILLS");
    // Each is a command of its own, and its record's file is its name's.
    let help = std::process::Command::new(crate::common::bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for d in DRILLS {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{} ", d.name))),
            "{} is no command:\n{help}",
            d.name
        );
        assert_eq!(d.file.name(), format!("{}.json", d.name));
    }
}

#[test]
fn the_drills_load_is_one_engine_and_their_judges_live_with_them() {
    // One loop of constant arrivals for the drills: the engine's; the commands start none.
    let mut loops = Vec::new();
    let mut judges = Vec::new();
    for p in sources() {
        let r = rel(&p);
        let text = code(&std::fs::read_to_string(&p).unwrap());
        if text.contains("drill::engine::run(") || text.contains("engine::run(target") {
            loops.push(r.clone());
        }
        if r.starts_with("diagnose/")
            && (text.contains("record::drain") || text.contains("record::outage"))
        {
            judges.push(r.clone());
        }
    }
    assert_eq!(
        loops,
        vec!["drill/mod.rs".to_string()],
        "who runs the drills' load"
    );
    assert!(judges.is_empty(), "a drill judged in diagnose/: {judges:?}");
}

#[test]
fn no_file_outside_record_names_a_results_file() {
    use n8ncap::record::dir::{SCALE, SCALE_PAGE, WRITTEN};
    let mut names: Vec<String> = WRITTEN.iter().map(|n| n.to_string()).collect();
    names.extend([SCALE, SCALE_PAGE].map(str::to_string));
    names.extend(DRILLS.iter().map(|d| d.file.name().to_string()));
    let mut found = Vec::new();
    for p in sources() {
        let r = rel(&p);
        if r.starts_with("record/") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&p).unwrap());
        for n in &names {
            if text.contains(&format!("\"{n}\"")) {
                found.push(format!("src/{r}: \"{n}\""));
            }
        }
        // The commands hand records to the results directory and write no file themselves.
        if r.starts_with("commands/")
            && ["std::fs::write(", "File::create(", "OpenOptions::new("]
                .iter()
                .any(|w| text.contains(w))
        {
            found.push(format!("src/{r}: writes a file"));
        }
    }
    assert!(
        found.is_empty(),
        "results files named outside record/:\n{}",
        found.join("\n")
    );
}
