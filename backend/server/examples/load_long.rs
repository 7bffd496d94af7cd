//! Load benchmark: runs as long as the tutorial's, streamed from a server that just started.
//!
//! Writes a finished run of `--steps` steps (seven per-step tags a step, as the trainer's)
//! into a fresh runs directory, starts `scalebook serve` on it, and measures:
//! - a new viewer: the time from its `subscribe` to the whole run's history (every point
//!   folded, up to the last line), and to that of a second viewer once the first read it;
//! - `--behind` viewers at once, each resuming `--behind-points` points before the end: the time
//!   until every one of them has every point, and how many did;
//!
//! with the server's peak resident memory (sampled every 100 ms) throughout, and the slowest
//! answer to another client's ping meanwhile (its own thread here; the viewers' decoding shares
//! this machine's cores with the server, so it counts in that figure too).
//!
//! ```sh
//! cargo build --release --bins --examples
//! target/release/examples/load_long --steps 30000 --behind 100 --behind-points 100000
//! ```

mod support;

use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use scalebook_shared::protocol::{ClientMessage, RunId, ServerMessage};
use tokio_tungstenite::tungstenite::Message;

use self::support::{PeakRss, Socket, mib, rss_kib, send, start_server};

#[derive(Debug, Parser)]
struct Args {
    /// Steps of the finished run (seven metric lines each).
    #[arg(long, default_value_t = 30_000)]
    steps: u64,
    /// Viewers resuming far behind, all at once.
    #[arg(long, default_value_t = 100)]
    behind: usize,
    /// How far behind each of them resumes, in points.
    #[arg(long, default_value_t = 100_000)]
    behind_points: u64,
}

/// The next protocol message on `ws` (`None` once it closed).
async fn next(ws: &mut Socket) -> Option<ServerMessage> {
    loop {
        match ws.next().await? {
            Ok(Message::Text(text)) => return serde_json::from_str(text.as_str()).ok(),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Subscribes from scratch and waits for the history: seconds taken and its last line.
async fn history(url: &str, id: &RunId) -> (f64, u64) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let started = Instant::now();
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: None, after_log_seq: None }).await;
    loop {
        match next(&mut ws).await.expect("the connection closed before the history") {
            ServerMessage::History { upto_seq, .. } => return (started.elapsed().as_secs_f64(), upto_seq),
            _ => continue,
        }
    }
}

/// Resumes after line `after` and reads until line `last`: whether it got every one.
async fn resume(url: String, id: RunId, after: u64, last: u64) -> bool {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: Some(after), after_log_seq: None }).await;
    let mut expected = after + 1;
    while expected <= last {
        match next(&mut ws).await {
            Some(ServerMessage::Points { points, .. }) => {
                for point in points {
                    if point.seq != expected {
                        return false;
                    }
                    expected += 1;
                }
            }
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// Pings every 50 ms until `stop`; the slowest answer.
async fn ping(url: String, stop: tokio::sync::watch::Receiver<bool>) -> Duration {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut slowest = Duration::ZERO;
    for nonce in 0.. {
        if *stop.borrow() {
            break;
        }
        let sent = Instant::now();
        send(&mut ws, &ClientMessage::Ping { nonce }).await;
        while !matches!(next(&mut ws).await, Some(ServerMessage::Pong { nonce: n }) if n == nonce) {}
        slowest = slowest.max(sent.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    slowest
}

fn main() {
    let args = Args::parse();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-long-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let id = RunId::parse("20261126T000000-1").unwrap();
    let written = Instant::now();
    let lines = scalebook_harness::write_finished_run(&scratch.join("runs"), &id, args.steps).unwrap();
    let bytes = std::fs::metadata(scratch.join("runs").join(id.as_str()).join("metrics.jsonl")).unwrap().len();
    println!(
        "run: {} steps, {lines} points, {:.1} MB (written in {:.1} s)",
        args.steps,
        bytes as f64 / 1e6,
        written.elapsed().as_secs_f64()
    );
    let server = start_server(scratch, &[]);
    let pid = server.pid();
    let url = server.ws_url(&server.viewer_token);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let idle = rss_kib(pid);
        let peak = PeakRss::sample(pid);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        // On a thread and runtime of its own, so the viewers' decoding here does not starve it.
        let pinger = std::thread::spawn({
            let url = url.clone();
            move || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(ping(url, stopped))
        });
        let (first, upto) = history(&url, &id).await;
        let (second, _) = history(&url, &id).await;
        println!("new viewer: the whole history (up to line {upto}) in {first:.2} s; a second viewer in {second:.3} s");
        let after = lines.saturating_sub(args.behind_points);
        let started = Instant::now();
        let viewers: Vec<_> = (0..args.behind).map(|_| tokio::spawn(resume(url.clone(), id.clone(), after, lines))).collect();
        let mut complete = 0;
        for viewer in viewers {
            complete += usize::from(viewer.await.unwrap());
        }
        let took = started.elapsed().as_secs_f64();
        stop.send(true).unwrap();
        let slowest = pinger.join().unwrap();
        println!(
            "{} viewers resuming {} points behind: {complete} of them got every point, all done in {took:.1} s",
            args.behind,
            lines - after
        );
        println!("another client's slowest ping meanwhile: {} ms", slowest.as_millis());
        println!("server RSS: idle {:.1} MiB, peak {:.1} MiB", mib(idle), mib(peak.stop()));
    });
}
