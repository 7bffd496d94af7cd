//! Load benchmark: a classroom of WebSocket viewers on one live run.
//!
//! Starts `scalebook serve` on a free local port, launches a CPU run, connects `--viewers`
//! browsers' worth of WebSocket clients that each subscribe to it, and measures, for every
//! point each viewer receives live, the delay from the trainer writing it (the point's
//! `wall`, stamped by the trainer just before it appends the line) to the viewer receiving
//! it, plus the server's resident memory (`VmRSS` in `/proc`) before and while they watch.
//! Everything runs on this machine (server, trainer and viewers share its cores), with the
//! debug build `./scalebook.sh run` serves.
//!
//! ```sh
//! cargo build --bins && cargo run --example load_viewers -p scalebook-server -- --viewers 200
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::protocol::{ClientMessage, RunId, ServerMessage};
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Parser)]
struct Args {
    /// WebSocket viewers subscribed to the run.
    #[arg(long, default_value_t = 200)]
    viewers: usize,
    /// The run's config.
    #[arg(long, default_value = "cpu_tiny")]
    config: String,
    /// Training iterations (each writes a few points).
    #[arg(long, default_value_t = 2000)]
    iters: u64,
}

/// What one viewer saw.
struct Seen {
    /// Seconds from the trainer's write to receipt, for every live point.
    delays: Vec<f64>,
    /// Points received in all (live or replayed).
    points: usize,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The server's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A built binary: examples live in `target/<profile>/examples/`.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let path = exe.parent().and_then(Path::parent).expect("target directory").join(name);
    assert!(path.is_file(), "{} is not built: run `cargo build --bins` first", path.display());
    path
}

/// Starts the server with a stub page and returns it with `host:port` and the token.
fn start_server(scratch: &Path, workspace: &Path) -> (Child, String, String) {
    let stat = scratch.join("static");
    std::fs::create_dir_all(stat.join("dist")).unwrap();
    std::fs::write(stat.join(scalebook_server::static_files::PAGE), "<!doctype html>").unwrap();
    let mut child = Command::new(binary("scalebook"))
        // Warnings only: 500 viewers' connections would fill the terminal.
        .env("RUST_LOG", "warn")
        .args(["serve", "--port", "0", "--static-dir"])
        .arg(&stat)
        .arg("--runs-dir")
        .arg(scratch.join("runs"))
        .arg("--yaml-config")
        .arg(workspace.join("config/ViT.yaml"))
        .arg("--data-root")
        .arg(scratch.join("data"))
        .current_dir(workspace)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let url = lines.find_map(|l| l.ok()?.strip_prefix("Scalebook is ready: http://").map(str::to_owned)).expect("no URL");
    // Keep draining the server's output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let (addr, token) = url.split_once("/?token=").expect("a token URL");
    (child, addr.to_owned(), token.to_owned())
}

/// The tiny synthetic dataset the tests use (40 x 80 grid, one year).
fn tiny_data(scratch: &Path) -> Vec<String> {
    let dir = scratch.join("data");
    let status = Command::new(binary("scalebook-train"))
        .args(["datagen", "--force", "--years", "1", "--steps-per-year", "48", "--height", "40", "--width", "80", "--out"])
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "datagen failed");
    data_dir_overrides(&dir.display().to_string())
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send(ws: &mut Socket, message: &ClientMessage) {
    ws.send(Message::text(serde_json::to_string(message).unwrap())).await.unwrap();
}

/// One viewer: subscribes from the first point and records every point until the run ends.
async fn view(url: String, id: RunId, connected: Arc<AtomicU64>) -> Seen {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("viewer connect");
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: None }).await;
    let subscribed = now();
    connected.fetch_add(1, Ordering::SeqCst);
    let mut seen = Seen { delays: Vec::new(), points: 0 };
    let mut ended = false;
    loop {
        // Run updates and points travel separately: after the final state, wait until the
        // last points have arrived too (a second of silence).
        let next = match ended {
            false => ws.next().await,
            true => tokio::time::timeout(Duration::from_secs(1), ws.next()).await.ok().flatten(),
        };
        let Some(Ok(message)) = next else { break };
        let received = now();
        let Message::Text(text) = message else { continue };
        match serde_json::from_str::<ServerMessage>(text.as_str()) {
            Ok(ServerMessage::Points { points, .. }) => {
                seen.points += points.len();
                // Points written before this viewer subscribed were a replay, not live.
                seen.delays.extend(points.iter().filter(|p| p.point.wall >= subscribed).map(|p| received - p.point.wall));
            }
            Ok(ServerMessage::RunUpdate { run }) if run.id == id && run.state().is_final() => ended = true,
            _ => {}
        }
    }
    seen
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args = Args::parse();
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-load-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let mut overrides = tiny_data(scratch);
    overrides.push(format!("num_iters={}", args.iters));
    let (mut server, addr, token) = start_server(scratch, &workspace);
    let pid = server.id();
    let url = format!("ws://{addr}/api/ws?token={token}");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let idle_rss = rss_kib(pid);
        let (mut control, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let launch = serde_json::json!({ "type": "launch", "config": args.config, "overrides": overrides, "seed": 1 });
        control.send(Message::text(launch.to_string())).await.unwrap();
        let id = loop {
            let Some(Ok(Message::Text(text))) = control.next().await else { panic!("control connection lost") };
            match serde_json::from_str::<ServerMessage>(text.as_str()).unwrap() {
                ServerMessage::Launched { run } => break run,
                ServerMessage::Error(e) => panic!("launch refused: {e:?}"),
                _ => {}
            }
        };
        let connected = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let viewers: Vec<_> = (0..args.viewers).map(|_| tokio::spawn(view(url.clone(), id.clone(), connected.clone()))).collect();
        let peak = Arc::new(AtomicU64::new(idle_rss));
        let sampler = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(pid), Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        while connected.load(Ordering::SeqCst) < args.viewers as u64 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let connect_time = started.elapsed();
        let connected_rss = rss_kib(pid);
        let mut delays = Vec::new();
        let mut points = Vec::new();
        for viewer in viewers {
            let seen = viewer.await.unwrap();
            delays.extend(seen.delays);
            points.push(seen.points);
        }
        sampler.abort();
        let in_file = std::fs::read_to_string(scratch.join("runs").join(id.as_str()).join(scalebook_shared::rundir::METRICS))
            .unwrap()
            .lines()
            .count();
        delays.sort_by(f64::total_cmp);
        let complete = points.iter().filter(|&&p| p == in_file).count();
        println!("viewers: {} (all connected and subscribed in {:.2} s)", args.viewers, connect_time.as_secs_f64());
        println!("run: {} with num_iters={}, {in_file} points, {:.1} s", args.config, args.iters, started.elapsed().as_secs_f64());
        println!("viewers that received every point: {complete} of {}", args.viewers);
        println!("live deliveries measured: {}", delays.len());
        let ms = |p: f64| percentile(&delays, p) * 1000.0;
        println!("delay write -> receipt: p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms", ms(0.5), ms(0.9), ms(0.99), ms(1.0));
        let mib = |kib: u64| kib as f64 / 1024.0;
        let peak = peak.load(Ordering::SeqCst);
        println!("server RSS: idle {:.1} MiB, viewers connected {:.1} MiB, peak {:.1} MiB", mib(idle_rss), mib(connected_rss), mib(peak));
    });
    let _ = server.kill();
    let _ = server.wait();
}
