//! TensorBoard logdirs in, against event files written by TensorBoard's own Python writer
//! (`EventFileWriter`), in both forms of a scalar: `scalebook tb import` brings every scalar
//! once and in order, and `serve --watch-logdir` streams what a file gains while it is
//! followed, across a server restart. The Python environment is the tests' own
//! (`$SCALEBOOK_PYTHON`, set up by `./scalebook.sh test`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::protocol::{ClientMessage, ErrorCode, RunHandle, RunId, RunRecord, RunState, ServerMessage};
use scalebook_shared::tfevents;

use crate::harness::{Client, Server, assert_all_points, collect, points_in_file, temp_dir};

/// A writer driven line by line on stdin, answering `ok` once a command is on disk:
/// `write RUN FORM TAG FIRST END` writes steps FIRST..END of TAG to run directory RUN (the
/// value of a step is `step / 4 + len(tag)`; FORM is `simple` as PyTorch's SummaryWriter
/// writes scalars, or `float` / `double`, a scalar tensor with the scalars plugin's metadata
/// as TensorFlow 2 does), `new-file RUN` closes the run's file so later steps go to a second.
const WRITER: &str = r#"
import os, sys, time
import numpy as np
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.scalar import metadata
from tensorboard.util import tensor_util

logdir = sys.argv[1]
writers = {}

def value(form, tag, step):
    v = step / 4 + len(tag)
    if form == "simple":
        return summary_pb2.Summary.Value(tag=tag, simple_value=v)
    number = np.float32(v) if form == "float" else np.float64(v)
    return summary_pb2.Summary.Value(
        tag=tag,
        tensor=tensor_util.make_tensor_proto(number),
        metadata=metadata.create_summary_metadata(display_name=tag, description=""),
    )

for line in sys.stdin:
    words = line.split()
    if words[0] == "write":
        run, form, tag, first, end = words[1:]
        if run not in writers:
            writers[run] = EventFileWriter(os.path.join(logdir, run))
        for step in range(int(first), int(end)):
            summary = summary_pb2.Summary(value=[value(form, tag, step)])
            writers[run].add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        writers[run].flush()
    elif words[0] == "new-file":
        # The next file's name (time in seconds, host, pid, a counter) sorts after this one's.
        writers.pop(words[1]).close()
    print("ok", flush=True)
for writer in writers.values():
    writer.close()
"#;

fn python() -> PathBuf {
    std::env::var_os("SCALEBOOK_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").expect("HOME is set");
        PathBuf::from(home).join(".cache/scalebook/py-venv/bin/python")
    })
}

struct PythonWriter {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl PythonWriter {
    fn start(logdir: &Path) -> PythonWriter {
        let mut child = Command::new(python())
            .arg("-c")
            .arg(WRITER)
            .arg(logdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the tests' Python (run ./scalebook.sh test)");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        PythonWriter { child, stdin, stdout }
    }

    /// Sends one command and waits until the writer has done it.
    fn send(&mut self, command: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{command}").unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok", "the Python writer failed on `{command}`");
    }

    /// Closes every file and waits for the writer to end.
    fn finish(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for PythonWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The points `write _ _ TAG FIRST END` writes, as `(tag, step, value)`.
fn written(tag: &str, steps: std::ops::Range<u64>) -> Vec<(String, u64, f64)> {
    steps.map(|step| (tag.to_owned(), step, step as f64 / 4.0 + tag.len() as f64)).collect()
}

fn triples<'a>(points: impl IntoIterator<Item = &'a MetricPoint>) -> Vec<(String, u64, f64)> {
    points.into_iter().map(|p| (p.tag.clone(), p.step, p.value)).collect()
}

fn tb_import(logdir: &Path, runs_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scalebook")).args(["tb", "import"]).arg(logdir).arg("--runs-dir").arg(runs_dir).output().unwrap()
}

/// Every run of a runs directory with its record.
fn records(runs_dir: &Path) -> Vec<RunRecord> {
    let mut records: Vec<RunRecord> = std::fs::read_dir(runs_dir)
        .unwrap()
        .map(|entry| serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path().join("run.json")).unwrap()).unwrap())
        .collect();
    records.sort_by(|a, b| a.config.cmp(&b.config));
    records
}

