//! Real `scalebook serve` processes on free ports (or Unix sockets), started by the workspace's
//! one harness (`scalebook-harness`) with a throw-away page, a WebSocket client speaking the
//! protocol, a bare HTTP client, and the trainer's tiny test dataset.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use scalebook_harness::{Serve, Served};
use scalebook_shared::config::data_dir_overrides;
use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::protocol::{ClientMessage, RunId, RunRecord, RunState, SeqPoint, ServerMessage, ServerReply};
use scalebook_shared::rundir;
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use scalebook_harness::workspace;

/// Pings the server from its own connection every 50 ms until told to stop; returns the
/// slowest answer.
pub async fn ping_throughout(mut client: Client, stop: tokio::sync::watch::Receiver<bool>) -> Duration {
    let mut slowest = Duration::ZERO;
    for nonce in 0.. {
        if *stop.borrow() {
            break;
        }
        let sent = Instant::now();
        client.send(&ClientMessage::Ping { nonce }).await;
        client.recv_until(Duration::from_secs(60), |m| matches!(m, ServerMessage::Pong { nonce: n } if *n == nonce).then_some(())).await;
        slowest = slowest.max(sent.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    slowest
}

/// Walks `dir` and fails, naming the first, if it or anything under it may be read, written or
/// entered by anyone but its owner (links, whose own mode means nothing, aside); returns every
/// path it checked. (With the usual umask of 022, anything made without care is 0755 or 0644.)
pub fn assert_private(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;

    let mut checked = Vec::new();
    let mut left = vec![dir.to_owned()];
    while let Some(path) = left.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}: others may reach it", path.display());
        if meta.is_dir() {
            left.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        }
        checked.push(path);
    }
    checked
}

/// A fresh directory under the target directory, removed when dropped.
pub fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!("serve-{name}-")).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The trainer beside the server binary, as `serve` finds it.
pub fn trainer() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_scalebook")).with_file_name("scalebook-train");
    assert!(path.is_file(), "{} is not built: run `cargo build --bins` first", path.display());
    path
}

/// The tiny synthetic dataset, generated once and kept in the target directory.
pub fn tiny_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-tiny-data");
        if !dir.is_dir() {
            // Generated aside and renamed into place, so an interrupted test run never leaves
            // half a dataset for the next one.
            let partial = tempfile::Builder::new().prefix("serve-tiny-data-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let status = Command::new(trainer())
                .args(["datagen", "--force", "--years", "1", "--steps-per-year", "48", "--height", "40", "--width", "80", "--out"])
                .arg(partial.path())
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "datagen failed");
            let _ = std::fs::rename(partial.keep(), &dir);
        }
        dir
    })
}

/// Overrides that point `cpu_tiny` at the tiny dataset, plus `extra`.
pub fn tiny_overrides(extra: &[&str]) -> Vec<String> {
    let mut overrides = data_dir_overrides(&tiny_data().display().to_string());
    overrides.extend(extra.iter().map(|s| s.to_string()));
    overrides
}

/// A stand-in for the built front-end: the page (`dist/index.html`) with a title to look for.
pub fn write_stub_page(static_dir: &Path) {
    std::fs::create_dir_all(static_dir.join("dist")).unwrap();
    std::fs::write(static_dir.join(scalebook_server::static_files::PAGE), "<!doctype html><title>Scalebook</title>").unwrap();
}

/// `scalebook serve` as these tests start it in `dir`: its page from `dir/static`, its runs in
/// `dir/runs` unless `args` name others, the tests' datasets readable, and `args`.
pub fn serve_in(dir: &Path, args: &[&str]) -> Serve {
    Serve::new(env!("CARGO_BIN_EXE_scalebook"))
        .static_dir(dir.join("static"))
        .runs_dir(dir.join("runs"))
        // Where the tests' datasets live (see `tiny_data`): a directory runs may read.
        .data_root(env!("CARGO_TARGET_TMPDIR"))
        .args(args)
}

/// A server of the harness's (its URL, tokens, links and runs directory through `Deref`) with a
/// throw-away page and a log a test can read. Dropped, it stops, and stops the runs it left.
pub struct Server {
    /// First, so that the server stops (printing its log if a test failed) before its
    /// directory goes.
    served: Served,
    /// What the server serves as static files (a stub page; tests may add files).
    pub static_dir: PathBuf,
    /// Its stderr: warnings and the request log.
    pub log: PathBuf,
    /// Holds the static files, the log and (unless given) the runs; removed on drop.
    _dir: TempDir,
}

impl Server {
    /// Starts `scalebook serve` with a throw-away page and `args` (a runs dir of its own unless
    /// `--runs-dir` is among them).
    pub fn start(name: &str, args: &[&str]) -> Server {
        Server::start_with_env(name, args, &[])
    }

