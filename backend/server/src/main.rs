//! `scalebook`: the one command users have. It serves the notebook and also answers the
//! questions a learner asks at a terminal (which ranks share a group? what does this config
//! expand to?) with the same `shared` code the browser runs.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
