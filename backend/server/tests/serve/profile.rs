//! The timeline's endpoints on a real server: a run's list of rank traces (empty until there
//! are some), each trace served as written, their summary, and a clear 404 for every other request (an
//! unknown run, a rank with no trace, a rank that is not a plain number, a name that tries to
//! leave the profile directory).

use scalebook_shared::profile::trace::{ProfileSummary, Trace, TraceList};
use scalebook_shared::profile::trace_file;
use scalebook_shared::rundir::PROFILE_DIR;

use crate::harness::{Response, Server, tiny_overrides};

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
