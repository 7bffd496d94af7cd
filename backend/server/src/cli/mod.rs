//! Command-line faces. Input errors (a bad layout, an invalid config) exit with status 2 and
//! one clear message on stderr, like clap's own usage errors.

pub mod config;
pub mod estimate;
pub mod export;
pub mod layout;
pub mod profile;
pub mod search;
pub mod serve;
pub mod supervise;
pub mod tb;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "scalebook", version, about = "The Deep Learning at Scale tutorial as an interactive notebook")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the notebook in the browser.
    Serve(Box<serve::ServeArgs>),
    /// Show the rank groups of a tp/cp/dp/pp layout.
    Layout(layout::LayoutArgs),
    /// Inspect training configs.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Estimate memory, step time and communication of a config on a layout and cluster.
    Estimate(estimate::EstimateArgs),
    /// Write the static edition: the page and every file it reads, for any static web server.
    Export(export::ExportArgs),
    /// A run's profile in numbers: each rank's step by the trainer's ranges, a pipeline's bubble.
    Profile(profile::ProfileArgs),
    /// Search every layout of a config on a number of GPUs: ranked, explained, and what was left out.
    Search(search::SearchArgs),
    /// Bring TensorBoard logdirs in as runs.
    #[command(subcommand)]
    Tb(tb::TbCommand),
    /// Run a trainer and record how it ended (what `serve` starts runs with).
    #[command(hide = true)]
    Supervise(supervise::SuperviseArgs),
}

/// Exit status for input the user must fix (mirrors clap's usage errors).
pub use scalebook_shared::rundir::exit_code::INVALID_INPUT as EXIT_INVALID_INPUT;

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    private_by_default();
    match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Layout(args) => layout::run(args),
        Command::Config(cmd) => config::run(cmd),
        Command::Estimate(args) => estimate::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Search(args) => search::run(args),
        Command::Export(args) => export::run(args),
        Command::Tb(cmd) => tb::run(cmd),
        Command::Supervise(args) => supervise::run(args),
    }
}

/// Makes everything this process writes, and every process it starts (the supervisor, the
/// trainer, `sbatch` and so the job), its owner's only: runs hold what a learner did, their
/// logs and copies of the class's runs, the kept class link its token. One setting at the
/// start, before anything is written, so no file is ever made readable by others first.
fn private_by_default() {
    use nix::sys::stat::{Mode, umask};

    umask(Mode::from_bits_truncate(0o077));
}

/// Writes `text` to standard output. A reader that stops reading (`scalebook search | head`)
/// ends the output, not the program: what it did not read, it did not want.
pub fn print(text: impl std::fmt::Display) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match write!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}
