//! Benchmark: a profile as large as a learner's `profile=1:129` wrote (228.8 MB, 860,266
//! events), summarised by the server instead of sent to every page.
//!
//! Writes a finished run whose rank-0 trace is `--events` events in Kineto's form (the
//! trainer's ranges around each of `--steps` steps, CPU ops on the main thread, GPU kernels on
//! a stream, an all-reduce per step with its NCCL kernel), starts `scalebook serve` on it, and
//! measures how soon the server has summarised it (it does so as it starts, for profiles
//! written while it was away, and as a run ends), a page's `GET /api/runs/ID/profile/summary`
//! then, and the same request once the trace changed (summarised again on the request, the
//! trace read as a stream, once), with the server's peak resident memory throughout.
//!
//! ```sh
//! cargo build --release --bins --examples
//! target/release/examples/load_trace --events 860000 --steps 128
//! ```

mod support;

use std::io::{BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Instant;

use clap::Parser;
use scalebook_shared::profile::trace::ProfileSummary;
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

const OPS: [&str; 8] =
    ["aten::linear", "aten::addmm", "aten::layer_norm", "aten::gelu", "aten::softmax", "aten::matmul", "aten::add", "aten::copy_"];

/// Writes the trace; its size in bytes.
fn write_trace(path: &Path, events: u64, steps: u64) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    write!(out, r#"{{"schemaVersion":1,"deviceProperties":[{{"id":0,"name":"NVIDIA A100-SXM4-40GB"}}],"traceEvents":["#).unwrap();
    write!(out, r#"{{"ph":"M","name":"thread_name","pid":1321,"tid":1376,"args":{{"name":"main"}}}}"#).unwrap();
    let per_step = events / steps;
    let step_us = 50_000.0;
    let mut ts = 4_800_958_445_864.0;
    for step in 1..=steps {
        let t0 = ts;
        let range = |out: &mut BufWriter<std::fs::File>, name: &str, start: f64, dur: f64| {
            write!(out, r#",{{"ph":"X","cat":"user_annotation","name":"{name}","pid":1321,"tid":1376,"ts":{start:.3},"dur":{dur:.3}}}"#)
                .unwrap();
        };
        range(&mut out, &format!("step {step}"), t0, step_us);
        range(&mut out, "data_wait", t0, 2_000.0);
        range(&mut out, "forward", t0 + 2_000.0, 15_000.0);
        range(&mut out, "backward", t0 + 17_000.0, 25_000.0);
        range(&mut out, "grad_allreduce", t0 + 40_000.0, 5_000.0);
        range(&mut out, "c10d::all_reduce", t0 + 40_500.0, 4_000.0);
        range(&mut out, "optimizer", t0 + 45_000.0, 4_000.0);
        // The ops: pairs of a CPU op and the kernel it launched, spread over the step.
        let ops = per_step.saturating_sub(7) / 2;
        let gap = 47_000.0 / ops as f64;
        for i in 0..ops {
            let (name, start) = (OPS[(i % OPS.len() as u64) as usize], t0 + 2_000.0 + i as f64 * gap);
            write!(
                out,
                r#",{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1321,"tid":1376,"ts":{start:.3},"dur":{:.3},"args":{{"External id":{i},"Record function id":0,"Sequence number":{i},"Fwd thread id":0,"Ev Idx":{i},"Input Dims":[[32,1024,768],[768,768]],"Input type":["float","float"]}}}}"#,
                gap * 0.8
            )
            .unwrap();
            let kernel = if (40_500.0..44_500.0).contains(&(start - t0)) && i % 2 == 0 {
                "ncclKernel_AllReduce_RING_LL_Sum_float"
            } else {
                "ampere_sgemm_128x64_tn"
            };
            write!(
                out,
                r#",{{"ph":"X","cat":"kernel","name":"{kernel}","pid":0,"tid":7,"ts":{:.3},"dur":{:.3},"args":{{"queued":0,"device":0,"stream":7,"correlation":{i},"registers per thread":128,"grid":[1024,1,1],"block":[256,1,1]}}}}"#,
                start + gap * 0.5,
                gap * 0.7
            )
            .unwrap();
        }
        ts += step_us;
    }
    write!(out, r#"],"traceName":"rank0","displayTimeUnit":"ms","baseTimeNanoseconds":1790857026000000000}}"#).unwrap();
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
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
    let bytes = write_trace(&profile.join(trace_file(0)), args.events, args.steps);
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
    // A trace that changed is summarised again when a page asks.
    std::fs::File::options().append(true).open(profile.join(trace_file(0))).unwrap().set_modified(std::time::SystemTime::now()).unwrap();
    let (again, on_request) = get(server.addr(), &server.viewer_token, &path);
    assert_eq!(body, again);
    let summary: ProfileSummary = serde_json::from_str(&body).unwrap();
    let rank = &summary.ranks[0];
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