    /// As [`Server::start`], with `env` added to the server's environment.
    pub fn start_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = temp_dir(name);
        let static_dir = dir.path().join("static");
        write_stub_page(&static_dir);
        let log = dir.path().join("server.log");
        let served = serve_in(dir.path(), args).envs(env.iter().copied()).log_to(&log).start().unwrap_or_else(|e| panic!("{e}"));
        Server { served, static_dir, log, _dir: dir }
    }

    /// Kills the server outright (no graceful shutdown), as a crash or `kill -9` would; its
    /// runs go on.
    pub fn kill(self) {
        self.served.kill().unwrap();
    }

    pub async fn connect(&self) -> Client {
        self.connect_with(&self.token).await
    }

    /// A WebSocket through the viewer link.
    pub async fn connect_viewer(&self) -> Client {
        self.connect_with(&self.viewer_token).await
    }

    async fn connect_with(&self, token: &str) -> Client {
        Client::connect(&self.ws_url(token)).await.unwrap()
    }

    /// GET `path` with the token as a bearer header.
    pub fn get(&self, path: &str) -> Response {
        http_get(self.addr(), path, &[("Authorization", &format!("Bearer {}", self.token))])
    }
}

impl Deref for Server {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.served
    }
}

impl Server {
    /// Waits until run `id`'s record as the server wrote it (with what clients are not told,
    /// such as a local run's process group) gives what `pick` wants.
    pub async fn wait_on_disk<T>(&self, id: &RunId, mut pick: impl FnMut(&RunRecord) -> Option<T>) -> T {
        let path = self.run_dir(id).join(rundir::RECORD);
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let record = std::fs::read_to_string(&path).ok().and_then(|text| serde_json::from_str::<RunRecord>(&text).ok());
            if let Some(found) = record.as_ref().and_then(&mut pick) {
                return found;
            }
            assert!(Instant::now() < deadline, "run {id} never got there on disk: {record:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls the API until run `id`'s record satisfies `pick` (messages that said so may
    /// have gone by before the test listened).
    pub async fn wait_for<T>(&self, id: &RunId, mut pick: impl FnMut(&RunRecord) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let record: RunRecord = serde_json::from_str(&self.get(&format!("/api/runs/{id}")).body).unwrap();
            if let Some(found) = pick(&record) {
                return found;
            }
            assert!(Instant::now() < deadline, "run {id} never got there: {record:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub struct Response {
    pub status: u16,
    /// The header lines, names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The body as sent, for binary answers (a PNG).
    pub bytes: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A bare HTTP/1.1 GET over any stream, so tests control every header (and send no cookie
/// jar or redirect logic of a client library).
pub fn http_over(stream: impl Read + Write, path: &str, headers: &[(&str, &str)]) -> Response {
    http_request(stream, "GET", path, headers)
}

/// A bare HTTP/1.1 request of any method, without a body.
pub fn http_request(mut stream: impl Read + Write, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let bytes = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or_else(Vec::new, |at| raw[at + 4..].to_vec());
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers =
        head.lines().skip(1).filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    Response { status, headers, body: body.to_owned(), bytes }
}

pub fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    http_over(std::net::TcpStream::connect(addr).unwrap(), path, headers)
}

/// A WebSocket client of the protocol, over plain TCP (a page's) or any other stream (a
/// follower's TLS).
pub struct Client<S = MaybeTlsStream<TcpStream>> {
    ws: WebSocketStream<S>,
}

impl Client {
    pub async fn connect(url: &str) -> Result<Client, tokio_tungstenite::tungstenite::Error> {
        let (ws, _) = tokio_tungstenite::connect_async(url).await?;
        Ok(Client { ws })
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Client<S> {
    pub fn over(ws: WebSocketStream<S>) -> Client<S> {
        Client { ws }
    }

    /// The close frame the server ends the connection with (messages before it are skipped).
    pub async fn closed(&mut self, timeout: Duration) -> Option<tokio_tungstenite::tungstenite::protocol::CloseFrame> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.ws.next()).await.expect("not closed in time") {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    }

    pub async fn send(&mut self, message: &ClientMessage) {
        self.send_text(&serde_json::to_string(message).unwrap()).await;
    }

    pub async fn send_text(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.unwrap();
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.ws.send(Message::binary(bytes)).await.unwrap();
    }

    /// The next frame as a reply with its request id (heartbeats included), or a panic after
    /// `timeout`.
    pub async fn recv_reply(&mut self, timeout: Duration) -> ServerReply {
        loop {
            let next = tokio::time::timeout(timeout, self.ws.next()).await.expect("no message in time");
            match next.expect("connection closed").expect("connection failed") {
                Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap_or_else(|e| panic!("{e}: {text}")),
                Message::Close(frame) => panic!("closed by the server: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// The next protocol message (heartbeats included), or a panic after `timeout`.
    pub async fn recv(&mut self, timeout: Duration) -> ServerMessage {
        self.recv_reply(timeout).await.message
    }

    /// Skips messages until one `pick` accepts, within `timeout` overall.
    pub async fn recv_until<T>(&mut self, timeout: Duration, mut pick: impl FnMut(&ServerMessage) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.recv(left).await;
            if let Some(found) = pick(&message) {
                return found;
            }
        }
    }

    /// Launches `config` with `overrides` and returns the new run's id.
    pub async fn launch(&mut self, config: &str, overrides: Vec<String>) -> RunId {
        self.launch_json(serde_json::json!({ "type": "launch", "config": config, "overrides": overrides, "seed": 1 })).await
    }

    /// Sends a `launch` message as given and returns the new run's id.
    pub async fn launch_json(&mut self, request: serde_json::Value) -> RunId {
        self.launch_json_while(request, |_| {}).await
    }

    /// Launches `config` with `overrides`, handing `meanwhile` every other message that comes
    /// before the new run's id (points of a run the test collects, say).
    pub async fn launch_while(&mut self, config: &str, overrides: Vec<String>, meanwhile: impl FnMut(&ServerMessage)) -> RunId {
        let request = serde_json::json!({ "type": "launch", "config": config, "overrides": overrides, "seed": 1 });
        self.launch_json_while(request, meanwhile).await
    }

    async fn launch_json_while(&mut self, request: serde_json::Value, mut meanwhile: impl FnMut(&ServerMessage)) -> RunId {
        self.send_text(&request.to_string()).await;
        self.recv_until(Duration::from_secs(60), |m| match m {
            ServerMessage::Launched { run } => Some(run.clone()),
            ServerMessage::Error(e) => panic!("launch refused: {e:?}"),
            other => {
                meanwhile(other);
                None
            }
        })
        .await
    }
}

/// The final state in `message` when it is a `run_update` for `id` that ended.
pub fn ended(message: &ServerMessage, id: &RunId) -> Option<RunState> {
    match message {
        ServerMessage::RunUpdate { run } if &run.id == id => Some(run.state()).filter(|s| s.is_final()),
        _ => None,
    }
}

/// Long enough for any run here on a busy two-core machine.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// Every point of `metrics.jsonl` by line number, as the server numbers them.
pub fn points_in_file(run_dir: &Path) -> BTreeMap<u64, MetricPoint> {
    let text = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap_or_default();
    text.lines().zip(1..).map(|(line, seq)| (seq, serde_json::from_str(line).unwrap())).collect()
}

/// Fails unless `seen` holds exactly the points of the run's file, naming the first difference.
pub fn assert_all_points(seen: &BTreeMap<u64, MetricPoint>, run_dir: &Path) {
    let file = points_in_file(run_dir);
    let missing: Vec<u64> = file.keys().filter(|seq| !seen.contains_key(seq)).copied().collect();
    let extra: Vec<u64> = seen.keys().filter(|seq| !file.contains_key(seq)).copied().collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing points {missing:?}, points not in the file {extra:?}");
    let changed = file.iter().find(|(seq, point)| seen[*seq] != **point);
    assert!(changed.is_none(), "point {:?} arrived as {:?}", changed, changed.map(|(seq, _)| &seen[seq]));
}

/// Adds `points` to `seen`, failing on any sequence number seen before.
pub fn collect(seen: &mut BTreeMap<u64, MetricPoint>, points: &[SeqPoint]) {
    for p in points {
        assert!(seen.insert(p.seq, p.point.clone()).is_none(), "point {} delivered twice", p.seq);
    }
}

/// What a client saw of a run: its final state, and how many points arrived while it was
/// still going.
pub struct Followed {
    pub state: RunState,
    pub live: usize,
}

/// Receives points until run `id` has ended and every point of its file has arrived.
pub async fn follow_to_end(client: &mut Client, id: &RunId, run_dir: &Path, seen: &mut BTreeMap<u64, MetricPoint>) -> Followed {
    let mut state = None;
    let mut live = 0;
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    loop {
        if let Some(state) = state
            && run_dir.join(rundir::METRICS).is_file()
            && seen.len() == points_in_file(run_dir).len()
        {
            return Followed { state, live };
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match client.recv(left).await {
            ServerMessage::Points { run, points } if &run == id => {
                if state.is_none() {
                    live += points.len();
                }
                collect(seen, &points);
            }
            // A run that ended while no server watched is final before anyone subscribes.
            ServerMessage::Runs { runs, .. } => {
                state = state.or(runs.iter().find(|r| &r.id == id).map(|r| r.state()).filter(|s| s.is_final()))
            }
            message => state = state.or(ended(&message, id)),
        }
    }
}
