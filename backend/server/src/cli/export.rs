//! `scalebook export DIR`: the static edition, a directory any static web server can serve (at
//! its root or under a path prefix) with no Scalebook behind it ([`scalebook_server::export`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use scalebook_server::Error;
use scalebook_server::base_path::BasePath;
use scalebook_server::export::{self, Sources};
use scalebook_server::predict::default_machine_cache;
use scalebook_server::state::{ClustersFile, Configs};

use super::EXIT_INVALID_INPUT;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The directory to write: new, or empty.
    dir: PathBuf,
    /// The URL path the edition will be served under (e.g. /scalebook/), when known: the page
    /// then finds its files from any address below it, `/scalebook/index.html` included.
    /// Without it the edition works at the root and under any prefix whose address ends in `/`.
    #[arg(long, default_value = "")]
    base_path: String,
    /// Directory with the built page (dist/) and the chapter files, as `serve` takes it.
    #[arg(long, default_value = "static")]
    static_dir: PathBuf,
    /// The training configs the page offers.
    #[arg(long, default_value = "config/ViT.yaml")]
    yaml_config: PathBuf,
    /// The clusters the estimates read (default: clusters.yaml beside --yaml-config).
    #[arg(long)]
    clusters: Option<PathBuf>,
    /// The trainer that measures this machine for the estimates' "this machine" (default:
    /// `scalebook-train` beside this program). Without one the edition offers no such choice.
    #[arg(long)]
    trainer: Option<PathBuf>,
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    // The edition is for publishing: readable by whoever serves it (a web server runs as
    // another user), unlike the runs `scalebook` keeps its owner's only.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let base = match BasePath::parse(&args.base_path) {
        Ok(base) => base,
        Err(e) => return refuse(&e),
    };
    let configs = Configs::load(&args.yaml_config)?;
    let clusters_path = args.clusters.clone().unwrap_or_else(|| configs.path.with_file_name("clusters.yaml"));
    let clusters = ClustersFile::load(&clusters_path)?
        .clusters
        .with_context(|| format!("{} is missing: the estimates of the static edition read it", clusters_path.display()))?;
    let trainer = match &args.trainer {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("cannot find this program's own path")?.with_file_name("scalebook-train"),
    };
    let machine = match scalebook_server::machine::load_or_measure(&default_machine_cache(), &trainer) {
        Ok(machine) => Some(machine),
        Err(e) => {
            eprintln!("warning: the edition's estimates offer no \"this machine\": {e}");
            None
        }
    };
    let sources = Sources {
        static_dir: &args.static_dir,
        configs_json: &configs.json,
        clusters: &clusters,
        source_root: &configs.project_root(),
        machine: machine.as_ref(),
        base: base.as_ref(),
    };
    match export::export(&sources, &args.dir) {
        Ok(done) => {
            let at = base.as_ref().map_or_else(|| "at any path ending in /".to_owned(), |b| format!("at {}/", b.as_str()));
            super::print(format_args!(
                "exported the static edition to {}: {} files, {} bytes ({} code listings, module {}{}); serve it with any static web server, {at}\n",
                args.dir.display(),
                done.files,
                done.bytes,
                done.listings,
                done.module,
                if machine.is_some() { ", estimates of this machine" } else { "" },
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        // Input the user must fix: the directory and the rule it breaks.
        Err(e @ (Error::ExportTarget { .. } | Error::FrontendNotBuilt { .. } | Error::ExportListing { .. })) => refuse(&e),
        Err(e) => Err(e.into()),
    }
}

fn refuse(e: &Error) -> anyhow::Result<ExitCode> {
    eprintln!("error: {e}");
    Ok(ExitCode::from(EXIT_INVALID_INPUT))
}
