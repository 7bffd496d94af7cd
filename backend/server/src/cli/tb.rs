//! `scalebook tb`: TensorBoard logdirs in. `tb import LOGDIR` makes a completed run of every
//! run of a logdir (a directory with `events.out.tfevents.*` files), listed, charted and
//! streamed like a run the server launched, next to Scalebook's own.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use scalebook_server::Error;
use scalebook_server::logdir::import::{self, Outcome};
use scalebook_server::store::RunStore;

use super::EXIT_INVALID_INPUT;

/// Below this many bytes to read an import is quick and shows no progress bar.
const PROGRESS_BAR_BYTES: u64 = 8 << 20;

#[derive(Debug, clap::Subcommand)]
pub enum TbCommand {
    /// Import every run of a TensorBoard logdir as a completed run (again: nothing changes).
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The logdir: a directory with event files (events.out.tfevents.*), in it or in its
    /// subdirectories; each directory holding some is one run.
    logdir: PathBuf,
    /// Where runs are kept (the server's --runs-dir).
    #[arg(long = "runs-dir", visible_alias = "runs", value_name = "DIR", default_value = "runs")]
    runs_dir: PathBuf,
    /// Import what can be read of damaged event files (a bad checksum, an impossible length, a
    /// last record cut short) and say what was skipped, rather than stop with nothing imported.
    #[arg(long)]
    allow_damaged: bool,
}

pub fn run(cmd: TbCommand) -> anyhow::Result<ExitCode> {
    super::serve::init_logging();
    let TbCommand::Import(args) = cmd;
    let store = RunStore::open(&args.runs_dir).with_context(|| format!("cannot open the runs directory {}", args.runs_dir.display()))?;
    match import_logdir(&args.logdir, &store, args.allow_damaged) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Input the user must fix: the path and the rule it breaks.
        Err(e @ Error::Logdir { .. }) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(EXIT_INVALID_INPUT))
        }
        Err(e) => Err(e.into()),
    }
}

fn import_logdir(logdir: &Path, store: &RunStore, allow_damaged: bool) -> Result<(), Error> {
    let found = import::find(logdir, store)?;
    let total: u64 = found.iter().map(import::Found::bytes_to_read).sum();
    let bar = if total >= PROGRESS_BAR_BYTES { ProgressBar::new(total) } else { ProgressBar::hidden() };
    if let Ok(style) = ProgressStyle::with_template("reading event files [{bar:40}] {bytes}/{total_bytes}, {eta} left") {
        bar.set_style(style);
    }
    let outcomes = import::import(store, found, allow_damaged, &mut |n| bar.inc(n));
    bar.finish_and_clear();
    for (source, outcome) in outcomes? {
        let name = source.dir();
        match outcome {
            Outcome::Imported { record, points, tags, images, skipped } => {
                let images = if images > 0 { format!(", {images} images (listed, not charted)") } else { String::new() };
                println!("{}: run {} ({points} scalars in {tags} tags{images})", name.display(), record.id);
                for why in skipped {
                    eprintln!("warning: {}: skipped what could not be read of {why}", name.display());
                }
            }
            Outcome::AlreadyThere { id } => println!("{}: already run {id}, unchanged", name.display()),
        }
    }
    Ok(())
}
