//! How a run ended, in the states users need to tell apart, with the reason they need to act:
//! the trainer's exit status and the last lines it wrote decide between completed, failed,
//! out of memory, cancelled and lost.

use scalebook_shared::protocol::RunState;

use scalebook_shared::rundir::{ExitRecord, exit_code};

/// The longest reason kept; a reason is one line for a list view, the log has the rest.
const MAX_REASON_CHARS: usize = 300;

/// What libtorch and the kernel print when memory runs out (CUDA's allocator, the CPU
/// allocator, NCCL and cuBLAS failing to allocate).
const OOM_MARKERS: [&str; 4] =
    ["out of memory", "DefaultCPUAllocator: can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED", "std::bad_alloc"];

/// The final state of a run from how its process ended (`None`: it left no status),
/// whether a cancel was requested, and the end of its log.
pub fn decide(exit: Option<&ExitRecord>, cancel_requested: bool, log_tail: &str) -> (RunState, Option<String>) {
    let Some(exit) = exit else {
        return if cancel_requested {
            (RunState::Cancelled, Some("cancelled".into()))
        } else {
            (RunState::Lost, Some("the run's processes are gone and left no exit status (was the machine restarted?)".into()))
        };
    };
    if exit.code == Some(0) {
        return (RunState::Completed, None);
    }
    if cancel_requested {
        return (RunState::Cancelled, Some("cancelled".into()));
    }
    if let Some(limit) = exit.time_limit_s {
        let message = format!("stopped at the time limit of a learner's run ({} min, the server's --learner-time-limit)", limit / 60);
        return (RunState::Timeout, Some(message));
    }
    if let Some(error) = &exit.error {
        return (RunState::Failed, Some(shorten(error)));
    }
    if let Some(line) = non_empty_lines(log_tail).find(|l| OOM_MARKERS.iter().any(|m| l.contains(m))) {
        return (RunState::OutOfMemory, Some(shorten(without_error_prefix(line))));
    }
    let error_line = error_line(log_tail);
    if let Some(lost) = killed_on_a_node(log_tail) {
        let then = trainer_error(log_tail).map(|l| format!("; the other ranks stopped with them ({l})")).unwrap_or_default();
        return (RunState::Failed, Some(shorten(&format!("{lost}{then}"))));
    }
    let reason = match (exit.code, exit.signal) {
        (Some(code), _) if code == i32::from(exit_code::INVALID_INPUT) => format!("invalid input: {}", error_line.unwrap_or("see the log")),
        (_, Some(signal)) => {
            let name = nix::sys::signal::Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned());
            match error_line {
                Some(line) => format!("killed by {name}: {line}"),
                // SIGKILL nobody here sent is most often the kernel's out-of-memory killer.
                None if signal == 9 => format!("killed by {name} (the system may have run out of memory)"),
                None => format!("killed by {name}"),
            }
        }
        (code, _) => match error_line.or_else(|| non_empty_lines(log_tail).next()) {
            Some(line) => line.to_owned(),
            None => format!("exited with status {}", code.unwrap_or(-1)),
        },
    };
    (RunState::Failed, Some(shorten(&reason)))
}

/// The last line that reports an error (`error: ...`, without that prefix; a panic). Lines
/// of the launchers (srun, slurmstepd, the script's trace) count only when the trainer itself
/// said nothing: they say that a rank failed, the trainer says why.
fn error_line(log_tail: &str) -> Option<&str> {
    trainer_error(log_tail).or_else(|| non_empty_lines(log_tail).find(is_error).map(without_error_prefix))
}

/// The last error line the trainer itself wrote, without its `error: ` prefix.
fn trainer_error(log_tail: &str) -> Option<&str> {
    non_empty_lines(log_tail).filter(|l| !is_launcher_line(l)).find(is_error).map(without_error_prefix)
}

fn is_error(line: &&str) -> bool {
    line.to_ascii_lowercase().contains("error") || line.contains("panicked")
}

