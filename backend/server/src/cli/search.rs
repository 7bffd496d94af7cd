//! `scalebook search`: which layout to run a config on, for an instructor preparing a class.
//! Every layout of a GPU count, ranked by the same estimate `scalebook estimate` prints, with
//! why the best are fast, what was left out and why, and where the tutorial's own choice
//! stands; the page's layout search is the same `shared` code.

use std::fmt::{self, Display, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use scalebook_shared::cluster::Clusters;
use scalebook_shared::numbers::thousands;
use scalebook_shared::search::{Answer, Exclusion, Judgement, Ranked, Space, Standing, search};
use serde::Serialize;

use super::EXIT_INVALID_INPUT;
use super::config::{FileArgs, Invalid, in_file, load};

/// The fastest rank layouts the table explains part by part.
const EXPLAINED: usize = 3;

/// Parts of a step shorter than this round to nothing in the table and are not listed.
const SHOWN_SECONDS: f64 = 5e-5;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// The config's name in the file (e.g. mp).
    #[arg(long, value_name = "NAME")]
    config: String,
    #[command(flatten)]
    file: FileArgs,
    /// How many GPUs to lay the config out on.
    #[arg(long, value_name = "N")]
    gpus: u32,
    /// The cluster, from the clusters file.
    #[arg(long, default_value = "perlmutter")]
    cluster: String,
    /// The file of clusters, with their hardware figures and estimate factors.
    #[arg(long = "clusters", value_name = "FILE", default_value = "config/clusters.yaml")]
    clusters: PathBuf,
    /// The GPU model (default: the cluster's first).
    #[arg(long, value_name = "MODEL")]
    gpu: Option<String>,
    /// How many of the fastest layouts to list.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    top: u64,
    /// Print the answer as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    match answer(&args) {
        Ok(answer) if args.json => super::print(format_args!("{}\n", serde_json::to_string_pretty(&View::new(&args, &answer))?))?,
        Ok(answer) => super::print(Report { args: &args, answer: &answer, took: started.elapsed() })?,
        Err(problems) => {
            eprintln!("{problems}");
            return Ok(ExitCode::from(EXIT_INVALID_INPUT));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The answer, or every problem with the input, one per line (`field: rule`).
fn answer(args: &SearchArgs) -> Result<Answer, Invalid> {
    let config = load(&args.file.yaml)?.get(&args.config)?;
    let clusters = load_clusters(&args.clusters)?;
    let cluster = clusters.get(&args.cluster)?;
    let space = Space {
        config_name: &args.config,
        config: &config,
        cluster_name: &args.cluster,
        cluster,
        gpu: args.gpu.as_deref(),
        gpus: args.gpus,
    };
    tracing::debug!(config = %args.config, gpus = args.gpus, "searching layouts");
    Ok(search(&space)?)
}

fn load_clusters(path: &Path) -> Result<Clusters, Invalid> {
    let text = std::fs::read_to_string(path).map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    Clusters::parse(&text).map_err(|e| in_file(path, e))
}

fn shown(args: &SearchArgs, answer: &Answer) -> usize {
    usize::try_from(args.top).unwrap_or(usize::MAX).min(answer.ranked.len())
}

/// What `--json` prints: the answer with the fastest `--top` layouts rather than all of them.
#[derive(Serialize)]
struct View<'a> {
    config: &'a str,
    cluster: &'a str,
    gpu: &'a str,
    gpus: u32,
    memory_limit_gb: f64,
    searched: u64,
    valid: usize,
    estimates: u64,
    top: &'a [Ranked],
    /// The Pareto front, each with its rank (from 1).
    front: Vec<(usize, &'a Ranked)>,
    exclusions: &'a [Exclusion],
    tutorial: &'a [Standing],
}

impl<'a> View<'a> {
    fn new(args: &'a SearchArgs, answer: &'a Answer) -> View<'a> {
        View {
            config: &args.config,
            cluster: &args.cluster,
            gpu: &answer.gpu,
            gpus: answer.gpus,
            memory_limit_gb: answer.memory_limit_gb,
            searched: answer.searched,
            valid: answer.ranked.len(),
            estimates: answer.estimates,
            top: &answer.ranked[..shown(args, answer)],
            front: answer.front.iter().map(|&i| (i + 1, &answer.ranked[i])).collect(),
            exclusions: &answer.exclusions,
            tutorial: &answer.tutorial,
        }
    }
}

/// The readable form: the count, the fastest, the front, why the best are fast, what was left
/// out, and the tutorial's choice.
struct Report<'a> {
    args: &'a SearchArgs,
    answer: &'a Answer,
    took: Duration,
}

