//! `scalebook supervise --exit-file FILE -- PROGRAM ARGS...`: internal, started by `serve` for
//! every local run (see `scalebook_server::executor::supervise`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SuperviseArgs {
    /// Where to write how the program ended.
    #[arg(long)]
    exit_file: PathBuf,
    /// Stop the program (and its process group) after this many seconds.
    #[arg(long, value_name = "SECS")]
    time_limit_secs: Option<u64>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

pub fn run(args: SuperviseArgs) -> anyhow::Result<ExitCode> {
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("supervise: no program given after --");
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(scalebook_server::executor::supervise::supervise(
        &args.exit_file,
        program,
        rest,
        args.time_limit_secs.map(std::time::Duration::from_secs),
    ))?)
}
