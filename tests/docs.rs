//! Every command README.md and `docs/` show a reader runs here, as written. Each shell block says
//! what it is in its info string:
//! - `sh runnable` — run in order, page by page, in one working directory per page (holding
//!   the repository's `examples/`, `fixtures/` and `profiles/`), with this build's `n8ncap` first
//!   on PATH; every command exits 0, or the block's last one exits as `exit=N` says;
//! - `sh template` — a command for the reader's own n8n (a host, a Prometheus, a cluster this
//!   machine does not have): each `n8ncap` invocation in it is parsed by the CLI's own
//!   definitions, so a renamed or removed flag fails here;
//! - `sh walkthrough` — the README's Docker walkthrough, run by `compose_example.rs`;
//! - `sh setup` — the README's set-up: `cargo test` must be what `.ci/run` runs, `cargo run
//!   --release -- demo` is run as `n8ncap demo` with this build;
//! - `sh tiers` — the README's test tiers: each command is one `.ci/run` runs.
//!
//! A shell block with no such word fails: no command reaches the documentation untested.

use crate::common::root;
use clap::Parser;
use pulldown_cmark::{CodeBlockKind, Event, Parser as Markdown, Tag, TagEnd};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fenced shell block: the page it is on, its info string's words after the language, its text.
struct Block {
    page: String,
    kind: String,
    exit: i32,
    text: String,
}

fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

fn shell_blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page.strip_prefix(root()).unwrap().display().to_string();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for ev in Markdown::new(&text) {
        match ev {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let mut words = info.split_whitespace();
                let lang = words.next().unwrap_or("");
                if !matches!(lang, "sh" | "bash" | "shell" | "console") {
                    continue;
                }
                let kind = words.next().unwrap_or("").to_string();
                let exit = words
                    .find_map(|w| w.strip_prefix("exit="))
                    .map(|n| n.parse().expect("exit=N is a number"))
                    .unwrap_or(0);
                open = Some(Block {
                    page: name.clone(),
                    kind,
                    exit,
                    text: String::new(),
                });
            }
            Event::Text(t) => {
                if let Some(b) = open.as_mut() {
                    b.text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(open.take()),
            _ => {}
        }
    }
    out
}

/// The block's commands: continuation lines joined, blank lines and whole-line comments cut.
fn commands(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cont = false;
    for line in text.lines() {
        let (body, more) = match line.trim_end().strip_suffix('\\') {
            Some(t) => (t.trim().to_string(), true),
            None => (line.trim().to_string(), false),
        };
        if cont {
            let last = out.last_mut().unwrap();
            last.push(' ');
            last.push_str(&body);
        } else if !body.is_empty() && !body.starts_with('#') {
            out.push(body);
        }
        cont = more;
    }
    out
}

/// The commands of the README's walkthrough block (`compose_example.rs` runs them).
pub(crate) fn walkthrough() -> Vec<String> {
    let blocks = shell_blocks(&root().join("README.md"));
    let walk = blocks.iter().find(|b| b.kind == "walkthrough");
    commands(&walk.expect("the README has a walkthrough block").text)
}

/// Shell words of one command (quotes and backslashes as sh reads them, a comment cut; no
/// expansion).
pub(crate) fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut any = false;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                any = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                any = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        _ => cur.push(c),
                    }
                }
            }
            '\\' => {
                any = true;
                cur.extend(chars.next());
            }
            '#' if !any && cur.is_empty() => break,
            c if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Each `n8ncap` invocation of a template command: the words between the shell's operators,
/// redirections dropped.
fn invocations(cmd: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut skip_next = false;
    for w in words(cmd) {
        if skip_next {
            skip_next = false;
            continue;
        }
        match w.as_str() {
            "|" | "&&" | "||" | ";" => out.push(std::mem::take(&mut cur)),
            ">" | ">>" | "<" | "2>" => skip_next = true,
            _ => cur.push(w),
        }
    }
    out.push(cur);
    out.into_iter()
        .filter(|c| c.first().is_some_and(|w| w == "n8ncap"))
        .collect()
}

/// One working directory per page, holding what its commands read, with this build first on PATH.
struct Session {
    dir: PathBuf,
    path: String,
}

