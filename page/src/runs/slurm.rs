//! What a Slurm run's page says of its job beyond the state, in the words people use at a
//! Slurm front end: where a pending job stands in the queue and when Slurm expects it to
//! start, the nodes it runs on, how long it ran and the CPU and GPU time it held, and how old
//! all that is (the server asks Slurm once a poll period for every job).
//!
//! When a job fails, its error lines come first: the job's log holds every rank's stdout and
//! stderr together (one file every viewer follows), and what went wrong is in the few lines a
//! rank wrote to stderr, easily hundreds of lines up from the end.

use scalebook_shared::protocol::{RunState, SlurmStatus};

use crate::progress::duration;
use crate::units::thousands;

/// The error lines shown first, at most.
pub const ERROR_LINES: usize = 8;

/// Lines about `status` for a run now in `state`; `now` and Slurm's estimate are Unix
/// seconds, `clock` writes one as the page's clock shows it.
pub fn describe(status: &SlurmStatus, state: RunState, now: f64, clock: impl Fn(f64) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    if state == RunState::Queued {
        if let (Some(place), Some(of)) = (status.place, status.pending) {
            lines.push(format!("place {place} of {of} pending jobs in its partition"));
        }
        match status.expected_start {
            Some(at) if at > now => lines.push(format!("Slurm expects to start it at {} (in {})", clock(at), duration(at - now))),
            Some(_) => lines.push("Slurm expects to start it any moment now".to_owned()),
            None => {}
        }
    }
    match (&status.nodes, status.elapsed_s) {
        (Some(nodes), None) if state == RunState::Running => lines.push(format!("running on {nodes}")),
        (nodes, Some(elapsed)) => {
            let on = nodes.as_ref().map(|n| format!(" on {n}")).unwrap_or_default();
            lines.push(format!("ran {}{on}", duration(elapsed)));
        }
        _ => {}
    }
    if let Some((cpu_h, gpu_h)) = status.hours_held() {
        let (cpus, gpus) = (status.cpus.unwrap_or(0), status.gpus.unwrap_or(0));
        let mut held = format!("held {cpus} CPUs ({} CPU-hours)", hours(cpu_h));
        if gpus > 0 {
            held.push_str(&format!(" and {gpus} GPUs ({} GPU-hours)", hours(gpu_h)));
        }
        if let Some(used) = status.cpu_used_s {
            held.push_str(&format!("; its processes used {} of CPU time", duration(used)));
        }
        lines.push(held);
    }
    lines
}

/// How old Slurm's word is: `Slurm's answer from 08:01:12 (12 s old)`, timed by the server's
/// clock alone (`server_now`), so a browser clock that is off changes nothing.
pub fn age(answered_at: f64, server_now: f64, clock: impl Fn(f64) -> String) -> String {
    let old = (server_now - answered_at).max(0.0);
    format!("Slurm's answer from {} ({} old)", clock(answered_at), duration(old))
}

fn hours(h: f64) -> String {
    if h >= 100.0 { thousands(h.round() as u64) } else { format!("{h:.2}") }
}

/// The lines of a failed run's log that say what went wrong, oldest first, at most
/// [`ERROR_LINES`]: what ranks write on stderr when they fail (errors, panics, tracebacks,
/// Slurm's own complaints about tasks).
pub fn error_lines<'a>(log: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let failing = |line: &str| {
        let lower = line.to_ascii_lowercase();
        ["error", "panicked", "traceback", "killed", "exception", "fatal", "cannot "].iter().any(|word| lower.contains(word))
    };
    let found: Vec<&str> = log.into_iter().filter(|line| failing(line)).collect();
    found[found.len().saturating_sub(ERROR_LINES)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(at: f64) -> String {
        format!("t{at}")
    }

    #[test]
    fn a_pending_job_says_where_it_stands_and_when_it_should_start() {
        let status = SlurmStatus { place: Some(3), pending: Some(12), expected_start: Some(1300.0), ..SlurmStatus::default() };
        assert_eq!(
            describe(&status, RunState::Queued, 1000.0, clock),
            ["place 3 of 12 pending jobs in its partition", "Slurm expects to start it at t1300 (in 5 min 00 s)"]
        );
        assert_eq!(describe(&status, RunState::Queued, 1400.0, clock)[1], "Slurm expects to start it any moment now");
        // Once it runs, only where.
        let running = SlurmStatus { nodes: Some("node[1-2]".into()), ..SlurmStatus::default() };
        assert_eq!(describe(&running, RunState::Running, 1000.0, clock), ["running on node[1-2]"]);
    }

    #[test]
    fn an_ended_job_says_how_long_it_ran_and_what_it_held() {
        let status = SlurmStatus {
            nodes: Some("nid[001-002]".into()),
            elapsed_s: Some(1800.0),
            cpus: Some(128),
            gpus: Some(8),
            cpu_used_s: Some(5400.0),
            ..SlurmStatus::default()
        };
        assert_eq!(
            describe(&status, RunState::Failed, 0.0, clock),
            [
                "ran 30 min 00 s on nid[001-002]",
                "held 128 CPUs (64.00 CPU-hours) and 8 GPUs (4.00 GPU-hours); its processes used 1 h 30 min of CPU time"
            ]
        );
        assert_eq!(age(100.0, 112.0, clock), "Slurm's answer from t100 (12 s old)");
    }

    #[test]
    fn a_failed_jobs_error_lines_come_out_of_its_log() {
        let log = [
            "0: epoch 3 step 40 loss 0.61",
            "2: thread 'main' panicked at trainer/src/train.rs:88: connection reset by peer",
            "1: epoch 3 step 41 loss 0.60",
            "srun: error: node2: tasks 2-3: Killed",
            "srun: Job step aborted",
        ];
        assert_eq!(error_lines(log), [log[1], log[3]]);
        let many: Vec<String> = (0..20).map(|i| format!("error {i}")).collect();
        let shown = error_lines(many.iter().map(String::as_str));
        assert_eq!((shown.len(), shown[0]), (ERROR_LINES, "error 12"));
    }
}
