use super::*;
use std::path::{Path, PathBuf};

/// A directory of the test's own, removed when the test ends (a panic included).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("n8ncap-shell-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// The pid a command wrote to `file`.
fn pid_in(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until a command has written a whole line to `file`.
async fn written(file: &Path) {
    while !std::fs::read_to_string(file).is_ok_and(|t| t.ends_with('\n')) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `pid` is still a live process (a zombie counts as gone: it runs nothing).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits (bounded) for `pid` to be gone; whether it went.
async fn gone(pid: i32) -> bool {
    for _ in 0..200 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[test]
fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
    let mut t = Tail::new(10);
    t.push(b"0123456");
    t.push(b"789abc");
    assert_eq!(t.kept, b"3456789abc");
    assert_eq!(t.dropped, 3);
    t.push(&[b'x'; 25]);
    assert_eq!(t.kept, vec![b'x'; 10]);
    assert_eq!(t.dropped, 3 + 10 + 15);
}

/// 50 MB of output: the kept end is [`OUTPUT_KEPT`] bytes, and every byte before it is counted
/// as not kept (it was read and let go, never held whole).
#[tokio::test]
async fn an_output_of_any_size_is_kept_by_its_end() {
    let ran = run_shell(
        "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo THE END",
        Duration::from_secs(300),
        None,
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    let (note, body) = ran.output.split_once('\n').unwrap();
    let dropped: u64 = note
        .trim_start_matches('[')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // The last line break is not shown (the output is split into lines).
    assert_eq!(dropped + body.len() as u64 + 1, 50_000_000 + 1 + 8);
    assert!(body.len() <= OUTPUT_KEPT);
    assert!(body.ends_with("THE END"));
}

/// A command that returns while a child it left in the background holds its output is done
/// when it returns: the step is its status, not the child's life (600 s here).
#[tokio::test]
async fn a_background_child_holding_the_output_does_not_hold_the_step() {
    let d = scratch("background");
    let pidfile = d.join("pid");
    let command = format!("sleep 600 & echo $! > {}; echo scaled", pidfile.display());
    let ran = run_shell(&command, Duration::from_secs(120), None).await;
    let pid = pid_in(&pidfile);
    let still = alive(pid);
    // SAFETY: kill(2) of the test's own sleep, by its pid.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    assert!(ran.failure.is_none(), "{ran:?}");
    assert_eq!(ran.output.trim(), "scaled");
    // What the operator's command left running is theirs: not ended.
    assert!(still);
}

/// A deadline ends the whole process group: a pipeline's and a subshell's children too.
#[tokio::test]
async fn a_deadline_ends_the_whole_group() {
    let d = scratch("deadline");
    let pidfile = d.join("pid");
    let command = format!(
        "(sleep 600; echo late) & echo $! > {}; sleep 600 | cat",
        pidfile.display()
    );
    let ran = run_shell(&command, Duration::from_millis(1500), None).await;
    assert!(
        ran.failure.as_deref().is_some_and(|f| f.contains("1.5s")),
        "{ran:?}"
    );
    assert_eq!(ran.exit_code, None);
    assert!(
        gone(pid_in(&pidfile)).await,
        "the subshell outlived the deadline"
    );
}

/// An interrupt ends the group at once, long before the deadline.
#[tokio::test]
async fn an_interrupt_ends_the_whole_group() {
    let d = scratch("interrupt");
    let pidfile = d.join("pid");
    let command = format!("(sleep 600) & echo $! > {}; sleep 600", pidfile.display());
    let (interrupt, fire) = super::super::Interrupt::by_hand();
    let file = pidfile.clone();
    tokio::spawn(async move {
        written(&file).await;
        let _ = fire.send(Some(130));
    });
    let ran = run_shell(&command, Duration::from_secs(3600), Some(&interrupt)).await;
    assert!(
        ran.failure
            .as_deref()
            .is_some_and(|f| f.contains("interrupted")),
        "{ran:?}"
    );
    assert!(
        gone(pid_in(&pidfile)).await,
        "the subshell outlived the interrupt"
    );
}

/// A step dropped mid-way (another arm of a `select!` won) leaves nothing of its command.
#[tokio::test]
async fn a_dropped_step_ends_the_whole_group() {
    let d = scratch("dropped");
    let pidfile = d.join("pid");
    let command = format!("(sleep 600) & echo $! > {}; sleep 600", pidfile.display());
    let file = pidfile.clone();
    tokio::select! {
        _ = run_shell(&command, Duration::from_secs(3600), None) => panic!("returned"),
        _ = async {
            written(&file).await;
        } => {}
    }
    assert!(
        gone(pid_in(&pidfile)).await,
        "the subshell outlived the drop"
    );
}

#[tokio::test]
async fn status_and_both_streams_are_kept() {
    let ran = run_shell(
        "echo out; echo err >&2; exit 7",
        Duration::from_secs(60),
        None,
    )
    .await;
    assert_eq!(ran.exit_code, Some(7));
    assert_eq!(ran.output, "out\nerr");
    assert!(ran.failure.as_deref().is_some_and(|f| f.contains('7')));
    let missing = run_shell("exit 0", Duration::from_secs(60), None).await;
    assert!(missing.failure.is_none() && missing.output.is_empty());
}
