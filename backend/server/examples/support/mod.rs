//! What the load benchmarks share: a real `scalebook serve` on a free port with the tutorial's
//! configs and a tiny synthetic dataset, its memory, the instructor's moves and the room's
//! head count, and the statistics they report.
//!
//! Each benchmark compiles its own copy of this module and uses a part of it.
#![allow(dead_code, reason = "each benchmark uses only a part of what they share")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use scalebook_harness::Serve;
use scalebook_shared::charts::XAxis;
use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::protocol::{ChartView, ClientMessage, Presentation, RunId, ServerMessage};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;

/// A client's WebSocket: a page's plain one by default, or any other stream under it (a
/// follower's TLS to a class listener).
pub type Socket<S = tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> = tokio_tungstenite::WebSocketStream<S>;

/// A server started for a benchmark (the workspace's one harness): killed when dropped, with
/// the runs it started, so a benchmark that fails half-way leaves no trainer behind.
pub use scalebook_harness::Served;

/// Seconds since the Unix epoch (the trainer stamps points with the same clock).
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The server's resident memory in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The part of the server's resident memory that is its own (heap, stacks) in KiB: without the
/// pages of the binary and libraries, which every process of the same program shares, so a
/// sum over many servers counts them once per process.
pub fn anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon:")
}

/// A field of `/proc/PID/status` in KiB (0 once the process is gone).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A built binary: examples live in `target/<profile>/examples/`, beside `deps/`.
fn binary(name: &str) -> PathBuf {
    scalebook_harness::workspace_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Starts the server with a stub page, its runs and data in `scratch`.
pub fn start_server(scratch: &Path, extra_args: &[&str]) -> Served {
    start_server_with(scratch, extra_args, &[])
}

/// As [`start_server`], with `env` added to the server's environment.
pub fn start_server_with(scratch: &Path, extra_args: &[&str], env: &[(&str, &str)]) -> Served {
    let stat = scratch.join("static");
    std::fs::create_dir_all(stat.join("dist")).unwrap();
    std::fs::write(stat.join(scalebook_server::static_files::PAGE), "<!doctype html>").unwrap();
    // The data root must exist, even for a server that trains nothing.
    std::fs::create_dir_all(scratch.join("data")).unwrap();
    Serve::new(binary("scalebook"))
        // Warnings only: 500 viewers' connections would fill the terminal.
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .static_dir(stat)
        .runs_dir(scratch.join("runs"))
        .data_root(scratch.join("data"))
        .args(extra_args)
        .start()
        .unwrap_or_else(|e| panic!("{e}"))
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

pub async fn send<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut Socket<S>, message: &ClientMessage) {
    ws.send(Message::text(serde_json::to_string(message).unwrap())).await.unwrap();
}

/// The value below which a share `p` of `sorted` lies (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `p50 .. ms, p90 .. ms, p95 .. ms, p99 .. ms, max .. ms` of delays in seconds (sorted here).
pub fn delay_summary(delays: &mut [f64]) -> String {
    if delays.is_empty() {
        return "none measured".into();
    }
    delays.sort_by(f64::total_cmp);
    let ms = |p: f64| percentile(delays, p) * 1000.0;
    format!("p50 {:.0} ms, p90 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms, max {:.0} ms", ms(0.5), ms(0.9), ms(0.95), ms(0.99), ms(1.0))
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

/// The highest resident memory of a process (or of several together) seen every 100 ms while
/// it is sampled.
pub struct PeakRss {
    peak: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

impl PeakRss {
    pub fn sample(pid: u32) -> PeakRss {
        PeakRss::sample_all(vec![pid])
    }

    /// The highest total resident memory of the processes `pids` together.
    pub fn sample_all(pids: Vec<u32>) -> PeakRss {
        let total = move || pids.iter().map(|&pid| rss_kib(pid)).sum();
        let peak = Arc::new(AtomicU64::new(total()));
        let sampler = tokio::spawn({
            let peak = peak.clone();
            async move {
                loop {
                    peak.fetch_max(total(), Ordering::SeqCst);
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
pub async fn watch_run<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut Socket<S>,
    id: &RunId,
    mut also: impl FnMut(&ServerMessage, f64),
) -> Seen {
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

/// When the instructor sent each place (`nav-K` is place K), shared with every follower.
#[derive(Clone, Default)]
pub struct SentAt(Arc<Mutex<Vec<f64>>>);

impl SentAt {
    /// Place K is sent now: K is the number of places sent before.
    pub fn record(&self) -> usize {
        let mut sent = self.0.lock().unwrap();
        sent.push(now());
        sent.len() - 1
    }

    /// How many places were sent.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The place a `presenting` message received at `received` shows, and the seconds since
    /// the instructor sent it; `None` for any other message.
    pub fn delay(&self, message: &ServerMessage, received: f64) -> Option<(usize, f64)> {
        let ServerMessage::Presenting { presentation: Some(p) } = message else { return None };
        let k = p.chapter.strip_prefix("nav-")?.parse::<usize>().ok()?;
        Some((k, received - self.0.lock().unwrap()[k]))
    }
}

/// The instructor's place K: each move changes the chapter, block, element, quiz and axis, with
/// `run` charted.
pub fn place(k: usize, run: &RunId) -> Presentation {
    Presentation {
        chapter: format!("nav-{k}"),
        block: Some((k % 7) as u32),
        element: Some(k as u32),
        quiz: k.is_multiple_of(3).then_some(1),
        charts: ChartView {
            runs: vec![run.clone()],
            axis: if k.is_multiple_of(2) { XAxis::Step } else { XAxis::Relative },
            smoothing: 0.6,
            names: Vec::new(),
        },
    }
}

/// Reads the instructor's messages until it is told that `viewers` watch and all of them
/// follow; how long that took.
pub async fn until_all_follow(instructor: &mut Socket, viewers: usize) -> Duration {
    let started = Instant::now();
    // Pages and learners' servers alike count as following (viewer pages in `viewers`,
    // learners' servers in `followers`): the head count that matters is `following`.
    while let Some(Ok(message)) = instructor.next().await {
        if let Message::Text(text) = message
            && let Ok(ServerMessage::Audience(audience)) = serde_json::from_str(text.as_str())
            && audience.following as usize == viewers
        {
            return started.elapsed();
        }
    }
    panic!("the instructor's connection closed before everyone followed");
}
