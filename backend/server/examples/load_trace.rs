//! Benchmark: a profile as large as a learner's `profile=1:129` wrote (228.8 MB, 860,266
//! events), summarised by the server instead of sent to every page.
//!
//! Writes a finished run whose rank-0 trace is `--events` events in Kineto's form (the
//! trainer's ranges around each of `--steps` steps, CPU ops on the main thread, GPU kernels on
//! a stream, an all-reduce per step with its NCCL kernel), starts `scalebook serve` on it, and
//! measures how soon the server has summarised it (it does so as it starts, for profiles
//! written while it was away, and as a run ends), a page's `GET /api/runs/ID/profile/summary`
//! then, and the same request once the trace changed (summarised again on the request, the
//! trace read as a stream, once), the timeline's first window (the whole trace at a page's
//! width) and a zoom to one step, with the server's peak resident memory throughout.
//!
//! ```sh
//! cargo build --release --bins --examples
//! target/release/examples/load_trace --events 860000 --steps 128
//! ```

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use clap::Parser;
use scalebook_shared::profile::trace::{EXCERPT_PIXELS, ProfileSummary, Trace};
use scalebook_shared::profile::trace_file;
use scalebook_shared::protocol::RunId;
use scalebook_shared::rundir;

use self::support::{PeakRss, mib, rss_kib, start_server};

#[derive(Debug, Parser)]
struct Args {
    /// Events in the trace.
    #[arg(long, default_value_t = 860_000)]
    events: u64,
    /// Profiled steps they are spread over.
    #[arg(long, default_value_t = 128)]
    steps: u64,
}

/// GETs `path` with the token; the body, and the seconds to its last byte.
fn get(addr: &str, token: &str, path: &str) -> (String, f64) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    (body.to_owned(), seconds)
}

fn main() {
    let args = Args::parse();
    let scratch_dir = tempfile::Builder::new().prefix("scalebook-trace-").tempdir().unwrap();
    let scratch = scratch_dir.path();
    let id = RunId::parse("20261126T000000-1").unwrap();
    scalebook_harness::write_finished_run(&scratch.join("runs"), &id, 10).unwrap();
    let profile = scratch.join("runs").join(id.as_str()).join(rundir::PROFILE_DIR);
    std::fs::create_dir_all(&profile).unwrap();
    let written = Instant::now();
    let bytes = scalebook_harness::write_kineto_trace(&profile.join(trace_file(0)), args.events, args.steps).unwrap();
    println!(
        "trace: {} events over {} steps, {:.1} MB (written in {:.1} s)",
        args.events,
        args.steps,
        bytes as f64 / 1e6,
        written.elapsed().as_secs_f64()
    );
    let server = start_server(scratch, &[]);
    let started = Instant::now();
    let pid = server.pid();
    // The memory sampler is a task: its runtime's workers run it while this thread asks.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _entered = runtime.enter();
    let idle = rss_kib(pid);
    let peak = PeakRss::sample(pid);
    let path = format!("/api/runs/{id}/profile/summary");
    // The server summarises, as it starts, the profiles written while it was away.
    let kept = profile.join("summary.json");
    while !kept.is_file() {
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "no summary kept");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let at_start = started.elapsed().as_secs_f64();
    let (body, asked) = get(server.addr(), &server.viewer_token, &path);
    let summary: ProfileSummary = serde_json::from_str(&body).unwrap();
    let rank = &summary.ranks[0];
    // The timeline's first window (the whole trace at the page's columns, kept by the server
    // once it summarised), the same computed on a request (another width), then a zoom into one
    // step (its detail beside the rest, merged).
    let kept = profile.join("excerpt0.json");
    while !kept.is_file() {
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "no excerpt kept");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let kept_at = started.elapsed().as_secs_f64();
    let excerpt = |query: &str| {
        let (body, seconds) = get(server.addr(), &server.viewer_token, &format!("/api/runs/{id}/profile/0?{query}"));
        (Trace::parse(&body).unwrap().len(), body.len(), seconds)
    };
    let (events, bytes, first) = excerpt(&format!("px={EXCERPT_PIXELS}"));
    println!(
        "first timeline window (the whole trace): kept {kept_at:.2} s after the server was ready; a page's request then {:.1} ms, {events} events, {:.1} kB",
        first * 1e3,
        bytes as f64 / 1e3
    );
    let (_, _, computed) = excerpt("px=1000");
    println!("the whole trace at another width, read on the request: {computed:.2} s");
    let excerpt = |query: &str| excerpt(&format!("px={EXCERPT_PIXELS}{query}"));
    let step = &rank.steps[rank.steps.len() / 2];
    let step_start = rank.first_us + (rank.last_us - rank.first_us) * (rank.steps.len() / 2) as f64 / rank.steps.len() as f64;
    let (events, bytes, zoomed) = excerpt(&format!("&start={step_start}&end={}", step_start + step.total_us));
    println!("a zoom to one step's window: {zoomed:.2} s, {events} events, {:.1} kB", bytes as f64 / 1e3);
    // A trace that changed is summarised again when a page asks.
    std::fs::File::options().append(true).open(profile.join(trace_file(0))).unwrap().set_modified(std::time::SystemTime::now()).unwrap();
    let (again, on_request) = get(server.addr(), &server.viewer_token, &path);
    assert_eq!(body, again);
    println!(
        "summary: {} events, {} steps, top op {} ({:.0} ms), communication {:.0} ms of which {:.0} ms overlapped; {} bytes",
        rank.events,
        rank.steps.len(),
        rank.top_ops[0].name,
        rank.top_ops[0].total_us / 1e3,
        rank.communication_us / 1e3,
        rank.overlapped_us / 1e3,
        body.len()
    );
    println!(
        "kept by the server {at_start:.2} s after it was ready; a page's request then: {:.1} ms; summarised on a request (the trace changed): {on_request:.2} s",
        asked * 1e3
    );
    println!("server memory: {:.1} MiB idle, peak {:.1} MiB", mib(idle), mib(peak.stop()));
}
