//! `scalebook-train launch --nproc N -- train ...`: N local ranks of a trainer command.

use std::process::ExitCode;

use scalebook_shared::rundir::exit_code;
use scalebook_trainer::dist::launch::{self, Outcome};

#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// Number of rank processes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    nproc: u16,
    /// Rendezvous port (default: a free one).
    #[arg(long)]
    master_port: Option<u16>,
    /// The scalebook-train subcommand and its flags, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(args: LaunchArgs) -> anyhow::Result<ExitCode> {
    let program = scalebook_shared::program::restartable(std::env::current_exe()?);
    let port = match args.master_port {
        Some(p) => p,
        None => launch::free_port()?,
    };
    match launch::run(&program, &args.command, usize::from(args.nproc), port)? {
        Outcome::Success => Ok(ExitCode::SUCCESS),
        // An invalid config fails on every rank with 2; keep that meaning.
        Outcome::RankFailed { code: Some(code), .. } if code == i32::from(exit_code::INVALID_INPUT) => {
            Ok(ExitCode::from(exit_code::INVALID_INPUT))
        }
        Outcome::RankFailed { .. } => Ok(ExitCode::FAILURE),
    }
}
