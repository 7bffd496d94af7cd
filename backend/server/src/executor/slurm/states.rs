//! What Slurm says about a job, read from `squeue`, `sacct` and `scontrol show job`, and the
//! run state it means for a learner: Slurm has two dozen job states, people need eight.

use scalebook_shared::protocol::RunState;

use crate::executor::outcome;
use scalebook_shared::rundir::ExitRecord;

/// `squeue --format` fields, `|`-separated, the command (the script path) last so nothing in
/// it can shift the other fields.
pub const SQUEUE_FORMAT: &str = "%i|%T|%r|%o";
/// `sacct --format` fields (with `--parsable2`: `|`-separated, no trailing `|`).
pub const SACCT_FORMAT: &str = "JobID,State,ExitCode,Reason";

/// One job as a Slurm command reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub job_id: u64,
    /// The state name (`RUNNING`, `CANCELLED`, ...): sacct's `CANCELLED by 1234` is cut to
    /// its first word.
    pub state: String,
    /// Slurm's reason (`Priority`, `TimeLimit`, `None`).
    pub reason: String,
    /// `ExitCode=code:signal`, where the command reports it (sacct, scontrol).
    pub exit: Option<ExitRecord>,
    /// The batch script's path (squeue, scontrol): a job id Slurm reused for someone else's
    /// job runs another script.
    pub command: Option<String>,
}

/// Where a run stands by what Slurm said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Queued or running, with Slurm's reason when it gives one (why a job waits).
    Live(RunState, Option<String>),
    /// A final state with its reason.
    Ended(RunState, Option<String>),
}

/// Lines of `squeue --noheader --format=SQUEUE_FORMAT`; others (a `CLUSTER:` header of a
/// multi-cluster query) are skipped.
pub fn parse_squeue(text: &str) -> Vec<JobInfo> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.trim().splitn(4, '|');
            let job_id = fields.next()?.parse().ok()?;
            let state = fields.next()?.to_owned();
            let reason = fields.next()?.to_owned();
            let command = fields.next().map(str::to_owned);
            Some(JobInfo { job_id, state, reason, exit: None, command })
        })
        .collect()
}

/// Lines of `sacct -X --noheader --parsable2 --format=SACCT_FORMAT`.
pub fn parse_sacct(text: &str) -> Vec<JobInfo> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.trim().split('|').collect();
            let [id, state, exit, reason] = fields[..] else { return None };
            Some(JobInfo {
                job_id: id.parse().ok()?,
                state: state.split_whitespace().next()?.to_owned(),
                reason: reason.to_owned(),
                exit: parse_exit_code(exit),
                command: None,
            })
        })
        .collect()
}