impl Session {
    fn new(page: &str) -> Session {
        let dir = std::env::temp_dir().join(format!(
            "n8ncap-docs-{}-{}",
            page.replace(['/', '.'], "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for d in ["examples", "fixtures", "profiles"] {
            std::os::unix::fs::symlink(root().join(d), dir.join(d)).unwrap();
        }
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_n8ncap"));
        let path = format!(
            "{}:{}",
            bin.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Session { dir, path }
    }

    /// Runs one command under bash (pipefail) and returns its exit code and output.
    fn run(&self, cmd: &str) -> (i32, String) {
        let out = Command::new("bash")
            .args(["-o", "pipefail", "-c", cmd])
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn blocks() -> Vec<Block> {
    pages().iter().flat_map(|p| shell_blocks(p)).collect()
}

#[test]
fn every_shell_block_says_how_it_is_tested() {
    let blocks = blocks();
    assert!(blocks.len() >= 20, "{} shell blocks", blocks.len());
    for b in &blocks {
        assert!(
            matches!(
                b.kind.as_str(),
                "runnable" | "template" | "walkthrough" | "setup" | "tiers"
            ),
            "{}: a shell block marked {:?} — mark it runnable, template, walkthrough or setup:\n{}",
            b.page,
            b.kind,
            b.text
        );
    }
    let walk: Vec<&Block> = blocks.iter().filter(|b| b.kind == "walkthrough").collect();
    assert_eq!(walk.len(), 1, "one walkthrough, run by compose_example.rs");
    assert_eq!(walk[0].page, "README.md");
}

#[test]
fn every_template_command_parses_with_the_cli() {
    let mut parsed = 0;
    for b in blocks().iter().filter(|b| b.kind == "template") {
        for cmd in commands(&b.text) {
            for argv in invocations(&cmd) {
                if let Err(e) = n8ncap::cli::Cli::try_parse_from(&argv) {
                    panic!("{}: `{}` does not parse:\n{e}", b.page, argv.join(" "));
                }
                parsed += 1;
            }
        }
    }
    assert!(parsed >= 10, "{parsed} template commands parsed");
}

/// The README's set-up block, each command as shell words.
fn setup_commands() -> Vec<Vec<String>> {
    let setup: Vec<Block> = shell_blocks(&root().join("README.md"))
        .into_iter()
        .filter(|b| b.kind == "setup")
        .collect();
    assert_eq!(setup.len(), 1);
    commands(&setup[0].text).iter().map(|c| words(c)).collect()
}

/// `.ci/run` runs the README's test command and each tier the README names, as written there
/// (its cargo-nextest branch runs the same tests; this is the branch without it).
#[test]
fn the_setup_block_and_the_tiers_are_what_ci_runs() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let ci_lines: Vec<&str> = ci.lines().map(str::trim).collect();
    assert!(setup_commands().iter().any(|c| c == &["cargo", "test"]));
    assert!(
        ci_lines.contains(&"cargo test"),
        ".ci/run runs the README's test command"
    );
    let tiers: Vec<Block> = shell_blocks(&root().join("README.md"))
        .into_iter()
        .filter(|b| b.kind == "tiers")
        .collect();
    assert_eq!(tiers.len(), 1, "one block of the test tiers in the README");
    let cmds = commands(&tiers[0].text);
    assert_eq!(cmds.len(), 3, "fast, stack and real-time: {cmds:?}");
    assert_eq!(words(&cmds[0]), ["cargo", "test"]);
    for cmd in &cmds[1..] {
        let cmd = words(cmd).join(" ");
        assert!(
            ci_lines.iter().any(|l| l.contains(&cmd)),
            ".ci/run does not run the README's `{cmd}`"
        );
    }
}

#[test]
#[ignore = "stack tier (≈ 30 s): the demo, a simulated stack swept"]
fn the_setup_block_s_demo_says_the_runner_limit() {
    let cmds = setup_commands();
    let demo = cmds
        .iter()
        .find(|c| c.starts_with(&["cargo".into(), "run".into()]))
        .expect("the set-up runs the demo");
    let args = &demo[demo.iter().position(|w| w == "--").unwrap() + 1..];
    let session = Session::new("setup");
    let (code, out) = session.run(&format!("n8ncap {}", args.join(" ")));
    assert_eq!(code, 0, "{out}");
    // The demo's stack caps at its runner limit: 10 tasks ÷ 0.5 s = 20 req/s.
    let line = out
        .lines()
        .find(|l| l.starts_with("Diagnosis:"))
        .unwrap_or_else(|| panic!("no diagnosis line:\n{out}"));
    let rate: f64 = line
        .split_whitespace()
        .skip_while(|w| *w != "measured")
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no measured rate in {line:?}"));
    assert!(rate > 10.0 && rate <= 20.5, "{rate}");
}

/// Runs the runnable blocks of one page in order.
fn run_page(page: &str) -> usize {
    let blocks: Vec<Block> = shell_blocks(&root().join(page))
        .into_iter()
        .filter(|b| b.kind == "runnable")
        .collect();
    let session = Session::new(page);
    let mut ran = 0;
    for b in &blocks {
        let cmds = commands(&b.text);
        for (i, cmd) in cmds.iter().enumerate() {
            let want = if i + 1 == cmds.len() { b.exit } else { 0 };
            let (code, out) = session.run(cmd);
            assert_eq!(
                code, want,
                "{page}: `{cmd}` exited {code}, not {want}:\n{out}"
            );
            // What the command was for is there: its output, or the file it wrote.
            match cmd.rsplit_once(" > ") {
                Some((_, file)) => {
                    let len =
                        std::fs::metadata(session.dir.join(file.trim())).map_or(0, |m| m.len());
                    assert!(len > 0, "{page}: `{cmd}` wrote nothing to {file}");
                }
                None if cmd.starts_with("n8ncap ") => {
                    assert!(!out.trim().is_empty(), "{page}: `{cmd}` printed nothing")
                }
                None => {}
            }
            ran += 1;
        }
    }
    ran
}

macro_rules! page_test {
    ($name:ident, $page:expr, $min:expr) => {
        #[test]
        fn $name() {
            let ran = run_page($page);
            assert!(ran >= $min, "{}: {ran} commands run", $page);
        }
    };
}

page_test!(readme_commands_run, "README.md", 6);
page_test!(audit_page_commands_run, "docs/audit.md", 3);
page_test!(compare_page_commands_run, "docs/compare.md", 2);
page_test!(diagnose_page_commands_run, "docs/diagnose.md", 3);
page_test!(exporter_page_commands_run, "docs/exporter.md", 1);
page_test!(inspect_page_commands_run, "docs/inspect.md", 1);
page_test!(k6_page_commands_run, "docs/k6.md", 1);
page_test!(reference_page_commands_run, "docs/reference.md", 2);
page_test!(sweep_page_commands_run, "docs/sweep.md", 1);
page_test!(scale_page_commands_run, "docs/scale.md", 2);
page_test!(autoscaling_page_commands_run, "docs/autoscaling.md", 3);

#[test]
fn every_page_with_runnable_blocks_has_a_test() {
    let tested = [
        "README.md",
        "docs/audit.md",
        "docs/compare.md",
        "docs/diagnose.md",
        "docs/exporter.md",
        "docs/inspect.md",
        "docs/k6.md",
        "docs/reference.md",
        "docs/sweep.md",
        "docs/scale.md",
        "docs/autoscaling.md",
    ];
    for b in blocks().iter().filter(|b| b.kind == "runnable") {
        assert!(
            tested.contains(&b.page.as_str()),
            "{} has no page test",
            b.page
        );
    }
}

#[test]
fn shell_words_are_split_as_sh_splits_them() {
    assert_eq!(
        words(r#"n8ncap sweep --body '{"sleep_ms":1000}' --match 'a="b c"' x\ y "q\"r""#),
        vec![
            "n8ncap",
            "sweep",
            "--body",
            r#"{"sleep_ms":1000}"#,
            "--match",
            r#"a="b c""#,
            "x y",
            r#"q"r"#
        ]
    );
    let inv = invocations("helm template n n8n/n8n | n8ncap audit -f - > out.txt");
    assert_eq!(inv, vec![vec!["n8ncap", "audit", "-f", "-"]]);
}

/// The README is a guide: at most 300 lines, every page of `docs/` linked from it, and every
/// relative link of README and `docs/` names a file that exists.
#[test]
fn the_readme_is_a_guide_and_every_link_resolves() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines");
    let mut linked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let base = page.parent().unwrap().to_path_buf();
        for ev in Markdown::new(&text) {
            if let Event::Start(Tag::Link { dest_url, .. }) = ev {
                if dest_url.contains("://") || dest_url.starts_with('#') {
                    continue;
                }
                let file = dest_url.split('#').next().unwrap();
                assert!(
                    base.join(file).exists(),
                    "{}: link to {dest_url} names no file",
                    page.display()
                );
                linked += 1;
            }
        }
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        if name.starts_with("docs/") {
            assert!(
                readme.contains(&format!("({name}")),
                "README does not link {name}"
            );
        }
    }
    assert!(linked >= 20, "{linked} links");
}

/// The README's words against the commands it documents (issue #63): the introduction calls
/// nothing "next" that a section below documents, and every `--format NAME` the README names
/// is a format the command line takes.
#[test]
fn the_readme_promises_nothing_it_already_documents() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let intro = &text[..text.find("## Set-up").unwrap()];
    for promise in ["is next", "are next", "coming soon", "planned"] {
        assert!(
            !intro.contains(promise),
            "the introduction says {promise:?}"
        );
    }
    let mut formats: Vec<&str> = Vec::new();
    for part in text.split("--format ").skip(1) {
        let word = part
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '|'))
            .next()
            .unwrap_or("");
        formats.extend(word.split('|').filter(|w| !w.is_empty()));
    }
    assert!(
        formats.contains(&"keda") && formats.contains(&"prometheus-rules"),
        "{formats:?}"
    );
    let help = |cmd: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_n8ncap"))
            .args([cmd, "--help"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let all: String = [
        "recommend",
        "diagnose",
        "compare",
        "audit",
        "scale",
        "replay",
        "inspect",
        "report",
        "sweep",
    ]
    .iter()
    .map(|c| help(c))
    .collect();
    for f in formats {
        assert!(
            all.contains(f),
            "--format {f} is in README.md but no command takes it"
        );
    }
}
