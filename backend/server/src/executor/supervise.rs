//! The supervisor: a small process (`scalebook supervise`) between the server and the
//! trainer. It leads the run's process group, waits for the trainer, and writes how it ended
//! to `exit.json`.
//!
//! Why not let the server wait for the trainer itself: only a parent learns a child's exit
//! status, and the server is the short-lived part (the hub culls idle servers; a user restarts
//! one). A server started later re-attaches to a running run but is not its parent; without
//! the supervisor it could only tell that the run ended, never how.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::local::CANCEL_GRACE;
use crate::store::write_json_atomic;
use scalebook_shared::rundir::ExitRecord;

/// Runs `program args` and waits for it, recording its end in `exit_file`.
///
/// A cancel sends SIGTERM to the whole group, so the trainer gets it too; the supervisor
/// catches its own copy and keeps waiting, so the trainer's real status (killed by SIGTERM, or
/// a clean exit if it finished first) is what gets recorded. Past `time_limit` the supervisor
/// does the same itself, and what is left of the group after [`CANCEL_GRACE`] is killed.
pub async fn supervise(exit_file: &Path, program: &OsString, args: &[OsString], time_limit: Option<Duration>) -> io::Result<ExitCode> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut child = match tokio::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(e) => {
            let message = format!("cannot start {}: {e}", Path::new(program).display());
            eprintln!("error: {message}");
            let record = ExitRecord { code: None, signal: None, error: Some(message), time_limit_s: None };
            write_json_atomic(exit_file, &record)?;
            return Ok(ExitCode::from(127));
        }
    };
    let limit = time_limit.map(|limit| Box::pin(tokio::time::sleep(limit)));
    let over = async {
        match limit {
            Some(sleep) => sleep.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(over);
    let mut timed_out = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = terminate.recv() => {}
            () = &mut over, if !timed_out => {
                timed_out = true;
                eprintln!("scalebook: the run reached its time limit of {}: stopping it", minutes(time_limit));
                let group = nix::unistd::getpgrp();
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
                if let Ok(status) = tokio::time::timeout(CANCEL_GRACE, child.wait()).await {
                    break status?;
                }
                // Recorded first: the kill takes the supervisor with the rest of its group.
                let record = ExitRecord { signal: Some(9), time_limit_s: time_limit.map(|l| l.as_secs()), ..ExitRecord::default() };
                write_json_atomic(exit_file, &record)?;
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
        }
    };
    let mut record = super::exit_record(status);
    if timed_out {
        record.time_limit_s = time_limit.map(|l| l.as_secs());
    }
    write_json_atomic(exit_file, &record)?;
    // The supervisor's own status mirrors the trainer's, as a shell's `$?` would.
    let code = record.code.or(record.signal.map(|s| 128 + s)).unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// A time limit in words, for the log.
fn minutes(limit: Option<Duration>) -> String {
    match limit.map(|l| l.as_secs()) {
        Some(s) if s % 60 == 0 => format!("{} min", s / 60),
        Some(s) => format!("{s} s"),
        None => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path in a fresh directory that lives as long as the returned guard.
    fn temp_file(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{name}.json"));
        (dir, path)
    }

    fn read(path: &Path) -> ExitRecord {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn records_the_exit_code() {
        let (_dir, path) = temp_file("code");
        let args: Vec<OsString> = ["-c", "exit 3"].map(OsString::from).to_vec();
        supervise(&path, &"sh".into(), &args, None).await.unwrap();
        assert_eq!(read(&path), ExitRecord { code: Some(3), signal: None, error: None, time_limit_s: None });
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test]
    async fn records_the_signal_that_killed_the_program() {
        let (_dir, path) = temp_file("signal");
        let args: Vec<OsString> = ["-c", "kill -KILL $$"].map(OsString::from).to_vec();
        supervise(&path, &"sh".into(), &args, None).await.unwrap();
        assert_eq!(read(&path), ExitRecord { code: None, signal: Some(9), error: None, time_limit_s: None });
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test]
    async fn a_program_that_cannot_start_leaves_the_reason() {
        let (_dir, path) = temp_file("missing");
        let code = supervise(&path, &"/nonexistent/scalebook-train".into(), &[], None).await.unwrap();
        assert_eq!(code, ExitCode::from(127));
        let record = read(&path);
        assert!(record.error.unwrap().contains("/nonexistent/scalebook-train"));
        std::fs::remove_file(&path).unwrap();
    }
}