/// Where srun saw a node's tasks killed (`srun: error: node2: tasks 2-3: Killed`), in words:
/// what a node lost mid-run looks like from the batch script. The first such line names the
/// node that failed; the others follow from it.
fn killed_on_a_node(log_tail: &str) -> Option<String> {
    let killed = log_tail.lines().map(str::trim).filter(|l| l.ends_with(": Killed")).find_map(|l| l.strip_prefix("srun: error: "))?;
    let mut parts = killed.split(": ");
    let (node, tasks) = (parts.next()?, parts.next()?);
    let (ranks, were) = match (tasks.strip_prefix("tasks "), tasks.strip_prefix("task ")) {
        (Some(many), _) => (format!("ranks {many}"), "were"),
        (_, Some(one)) => (format!("rank {one}"), "was"),
        _ => return None,
    };
    Some(format!("{ranks} on node {node} {were} killed (the node or its tasks were lost)"))
}

fn is_launcher_line(line: &str) -> bool {
    ["srun:", "slurmstepd", "+ ", "[launch]"].iter().any(|p| line.starts_with(p))
}

fn without_error_prefix(line: &str) -> &str {
    line.strip_prefix("error: ").unwrap_or(line)
}

/// A line without the rank label the launchers put in front (`[rank 3] ` from the local
/// launcher, `3: ` from `srun --label`).
fn without_rank_label(line: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = line.strip_prefix("[rank ")
        && let Some((rank, text)) = rest.split_once("] ")
        && digits(rank)
    {
        return text;
    }
    match line.split_once(": ") {
        Some((rank, text)) if digits(rank.trim_start()) => text,
        _ => line,
    }
}

