//! `scalebook-train datagen`: writes the synthetic ERA5-like dataset the CPU configs read
//! (`data/synthetic/{train,valid,test,stats}` by default).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use scalebook_trainer::data::synth::{self, Progress, SynthConfig};

#[derive(Debug, clap::Args)]
pub struct DatagenArgs {
    /// Directory to write train/, valid/, test/ and stats/ into.
    #[arg(long, default_value = "data/synthetic")]
    out: PathBuf,
    /// Number of training years (files); validation and test get one later year each.
    #[arg(long, default_value_t = SynthConfig::default().years)]
    years: usize,
    /// Time steps per year (6 hours each in the tutorial's data).
    #[arg(long, default_value_t = SynthConfig::default().steps_per_year)]
    steps_per_year: usize,
    /// Grid rows (latitudes, north to south).
    #[arg(long, default_value_t = SynthConfig::default().height)]
    height: usize,
    /// Grid columns (longitudes).
    #[arg(long, default_value_t = SynthConfig::default().width)]
    width: usize,
    /// Random seed: the same arguments give the same bytes.
    #[arg(long, default_value_t = SynthConfig::default().seed)]
    seed: u64,
    /// Replace a dataset already in --out.
    #[arg(long)]
    force: bool,
}

pub fn run(args: DatagenArgs) -> anyhow::Result<ExitCode> {
    let config =
        SynthConfig { years: args.years, steps_per_year: args.steps_per_year, height: args.height, width: args.width, seed: args.seed };
    config.validate()?;
    let total_steps = (config.years + 2) * config.steps_per_year;
    eprintln!(
        "writing {} training years, 1 validation and 1 test year of {} steps, {} x {} x 20 ({:.0} MB) to {}",
        config.years,
        config.steps_per_year,
        config.height,
        config.width,
        config.field_bytes() as f64 / 1e6,
        args.out.display()
    );
    let start = Instant::now();
    // A bar on a terminal; plain lines in logs, where a redrawn bar is noise.
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total_steps as u64);
        if let Ok(style) = ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} steps, {eta} left") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let files = synth::generate(&args.out, &config, args.force, &mut |event| match (event, &bar) {
        (Progress::File { path, .. }, Some(bar)) => bar.set_message(short_name(path)),
        (Progress::File { path, steps }, None) => {
            eprintln!("writing {} ({steps} steps)", path.display())
        }
        (Progress::Step, Some(bar)) => bar.inc(1),
        (Progress::Step, None) => {}
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let files = files?;
    let bytes: u64 = files.iter().filter_map(|file| std::fs::metadata(file).ok()).map(|meta| meta.len()).sum();
    println!(
        "wrote {} files ({:.0} MB) to {} in {:.1} s",
        files.len(),
        bytes as f64 / 1e6,
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The split and file name (`train/1990.h5`), which fit beside the bar.
fn short_name(path: &Path) -> String {
    let split = path.parent().and_then(Path::file_name).map(Path::new).unwrap_or(Path::new(""));
    split.join(path.file_name().unwrap_or_default()).display().to_string()
}
