//! `scalebook profile RUN_DIR`: a run's profile in numbers, as the timeline's summary shows it
//! in the browser: each rank's mean profiled step cut by the trainer's ranges, and a pipelined
//! run's bubble beside its schedule's formula. For the terminal, and for benchmarks that set a
//! measured bubble beside the prediction (`bench/layouts.sh`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use scalebook_server::profiles;
use scalebook_shared::profile::trace::{ProfileSummary, format_micros};

use super::EXIT_INVALID_INPUT;

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// The run directory (its `profile/` holds one trace per rank).
    run_dir: PathBuf,
    /// Print the summary as JSON (the server's `api/runs/ID/profile/summary`).
    #[arg(long)]
    json: bool,
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    if !args.run_dir.is_dir() {
        eprintln!("error: run_dir: {} is not a directory", args.run_dir.display());
        return Ok(ExitCode::from(EXIT_INVALID_INPUT));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let summary = runtime.block_on(profiles::summary(&args.run_dir))?;
    if args.json {
        super::print(format_args!("{}\n", serde_json::to_string(&summary)?))?;
    } else {
        super::print(text(&summary))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The summary for a terminal: a line per rank, then the bubbles, then what was not read.
fn text(summary: &ProfileSummary) -> String {
    let mut out = String::new();
    if summary.ranks.is_empty() {
        out.push_str("no profiled step: run with `profile: START:END` (e.g. --set profile=5:8)\n");
    }
    for rank in &summary.ranks {
        let steps = rank.steps.len().max(1) as f64;
        let mean = rank.steps.iter().map(|s| s.total_us).sum::<f64>() / steps;
        let mut parts: Vec<(String, f64)> = Vec::new();
        for range in rank.steps.iter().flat_map(|s| &s.ranges) {
            match parts.iter_mut().find(|(name, _)| *name == range.name) {
                Some((_, us)) => *us += range.us / steps,
                None => parts.push((range.name.clone(), range.us / steps)),
            }
        }
        let parts: Vec<String> = parts.iter().map(|(name, us)| format!("{name} {}", format_micros(*us))).collect();
        let _ = writeln!(out, "rank {}: a step {} over {} step(s): {}", rank.rank, format_micros(mean), rank.steps.len(), parts.join(", "));
    }
    for bubble in &summary.bubbles {
        let _ = writeln!(out, "bubble, {bubble}");
    }
    for unread in &summary.unread {
        let _ = writeln!(out, "not read: {unread}");
    }
    out
}