fn logdir_of(record: &RunRecord) -> Option<(&str, &str)> {
    match &record.handle {
        Some(RunHandle::Logdir { logdir, run }) => Some((logdir.as_str(), run.as_str())),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tb_import_brings_every_scalar_of_tensorboards_files_once_and_in_order() {
    let dir = temp_dir("tb-import");
    let (logdir, runs_dir) = (dir.path().join("logdir"), dir.path().join("runs"));
    let mut writer = PythonWriter::start(&logdir);
    writer.send("write base/1GPU/00/logs simple Loss/train 0 30");
    writer.send("write base/1GPU/00/logs simple Loss/valid 0 5");
    writer.send("new-file base/1GPU/00/logs");
    writer.send("write base/1GPU/00/logs simple Loss/train 30 40");
    writer.send("write tf2 float accuracy 0 12");
    writer.send("write tf2 double lr 0 12");
    writer.finish();
    std::fs::write(logdir.join("notes.txt"), "not a run").unwrap();

    let out = tb_import(&logdir, &runs_dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let imported = records(&runs_dir);
    let logdir_path = std::fs::canonicalize(&logdir).unwrap().display().to_string();
    let names: Vec<_> = imported.iter().map(|r| (r.config.as_str(), logdir_of(r), r.state())).collect();
    assert_eq!(
        names,
        [
            ("tensorboard:base/1GPU/00/logs", Some((logdir_path.as_str(), "base/1GPU/00/logs")), RunState::Completed),
            ("tensorboard:tf2", Some((logdir_path.as_str(), "tf2")), RunState::Completed),
        ]
    );
    let base_dir = runs_dir.join(imported[0].id.as_str());
    let event_files = std::fs::read_dir(logdir.join("base/1GPU/00/logs")).unwrap().count();
    assert_eq!(event_files, 2, "the run was meant to span two files");
    let expected = [written("Loss/train", 0..30), written("Loss/valid", 0..5), written("Loss/train", 30..40)].concat();
    assert_eq!(triples(points_in_file(&base_dir).values()), expected);
    let tf2_dir = runs_dir.join(imported[1].id.as_str());
    assert_eq!(triples(points_in_file(&tf2_dir).values()), [written("accuracy", 0..12), written("lr", 0..12)].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("run {} (45 scalars in 2 tags)", imported[0].id)), "{stdout}");

    // Again: the same runs, unchanged.
    let again = tb_import(&logdir, &runs_dir);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(String::from_utf8_lossy(&again.stdout).matches("unchanged").count(), 2, "{}", String::from_utf8_lossy(&again.stdout));
    assert_eq!(records(&runs_dir), imported);
    assert_eq!(triples(points_in_file(&base_dir).values()), expected);

    // Listed and streamed like a run of the server's own.
    let server = Server::start("tb-import-serve", &["--runs-dir", runs_dir.to_str().unwrap()]);
    let mut listed: Vec<RunRecord> = serde_json::from_str(&server.get("/api/runs").body).unwrap();
    listed.sort_by(|a, b| a.config.cmp(&b.config));
    assert_eq!(listed, imported);
    let mut client = server.connect().await;
    let id = imported[1].id.clone();
    let mut seen = BTreeMap::new();
    receive_points(&mut client, &id, &mut seen, 24).await;
    assert_all_points(&seen, &tf2_dir);
}

#[test]
fn bad_logdirs_are_refused_naming_the_path_and_the_rule_with_nothing_written() {
    let dir = temp_dir("tb-bad");
    let runs_dir = dir.path().join("runs");
    let refused = |logdir: &Path, expected: &str| {
        let out = tb_import(logdir, &runs_dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert_eq!(std::fs::read_dir(&runs_dir).map_or(0, |d| d.count()), 0, "a refused import wrote a run");
    };
    let missing = dir.path().join("missing");
    refused(&missing, &format!("{}: cannot open it", missing.display()));
    refused(&missing, "events.out.tfevents.*");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    std::fs::write(empty.join("sub/notes.txt"), "no events here").unwrap();
    refused(&empty, "no event files: a logdir is a directory holding TensorBoard event files");

    // One good run and one damaged file: nothing is imported.
    let logdir = dir.path().join("logdir");
    std::fs::create_dir_all(logdir.join("good")).unwrap();
    std::fs::create_dir_all(logdir.join("bad")).unwrap();
    let mut good = tfevents::file_version_record(1.0);
    good.extend(tfevents::scalar_record(2.0, 1, "loss", 0.5));
    std::fs::write(logdir.join("good").join(tfevents::file_name(1, "h", 1)), &good).unwrap();
    let mut damaged = good.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let bad_file = std::fs::canonicalize(logdir.join("bad")).unwrap().join(tfevents::file_name(1, "h", 2));
    std::fs::write(&bad_file, &damaged).unwrap();
    let second_record = tfevents::file_version_record(1.0).len();
    refused(&logdir, &format!("{}: byte {second_record}: the record's payload fails its checksum", bad_file.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_logdir_streams_what_its_files_gain_exactly_once_across_restarts() {
    let dir = temp_dir("tb-watch");
    let (logdir, runs_dir) = (dir.path().join("logdir"), dir.path().join("runs"));
    std::fs::create_dir_all(&logdir).unwrap();
    let args = ["--runs-dir", runs_dir.to_str().unwrap(), "--watch-logdir", logdir.to_str().unwrap()];
    let mut writer = PythonWriter::start(&logdir);
    writer.send("write live simple Loss/train 0 10");
    let server = Server::start("tb-watch-a", &args);
    let id = logdir_run(&server, "live").await;
    let run_dir = runs_dir.join(id.as_str());
    let mut client = server.connect().await;
    let mut seen = BTreeMap::new();
    receive_points(&mut client, &id, &mut seen, 10).await;

    // The file grows while it is followed: the new points stream.
    writer.send("write live simple Loss/train 10 25");
    writer.send("write live simple Loss/valid 0 3");
    receive_more(&mut client, &id, &mut seen, 28).await;
    // A run that appears while the logdir is followed becomes a run too.
    writer.send("write second double lr 0 4");
    let second = logdir_run(&server, "second").await;
    assert_eq!(triples(points_in_file(&runs_dir.join(second.as_str())).values()), written("lr", 0..4));

    // Written while no server watched: the next one copies it once, into the same run.
    server.kill();
    writer.send("write live simple Loss/train 25 30");
    let server = Server::start("tb-watch-b", &args);
    let mut client = server.connect().await;
    let last = *seen.keys().last().unwrap();
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(last), after_log_seq: None }).await;
    receive_more(&mut client, &id, &mut seen, 33).await;
    let expected = [written("Loss/train", 0..25), written("Loss/valid", 0..3), written("Loss/train", 25..30)].concat();
    assert_eq!(triples(seen.values()), expected);
    assert_all_points(&seen, &run_dir);
    let listed: Vec<RunRecord> = serde_json::from_str(&server.get("/api/runs").body).unwrap();
    assert_eq!(
        listed.iter().map(|r| (r.id.clone(), r.state())).collect::<Vec<_>>(),
        [(id.clone(), RunState::Running), (second, RunState::Running)]
    );
    // Its training runs elsewhere: there is nothing here to cancel.
    client.send(&ClientMessage::Cancel { run: id }).await;
    let refused = client
        .recv_until(Duration::from_secs(30), |m| match m {
            ServerMessage::Error(report) => Some(report.clone()),
            _ => None,
        })
        .await;
    assert_eq!(refused.code, ErrorCode::NotCancellable);
    assert!(refused.message.contains("followed from a TensorBoard logdir"), "{}", refused.message);
    writer.finish();
}

/// Waits until the server lists the run read from the logdir's run directory `name`, running.
async fn logdir_run(server: &Server, name: &str) -> RunId {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed: Vec<RunRecord> = serde_json::from_str(&server.get("/api/runs").body).unwrap();
        if let Some(record) = listed.iter().find(|r| logdir_of(r).is_some_and(|(_, run)| run == name)) {
            assert_eq!(record.state(), RunState::Running, "{record:?}");
            return record.id.clone();
        }
        assert!(Instant::now() < deadline, "no run of {name} appeared: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Subscribes to every point of run `id` and receives until `count` have arrived.
async fn receive_points(client: &mut Client, id: &RunId, seen: &mut BTreeMap<u64, MetricPoint>, count: usize) {
    client.send(&ClientMessage::Subscribe { run: id.clone(), after_seq: Some(0), after_log_seq: None }).await;
    receive_more(client, id, seen, count).await;
}

/// Receives points of run `id` until `count` have arrived, failing on any arriving twice.
async fn receive_more(client: &mut Client, id: &RunId, seen: &mut BTreeMap<u64, MetricPoint>, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if let ServerMessage::Points { run, points } = client.recv(left).await
            && &run == id
        {
            collect(seen, &points);
        }
    }
}

#[test]
fn scalebooks_own_runs_inside_a_logdir_are_not_imported_again() {
    let dir = temp_dir("tb-own-runs");
    let logdir = dir.path().join("project");
    let runs_dir = logdir.join("runs");
    let mut file = tfevents::file_version_record(1.0);
    file.extend(tfevents::scalar_record(2.0, 1, "Loss/train", 0.5));
    for run in ["runs/20250101-000000-1/logs", "pytorch"] {
        std::fs::create_dir_all(logdir.join(run)).unwrap();
        std::fs::write(logdir.join(run).join(tfevents::file_name(1, "h", 1)), &file).unwrap();
    }
    let out = tb_import(&logdir, &runs_dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<String> = std::fs::read_dir(&runs_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let new: Vec<&String> = runs.iter().filter(|name| *name != "20250101-000000-1").collect();
    assert_eq!(new.len(), 1, "{runs:?}");
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(runs_dir.join(new[0]).join("run.json")).unwrap()).unwrap();
    assert_eq!(logdir_of(&record).map(|(_, run)| run), Some("pytorch"));
}

#[test]
fn tb_import_refuses_a_file_cut_short_unless_allowed_and_says_what_it_skipped() {
    let dir = temp_dir("tb-cut");
    let (logdir, runs_dir) = (dir.path().join("logdir"), dir.path().join("runs"));
    std::fs::create_dir_all(logdir.join("cut")).unwrap();
    let mut bytes = tfevents::file_version_record(1.0);
    bytes.extend(tfevents::scalar_record(2.0, 1, "loss", 0.5));
    let last = tfevents::scalar_record(3.0, 2, "loss", 0.25);
    bytes.extend(&last[..last.len() - 3]);
    let file = std::fs::canonicalize(logdir.join("cut")).unwrap().join(tfevents::file_name(1, "h", 1));
    std::fs::write(&file, &bytes).unwrap();

    let out = tb_import(&logdir, &runs_dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{}: its last {} bytes are a record cut short", file.display(), last.len() - 3)), "{stderr}");
    assert!(stderr.contains("--allow-damaged"), "{stderr}");
    assert_eq!(std::fs::read_dir(&runs_dir).map_or(0, |d| d.count()), 0, "a refused import wrote a run");

    let out = Command::new(env!("CARGO_BIN_EXE_scalebook"))
        .args(["tb", "import", "--allow-damaged"])
        .arg(&logdir)
        .arg("--runs-dir")
        .arg(&runs_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("(1 scalars in 1 tags)"));
    assert!(stderr.contains("warning:") && stderr.contains("record cut short"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nan_time_or_value_is_kept_and_an_impossible_record_stops_its_file_with_a_word_in_the_log() {
    let dir = temp_dir("tb-nan");
    let (logdir, runs_dir) = (dir.path().join("logdir"), dir.path().join("runs"));
    std::fs::create_dir_all(logdir.join("odd")).unwrap();
    // A broken writer: NaN and infinite times, a diverged loss, then a record claiming 4 GB.
    let mut bytes = tfevents::file_version_record(f64::NAN);
    bytes.extend(tfevents::scalar_record(f64::INFINITY, 1, "loss", f32::NAN));
    bytes.extend(tfevents::scalar_record(1.7e9, 2, "loss", f32::INFINITY));
    bytes.extend(tfevents::scalar_record(1.7e9 + 1.0, 3, "loss", 0.5));
    let huge = (4u64 << 30).to_le_bytes();
    bytes.extend(huge);
    bytes.extend(tfevents::masked_crc32c(&huge).to_le_bytes());
    bytes.extend([0u8; 64]);
    std::fs::write(logdir.join("odd").join(tfevents::file_name(1, "h", 1)), &bytes).unwrap();
    let args = ["--runs-dir", runs_dir.to_str().unwrap(), "--watch-logdir", logdir.to_str().unwrap()];
    let server = Server::start("tb-nan", &args);
    let id = logdir_run(&server, "odd").await;

    // Every page can read the run list: the run's times are numbers, from the events that have one.
    let listed: Vec<RunRecord> = serde_json::from_str(&server.get("/api/runs").body).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].created_at, 1.7e9);
    // The points come whole, NaN and infinity included.
    let mut client = server.connect().await;
    let mut seen = BTreeMap::new();
    receive_points(&mut client, &id, &mut seen, 3).await;
    let values: Vec<f64> = seen.values().map(|p| p.value).collect();
    assert!(values[0].is_nan() && values[1] == f64::INFINITY && values[2] == 0.5, "{values:?}");
    // The impossible record is said where the page shows it, once.
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        let log = server.get(&format!("/api/runs/{id}/files/job.log")).body;
        if log.contains("not read further") || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(log.contains("the record claims 4294967296 bytes"), "{log}");
    // Passes later (one that finds a new run has read every run again), still once.
    std::fs::create_dir_all(logdir.join("later")).unwrap();
    std::fs::write(logdir.join("later").join(tfevents::file_name(2, "h", 1)), tfevents::file_version_record(2.0)).unwrap();
    logdir_run(&server, "later").await;
    let again = server.get(&format!("/api/runs/{id}/files/job.log")).body;
    assert_eq!(again.matches("not read further").count(), 1, "{again}");
}
