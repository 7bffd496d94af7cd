//! `scalebook-train`: the trainer binary the app launches, and the tools around it.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    scalebook_trainer::ffi::keep_freed_memory();
    match cli::run(cli::Cli::parse()) {
        Ok(code) => code,
        Err(err) => cli::report(&err),
    }
}
