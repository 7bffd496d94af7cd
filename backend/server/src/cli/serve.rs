//! `scalebook serve`: start the notebook server and print the URL to open.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::ServiceExt;
use axum::extract::Request;
use scalebook_server::auth::{Keyring, Token, Tokens};
use scalebook_server::base_path::BasePath;
use scalebook_server::class::follow::{Following, Me};
use scalebook_server::class::shared::SharedRuns;
use scalebook_server::classroom::Classroom;
use scalebook_server::executor::TrainerCommand;
use scalebook_server::executor::local::LocalExecutor;
use scalebook_server::executor::slurm::{SlurmCommands, SlurmExecutor};
use scalebook_server::gate::{Connection, GateLimits, GatedListener};
use scalebook_server::learners::{self, Identities, LaunchRates};
use scalebook_server::limits::LaunchLimits;
use scalebook_server::predict::{Predictor, default_machine_cache};
use scalebook_server::routes;
use scalebook_server::runs::logdir::follow::LogdirFollower;
use scalebook_server::runs::{Executors, RunManager};
use scalebook_server::state::{AppState, ClustersFile, Configs, WsSettings};
use scalebook_server::store::RunStore;
use scalebook_shared::protocol::ClassLink;

use self::class_listener::{ClassDoors, ClassListener};

mod class_listener;

