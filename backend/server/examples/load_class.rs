//! Load benchmark: a class of many Scalebooks following one instructor while a run streams.
//!
//! Starts the instructor's `scalebook serve` with a class listener, then `--followers` learners'
//! servers: real `scalebook serve` processes that join the class with its link (as
//! `SCALEBOOK_CLASS_LINK`), each with one page of its own that follows and charts the
//! instructor's run through its server's copy (`i-<id>`). Beside them, `--simulated` clients
//! connect straight to the class listener as follower servers do (TLS with the certificate
//! pinned, the follower token in the upgrade, `introduce`, `follow`, `list_runs`, the run
//! subscribed), so the class listener holds a full room without a process per learner. Once
//! the instructor is told everyone follows, it launches a CPU run and, when every client has
//! subscribed to it, moves to another place every `--interval-ms` until the run ends.
//!
//! Measured at the learners' pages (two servers and two file tailers away from the trainer)
//! and at the simulated followers (one): the delay of navigation (the instructor's `present`
//! leaving its socket to the client's socket returning `presenting`), the delay of points (the
//! trainer's stamp to receipt), who saw the last place and every point; the resident memory of
//! the instructor's server and of the follower servers together; and what the instructor's own
//! page meanwhile waits for an answer (a ping every 100 ms from a page of theirs), with
//! `--silent` connections that never say a word held on the class listener (each opened again
//! when the listener closes it) and `--summaries` runs summarised by each simulated follower
//! (the roster at its largest). Every process shares this machine's cores.
//!
//! ```sh
//! ./scalebook.sh cargo build --release --bins
//! ./scalebook.sh cargo run --release -p scalebook-server --example load_class -- --followers 50 --simulated 500
//! ./scalebook.sh cargo run --release -p scalebook-server --example load_class -- --followers 0 --simulated 2048 --summaries 32 --silent 2000
//! ```

