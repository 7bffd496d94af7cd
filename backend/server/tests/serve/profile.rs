//! The timeline's endpoints on a real server: a run's list of rank traces (empty until there
//! are some), each trace served as written or in excerpts for a window, their summary, and a
//! clear 404 for every other request (an unknown run, a rank with no trace, a rank that is not
//! a plain number, a name that tries to leave the profile directory) and a 400 naming the
//! field for a bad window; six pages opening a large profile at once, each served its summary
//! and excerpt while another client's pings are answered.

use std::time::Duration;

use scalebook_harness::{write_finished_run, write_kineto_trace};
use scalebook_shared::profile::trace::{EXCERPT_PIXELS, ProfileSummary, Timeline, Trace, TraceList};
use scalebook_shared::profile::trace_file;
use scalebook_shared::protocol::RunId;
use scalebook_shared::rundir::PROFILE_DIR;

use crate::harness::{Response, Server, http_get, ping_throughout, temp_dir, tiny_overrides};

/// A small trace in Kineto's form for `rank`: a thread name, a range, two nested ops, and
/// events the timeline ignores.
fn kineto_trace(rank: usize) -> String {
    format!(
        r#"{{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [
  {{"ph": "M", "name": "thread_name", "pid": 4{rank}, "tid": 1, "args": {{"name": "rank {rank} main"}}}},
  {{"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 4{rank}, "tid": 1, "ts": 10.5, "dur": 100.25}},
  {{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4{rank}, "tid": 1, "ts": 11, "dur": 50, "args": {{"Ev Idx": 1}}}},
  {{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4{rank}, "tid": 1, "ts": 12, "dur": 40}},
  {{"ph": "i", "s": "t", "name": "mark", "pid": 4{rank}, "tid": 1, "ts": 20}}
], "traceName": "rank{rank}", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000}}"#
    )
}