/// Where the tokens may come from instead of `--token` and `--viewer-token` (ignored on a Unix
/// socket). Read by hand rather than through clap: a variable must never appear in `--help`,
/// and one set for a TCP server must not conflict with `--unix-socket`.
const TOKEN_VARIABLE: &str = "SCALEBOOK_TOKEN";
const VIEWER_TOKEN_VARIABLE: &str = "SCALEBOOK_VIEWER_TOKEN";
/// Where the class link to follow may come from instead of `--follow` (it holds the class's
/// token, and a command line is visible to every user of the machine).
const CLASS_LINK_VARIABLE: &str = "SCALEBOOK_CLASS_LINK";
/// The share of the process's descriptors the owner's listener may hold as connections (one
/// half; the class listener's is a quarter): the owner's listener never waits on the class's
/// crowd, and a quarter stays for the runs' files and the trainers' pipes.
const MAIN_SHARE: u64 = 2;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. The default keeps the server private to this machine.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Listen on this Unix socket instead (created private to you, so no token is needed):
    /// what jupyter-server-proxy's `unix_socket: True` gives.
    #[arg(long, conflicts_with_all = ["port", "host", "token", "viewer_token"])]
    unix_socket: Option<PathBuf>,
    /// Directory with index.html, the built front-end (dist/) and the chapter files.
    #[arg(long, default_value = "static")]
    static_dir: PathBuf,
    /// The training configs offered in the notebook.
    #[arg(long, default_value = "config/ViT.yaml")]
    yaml_config: PathBuf,
    /// Where runs are kept (one directory per run).
    #[arg(long, default_value = "runs")]
    runs_dir: PathBuf,
    /// Serve under this URL path too, e.g. /user/NAME/proxy/absolute/8080 (jupyter-server-proxy
    /// with `absolute_url: True`).
    #[arg(long, default_value = "")]
    base_path: String,
    /// The access token (default: $SCALEBOOK_TOKEN, else a random one, printed in the URL).
    /// Prefer the environment variable: a command line is visible to every user of the
    /// machine (`ps`).
    #[arg(long)]
    token: Option<String>,
    /// The viewer token, for the link handed to the room: it reads and follows but never
    /// launches or cancels (default: $SCALEBOOK_VIEWER_TOKEN, else derived from the token).
    #[arg(long)]
    viewer_token: Option<String>,
    /// How many local rank processes train at once: a run of N ranks counts N (one larger
    /// than this runs alone); later runs wait, queued.
    /// (`--max-local-runs` is its old name, still accepted.)
    #[arg(long, default_value_t = 1, alias = "max-local-runs")]
    max_local_ranks: usize,
    /// Runs each learner (a page opened through the viewer link) may have queued or running at
    /// once; 0: learners launch nothing. Learner runs train on this machine's CPU, and take
    /// turns in the queue after the instructor's.
    #[arg(long, default_value_t = 0)]
    viewer_runs: u32,
    /// A config learners may launch (repeatable; default with --viewer-runs: cpu_tiny and
    /// cpu_short, those of them the config file has).
    #[arg(long = "learner-config", value_name = "NAME")]
    learner_configs: Vec<String>,
    /// Minutes a learner's run may train; then it is stopped (state `timeout`), so no launch
    /// holds the room's slots for hours.
    #[arg(long, value_name = "MINUTES", default_value_t = 30)]
    learner_time_limit: u32,
    /// The most ranks one learner's run may have: two lets every chapter's hands-on layout run
    /// (dp, tp or cp of 2). A run of more ranks than --max-local-ranks waits for the machine
    /// and then runs alone, so a room of N learners needs about 2N cores to keep every one of
    /// them training at once.
    #[arg(long, value_name = "RANKS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    learner_ranks: u32,
    /// The memory one learner's run may use, all its ranks together, in GiB (default: this
    /// machine's memory over the learner runs it runs at once, --max-local-ranks over
    /// --learner-ranks). A launch predicted to need more is refused, naming the share.
    #[arg(long, value_name = "GIB")]
    learner_memory_share: Option<f64>,
    /// A directory runs may read data from, besides the project's `data/` (repeatable). A
    /// launch naming data anywhere else is refused.
    #[arg(long = "data-root", value_name = "DIR")]
    data_roots: Vec<PathBuf>,
    /// The trainer binary (default: `scalebook-train` beside this program).
    #[arg(long)]
    trainer: Option<PathBuf>,
    /// The clusters runs may go to (default: clusters.yaml beside --yaml-config).
    #[arg(long)]
    clusters: Option<PathBuf>,
    /// Where sbatch, squeue, sacct, scontrol and scancel are (default: found on PATH).
    #[arg(long)]
    slurm_bin_dir: Option<PathBuf>,
    /// Seconds between polls of Slurm for the state of this server's jobs (one squeue for
    /// all of them); a login node is shared, so keep it at 30 or more outside tests.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    slurm_poll_secs: u64,
    /// Follow a TensorBoard logdir live (repeatable): each run in it (a directory with
    /// events.out.tfevents.* files) becomes a run, `running` while followed, and its new
    /// scalars stream to every browser.
    #[arg(long = "watch-logdir", value_name = "DIR")]
    watch_logdirs: Vec<PathBuf>,
    /// Open the class listener on this address (e.g. 0.0.0.0:8443): learners' own Scalebooks
    /// join the class through it (TLS, a follower token; it reads and follows, never launches).
    /// Prints the class link to a terminal; the instructor's page shows it too.
    #[arg(long, value_name = "ADDRESS:PORT")]
    class_listen: Option<SocketAddr>,
    /// Open the class listener on this Unix socket too (or only), for learners on this host:
    /// its directory must be yours alone to write (`mkdir -m 711 DIR`), so nobody can take
    /// the class's place. The room's class link then leads here; invitations lead to
    /// --class-listen when there is one.
    #[arg(long, value_name = "PATH")]
    class_socket: Option<PathBuf>,
    /// The host name learners reach the class listener by (default: this machine's name when
    /// listening on every address, else the address).
    #[arg(long, value_name = "NAME")]
    class_host: Option<String>,
    /// Where the class listener's certificate and follower token are kept (default:
    /// ~/.local/share/scalebook/class).
    #[arg(long, value_name = "DIR")]
    class_dir: Option<PathBuf>,
    /// Follow the class of this class link (`scalebook-class://...`; `@FILE` reads it from a
    /// file only you can read, mode 600). Prefer $SCALEBOOK_CLASS_LINK (which may be `@FILE`
    /// too): a command line is visible to every user (`ps`).
    #[arg(long, value_name = "LINK")]
    follow: Option<String>,
    /// The name the instructor's roster shows for this server when it follows a class
    /// (default: your Unix user).
    #[arg(long, value_name = "NAME")]
    class_name: Option<String>,
    /// When following a class, show the instructor a summary of your own runs (config,
    /// layout, state, latest loss and samples/s).
    #[arg(long)]
    share_runs: bool,
    /// Print the links with their tokens even when stdout is not a terminal (for wrappers that
    /// read them; a log keeps whatever is printed to it).
    #[arg(long)]
    print_links: bool,
    /// Seconds between WebSocket heartbeats.
    #[arg(long, default_value_t = 20, hide = true)]
    heartbeat_secs: u64,
    /// KiB queued for one WebSocket before it is dropped as too slow.
    #[arg(long, default_value_t = 4096, hide = true)]
    max_queued_kib: usize,
}

