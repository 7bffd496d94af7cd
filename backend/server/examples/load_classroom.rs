//! Load benchmark: a classroom following its instructor while a run streams.
//!
//! Starts `scalebook serve`, launches a CPU run from the instructor's link, connects
//! `--viewers` clients on the viewer link that each follow the presentation and chart the run
//! (as a following page does), waits until the instructor is told they all follow, then has the
//! instructor move to another place every `--interval-ms` while the run trains. It measures the
//! delay of navigation (from the instructor sending `present` to each follower receiving it),
//! the delay of points (from the trainer's write to receipt), whether every follower saw the
//! last place and every point, and the server's resident memory. Server, trainer and clients
//! share this machine's cores.
//!
//! ```sh
//! cargo build --bins && cargo run --example load_classroom -p scalebook-server -- --viewers 500
//! ```

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use scalebook_shared::protocol::{ClientMessage, RunId};
use tokio_tungstenite::tungstenite::Message;

use self::support::{
    PeakRss, Seen, SentAt, delay_summary, launch, mib, place, rss_kib, send, start_server, tiny_data, until_all_follow, watch_run,
};

#[derive(Debug, Parser)]
struct Args {
    /// Viewer pages following the instructor, each charting the run.
    #[arg(long, default_value_t = 500)]
    viewers: usize,
    /// The run's config.
    #[arg(long, default_value = "cpu_tiny")]
    config: String,
    /// Training iterations (each writes a few points).
    #[arg(long, default_value_t = 2000)]
    iters: u64,
    /// Places the instructor moves to while the run trains.
    #[arg(long, default_value_t = 60)]
    navigations: usize,
    /// Time between two moves.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
}

/// What one follower saw.
struct Followed {
    seen: Seen,
    /// Seconds from the instructor's send to receipt, per place received.
    navigation: Vec<f64>,
    /// The last place it was sent.
    last: Option<usize>,
}

/// One follower: follows the presentation and charts the run until it ends.
async fn follow(url: String, id: RunId, connected: Arc<AtomicU64>, sent_at: SentAt) -> Followed {
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("viewer connect");
    send(&mut ws, &ClientMessage::Follow { following: true }).await;
    send(&mut ws, &ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: None }).await;
    connected.fetch_add(1, Ordering::SeqCst);
    let (mut navigation, mut last) = (Vec::new(), None);
    let seen = watch_run(&mut ws, &id, |message, received| {
        if let Some((k, delay)) = sent_at.delay(message, received) {
            navigation.push(delay);
            last = Some(k);
        }
    })
    .await;
    Followed { seen, navigation, last }
}

fn main() {
    let args = Args::parse();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-classroom-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let mut overrides = tiny_data(scratch);
    overrides.push(format!("num_iters={}", args.iters));
    let server = start_server(scratch, &[]);
    let pid = server.pid();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let idle_rss = rss_kib(pid);
        let (mut instructor, _) = tokio_tungstenite::connect_async(&server.ws_url(&server.token)).await.unwrap();
        let id = launch(&mut instructor, &args.config, &overrides).await;
        let started = Instant::now();
        let (connected, sent_at) = (Arc::new(AtomicU64::new(0)), SentAt::default());
        let url = server.ws_url(&server.viewer_token);
        let followers: Vec<_> =
            (0..args.viewers).map(|_| tokio::spawn(follow(url.clone(), id.clone(), connected.clone(), sent_at.clone()))).collect();
        let peak = PeakRss::sample(pid);
        let counted_in = until_all_follow(&mut instructor, args.viewers).await;
        let connect_time = started.elapsed();
        let connected_rss = rss_kib(pid);

        // The instructor moves on every interval; its own messages are read and dropped.
        let (mut to_server, from_server) = instructor.split();
        let drain = tokio::spawn(from_server.for_each(|_| async {}));
        for _ in 0..args.navigations {
            tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
            let k = sent_at.record();
            let present = ClientMessage::Present { presentation: place(k, &id) };
            to_server.send(Message::text(serde_json::to_string(&present).unwrap())).await.unwrap();
        }
        let moved_for = started.elapsed();

        let (mut navigation, mut points) = (Vec::new(), Vec::new());
        let (mut reached_last, mut complete) = (0, 0);
        let mut followed = Vec::new();
        for follower in followers {
            followed.push(follower.await.unwrap());
        }
        let peak = peak.stop();
        drain.abort();
        let lines = server.metrics_lines(&id);
        for f in followed {
            navigation.extend(f.navigation);
            points.extend(f.seen.delays);
            reached_last += usize::from(f.last == Some(args.navigations - 1));
            complete += usize::from(f.seen.points == lines);
        }
        let run_time = started.elapsed().as_secs_f64();
        println!("followers: {} (connected, subscribed and counted as following in {:.2} s)", args.viewers, connect_time.as_secs_f64());
        println!("the instructor was told all {} follow {:.2} s after it started waiting", args.viewers, counted_in.as_secs_f64());
        println!("navigation: {} moves every {} ms over {:.1} s", args.navigations, args.interval_ms, moved_for.as_secs_f64());
        println!("followers that reached the last place: {reached_last} of {}", args.viewers);
        println!("navigation deliveries measured: {}", navigation.len());
        println!("navigation delay send -> receipt: {}", delay_summary(&mut navigation));
        println!("run: {} with num_iters={}, {lines} points, {run_time:.1} s", args.config, args.iters);
        println!("followers that received every point: {complete} of {}", args.viewers);
        println!("point deliveries measured: {}", points.len());
        println!("point delay write -> receipt: {}", delay_summary(&mut points));
        println!("server RSS: idle {:.1} MiB, followers connected {:.1} MiB, peak {:.1} MiB", mib(idle_rss), mib(connected_rss), mib(peak));
    });
}