fn refused(response: &Response, status: u16, code: &str, says: &str) {
    let body = response.json();
    assert_eq!(response.status, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["message"].as_str().unwrap().contains(says), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_traces_are_listed_and_served_and_nothing_else_is() {
    let server = Server::start("profile", &[]);
    let mut client = server.connect().await;
    // A run that profiles nothing: the test writes its profile directory itself.
    let id = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    let list = |server: &Server| -> TraceList {
        let response = server.get(&format!("/api/runs/{id}/profile"));
        assert_eq!(response.status, 200, "{}", response.body);
        serde_json::from_str(&response.body).unwrap()
    };
    assert!(list(&server).traces.is_empty(), "a run without a profile lists no traces");
    let summary = |server: &Server| -> ProfileSummary {
        let response = server.get(&format!("/api/runs/{id}/profile/summary"));
        assert_eq!(response.status, 200, "{}", response.body);
        serde_json::from_str(&response.body).unwrap()
    };
    assert_eq!(summary(&server), ProfileSummary::default(), "nothing to summarise yet");

    let dir = server.runs_dir.join(id.as_str()).join(PROFILE_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    for rank in [1, 0] {
        std::fs::write(dir.join(trace_file(rank)), kineto_trace(rank)).unwrap();
    }
    // Files that are not a rank's trace, as the trainer names them.
    for stray in ["notes.txt", "rank2.trace.json.tmp", "rank01.trace.json"] {
        std::fs::write(dir.join(stray), "[]").unwrap();
    }
    std::fs::write(server.runs_dir.join(id.as_str()).join("secret.json"), "[]").unwrap();

    let ranks: Vec<(usize, u64)> = list(&server).traces.into_iter().map(|t| (t.rank, t.bytes)).collect();
    assert_eq!(ranks, [(0, kineto_trace(0).len() as u64), (1, kineto_trace(1).len() as u64)]);
    for rank in [0, 1] {
        let response = server.get(&format!("/api/runs/{id}/profile/{rank}"));
        assert_eq!(response.status, 200, "{}", response.body);
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.body, kineto_trace(rank));
        assert_eq!(Trace::parse(&response.body).unwrap().len(), 3);
    }

    // The summary: both ranks' ops, computed once and kept beside the traces (not listed as
    // one); a trace that changes is summarised again.
    let both = summary(&server);
    assert_eq!(both.ranks.iter().map(|r| (r.rank, r.events)).collect::<Vec<_>>(), [(0, 3), (1, 3)]);
    let top = &both.ranks[0].top_ops[0];
    assert_eq!((top.name.as_str(), top.count, top.total_us), ("aten::linear", 1, 50.0));
    assert!(dir.join("summary.json").is_file());
    assert_eq!(list(&server).traces.len(), 2);
    assert_eq!(summary(&server), both);
    std::fs::write(dir.join(trace_file(1)), "not a trace").unwrap();
    let one = summary(&server);
    assert_eq!(one.ranks.len(), 1);
    assert!(one.unread.len() == 1 && one.unread[0].starts_with("rank 1:"), "{:?}", one.unread);
    std::fs::write(dir.join(trace_file(1)), kineto_trace(1)).unwrap();

    refused(&server.get(&format!("/api/runs/{id}/profile/2")), 404, "not_yet", "rank 2");
    for bad in ["01", "+1", "x", "rank0.trace.json", "..%2Fsecret.json", "..%2F..%2Frun.json", "-1"] {
        refused(&server.get(&format!("/api/runs/{id}/profile/{bad}")), 404, "not_found", "is not a rank");
    }
    refused(&server.get("/api/runs/19990101-000000-9/profile"), 404, "unknown_run", "no run 19990101-000000-9");
    refused(&server.get("/api/runs/19990101-000000-9/profile/0"), 404, "unknown_run", "no run");
    refused(&server.get("/api/runs/..%2F..%2Fetc/profile/0"), 400, "bad_request", "");
    // Like every API route, it needs the token.
    let anonymous = crate::harness::http_get(server.addr(), &format!("/api/runs/{id}/profile/0"), &[]);
    assert_eq!(anonymous.status, 401);
}

/// A rank's trace of `ops` ops of 1 µs, one every 10 µs from t = 1000, under one range.
fn long_trace(ops: usize) -> String {
    let mut events =
        vec![format!(r#"{{"ph": "X", "cat": "user_annotation", "name": "step 0", "pid": 1, "tid": 1, "ts": 1000, "dur": {}}}"#, ops * 10)];
    events.extend(
        (0..ops).map(|i| format!(r#"{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {}, "dur": 1}}"#, 1000 + i * 10)),
    );
    format!(r#"{{"traceEvents": [{}], "baseTimeNanoseconds": 1700000000000000000}}"#, events.join(",\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_is_served_in_excerpts_the_whole_coarse_and_a_window_in_detail() {
    let server = Server::start("profile-excerpt", &[]);
    let mut client = server.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    let dir = server.runs_dir.join(id.as_str()).join(PROFILE_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(trace_file(0)), long_trace(10_000)).unwrap();
    let excerpt = |query: &str| {
        let response = server.get(&format!("/api/runs/{id}/profile/0?{query}"));
        assert_eq!(response.status, 200, "{query}: {}", response.body);
        assert_eq!(response.header("content-type"), Some("application/json"));
        Trace::parse(&response.body).unwrap()
    };
    // The whole trace (100,000 µs) at 100 columns: the range, and 10 ops merged a column.
    let whole = excerpt("px=100");
    assert_eq!(whole.len(), 1 + 100);
    // A window of 1,000 µs in detail (100 columns of 10 µs, an op each, kept as it is), the
    // rest merged on either side of it (50 columns before, 49 after).
    let window = excerpt("px=100&start=51000&end=52000");
    assert_eq!(window.len(), 1 + 100 + 50 + 49);
    let timeline = |trace: Trace| Timeline::new([(0, trace)]);
    let full = timeline(Trace::parse(&long_trace(10_000)).unwrap());
    assert_eq!(timeline(window).bounds(), full.bounds());
    assert_eq!(timeline(whole).bounds(), full.bounds());
    // The whole trace at a page's width is kept beside it, until the trace changes.
    let page = format!("px={EXCERPT_PIXELS}");
    let first = excerpt(&page);
    assert!(dir.join("excerpt0.json").is_file());
    // The summary's pass wrote the events compactly, and windows are read from them.
    assert!(dir.join("events0.bin").is_file());
    assert_eq!(excerpt(&page), first);
    std::fs::write(dir.join(trace_file(0)), long_trace(20)).unwrap();
    assert_eq!(excerpt(&page).len(), 1 + 20);

    for (query, field, says) in [
        ("start=1&end=2", "px", "asked with px"),
        ("px=0", "px", "from 1 to 8192"),
        ("px=8193", "px", "from 1 to 8192"),
        ("px=ten", "px", "`ten` is not a number of columns"),
        ("px=10&start=5", "end", "end is missing"),
        ("px=10&end=5", "start", "start is missing"),
        ("px=10&start=NaN&end=5", "start", "finite number of µs"),
        ("px=10&start=9&end=5", "end", "end must be after start"),
    ] {
        let response = server.get(&format!("/api/runs/{id}/profile/0?{query}"));
        refused(&response, 400, "bad_request", says);
        assert_eq!(response.json()["problems"][0]["field"], field, "{query}");
    }
    refused(&server.get(&format!("/api/runs/{id}/profile/3?px=10")), 404, "not_found", "no readable profile of rank 3");
}

/// The issue's case 6: six pages open the profiling chapter at once on a run whose trace is a
/// long profile's (over 16 MB). Each gets the summary and the whole trace's excerpt, never the
/// file (which took the server to 1,727 MB with a 228.8 MB trace), and another client's pings
/// are answered throughout (they took 795 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_pages_opening_a_large_profile_at_once_get_its_summary_and_excerpts_and_pings_are_answered() {
    let dir = temp_dir("profile-six");
    let runs = dir.path().join("runs");
    let id = RunId::parse("20261126T000000-1").unwrap();
    write_finished_run(&runs, &id, 10).unwrap();
    let profile = runs.join(id.as_str()).join(PROFILE_DIR);
    std::fs::create_dir_all(&profile).unwrap();
    let bytes = write_kineto_trace(&profile.join(trace_file(0)), 70_000, 64).unwrap();
    assert!(bytes > 16 << 20, "the trace is only {bytes} bytes");
    let server = Server::start("profile-six", &["--runs-dir", runs.to_str().unwrap()]);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let pinger = tokio::spawn(ping_throughout(server.connect().await, stopped));
    let auth = format!("Bearer {}", server.token);
    let pages: Vec<_> = (0..6)
        .map(|_| {
            let (addr, auth, id) = (server.addr().to_owned(), auth.clone(), id.clone());
            tokio::task::spawn_blocking(move || {
                let get = |path: &str| http_get(&addr, &format!("/api/runs/{id}/profile/{path}"), &[("Authorization", &auth)]);
                (get("summary"), get(&format!("0?px={EXCERPT_PIXELS}")))
            })
        })
        .collect();
    for page in pages {
        let (summary, excerpt) = page.await.unwrap();
        assert_eq!((summary.status, excerpt.status), (200, 200), "{} {}", summary.body, excerpt.body);
        let summary: ProfileSummary = serde_json::from_str(&summary.body).unwrap();
        assert!(summary.ranks.len() == 1 && summary.ranks[0].events > 60_000, "{:?}", summary.ranks);
        assert!((excerpt.body.len() as u64) < bytes / 10, "an excerpt of {} bytes for a {bytes}-byte trace", excerpt.body.len());
        assert!(!Trace::parse(&excerpt.body).unwrap().is_empty());
    }
    stop.send(true).unwrap();
    let slowest = pinger.await.unwrap();
    assert!(slowest < Duration::from_secs(5), "a ping took {slowest:?}");
}
