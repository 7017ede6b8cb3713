//! `n8ncap completions SHELL` and `n8ncap man`: the command line described for the shell and
//! for man.

use crate::error;
use clap::CommandFactory;

pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "n8ncap", &mut std::io::stdout());
    Ok(error::EXIT_OK)
}

pub(super) fn man(command: Option<&str>) -> anyhow::Result<i32> {
    let top = crate::cli::Cli::command();
    let page = match command {
        None => top,
        Some(name) => {
            let Some(sub) = top.find_subcommand(name).cloned() else {
                let names: Vec<String> = top
                    .get_subcommands()
                    .map(|c| c.get_name().to_string())
                    .collect();
                return Err(crate::error::BadInput(format!(
                    "man {}: no such subcommand; one of {}",
                    crate::util::escape_control(name),
                    names.join(", ")
                ))
                .into());
            };
            let shown = format!("n8ncap {}", sub.get_name());
            sub.bin_name(shown.clone()).display_name(shown)
        }
    };
    // Titled as man names a subcommand's page: n8ncap-sweep(1).
    let title = match command {
        Some(_) => format!("n8ncap-{}", page.get_name()),
        None => "n8ncap".to_string(),
    };
    match clap_mangen::Man::new(page)
        .title(title)
        .render(&mut std::io::stdout())
    {
        // `n8ncap man | head` closes the pipe early: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(error::EXIT_OK),
    }
}