/// `scontrol show job ID`: `Key=Value` pairs separated by blanks over several lines.
pub fn parse_scontrol(text: &str) -> Option<JobInfo> {
    let value = |key: &str| text.split_whitespace().find_map(|pair| pair.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')));
    Some(JobInfo {
        job_id: value("JobId")?.parse().ok()?,
        state: value("JobState")?.to_owned(),
        reason: value("Reason").unwrap_or("None").to_owned(),
        exit: value("ExitCode").and_then(parse_exit_code),
        command: value("Command").map(str::to_owned),
    })
}

/// Slurm's `code:signal` (`0:0`, `1:0`, `0:15`).
fn parse_exit_code(text: &str) -> Option<ExitRecord> {
    let (code, signal) = text.trim().split_once(':')?;
    let (code, signal): (i32, i32) = (code.parse().ok()?, signal.parse().ok()?);
    Some(if signal == 0 {
        ExitRecord { code: Some(code), signal: None, error: None }
    } else {
        ExitRecord { code: None, signal: Some(signal), error: None }
    })
}

/// The run state for what Slurm said about its job. `cancel_requested`: this server asked to
/// cancel it; `log_tail`: the end of `job.log`, which explains a failure better than Slurm's
/// exit code does.
pub fn judge(info: &JobInfo, cancel_requested: bool, log_tail: &str) -> Verdict {
    let reason = (!matches!(info.reason.as_str(), "" | "None" | "(null)")).then(|| info.reason.clone());
    let ended = |state: RunState, why: &str| Verdict::Ended(state, Some(why.to_owned()));
    match info.state.as_str() {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => {
            Verdict::Live(RunState::Queued, reason.map(|r| format!("pending in Slurm: {r}")))
        }
        "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT" | "RESIZING" => {
            Verdict::Live(RunState::Running, None)
        }
        "COMPLETED" => Verdict::Ended(RunState::Completed, None),
        "CANCELLED" if cancel_requested => ended(RunState::Cancelled, "cancelled"),
        "CANCELLED" => ended(RunState::Cancelled, "cancelled outside Scalebook (scancel, or an administrator)"),
        "OUT_OF_MEMORY" => ended(RunState::OutOfMemory, "the job used more memory than Slurm allows it (OUT_OF_MEMORY)"),
        "TIMEOUT" => ended(RunState::Timeout, "the job reached its time limit (TIMEOUT)"),
        "DEADLINE" => ended(RunState::Timeout, "the job reached its deadline (DEADLINE)"),
        "NODE_FAIL" => ended(RunState::NodeFailure, "a node of the job failed (NODE_FAIL)"),
        "FAILED" => {
            let exit = info.exit.clone().unwrap_or(ExitRecord { code: Some(1), signal: None, error: None });
            match outcome::decide(Some(&exit), cancel_requested, log_tail) {
                (RunState::Completed, _) => ended(RunState::Failed, "Slurm reports FAILED"),
                (state, reason) => Verdict::Ended(state, reason),
            }
        }
        other => {
            let why = reason.map_or_else(|| format!("Slurm ended the job as {other}"), |r| format!("Slurm ended the job as {other} ({r})"));
            Verdict::Ended(RunState::Failed, Some(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(state: &str, reason: &str) -> JobInfo {
        JobInfo { job_id: 7, state: state.into(), reason: reason.into(), exit: None, command: None }
    }

    #[test]
    fn squeue_lines_keep_the_whole_script_path() {
        let text = "CLUSTER: perlmutter\n12|PENDING|Priority|/runs/a|b/job.sbatch\n13|RUNNING|None|/runs/c/job.sbatch\n";
        let jobs = parse_squeue(text);
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0], JobInfo { command: Some("/runs/a|b/job.sbatch".into()), ..info("PENDING", "Priority") }.with_id(12));
        assert_eq!((jobs[1].job_id, jobs[1].state.as_str()), (13, "RUNNING"));
    }

    #[test]
    fn sacct_lines_give_state_exit_and_reason() {
        let text = "41|COMPLETED|0:0|None\n42|CANCELLED by 1000|0:15|None\n43|FAILED|2:0|NonZeroExitCode\n44|OUT_OF_MEMORY|0:125|OutOfMemory\nnoise\n";
        let jobs = parse_sacct(text);
        let states: Vec<(u64, &str)> = jobs.iter().map(|j| (j.job_id, j.state.as_str())).collect();
        assert_eq!(states, [(41, "COMPLETED"), (42, "CANCELLED"), (43, "FAILED"), (44, "OUT_OF_MEMORY")]);
        assert_eq!(jobs[1].exit, Some(ExitRecord { code: None, signal: Some(15), error: None }));
        assert_eq!(jobs[2].exit, Some(ExitRecord { code: Some(2), signal: None, error: None }));
    }

    #[test]
    fn scontrol_output_is_read_by_key() {
        // As `scontrol show job` prints a job that ran past its limit (Slurm 22.05).
        let text = "JobId=2 JobName=long\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)\n   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15\n   Command=/runs/r1/job.sbatch\n   StdOut=/runs/r1/job.log\n";
        let job = parse_scontrol(text).unwrap();
        assert_eq!(job.job_id, 2);
        assert_eq!((job.state.as_str(), job.reason.as_str()), ("TIMEOUT", "TimeLimit"));
        assert_eq!(job.command.as_deref(), Some("/runs/r1/job.sbatch"));
        assert_eq!(job.exit, Some(ExitRecord { code: None, signal: Some(15), error: None }));
        assert_eq!(parse_scontrol("slurm_load_jobs error: Invalid job id specified"), None);
    }

    #[test]
    fn every_slurm_state_people_need_maps_to_its_own_run_state() {
        let cases = [
            ("PENDING", RunState::Queued),
            ("CONFIGURING", RunState::Queued),
            ("RUNNING", RunState::Running),
            ("COMPLETING", RunState::Running),
            ("COMPLETED", RunState::Completed),
            ("FAILED", RunState::Failed),
            ("CANCELLED", RunState::Cancelled),
            ("OUT_OF_MEMORY", RunState::OutOfMemory),
            ("TIMEOUT", RunState::Timeout),
            ("DEADLINE", RunState::Timeout),
            ("NODE_FAIL", RunState::NodeFailure),
            ("BOOT_FAIL", RunState::Failed),
            ("PREEMPTED", RunState::Failed),
        ];
        for (slurm, expected) in cases {
            let state = match judge(&info(slurm, "None"), false, "") {
                Verdict::Live(state, _) | Verdict::Ended(state, _) => state,
            };
            assert_eq!(state, expected, "{slurm}");
        }
    }

    #[test]
    fn reasons_say_why_a_job_waits_or_ended() {
        assert_eq!(
            judge(&info("PENDING", "Priority"), false, ""),
            Verdict::Live(RunState::Queued, Some("pending in Slurm: Priority".into()))
        );
        assert_eq!(judge(&info("PENDING", "None"), false, ""), Verdict::Live(RunState::Queued, None));
        let Verdict::Ended(_, Some(reason)) = judge(&info("CANCELLED", "None"), false, "") else { panic!() };
        assert!(reason.contains("outside Scalebook"), "{reason}");
        assert_eq!(judge(&info("CANCELLED", "None"), true, ""), Verdict::Ended(RunState::Cancelled, Some("cancelled".into())));
        let Verdict::Ended(_, Some(reason)) = judge(&info("PREEMPTED", "None"), false, "") else { panic!() };
        assert_eq!(reason, "Slurm ended the job as PREEMPTED");
    }

    #[test]
    fn a_failed_job_is_explained_by_its_log() {
        let failed = JobInfo { exit: Some(ExitRecord { code: Some(1), signal: None, error: None }), ..info("FAILED", "NonZeroExitCode") };
        let log = "0: error: cannot open /data/train/2016.h5: No such file\nsrun: error: nid001: task 0: Exited with exit code 1\n";
        assert_eq!(
            judge(&failed, false, log),
            Verdict::Ended(RunState::Failed, Some("cannot open /data/train/2016.h5: No such file".into()))
        );
        let oom = "0: error: CUDA out of memory. Tried to allocate 2.00 GiB\n";
        assert!(matches!(judge(&failed, false, oom), Verdict::Ended(RunState::OutOfMemory, _)));
    }

    impl JobInfo {
        fn with_id(mut self, id: u64) -> JobInfo {
            self.job_id = id;
            self
        }
    }
}
