//! What the load benchmarks share: a real `scalebook serve` on a free port with the tutorial's
//! configs and a tiny synthetic dataset, its memory, and the statistics they report.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::protocol::{ClientMessage, RunId, ServerMessage};
use tokio_tungstenite::tungstenite::Message;

pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A server started for a benchmark, killed when dropped.
pub struct Served {
    pub child: Child,
    /// `host:port`.
    pub addr: String,
    pub token: String,
    pub viewer_token: String,
}

impl Served {
    /// The WebSocket URL for `token`.
    pub fn ws_url(&self, token: &str) -> String {
        format!("ws://{}/api/ws?token={token}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds since the Unix epoch (the trainer stamps points with the same clock).
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The server's resident memory in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A built binary: examples live in `target/<profile>/examples/`.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let path = exe.parent().and_then(Path::parent).expect("target directory").join(name);
    assert!(path.is_file(), "{} is not built: run `cargo build --bins` first", path.display());
    path
}

/// The project's root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Starts the server with a stub page, its runs and data in `scratch`.
pub fn start_server(scratch: &Path, extra_args: &[&str]) -> Served {
    let workspace = workspace();
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
        .args(extra_args)
        .current_dir(&workspace)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let token_of = |line: &str| line.rsplit_once("#token=").map(|(_, token)| token.to_owned());
    let mut viewer_token = None;
    let url = lines
        .find_map(|l| {
            let line = l.ok()?;
            if line.starts_with("Viewer link") {
                viewer_token = token_of(&line);
            }
            line.strip_prefix("Scalebook is ready: http://").map(str::to_owned)
        })
        .expect("no URL");
    // Keep draining the server's output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let (addr, token) = url.split_once("/#token=").expect("a token URL");
    Served { child, addr: addr.to_owned(), token: token.to_owned(), viewer_token: viewer_token.expect("no viewer link") }
}

/// The tiny synthetic dataset the tests use (40 x 80 grid, one year), as launch overrides.
pub fn tiny_data(scratch: &Path) -> Vec<String> {
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

pub async fn send(ws: &mut Socket, message: &ClientMessage) {
    ws.send(Message::text(serde_json::to_string(message).unwrap())).await.unwrap();
}

/// The value below which a share `p` of `sorted` lies (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `p50 .. ms, p90 .. ms, p99 .. ms, max .. ms` of delays in seconds (sorted here).
pub fn delay_summary(delays: &mut [f64]) -> String {
    if delays.is_empty() {
        return "none measured".into();
    }
    delays.sort_by(f64::total_cmp);
    let ms = |p: f64| percentile(delays, p) * 1000.0;
    format!("p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms", ms(0.5), ms(0.9), ms(0.99), ms(1.0))
}

/// Launches `config` over `ws` and returns the new run's id.
pub async fn launch(ws: &mut Socket, config: &str, overrides: &[String]) -> RunId {
    let launch = serde_json::json!({ "type": "launch", "config": config, "overrides": overrides, "seed": 1 });
    ws.send(Message::text(launch.to_string())).await.unwrap();
    loop {
        let Some(Ok(Message::Text(text))) = ws.next().await else { panic!("control connection lost") };
        match serde_json::from_str::<ServerMessage>(text.as_str()).unwrap() {
            ServerMessage::Launched { run } => return run,
            ServerMessage::Error(e) => panic!("launch refused: {e:?}"),
            _ => {}
        }
    }
}

/// The highest resident memory of `pid` seen every 100 ms while it is sampled.
pub struct PeakRss {
    peak: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

impl PeakRss {
    pub fn sample(pid: u32) -> PeakRss {
        let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
        let sampler = tokio::spawn({
            let peak = peak.clone();
            async move {
                loop {
                    peak.fetch_max(rss_kib(pid), Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        PeakRss { peak, sampler }
    }

    /// The peak in KiB, sampling stopped.
    pub fn stop(self) -> u64 {
        self.sampler.abort();
        self.peak.load(Ordering::SeqCst)
    }
}

/// What one viewer saw of a run.
pub struct Seen {
    /// Seconds from the trainer's write to receipt, for every live point.
    pub delays: Vec<f64>,
    /// Points received in all (live or replayed).
    pub points: usize,
}

/// Records the points of run `id` arriving on `ws` (subscribed just before) until the run has
/// ended and its last points are in, handing every message to `also` with its time of receipt.
pub async fn watch_run(ws: &mut Socket, id: &RunId, mut also: impl FnMut(&ServerMessage, f64)) -> Seen {
    let subscribed = now();
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
        let Ok(message) = serde_json::from_str::<ServerMessage>(text.as_str()) else { continue };
        match &message {
            ServerMessage::Points { points, .. } => {
                seen.points += points.len();
                // Points written before this viewer subscribed were a replay, not live.
                seen.delays.extend(points.iter().filter(|p| p.point.wall >= subscribed).map(|p| received - p.point.wall));
            }
            ServerMessage::RunUpdate { run } if run.id == *id && run.state().is_final() => ended = true,
            _ => {}
        }
        also(&message, received);
    }
    seen
}