/// Diagnostics go to stderr through `tracing`: warnings, and one line per HTTP request and per
/// WebSocket connection, at `info` unless RUST_LOG says otherwise (`RUST_LOG=warn`,
/// `RUST_LOG=debug`). The ready line stays on stdout, where wrappers read it.
pub(super) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: logs written to a file (a Slurm log, a test) stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).try_init();
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging();
    scalebook_server::static_files::check(&args.static_dir)?;
    let configs = Configs::load(&args.yaml_config)?;
    let base = BasePath::parse(&args.base_path)?;
    let tokens = match args.unix_socket {
        Some(_) => None,
        None => Some(tokens(&args)?),
    };
    let follow = class_link_to_follow(args.follow.as_deref())?;
    let clusters_path = args.clusters.clone().unwrap_or_else(|| configs.path.with_file_name("clusters.yaml"));
    let clusters = ClustersFile::load(&clusters_path)?;
    let supervisor = scalebook_shared::program::restartable(std::env::current_exe().context("cannot find this program's own path")?);
    let command = trainer_command(&args, &supervisor)?;
    let trainer = command.trainer.clone();
    let mut limits = LaunchLimits::of_this_machine(&command.workdir, &args.data_roots)?;
    limits.learners =
        learners::settings(args.viewer_runs, args.learner_ranks, &args.learner_configs, &configs.file, args.learner_time_limit)
            .map_err(anyhow::Error::msg)?;
    if limits.learners.per_learner > 0 {
        let share = learners::memory_share(args.learner_memory_share, limits.memory_bytes, args.max_local_ranks, args.learner_ranks);
        limits.learners.memory_share_bytes = Some(share.map_err(anyhow::Error::msg)?);
    }
    let store = RunStore::open(&args.runs_dir).with_context(|| format!("cannot open the runs directory {}", args.runs_dir.display()))?;
    let ws = WsSettings {
        heartbeat: Duration::from_secs(args.heartbeat_secs.max(1)),
        max_queued_bytes: args.max_queued_kib.max(64) << 10,
        ..WsSettings::default()
    };
    let ws_heartbeat = ws.heartbeat;
    let descriptors = scalebook_server::gate::raise_descriptor_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = Listener::bind(&args).await?;
        let executors = Executors {
            local: LocalExecutor { supervisor, command: command.clone() },
            max_local_ranks: args.max_local_ranks,
            slurm: SlurmExecutor::new(
                command,
                SlurmCommands::new(args.slurm_bin_dir.as_deref()),
                Duration::from_secs(args.slurm_poll_secs),
            ),
            predictor: Predictor::new(clusters.clusters.clone(), default_machine_cache(), trainer.clone()),
        };
        // Measured now if this machine has not been yet, so the first launch need not wait.
        let (cache, measurer) = (default_machine_cache(), trainer.clone());
        tokio::task::spawn_blocking(move || {
            if let Err(e) = scalebook_server::machine::load_or_measure(&cache, &measurer) {
                tracing::warn!("local runs will have no prediction: {e}");
            }
        });
        let runs = RunManager::open(store, executors)?;
        LogdirFollower::start(runs.clone(), &args.watch_logdirs).await?;
        let classroom = Arc::<Classroom>::default();
        let doors = ClassDoors {
            tcp: args.class_listen,
            socket: args.class_socket.clone(),
            host: args.class_host.clone(),
            dir: args.class_dir.clone(),
        };
        let class = ClassListener::bind(doors, descriptors).await?;
        let following = Following::new(runs.clone(), classroom.clone(), Me::new(args.class_name.as_deref(), args.share_runs));
        let state = Arc::new(AppState {
            source_root: configs.project_root(),
            configs,
            clusters,
            limits,
            runs: runs.clone(),
            ws,
            classroom,
            class: class.as_ref().map(|c| c.key.clone()),
            shared: SharedRuns::new(runs.clone()),
            following: following.clone(),
            identities: Identities::default(),
            launch_rates: LaunchRates::default(),
        });
        // A link given now wins over the one a page joined with before.
        if let Some(link) = follow.or_else(|| following.kept_link()) {
            following.join(link);
        }
        let keyring = tokens.clone().map_or(Keyring::Private, |tokens| Keyring::Links(Arc::new(tokens)));
        let router = routes::router(state.clone(), args.static_dir.clone(), keyring)?;
        let service = routes::service(router, base.clone());
        let prefix = base.as_ref().map_or("", BasePath::as_str);
        // Links carry their token in the fragment, which no browser sends to a server. They are
        // printed in full only where no log keeps them (a terminal), when asked to, or when the
        // token was made here and there is no other way to learn it.
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let show = |token: &Token, made_here: bool| match terminal || args.print_links || made_here {
            true => token.as_str().to_owned(),
            false => "…".to_owned(),
        };
        if let Some(class) = &class {
            let link = class.key.link();
            match terminal || args.print_links {
                true => println!("Class link (learners join with it: scalebook serve --follow LINK, or the page's Join a class): {link}"),
                false => println!("Class listener on {}: its class link is in the instructor's page (Class)", link.address()),
            }
        }
        // Tests and wrappers read the ready line to learn the URL; keep its shape stable, and
        // last, so that when it comes everything is printed.
        match (&listener, &tokens) {
            (Listener::Tcp(l), Some(tokens)) => {
                let addr = l.local_addr()?;
                let made_here = args.token.is_none() && std::env::var(TOKEN_VARIABLE).is_err();
                let link = |token: &Token| format!("http://{addr}{prefix}/#token={}", show(token, made_here));
                println!("Instructor link (launches and cancels runs: keep it to yourself): {}", link(tokens.instructor()));
                println!("Viewer link (share this one with the room: it follows and reads, never launches): {}", link(tokens.viewer()));
                println!("Scalebook is ready: {}", link(tokens.instructor()));
            }
            (Listener::Tcp(l), None) => println!("Scalebook is ready: http://{}{prefix}/", l.local_addr()?),
            (Listener::Unix(_, path), _) => println!("Scalebook is ready: unix:{} (no token: only you can open it)", path.display()),
        }
        std::io::stdout().flush()?;
        if let Some(class) = class {
            tokio::spawn(class.serve(state));
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match listener {
            Listener::Tcp(l) => {
                // Quiet WebSockets live on their heartbeats: the idle timeout leaves room for two.
                let idle_timeout = GateLimits::default().idle_timeout.max(ws_heartbeat * 3);
                let limits = GateLimits { idle_timeout, ..GateLimits::default() }.sharing(descriptors, MAIN_SHARE);
                let gated = GatedListener::new(l, limits);
                let make = ServiceExt::<Request>::into_make_service_with_connect_info::<Connection>(service);
                axum::serve(gated, make).with_graceful_shutdown(shutdown).await?;
            }
            Listener::Unix(l, path) => {
                let make = ServiceExt::<Request>::into_make_service(service);
                axum::serve(l, make).with_graceful_shutdown(shutdown).await?;
                let _ = std::fs::remove_file(path);
            }
        }
        // Every change a browser was told of is on disk before the process ends.
        runs.flush().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// The tokens of a TCP server: each from its flag, else its environment variable; the
/// instructor's else random, the viewer's else derived from the instructor's.
fn tokens(args: &ServeArgs) -> anyhow::Result<Tokens> {
    let given = |flag: &Option<String>, variable: &str| flag.clone().or_else(|| std::env::var(variable).ok().filter(|t| !t.is_empty()));
    let instructor = match given(&args.token, TOKEN_VARIABLE) {
        Some(text) => Token::given(&text)?,
        None => Token::generate()?,
    };
    let viewer = given(&args.viewer_token, VIEWER_TOKEN_VARIABLE).map(|text| Token::given(&text)).transpose()?;
    Ok(Tokens::new(instructor, viewer)?)
}

/// The class link `--follow` (or `$SCALEBOOK_CLASS_LINK`) names, read from a file for `@FILE`.
fn class_link_to_follow(flag: Option<&str>) -> anyhow::Result<Option<ClassLink>> {
    let given = flag.map(str::to_owned).or_else(|| std::env::var(CLASS_LINK_VARIABLE).ok().filter(|l| !l.is_empty()));
    let Some(given) = given else { return Ok(None) };
    let text = match given.strip_prefix('@') {
        Some(path) => read_private_link(Path::new(path))?,
        None => given,
    };
    ClassLink::parse(&text).map(Some).map_err(|problems| anyhow::anyhow!("--follow: not a class link: {problems}"))
}

/// The class link in the file `path`, which only its owner may read or write: the link holds
/// the class's token, and a file others can read hands it to every user of the machine.
fn read_private_link(path: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;

    let shown = path.display();
    let mode = std::fs::metadata(path).with_context(|| format!("--follow: cannot read the class link from {shown}"))?.permissions().mode();
    anyhow::ensure!(
        mode & 0o077 == 0,
        "--follow: {shown} is readable or writable by others (mode {:o}), and a class link holds the class's token: a class link file is its owner's only (chmod 600 {shown})",
        mode & 0o777
    );
    std::fs::read_to_string(path).with_context(|| format!("--follow: cannot read the class link from {shown}"))
}

/// The trainer runs are started with: `--trainer`, or `scalebook-train` beside `scalebook`.
fn trainer_command(args: &ServeArgs, scalebook: &Path) -> anyhow::Result<TrainerCommand> {
    let trainer = match &args.trainer {
        Some(path) => std::path::absolute(path)?,
        None => scalebook.with_file_name("scalebook-train"),
    };
    Ok(TrainerCommand { trainer, workdir: std::env::current_dir()? })
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

impl Listener {
    async fn bind(args: &ServeArgs) -> anyhow::Result<Listener> {
        match &args.unix_socket {
            Some(path) => Ok(Listener::Unix(bind_private_socket(path)?, path.clone())),
            None => {
                let addr = SocketAddr::new(args.host, args.port);
                let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
                Ok(Listener::Tcp(listener))
            }
        }
    }
}

/// Binds a Unix socket that only this user can connect to (mode 0600 from the start: the
/// umask is narrowed around `bind`, so there is no moment when others could connect). A
/// socket file left by a server that is gone is replaced; one a live server answers on is not.
fn bind_private_socket(path: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    use nix::sys::stat::{Mode, umask};

    if let Ok(meta) = std::fs::symlink_metadata(path) {
        anyhow::ensure!(meta.file_type().is_socket(), "{} exists and is not a socket", path.display());
        anyhow::ensure!(std::os::unix::net::UnixStream::connect(path).is_err(), "{} is in use by a running server", path.display());
        std::fs::remove_file(path)?;
    }
    let previous = umask(Mode::from_bits_truncate(0o177));
    let bound = tokio::net::UnixListener::bind(path);
    umask(previous);
    let listener = bound.with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}
