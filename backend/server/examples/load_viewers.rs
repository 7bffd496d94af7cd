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

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use scalebook_shared::protocol::{ClientMessage, RunId};

use self::support::{PeakRss, Seen, delay_summary, launch, mib, rss_kib, send, start_server, tiny_data, watch_run};

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

/// One viewer: subscribes from the first point and records every point until the run ends.
async fn view(url: String, id: RunId, connected: Arc<AtomicU64>) -> Seen {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("viewer connect");
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: None }).await;
    connected.fetch_add(1, Ordering::SeqCst);
    watch_run(&mut ws, &id, |_, _| {}).await
}

fn main() {
    let args = Args::parse();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-load-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let mut overrides = tiny_data(scratch);
    overrides.push(format!("num_iters={}", args.iters));
    let server = start_server(scratch, &[]);
    let pid = server.pid();
    let url = server.ws_url(&server.token);
    // The room watches through the viewer link, as in a class.
    let viewer_url = server.ws_url(&server.viewer_token);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let idle_rss = rss_kib(pid);
        let (mut control, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let id = launch(&mut control, &args.config, &overrides).await;
        let connected = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let viewers: Vec<_> = (0..args.viewers).map(|_| tokio::spawn(view(viewer_url.clone(), id.clone(), connected.clone()))).collect();
        let peak = PeakRss::sample(pid);
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
        let peak = peak.stop();
        let in_file = server.metrics_lines(&id);
        let complete = points.iter().filter(|&&p| p == in_file).count();
        println!("viewers: {} (all connected and subscribed in {:.2} s)", args.viewers, connect_time.as_secs_f64());
        println!("run: {} with num_iters={}, {in_file} points, {:.1} s", args.config, args.iters, started.elapsed().as_secs_f64());
        println!("viewers that received every point: {complete} of {}", args.viewers);
        println!("live deliveries measured: {}", delays.len());
        println!("delay write -> receipt: {}", delay_summary(&mut delays));
        println!("server RSS: idle {:.1} MiB, viewers connected {:.1} MiB, peak {:.1} MiB", mib(idle_rss), mib(connected_rss), mib(peak));
    });
}