impl Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.answer;
        writeln!(
            f,
            "{} on {} × {} {} ({:.0} GiB): {} layouts searched, {} run, {} left out ({} estimates, {:.1} ms)\n",
            self.args.config,
            a.gpus,
            self.args.cluster,
            a.gpu,
            a.memory_limit_gb,
            thousands(a.searched),
            thousands(a.ranked.len() as u64),
            thousands(a.searched - a.ranked.len() as u64),
            thousands(a.estimates),
            self.took.as_secs_f64() * 1e3,
        )?;
        f.write_str(&ranking_table(a, shown(self.args, a)))?;
        f.write_str(&front_table(a))?;
        f.write_str(&why(a))?;
        f.write_str(&exclusion_table(&a.exclusions))?;
        f.write_str(&tutorial_lines(a))
    }
}

fn row_header() -> String {
    format!(
        "  {:>5} {:>3} {:>3} {:>3} {:>4} {:<9} {:>4} {:<9} {:>5} {:>9} {:>7}  limited by\n",
        "rank", "tp", "cp", "pp", "dp", "order", "zero", "recompute", "micro", "samples/s", "GiB/GPU"
    )
}

fn row(rank: usize, r: &Ranked) -> String {
    let c = &r.candidate;
    let s = c.sizes;
    format!(
        "  {rank:>5} {:>3} {:>3} {:>3} {:>4} {:<9} {:>4} {:<9} {:>5} {:>9.1} {:>7.1}  {}\n",
        s.tp,
        s.cp,
        s.pp,
        s.dp,
        c.order.to_string(),
        c.zero,
        if c.recompute { "yes" } else { "no" },
        c.micro_batches,
        r.samples_per_sec,
        r.memory_gb,
        r.limit,
    )
}

fn ranking_table(a: &Answer, top: usize) -> String {
    let mut out = format!("fastest {top} (each runs in the trainer as it is ranked)\n");
    out.push_str(&row_header());
    for (i, r) in a.ranked.iter().take(top).enumerate() {
        out.push_str(&row(i + 1, r));
    }
    out.push('\n');
    out
}

fn front_table(a: &Answer) -> String {
    let mut out = format!("Pareto front: {} layouts no other beats on both samples/s and memory per GPU\n", a.front.len());
    out.push_str(&row_header());
    for &i in &a.front {
        out.push_str(&row(i + 1, &a.ranked[i]));
    }
    out.push('\n');
    out
}

/// The step split of the fastest few rank layouts (the fastest of each tp, cp, pp, dp and
/// order: its ZeRO and micro-batch variants split their steps alike), each part with its share.
fn why(a: &Answer) -> String {
    let mut out = String::from("why: the fastest of each of the fastest rank layouts, each step by part (s), largest first\n");
    let mut seen = Vec::new();
    for (i, r) in a.ranked.iter().enumerate() {
        let layout = (r.candidate.sizes, r.candidate.order);
        if seen.len() == EXPLAINED {
            break;
        }
        if !seen.contains(&layout) {
            seen.push(layout);
            out.push_str(&split_lines(i + 1, r));
        }
    }
    out.push_str("  (not modelled: a DALI loader's time)\n\n");
    out
}

fn split_lines(rank: usize, r: &Ranked) -> String {
    let mut out = format!("  #{rank} {}: {:.4} s per step of {} samples\n", r.candidate, r.step_time_s, r.global_batch);
    let mut parts: Vec<_> = r.split.parts().into_iter().filter(|(_, s)| *s >= SHOWN_SECONDS).collect();
    parts.sort_by(|x, y| y.1.total_cmp(&x.1));
    for (part, seconds) in parts {
        let _ = writeln!(out, "      {:<58} {seconds:>8.4} {:>4.0}%", part.to_string(), 100.0 * seconds / r.step_time_s);
    }
    out
}

fn exclusion_table(exclusions: &[Exclusion]) -> String {
    let mut out = String::from("left out, by rule (each layout under the first rule it breaks)\n");
    for e in exclusions {
        let _ = writeln!(out, "  {:>9}  {}: {}\n             e.g. {}", thousands(e.count), e.field, e.sentence, e.example);
    }
    out.push('\n');
    out
}

fn tutorial_lines(a: &Answer) -> String {
    if a.tutorial.is_empty() {
        return String::from("the tutorial made no choice for this config on this many GPUs\n");
    }
    let mut out = String::from("the tutorial's choice\n");
    for standing in &a.tutorial {
        let _ = writeln!(out, "  {} (checklist {})", standing.choice.command, standing.choice.checklist);
        let _ = match &standing.judgement {
            Judgement::Valid(r) => writeln!(
                out,
                "    rank {} of {}: {:.1} samples/s, {:.1} GiB per GPU, limited by {}",
                standing.rank.map_or_else(|| "?".to_owned(), |rank| rank.to_string()),
                thousands(a.ranked.len() as u64),
                r.samples_per_sec,
                r.memory_gb,
                r.limit
            ),
            Judgement::Excluded { rule, reason } => writeln!(out, "    left out ({}): {reason}", rule.field()),
        };
        if let Some(d) = standing.behind_best {
            let _ = writeln!(
                out,
                "    behind the best mostly by {}: {:.2} ms per sample against the best's {:.2}",
                d.part, d.slower_ms_per_sample, d.faster_ms_per_sample
            );
        }
    }
    out
}