mod support;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use scalebook_server::class::tls::{self, Unreached};
use scalebook_shared::protocol::{
    ClassLink, ClientMessage, Introduction, MAX_SUMMARISED_RUNS, PROTOCOL_VERSION, RunId, RunState, RunSummary, ServerMessage,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use self::support::{
    PeakRss, Seen, SentAt, Served, Socket, anon_kib, delay_summary, launch, mib, place, rss_kib, send, start_server, start_server_with,
    tiny_data, until_all_follow, watch_run,
};

#[derive(Debug, Parser)]
struct Args {
    /// Learners' servers: `scalebook serve` processes following the class, one page each.
    #[arg(long, default_value_t = 50)]
    followers: usize,
    /// Clients on the class listener that act as follower servers.
    #[arg(long, default_value_t = 500)]
    simulated: usize,
    /// The run's config.
    #[arg(long, default_value = "cpu_tiny")]
    config: String,
    /// Training iterations (each writes a few points).
    #[arg(long, default_value_t = 2000)]
    iters: u64,
    /// The most places the instructor moves to (it stops earlier when the run ends).
    #[arg(long, default_value_t = 60)]
    navigations: usize,
    /// Time between two moves.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Connections to the class listener that never say a word, each opened again when the
    /// listener closes it.
    #[arg(long, default_value_t = 0)]
    silent: usize,
    /// Runs each simulated follower summarises for the roster (at most 32).
    #[arg(long, default_value_t = 0)]
    summaries: usize,
    /// Seconds after which the benchmark gives up (every process it started is killed).
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
}

/// Counts shown on the progress line.
#[derive(Default)]
struct Progress {
    servers: AtomicU64,
    following: AtomicU64,
    subscribed: AtomicU64,
    moves: AtomicU64,
    points: AtomicU64,
    /// Attempts of simulated followers to reach the class listener that failed.
    retries: AtomicU64,
    /// Silent connections opened (again) on the class listener.
    silent: AtomicU64,
}

impl Progress {
    /// Rewrites the progress line on the terminal every second, until the task is aborted.
    fn show(self: &Arc<Self>, args: &Args) -> JoinHandle<()> {
        let (progress, started) = (self.clone(), Instant::now());
        let (followers, clients) = (args.followers, args.followers + args.simulated);
        tokio::spawn(async move {
            loop {
                let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
                eprint!(
                    "\r[{:4.0} s] servers {}/{followers}, following {}/{clients}, subscribed {}/{clients}, moves {}, points received {}, retries {}, silent opened {}   ",
                    started.elapsed().as_secs_f64(),
                    count(&progress.servers),
                    count(&progress.following),
                    count(&progress.subscribed),
                    count(&progress.moves),
                    count(&progress.points),
                    count(&progress.retries),
                    count(&progress.silent),
                );
                let _ = std::io::stderr().flush();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
}

/// What one client saw.
struct Followed {
    seen: Seen,
    /// Seconds from the instructor's send to receipt, per place received.
    navigation: Vec<f64>,
    /// The last place it was sent.
    last: Option<usize>,
    /// Points that arrived after the run's final state.
    late: usize,
}

/// The run once launched (`None` until then).
type Launched = watch::Receiver<Option<RunId>>;

/// Waits for the launch, then reads `ws` until the run `local_id` names is known there (a run
/// update, or the list of runs), subscribes to it and records what arrives until it ends.
async fn chart<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut ws: Socket<S>,
    mut launched: Launched,
    local_id: impl Fn(&RunId) -> RunId,
    after_log_seq: Option<u64>,
    progress: Arc<Progress>,
    sent_at: SentAt,
) -> Followed {
    let upstream = launched.wait_for(Option::is_some).await.expect("the benchmark ended before the launch").clone().unwrap();
    let id = local_id(&upstream);
    loop {
        let Some(Ok(message)) = ws.next().await else { panic!("connection lost before run {id} was known") };
        let Message::Text(text) = message else { continue };
        let known = match serde_json::from_str::<ServerMessage>(text.as_str()) {
            Ok(ServerMessage::RunUpdate { run }) => run.id == id,
            Ok(ServerMessage::Runs { runs, .. }) => runs.iter().any(|r| r.id == id),
            _ => false,
        };
        if known {
            break;
        }
    }
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq }).await;
    progress.subscribed.fetch_add(1, Ordering::Relaxed);
    let (mut navigation, mut last, mut ended, mut late) = (Vec::new(), None, false, 0);
    let seen = watch_run(&mut ws, &id, |message, received| {
        match message {
            ServerMessage::Points { points, .. } => {
                progress.points.fetch_add(points.len() as u64, Ordering::Relaxed);
                late += if ended { points.len() } else { 0 };
            }
            ServerMessage::RunUpdate { run } if run.id == id => ended = run.state().is_final(),
            _ => {}
        }
        if let Some((k, delay)) = sent_at.delay(message, received) {
            navigation.push(delay);
            last = Some(k);
        }
    })
    .await;
    Followed { seen, navigation, last, late }
}

/// A learner's page on their own server (its owner's link): follows, and charts the server's
/// copy of the instructor's run.
async fn page(url: String, launched: Launched, progress: Arc<Progress>, sent_at: SentAt) -> Followed {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("page connect");
    send(&mut ws, &ClientMessage::Follow { following: true }).await;
    progress.following.fetch_add(1, Ordering::Relaxed);
    let copy = |upstream: &RunId| RunId::parse(&format!("i-{upstream}")).unwrap();
    chart(ws, launched, copy, None, progress, sent_at).await
}

/// Opens the class listener's WebSocket as a follower server does: TCP (or the socket), TLS
/// accepting only the link's certificate, the follower token in the upgrade's header.
async fn follower_socket(link: &ClassLink) -> Result<Socket<TlsStream<tls::Wire>>, String> {
    let tls = tls::reach(link).await.map_err(|unreached| match unreached {
        Unreached::Refused(why) | Unreached::Away(why) => why,
    })?;
    let mut request = format!("wss://{}/api/ws", link.authority()).into_client_request().map_err(|e| e.to_string())?;
    request.headers_mut().insert("authorization", tls::bearer(link).map_err(|e| e.to_string())?);
    let (ws, _) = tokio_tungstenite::client_async(request, tls).await.map_err(|e| e.to_string())?;
    Ok(ws)
}

/// How many times a simulated follower tries to reach the class listener before the
/// benchmark gives up on it.
const ATTEMPTS: u32 = 40;

/// A follower server as the class listener sees it: joins (trying again after half a second,
/// a follower server's first wait, when the listener turns it away), introduces
/// itself, follows, lists the runs and copies the instructor's run, log included.
async fn simulated(
    link: Arc<ClassLink>,
    k: usize,
    runs: Option<Vec<RunSummary>>,
    launched: Launched,
    progress: Arc<Progress>,
    sent_at: SentAt,
) -> Followed {
    let mut attempt = 1;
    let mut ws = loop {
        match follower_socket(&link).await {
            Ok(ws) => break ws,
            Err(e) if attempt == ATTEMPTS => panic!("simulated follower {k} could not join in {ATTEMPTS} attempts: {e}"),
            Err(_) => {
                attempt += 1;
                progress.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let introduction = Introduction { name: format!("simulated-{k}"), runs };
    let joining = [
        ClientMessage::Hello { version: PROTOCOL_VERSION, token: None, learner_key: None },
        ClientMessage::Introduce(introduction),
        ClientMessage::Follow { following: true },
        ClientMessage::ListRuns { before: None },
    ];
    for message in &joining {
        send(&mut ws, message).await;
    }
    progress.following.fetch_add(1, Ordering::Relaxed);
    chart(ws, launched, RunId::clone, Some(0), progress, sent_at).await
}

/// `count` runs as a follower summarises them, of the longest ids and config names.
fn summaries(count: usize) -> Option<Vec<RunSummary>> {
    let run = |i: usize| RunSummary {
        id: RunId::parse(&format!("{i:02}-{}", "r".repeat(61))).unwrap(),
        config: format!("{i:02}-{}", "c".repeat(61)),
        layout: Default::default(),
        state: RunState::Running,
        loss: Some(0.123_456_789),
        samples_per_sec: Some(12_345.678_9),
    };
    (count > 0).then(|| (0..count.min(MAX_SUMMARISED_RUNS)).map(run).collect())
}

/// A connection to the class listener that never says a word, opened again each time the
/// listener closes it, until aborted.
async fn silent(link: Arc<ClassLink>, progress: Arc<Progress>) {
    loop {
        match tls::connect(&link.address).await {
            Ok(mut tcp) => {
                progress.silent.fetch_add(1, Ordering::Relaxed);
                // Until the listener closes it (a read of nothing, or a reset).
                let _ = tokio::io::AsyncReadExt::read(&mut tcp, &mut [0u8; 1]).await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A page of the instructor's own, asking all along: a ping every 100 ms until `stop`, and
/// each answer's wait in seconds.
async fn owner(url: String, stop: Arc<AtomicBool>) -> Vec<f64> {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("the owner's page connects");
    let mut waits = Vec::new();
    for nonce in 1.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let sent = Instant::now();
        send(&mut ws, &ClientMessage::Ping { nonce }).await;
        while let Some(Ok(message)) = ws.next().await {
            if let Message::Text(text) = message
                && let Ok(ServerMessage::Pong { nonce: answered }) = serde_json::from_str(text.as_str())
                && answered == nonce
            {
                break;
            }
        }
        waits.push(sent.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    waits
}

/// Starts `count` learners' servers following the class of `link`, each in its own directory.
fn start_followers(scratch: &Path, link: &str, count: usize, progress: &Progress) -> Vec<Served> {
    (0..count)
        .map(|k| {
            let dir = scratch.join(format!("learner-{k}"));
            // Nothing of a learner's server lands in this user's own data directory.
            let data_home = dir.join("data-home").display().to_string();
            let env = [("SCALEBOOK_CLASS_LINK", link), ("XDG_DATA_HOME", data_home.as_str())];
            let served = start_server_with(&dir, &["--class-name", &format!("learner-{k}")], &env);
            progress.servers.fetch_add(1, Ordering::Relaxed);
            served
        })
        .collect()
}

/// What a group of clients saw, in a table row's figures.
#[derive(Default)]
struct Summary {
    clients: usize,
    reached_last: usize,
    complete: usize,
    /// Clients told the run's final state before its last points, and those points.
    told_early: usize,
    late: usize,
    navigation: Vec<f64>,
    points: Vec<f64>,
}

impl Summary {
    fn of(followed: Vec<Followed>, last: Option<usize>, lines: usize) -> Summary {
        let mut summary = Summary { clients: followed.len(), ..Summary::default() };
        for f in followed {
            summary.reached_last += usize::from(f.last.is_some() && f.last == last);
            summary.complete += usize::from(f.seen.points == lines);
            summary.told_early += usize::from(f.late > 0);
            summary.late += f.late;
            summary.navigation.extend(f.navigation);
            summary.points.extend(f.seen.delays);
        }
        summary
    }

    fn print(mut self, who: &str) {
        println!("{who}: {}", self.clients);
        println!("  reached the last place: {} of {}", self.reached_last, self.clients);
        println!("  navigation delay send -> receipt ({} deliveries): {}", self.navigation.len(), delay_summary(&mut self.navigation));
        println!("  received every point: {} of {}", self.complete, self.clients);
        println!("  told the run ended before its last points: {} of {} ({} points after)", self.told_early, self.clients, self.late);
        println!("  point delay write -> receipt ({} deliveries): {}", self.points.len(), delay_summary(&mut self.points));
    }
}

async fn all(tasks: Vec<JoinHandle<Followed>>) -> Vec<Followed> {
    let mut done = Vec::with_capacity(tasks.len());
    for task in tasks {
        done.push(task.await.expect("a client failed"));
    }
    done
}

fn main() {
    let args = Args::parse();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-class-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let mut overrides = tiny_data(scratch);
    overrides.push(format!("num_iters={}", args.iters));
    let class_dir = scratch.join("class").display().to_string();
    let instructor = start_server(scratch, &["--class-listen", "127.0.0.1:0", "--class-dir", &class_dir, "--print-links"]);
    let link_text = instructor.class_link.clone().expect("no class link printed");
    let link = Arc::new(ClassLink::parse(&link_text).expect("a class link"));
    let pid = instructor.pid();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let progress = Arc::new(Progress::default());
    // Shown from the runtime's workers while this thread starts the follower servers.
    let shown = {
        let _context = runtime.enter();
        progress.show(&args)
    };
    let idle_rss = rss_kib(pid);

    let started = Instant::now();
    let followers = start_followers(scratch, &link_text, args.followers, &progress);
    let start_time = started.elapsed();
    let pids: Vec<u32> = followers.iter().map(|f| f.pid()).collect();
    let followers_idle: u64 = pids.iter().map(|&pid| rss_kib(pid)).sum();

    let bench = async {
        let sent_at = SentAt::default();
        let (launch_to, launched) = watch::channel(None);
        let peak = PeakRss::sample(pid);
        let followers_peak = PeakRss::sample_all(pids.clone());
        let (mut control, _) = tokio_tungstenite::connect_async(&instructor.ws_url(&instructor.token)).await.unwrap();
        let stop_owner = Arc::new(AtomicBool::new(false));
        let owner = tokio::spawn(owner(instructor.ws_url(&instructor.token), stop_owner.clone()));
        let silent: Vec<_> = (0..args.silent).map(|_| tokio::spawn(silent(link.clone(), progress.clone()))).collect();
        let runs = summaries(args.summaries);
        let joined = Instant::now();
        let pages: Vec<_> =
            followers.iter().map(|f| tokio::spawn(page(f.ws_url(&f.token), launched.clone(), progress.clone(), sent_at.clone()))).collect();
        let simulated: Vec<_> = (0..args.simulated)
            .map(|k| tokio::spawn(simulated(link.clone(), k, runs.clone(), launched.clone(), progress.clone(), sent_at.clone())))
            .collect();
        until_all_follow(&mut control, args.followers + args.simulated).await;
        let join_time = joined.elapsed();
        let joined_rss = (rss_kib(pid), pids.iter().map(|&pid| rss_kib(pid)).sum::<u64>());
        let joined_anon: u64 = pids.iter().map(|&pid| anon_kib(pid)).sum();

        let id = launch(&mut control, &args.config, &overrides).await;
        let run_started = Instant::now();
        launch_to.send_replace(Some(id.clone()));
        // The instructor's own messages are read and dropped; the run's end stops the moves.
        let ended = Arc::new(AtomicBool::new(false));
        let (mut to_server, from_server) = control.split();
        let drain = tokio::spawn({
            let (ended, id) = (ended.clone(), id.clone());
            from_server.for_each(move |message| {
                if let Ok(Message::Text(text)) = message
                    && let Ok(ServerMessage::RunUpdate { run }) = serde_json::from_str(text.as_str())
                    && run.id == id
                    && run.state().is_final()
                {
                    ended.store(true, Ordering::SeqCst);
                }
                async {}
            })
        });
        let clients = (args.followers + args.simulated) as u64;
        while progress.subscribed.load(Ordering::Relaxed) < clients {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let subscribe_time = run_started.elapsed();
        for _ in 0..args.navigations {
            tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
            if ended.load(Ordering::SeqCst) {
                break;
            }
            let k = sent_at.record();
            let present = ClientMessage::Present { presentation: place(k, &id) };
            to_server.send(Message::text(serde_json::to_string(&present).unwrap())).await.unwrap();
            progress.moves.fetch_add(1, Ordering::Relaxed);
        }
        let (pages, simulated) = (all(pages).await, all(simulated).await);
        let run_time = run_started.elapsed();
        stop_owner.store(true, Ordering::SeqCst);
        let mut owner_waits = owner.await.expect("the owner's page");
        for task in &silent {
            task.abort();
        }
        let ended_anon: u64 = pids.iter().map(|&pid| anon_kib(pid)).sum();
        let (peak, followers_peak) = (peak.stop(), followers_peak.stop());
        drain.abort();
        shown.abort();
        eprintln!();

        let lines = instructor.metrics_lines(&id);
        let moves = sent_at.count();
        let last = moves.checked_sub(1);
        let n = args.followers.max(1) as f64;
        println!(
            "class: the instructor's server, {} follower servers (one page each), {} simulated followers",
            args.followers, args.simulated
        );
        println!("follower servers started in {:.1} s", start_time.as_secs_f64());
        println!("everyone joined and counted as following in {:.2} s", join_time.as_secs_f64());
        println!("simulated followers' failed attempts to reach the class listener: {}", progress.retries.load(Ordering::Relaxed));
        println!("every client subscribed {:.2} s after the launch", subscribe_time.as_secs_f64());
        println!("run: {} with num_iters={}, {lines} points, {:.1} s", args.config, args.iters, run_time.as_secs_f64());
        println!("navigation: {moves} moves every {} ms", args.interval_ms);
        Summary::of(pages, last, lines).print("learners' pages (on the follower servers)");
        Summary::of(simulated, last, lines).print("simulated followers (on the class listener)");
        println!(
            "the instructor's own page meanwhile, a ping every 100 ms ({} answered): {}",
            owner_waits.len(),
            delay_summary(&mut owner_waits)
        );
        println!(
            "silent connections on the class listener: {} held, opened {} times",
            args.silent,
            progress.silent.load(Ordering::Relaxed)
        );
        println!(
            "instructor's server RSS: idle {:.1} MiB, everyone following {:.1} MiB, peak {:.1} MiB",
            mib(idle_rss),
            mib(joined_rss.0),
            mib(peak)
        );
        println!(
            "follower servers' RSS, all together: idle {:.1} MiB ({:.1} each), everyone following {:.1} MiB, peak {:.1} MiB ({:.1} each)",
            mib(followers_idle),
            mib(followers_idle) / n,
            mib(joined_rss.1),
            mib(followers_peak),
            mib(followers_peak) / n
        );
        println!(
            "  of which their own (RssAnon, the rest is the binary's and libraries' pages they share): everyone following {:.1} MiB ({:.2} each), after the run {:.1} MiB ({:.2} each)",
            mib(joined_anon),
            mib(joined_anon) / n,
            mib(ended_anon),
            mib(ended_anon) / n
        );
    };
    runtime.block_on(async {
        tokio::select! {
            done = tokio::time::timeout(Duration::from_secs(args.timeout_secs), bench) => {
                done.unwrap_or_else(|_| panic!("\nthe benchmark took more than {} s", args.timeout_secs));
            }
            _ = tokio::signal::ctrl_c() => panic!("\ninterrupted"),
        }
    });
}
