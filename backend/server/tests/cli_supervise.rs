//! `scalebook supervise --time-limit-secs`, as the server starts it for a learner's run: past
//! its limit the whole process group is stopped, a program that ignores SIGTERM too, and the
//! end is recorded so the server calls the run a timeout, not a failure.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use scalebook_server::executor::outcome;
use scalebook_shared::protocol::RunState;
use scalebook_shared::rundir::ExitRecord;

#[test]
fn a_run_past_its_time_limit_is_stopped_with_its_whole_group_and_recorded_as_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (exit_file, pid_file) = (dir.path().join("exit.json"), dir.path().join("grandchild.pid"));
    // Deaf to SIGTERM, with a grandchild: only the group's SIGKILL stops all of it.
    let script = format!("trap '' TERM; sleep 600 & echo $! > {}; wait; wait", pid_file.display());
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_scalebook"))
        .arg("supervise")
        .arg("--exit-file")
        .arg(&exit_file)
        .args(["--time-limit-secs", "1", "--", "sh", "-c", &script])
        .process_group(0)
        .status()
        .unwrap();
    assert!(!status.success());
    assert!(started.elapsed() >= Duration::from_secs(1));
    let record: ExitRecord = serde_json::from_str(&std::fs::read_to_string(&exit_file).unwrap()).unwrap();
    assert_eq!(record.time_limit_s, Some(1), "{record:?}");
    let (state, message) = outcome::decide(Some(&record), false, "");
    assert_eq!(state, RunState::Timeout);
    assert!(message.unwrap().contains("time limit"));
    let grandchild = std::fs::read_to_string(&pid_file).unwrap();
    let proc_dir = format!("/proc/{}", grandchild.trim());
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(Path::new(&proc_dir)) {
        assert!(Instant::now() < deadline, "the grandchild {} outlived the time limit", grandchild.trim());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the process of `/proc/PID` still runs (a zombie waiting to be reaped does not).
fn alive(proc_dir: &Path) -> bool {
    std::fs::read_to_string(proc_dir.join("stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}
