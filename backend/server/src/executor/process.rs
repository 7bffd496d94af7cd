//! Process groups, as the kernel sees them. A run's processes share one group whose leader is
//! the supervisor, so one signal reaches every process of the run, and a server started later
//! can tell whether the group it recorded is still the same one.

use std::io;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat`, field 22),
/// or `None` when there is no such live process. Pids are reused; a pid together with its
/// start time is not.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// Field 3 (state) and field 22 (start time) of a `/proc/<pid>/stat` line. The command name
/// (field 2) is in parentheses and may itself contain spaces and parentheses, so fields are
/// counted from the last `)`. A zombie has exited: it counts as gone.
fn parse_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&("Z" | "X" | "x"))) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether the group leader `pgid` that started at `start_ticks` still runs.
pub fn leader_alive(pgid: u32, start_ticks: u64) -> bool {
    self::start_ticks(pgid) == Some(start_ticks)
}

/// Whether any process is left in group `pgid`.
pub fn group_exists(pgid: u32) -> bool {
    to_pid(pgid).is_some_and(|pid| killpg(pid, None) != Err(Errno::ESRCH))
}

/// Sends `signal` to every process of group `pgid`; a group that is already gone is not an
/// error.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    let pid = to_pid(pgid).ok_or_else(|| io::Error::other(format!("{pgid} is not a process group id")))?;
    match killpg(pid, signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Group ids 0 and 1 (the caller's own group, init) must never be signalled by mistake.
fn to_pid(pgid: u32) -> Option<Pid> {
    i32::try_from(pgid).ok().filter(|&p| p > 1).map(Pid::from_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        let line = "4242 (scalebook (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some(987_654));
        let zombie = line.replace(") S ", ") Z ");
        assert_eq!(parse_stat(&zombie), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_start_time_is_not_it() {
        let me = std::process::id();
        let ticks = start_ticks(me).unwrap();
        assert!(leader_alive(me, ticks));
        assert!(!leader_alive(me, ticks + 1));
    }

    #[test]
    fn the_callers_group_and_init_are_never_signalled() {
        assert!(signal_group(0, Signal::SIGTERM).is_err());
        assert!(signal_group(1, Signal::SIGTERM).is_err());
        assert!(!group_exists(0));
    }
}
