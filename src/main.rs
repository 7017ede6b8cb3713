//! n8ncap's entry point: parses arguments and dispatches; all work lives in the library.

use clap::Parser;
use n8ncap::cli::Cli;
use n8ncap::error::{self, exit_code_for};
use std::time::Duration;

fn main() {
    error::exit_quietly_on_closed_pipe();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                error::EXIT_BAD_INPUT
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("n8ncap: cannot start the async runtime: {e}");
            std::process::exit(error::EXIT_FAILED);
        }
    };
    let code = match rt.block_on(n8ncap::commands::run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("n8ncap: {}", n8ncap::util::for_terminal(&format!("{e:#}")));
            exit_code_for(&e)
        }
    };
    // Background tasks (simulator roles, connections) must not hold the process open.
    rt.shutdown_timeout(Duration::from_millis(200));
    std::process::exit(code);
}
