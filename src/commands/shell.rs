//! `n8ncap completions SHELL` and `n8ncap man`: the command line described for the shell and
//! for man.

use crate::error;
use clap::CommandFactory;

pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "n8ncap", &mut std::io::stdout());
    Ok(error::EXIT_OK)
}

pub(super) fn man() -> anyhow::Result<i32> {
    match clap_mangen::Man::new(crate::cli::Cli::command()).render(&mut std::io::stdout()) {
        // `n8ncap man | head` closes the pipe early: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(error::EXIT_OK),
    }
}