/// The log's non-empty lines without rank labels, last first.
fn non_empty_lines(log_tail: &str) -> impl Iterator<Item = &str> {
    log_tail.lines().map(|l| without_rank_label(l.trim()).trim()).filter(|l| !l.is_empty()).rev()
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> ExitRecord {
        ExitRecord { code: Some(code), signal: None, error: None, time_limit_s: None }
    }

    fn killed(signal: i32) -> ExitRecord {
        ExitRecord { code: None, signal: Some(signal), error: None, time_limit_s: None }
    }

    const TRAINING_LOG: &str = "2025-06-19 17:48:55,185 - root - INFO - Starting training loop...\n";

    #[test]
    fn a_clean_exit_is_completed_even_if_a_cancel_came_too_late() {
        assert_eq!(decide(Some(&exited(0)), false, TRAINING_LOG), (RunState::Completed, None));
        assert_eq!(decide(Some(&exited(0)), true, TRAINING_LOG), (RunState::Completed, None));
    }

    #[test]
    fn a_requested_cancel_explains_any_other_end() {
        for exit in [killed(15), killed(9), exited(1)] {
            assert_eq!(decide(Some(&exit), true, "error: interrupted\n").0, RunState::Cancelled, "{exit:?}");
        }
        assert_eq!(decide(None, true, "").0, RunState::Cancelled);
    }

    #[test]
    fn out_of_memory_is_recognised_in_every_allocator_wording() {
        for line in [
            "error: CUDA out of memory. Tried to allocate 2.00 GiB",
            "error: [enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1234",
            "RuntimeError: out of memory",
        ] {
            let log = format!("{TRAINING_LOG}{line}\nerror: training failed\n");
            let expected = line.strip_prefix("error: ").unwrap_or(line).to_owned();
            assert_eq!(decide(Some(&exited(1)), false, &log), (RunState::OutOfMemory, Some(expected)));
        }
    }

    #[test]
    fn failures_carry_the_last_error_line() {
        let log = format!("{TRAINING_LOG}error: cannot open /data/train/2016.h5: No such file\n\n");
        assert_eq!(decide(Some(&exited(1)), false, &log), (RunState::Failed, Some("cannot open /data/train/2016.h5: No such file".into())));
        let invalid = "error: embed_dim: 1536 is not divisible by num_heads 7\n";
        let (state, reason) = decide(Some(&exited(2)), false, invalid);
        assert_eq!(state, RunState::Failed);
        assert_eq!(reason.unwrap(), "invalid input: embed_dim: 1536 is not divisible by num_heads 7");
        let panic = "thread 'main' panicked at src/train/loop.rs:10:5:\nindex out of bounds\n";
        assert_eq!(decide(Some(&exited(101)), false, panic).1.unwrap(), "thread 'main' panicked at src/train/loop.rs:10:5:");
        assert_eq!(decide(Some(&exited(1)), false, "").1.unwrap(), "exited with status 1");
    }

    #[test]
    fn rank_labels_and_launcher_lines_do_not_hide_the_trainers_error() {
        let local = "[rank 1] error: cannot open /data/x.h5\n[launch] rank 1 exited with status 1; stopping the other ranks\n";
        assert_eq!(decide(Some(&exited(1)), false, local).1.unwrap(), "cannot open /data/x.h5");
        let slurm = "1: error: embed_dim: 7 is odd\nsrun: error: nid001: task 1: Exited with exit code 2\n";
        assert_eq!(decide(Some(&exited(2)), false, slurm).1.unwrap(), "invalid input: embed_dim: 7 is odd");
        let only_srun = "srun: error: nid001: task 0: Killed\n";
        assert_eq!(
            decide(Some(&exited(1)), false, only_srun).1.unwrap(),
            "rank 0 on node nid001 was killed (the node or its tasks were lost)"
        );
        let oom = "[rank 0] error: CUDA out of memory. Tried to allocate 2.00 GiB\n";
        assert_eq!(decide(Some(&exited(1)), false, oom).0, RunState::OutOfMemory);
    }

    #[test]
    fn signals_are_named_and_an_unexplained_kill_hints_at_memory() {
        let (state, reason) = decide(Some(&killed(9)), false, TRAINING_LOG);
        assert_eq!(state, RunState::Failed);
        assert_eq!(reason.unwrap(), "killed by SIGKILL (the system may have run out of memory)");
        assert_eq!(decide(Some(&killed(11)), false, "").1.unwrap(), "killed by SIGSEGV");
    }

    #[test]
    fn a_trainer_that_could_not_start_says_why() {
        let exit = ExitRecord { error: Some("cannot start /x/scalebook-train: No such file".into()), ..ExitRecord::default() };
        assert_eq!(decide(Some(&exit), false, "").1.unwrap(), "cannot start /x/scalebook-train: No such file");
    }

    #[test]
    fn no_status_and_no_cancel_is_lost() {
        assert_eq!(decide(None, false, TRAINING_LOG).0, RunState::Lost);
    }

    #[test]
    fn long_reasons_are_cut() {
        let line = format!("error: {}", "x".repeat(1000));
        let reason = decide(Some(&exited(1)), false, &line).1.unwrap();
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS + 1);
        assert!(reason.ends_with('…'));
    }

    #[test]
    fn a_node_whose_tasks_were_killed_is_named() {
        let log = "0: 2026-11-26 05:40:01,000 - root - INFO - step\n\
                   srun: error: node2: tasks 2-3: Killed\n\
                   0: error: all-reduce over dp/0: Connection closed by peer [127.0.0.1]:4411\n\
                   srun: error: node1: tasks 0-1: Exited with exit code 1\n";
        let (state, reason) = decide(Some(&exited(1)), false, log);
        assert_eq!(state, RunState::Failed);
        let reason = reason.unwrap();
        assert!(reason.starts_with("ranks 2-3 on node node2 were killed"), "{reason}");
        assert!(reason.contains("Connection closed by peer"), "{reason}");
        let one = decide(Some(&exited(1)), false, "srun: error: node1: task 0: Killed\n").1.unwrap();
        assert!(one.starts_with("rank 0 on node node1 was killed"), "{one}");
    }
}
