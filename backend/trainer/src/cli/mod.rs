//! Subcommands. Input the user must fix (an invalid config, a missing data directory) exits
//! with status 2 before any work starts.

mod bench;
mod bench_collectives;
mod config_args;
mod datagen;
mod launch;
mod machine;
mod summary;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use scalebook_shared::rundir::exit_code;

pub use config_args::ConfigArgs;

#[derive(Debug, Parser)]
#[command(name = "scalebook-train", version, about = "The tutorial's ViT weather model training on libtorch")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a synthetic ERA5-like dataset in the tutorial's on-disk format.
    Datagen(datagen::DatagenArgs),
    /// Build the model of a config, print its parameters and run one forward pass.
    Summary(summary::SummaryArgs),
    /// Train a config (the tutorial's train.py).
    Train(train::TrainArgs),
    /// Start N local ranks of a command (e.g. `launch --nproc 2 -- train --config cpu_short`).
    Launch(launch::LaunchArgs),
    /// Measure training and data-loading throughput.
    Bench(bench::BenchArgs),
    /// Measure all-reduce bandwidth (run it under `launch`).
    BenchCollectives(bench_collectives::BenchCollectivesArgs),
    /// Measure this machine as a step estimate sees it (matmul rate, copy bandwidth, op cost).
    Machine(machine::MachineArgs),
}

/// Prints an error the way users can act on it: each broken config rule on its own line
/// (status 2), anything else as one chain of causes (status 1).
pub fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(invalid) = err.downcast_ref::<scalebook_shared::Error>() {
        for problem in invalid.problems().0 {
            eprintln!("error: {problem}");
        }
        return ExitCode::from(exit_code::INVALID_INPUT);
    }
    if let Some(input) = err.downcast_ref::<scalebook_trainer::Error>().filter(|e| e.is_user_input()) {
        eprintln!("error: {input}");
        return ExitCode::from(exit_code::INVALID_INPUT);
    }
    eprintln!("error: {err:#}");
    ExitCode::FAILURE
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Datagen(args) => datagen::run(args),
        Command::Summary(args) => summary::run(args),
        Command::Train(args) => train::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchCollectives(args) => bench_collectives::run(args),
        Command::Machine(args) => machine::run(args),
        Command::Launch(args) => launch::run(args),
    }
}
