//! The runs a dropped server leaves behind. A local run's processes are a process group of
//! their own that outlives its server by design (a restarted server finds it again by its run
//! record), so a test or benchmark that is done with its server stops them here: one that
//! fails half-way leaves no trainer running.

use std::path::Path;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use scalebook_shared::protocol::{RunHandle, RunRecord};
use scalebook_shared::rundir;

/// Kills every process group that a run record (`RUNS/ID/run.json`) under `runs_dir` names
/// and whose leader still runs; how many it signalled. A missing directory has none.
pub fn stop_left_runs(runs_dir: &Path) -> usize {
    let records = std::fs::read_dir(runs_dir).into_iter().flatten().flatten();
    let texts = records.filter_map(|entry| std::fs::read_to_string(entry.path().join(rundir::RECORD)).ok());
    let groups = texts.filter_map(|text| match serde_json::from_str(&text) {
        Ok(RunRecord { handle: Some(RunHandle::Local { pgid, start_ticks }), .. }) => Some((pgid, start_ticks)),
        _ => None,
    });
    // Group ids 0 and 1 (the caller's own group, init) are never signalled, whatever a record says.
    let live = groups.filter(|&(pgid, start_ticks)| pgid > 1 && leader_alive(pgid, start_ticks));
    live.filter_map(|(pgid, _)| i32::try_from(pgid).ok()).filter(|&pgid| killpg(Pid::from_raw(pgid), Signal::SIGKILL).is_ok()).count()
}

/// Whether process `pid` runs and is the one that started at `start_ticks`: pids are reused, a
/// pid with its start time is not. The server makes the same check before it signals a run
/// (`scalebook_server::executor::process`); the harness has its own few lines rather than
/// depend on the server, whose tests depend on the harness.
fn leader_alive(pid: u32, start_ticks: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| started_at(&stat) == Some(start_ticks))
}

/// The start time (field 22, clock ticks since boot) of a `/proc/PID/stat` line, or `None` for
/// a process that has exited (a zombie). Fields are counted after the last `)`, since the
/// command name before it may itself hold spaces and parentheses.
fn started_at(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    // Field 3 is the state; field 22 comes 19 fields after it.
    let state = fields.next()?;
    let ticks = fields.nth(18)?.parse().ok()?;
    (!matches!(state, "Z" | "X" | "x")).then_some(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_are_read_after_the_command_name_and_zombies_have_none() {
        let stat = |state: &str| format!("77 (train (rank 0)) {state} 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 123456 1000 10");
        assert_eq!([started_at(&stat("S")), started_at(&stat("R")), started_at(&stat("Z"))], [Some(123_456), Some(123_456), None]);
        assert_eq!(started_at("77 (cut short) S 1"), None);
    }

    #[test]
    fn only_the_process_that_started_then_is_alive() {
        let me = std::process::id();
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let ticks = started_at(&stat).unwrap();
        assert!(leader_alive(me, ticks));
        assert!(!leader_alive(me, ticks + 1));
    }

    #[test]
    fn a_missing_runs_directory_has_nothing_to_stop() {
        assert_eq!(stop_left_runs(Path::new("/nonexistent/runs")), 0);
    }
}
