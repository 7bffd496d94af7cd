//! Benchmark: reading a TensorBoard event file, Scalebook beside TensorBoard's own Rust data
//! server (`tensorboard-data-server`, "rustboard", from the tests' Python environment).
//!
//! Writes one run's event file of `--mb` MB of scalars (seven tags a step, as the trainer logs;
//! with `--images N --image-mb M`, N images of M MB each spread through them, so that the
//! largest record is large), or takes `--file`, then measures each reader on the same file, one
//! run:
//! - rustboard: `server --logdir L --reload once`, from its start to its "Finished load cycle"
//!   line (it keeps 1000 points a tag by default, as TensorBoard does);
//! - `scalebook serve --watch-logdir L`: from its start to every point copied into the run's
//!   `metrics.jsonl` (it keeps every point);
//! - `scalebook tb import L`: the whole command;
//!
//! each with its peak resident memory (`VmHWM`, or the sampled peak for the server).
//!
//! ```sh
//! cargo build --release --bins --examples
//! target/release/examples/load_events --mb 110
//! ```

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use scalebook_shared::tfevents;

use self::support::{PeakRss, mib, start_server};

#[derive(Debug, Parser)]
struct Args {
    /// Size of the event file to write, in MB.
    #[arg(long, default_value_t = 110)]
    mb: u64,
    /// An event file to read instead (the tutorial's baseline, say).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Images to spread through the scalars.
    #[arg(long, default_value_t = 0)]
    images: u64,
    /// The size of each image, in MB.
    #[arg(long, default_value_t = 16.0)]
    image_mb: f64,
    /// Only write the event file, here, and stop (to profile one reader on it).
    #[arg(long)]
    write_to: Option<PathBuf>,
}

const TAGS: [&str; 7] = ["Loss/train", "Learning Rate", "Samples per sec", "data wait", "forward", "backward", "optimizer"];

/// What [`write_events`] wrote.
struct Written {
    scalars: u64,
    largest_record: usize,
}

/// Writes `args.mb` MB of scalar records to `path`, with `args.images` images among them.
fn write_events(path: &Path, args: &Args) -> Written {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = Written { scalars: 0, largest_record: 0 };
    let mut write = |record: Vec<u8>| {
        written.largest_record = written.largest_record.max(record.len());
        out.write_all(&record).unwrap();
        record.len() as u64
    };
    write(tfevents::file_version_record(1.7e9));
    // Bytes that do not compress, as a photograph's PNG.
    let image: Vec<u8> = (0..(args.image_mb * 1e6) as u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (mut bytes, mut images) = (0u64, 0u64);
    for step in 0.. {
        for tag in TAGS {
            bytes += write(tfevents::scalar_record(1.7e9 + step as f64, step, tag, 1.0 / (1.0 + step as f32)));
            written.scalars += 1;
        }
        if images < args.images && bytes >= args.mb * 1_000_000 * images / args.images {
            write(tfevents::image_record(1.7e9 + step as f64, step, "weather", &image, 360, 720));
            images += 1;
        }
        if bytes >= args.mb * 1_000_000 {
            break;
        }
    }
    out.flush().unwrap();
    written
}

/// The peak resident memory of a finished child, from `/usr/bin/time -f %M` (KiB).
fn timed(command: &mut Command) -> (f64, u64) {
    let started = Instant::now();
    let output = command.stderr(Stdio::piped()).stdout(Stdio::null()).output().unwrap();
    let took = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let peak = stderr.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
    (took, peak)
}

/// rustboard from its start to the end of its one load cycle: seconds and peak KiB.
fn rustboard(logdir: &Path) -> (f64, u64) {
    let server = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap()
        .join(".cache/scalebook/py-venv/lib/python3.11/site-packages/tensorboard_data_server/bin/server");
    let started = Instant::now();
    let mut child = Command::new(&server)
        .args(["--reload", "once", "--port", "0", "-v", "--logdir"])
        .arg(logdir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", server.display()));
    let stderr = BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        if line.unwrap().contains("Finished load cycle") {
            break;
        }
    }
    let took = started.elapsed().as_secs_f64();
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak = status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
    child.kill().unwrap();
    child.wait().unwrap();
    (took, peak)
}

fn main() {
    let args = Args::parse();
    if let Some(path) = &args.write_to {
        println!("wrote {} scalars to {}", write_events(path, &args).scalars, path.display());
        return;
    }
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-events-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let logdir = scratch.join("logdir");
    std::fs::create_dir_all(logdir.join("run")).unwrap();
    let file = logdir.join("run").join(tfevents::file_name(1, "bench", 1));
    match &args.file {
        Some(given) => drop(std::fs::copy(given, &file).unwrap()),
        None => {
            let written = write_events(&file, &args);
            let largest = written.largest_record as f64 / 1e6;
            println!("wrote {} scalars and {} images; the largest record {largest:.1} MB", written.scalars, args.images);
        }
    }
    let bytes = std::fs::metadata(&file).unwrap().len();
    println!("event file: {:.1} MB", bytes as f64 / 1e6);

    let (took, peak) = rustboard(&logdir);
    println!("rustboard (tensorboard-data-server), one load cycle: {took:.2} s, peak {:.1} MiB", mib(peak));

    let scalebook = scalebook_harness::workspace_binary("scalebook").unwrap();
    let runs = scratch.join("import-runs");
    let (took, peak) = timed(
        Command::new("/usr/bin/time").args(["-f", "%M"]).arg(&scalebook).args(["tb", "import"]).arg(&logdir).arg("--runs-dir").arg(&runs),
    );
    println!("scalebook tb import: {took:.2} s, peak {:.1} MiB", mib(peak));
    let imported = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path().join("metrics.jsonl")).next().unwrap();
    let imported_bytes = std::fs::metadata(&imported).unwrap().len();
    let lines = std::fs::read_to_string(&imported).unwrap().lines().count();

    // The watching server writes the same lines: done once its copy is as long.
    let started = Instant::now();
    let server = start_server(scratch, &["--watch-logdir", logdir.to_str().unwrap()]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (took, peak) = runtime.block_on(async {
        let peak = PeakRss::sample(server.pid());
        loop {
            let copied = std::fs::read_dir(scratch.join("runs"))
                .ok()
                .and_then(|mut dirs| dirs.next())
                .and_then(|dir| std::fs::metadata(dir.ok()?.path().join("metrics.jsonl")).ok())
                .map_or(0, |meta| meta.len());
            if copied >= imported_bytes {
                return (started.elapsed().as_secs_f64(), peak.stop());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    println!("scalebook serve --watch-logdir, to every point copied ({lines}): {took:.2} s from its start, peak {:.1} MiB", mib(peak));
}
