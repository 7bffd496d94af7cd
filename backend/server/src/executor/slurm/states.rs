//! What Slurm says about a job, read from `squeue`, `sacct` and `scontrol show job`, and the
//! run state it means for a learner: Slurm has two dozen job states, people need eight.
//!
//! Times are asked for as Unix seconds ([`TIME_FORMAT`]): Slurm otherwise prints its own
//! zone's local time, which a server in another zone would misread.

use scalebook_shared::protocol::{RunState, SlurmStatus};

use crate::executor::outcome;
use scalebook_shared::rundir::ExitRecord;

/// `squeue --format` fields, `|`-separated: id, state, reason, priority, partition, start
/// (expected, while pending), CPUs, nodes, and the command (the script path) last so nothing
/// in it can shift the other fields.
pub const SQUEUE_FORMAT: &str = "%i|%T|%r|%Q|%P|%S|%C|%N|%o";
/// `sacct --format` fields (with `--parsable2`: `|`-separated, no trailing `|`).
pub const SACCT_FORMAT: &str = "JobID,State,ExitCode,Reason,Elapsed,AllocCPUS,AllocTRES,TotalCPU,NodeList";
/// `SLURM_TIME_FORMAT` for every Slurm command: times as Unix seconds.
pub const TIME_FORMAT: &str = "%s";

/// One job as a Slurm command reported it.
#[derive(Debug, Clone, PartialEq, Default)]
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
    /// Scheduling priority and partition (squeue): a pending job's place in the queue.
    pub priority: Option<u64>,
    pub partition: Option<String>,
    /// Place among the partition's pending jobs, of how many ([`number_the_queue`]).
    pub place: Option<(u32, u32)>,
    /// Start time, Unix seconds: Slurm's estimate while the job pends.
    pub start: Option<f64>,
    /// The node list (`node[1-2]`), once it has nodes.
    pub nodes: Option<String>,
    pub cpus: Option<u32>,
    /// GPUs held (`gres/gpu=N` of its trackable resources: sacct, scontrol).
    pub gpus: Option<u32>,
    /// Seconds it ran (sacct, scontrol).
    pub elapsed_s: Option<f64>,
    /// CPU seconds its processes used (sacct).
    pub cpu_used_s: Option<f64>,
}

impl JobInfo {
    /// What a run's page shows of the job besides its state; how long it ran and what it held
    /// only once `ended` (a running job's count would change every poll).
    pub fn status(&self, ended: bool) -> SlurmStatus {
        let pending = self.state == "PENDING";
        SlurmStatus {
            place: self.place.filter(|_| pending).map(|p| p.0),
            pending: self.place.filter(|_| pending).map(|p| p.1),
            expected_start: self.start.filter(|_| pending),
            nodes: self.nodes.clone().filter(|n| !n.is_empty() && !pending && n != "None assigned"),
            elapsed_s: self.elapsed_s.filter(|_| ended),
            cpus: self.cpus.filter(|_| ended),
            gpus: self.gpus.filter(|_| ended),
            cpu_used_s: self.cpu_used_s.filter(|_| ended),
        }
    }
}

/// Numbers the pending jobs of `queue`, partition by partition, in the order Slurm starts them:
/// higher priority first, then the older (lower) id.
pub fn number_the_queue(queue: &mut [JobInfo]) {
    let pending: Vec<(String, u64, u64)> = queue
        .iter()
        .filter(|j| j.state == "PENDING")
        .map(|j| (j.partition.clone().unwrap_or_default(), j.priority.unwrap_or(0), j.job_id))
        .collect();
    for job in queue.iter_mut().filter(|j| j.state == "PENDING") {
        let (partition, priority) = (job.partition.clone().unwrap_or_default(), job.priority.unwrap_or(0));
        let same: Vec<&(String, u64, u64)> = pending.iter().filter(|p| p.0 == partition).collect();
        let ahead = same.iter().filter(|p| p.1 > priority || (p.1 == priority && p.2 < job.job_id)).count();
        job.place = Some((ahead as u32 + 1, same.len() as u32));
    }
}

/// Slurm's states of a job waiting to run.
const WAITING: [&str; 6] = ["PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"];
/// Slurm's states of a job that holds its nodes.
const RUNNING: [&str; 7] = ["RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"];

/// Whether a job in Slurm state `state` may still change.
pub fn is_live(state: &str) -> bool {
    WAITING.contains(&state) || RUNNING.contains(&state)
}

/// Where a run stands by what Slurm said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Queued or running, with Slurm's reason when it gives one (why a job waits).
    Live(RunState, Option<String>),
    /// A final state with its reason.
    Ended(RunState, Option<String>),
}

/// Lines of `squeue --noheader --format=SQUEUE_FORMAT`, the pending ones numbered; others (a
/// `CLUSTER:` header of a multi-cluster query) are skipped.
pub fn parse_squeue(text: &str) -> Vec<JobInfo> {
    let mut queue: Vec<JobInfo> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.trim().splitn(9, '|');
            let job_id = fields.next()?.parse().ok()?;
            let state = fields.next()?.to_owned();
            let reason = fields.next()?.to_owned();
            let priority = fields.next().and_then(|p| p.parse().ok());
            let partition = fields.next().map(str::to_owned);
            let start = fields.next().and_then(seconds_since_epoch);
            let cpus = fields.next().and_then(|c| c.parse().ok());
            let nodes = fields.next().map(str::to_owned).filter(|n| !n.is_empty());
            let command = fields.next().map(str::to_owned);
            Some(JobInfo { job_id, state, reason, command, priority, partition, start, cpus, nodes, ..JobInfo::default() })
        })
        .collect();
    number_the_queue(&mut queue);
    queue
}

/// Lines of `sacct -X --noheader --parsable2 --format=SACCT_FORMAT`.
pub fn parse_sacct(text: &str) -> Vec<JobInfo> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.trim().split('|').collect();
            let [id, state, exit, reason, elapsed, cpus, tres, total_cpu, nodes] = fields[..] else { return None };
            Some(JobInfo {
                job_id: id.parse().ok()?,
                state: state.split_whitespace().next()?.to_owned(),
                reason: reason.to_owned(),
                exit: parse_exit_code(exit),
                elapsed_s: parse_duration(elapsed),
                cpus: cpus.parse().ok(),
                gpus: gpus_of(tres),
                cpu_used_s: parse_duration(total_cpu),
                nodes: Some(nodes.to_owned()),
                ..JobInfo::default()
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
        priority: value("Priority").and_then(|p| p.parse().ok()),
        partition: value("Partition").map(str::to_owned),
        start: value("StartTime").and_then(seconds_since_epoch),
        nodes: value("NodeList").filter(|n| *n != "(null)").map(str::to_owned),
        cpus: value("NumCPUs").and_then(|c| c.parse().ok()),
        gpus: value("TRES").and_then(gpus_of),
        elapsed_s: value("RunTime").and_then(parse_duration),
        ..JobInfo::default()
    })
}

/// A time printed with [`TIME_FORMAT`] (`N/A`, `Unknown`: none).
fn seconds_since_epoch(text: &str) -> Option<f64> {
    text.trim().parse::<i64>().ok().filter(|s| *s > 0).map(|s| s as f64)
}

/// Slurm's durations: `[D-][HH:]MM:SS[.mmm]` (`1-02:03:04`, `00:12`, `01:02.345`).
fn parse_duration(text: &str) -> Option<f64> {
    let text = text.trim();
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (d.parse::<f64>().ok()?, rest),
        None => (0.0, text),
    };
    let parts: Vec<f64> = clock.split(':').map(|p| p.parse::<f64>().ok()).collect::<Option<_>>()?;
    let (h, m, s) = match parts[..] {
        [m, s] => (0.0, m, s),
        [h, m, s] => (h, m, s),
        _ => return None,
    };
    Some(days * 86_400.0 + h * 3600.0 + m * 60.0 + s)
}

/// The GPU count of a trackable-resources list (`cpu=8,mem=4G,node=2,gres/gpu=8`); none is 0.
fn gpus_of(tres: &str) -> Option<u32> {
    if tres.is_empty() {
        return None;
    }
    let gpus = tres.split(',').find_map(|item| item.strip_prefix("gres/gpu=")).and_then(|n| n.parse().ok());
    Some(gpus.unwrap_or(0))
}

/// Slurm's `code:signal` (`0:0`, `1:0`, `0:15`).
fn parse_exit_code(text: &str) -> Option<ExitRecord> {
    let (code, signal) = text.trim().split_once(':')?;
    let (code, signal): (i32, i32) = (code.parse().ok()?, signal.parse().ok()?);
    Some(if signal == 0 {
        ExitRecord { code: Some(code), signal: None, error: None, time_limit_s: None }
    } else {
        ExitRecord { code: None, signal: Some(signal), error: None, time_limit_s: None }
    })
}

/// The run state for what Slurm said about its job. `cancel_requested`: this server asked to
/// cancel it; `log_tail`: the end of `job.log`, which explains a failure better than Slurm's
/// exit code does.
pub fn judge(info: &JobInfo, cancel_requested: bool, log_tail: &str) -> Verdict {
    let reason = (!matches!(info.reason.as_str(), "" | "None" | "(null)")).then(|| info.reason.clone());
    let ended = |state: RunState, why: &str| Verdict::Ended(state, Some(why.to_owned()));
    match info.state.as_str() {
        state if WAITING.contains(&state) => Verdict::Live(RunState::Queued, reason.map(|r| format!("pending in Slurm: {r}"))),
        state if RUNNING.contains(&state) => Verdict::Live(RunState::Running, None),
        "COMPLETED" => Verdict::Ended(RunState::Completed, None),
        "CANCELLED" if cancel_requested => ended(RunState::Cancelled, "cancelled"),
        "CANCELLED" => ended(RunState::Cancelled, "cancelled outside Scalebook (scancel, or an administrator)"),
        "OUT_OF_MEMORY" => ended(RunState::OutOfMemory, "the job used more memory than Slurm allows it (OUT_OF_MEMORY)"),
        "TIMEOUT" => ended(RunState::Timeout, "the job reached its time limit (TIMEOUT)"),
        "DEADLINE" => ended(RunState::Timeout, "the job reached its deadline (DEADLINE)"),
        "NODE_FAIL" => ended(RunState::NodeFailure, "a node of the job failed (NODE_FAIL)"),
        "FAILED" => {
            let exit = info.exit.clone().unwrap_or(ExitRecord { code: Some(1), signal: None, error: None, time_limit_s: None });
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
        JobInfo { job_id: 7, state: state.into(), reason: reason.into(), ..JobInfo::default() }
    }

    #[test]
    fn squeue_lines_keep_the_whole_script_path() {
        let text = "CLUSTER: perlmutter\n12|PENDING|Priority|4000|gpu|1764150000|8||/runs/a|b/job.sbatch\n13|RUNNING|None|9000|gpu|1764140000|8|node[1-2]|/runs/c/job.sbatch\n";
        let jobs = parse_squeue(text);
        assert_eq!(jobs.len(), 2);
        let pending = JobInfo {
            command: Some("/runs/a|b/job.sbatch".into()),
            priority: Some(4000),
            partition: Some("gpu".into()),
            place: Some((1, 1)),
            start: Some(1_764_150_000.0),
            cpus: Some(8),
            ..info("PENDING", "Priority")
        };
        assert_eq!(jobs[0], pending.with_id(12));
        assert_eq!((jobs[1].job_id, jobs[1].state.as_str(), jobs[1].nodes.as_deref()), (13, "RUNNING", Some("node[1-2]")));
        // A pending job says when Slurm expects it, a running one where it runs.
        let status = jobs[0].status(false);
        assert_eq!((status.place, status.pending, status.expected_start, status.nodes), (Some(1), Some(1), Some(1_764_150_000.0), None));
        assert_eq!(jobs[1].status(false).nodes.as_deref(), Some("node[1-2]"));
    }

    #[test]
    fn pending_jobs_are_numbered_by_priority_then_age_within_their_partition() {
        let text = "5|PENDING|Priority|100|gpu|N/A|1||/a\n6|PENDING|Priority|300|gpu|N/A|1||/b\n7|PENDING|Resources|100|gpu|N/A|1||/c\n8|PENDING|Priority|1|cpu|N/A|1||/d\n9|RUNNING|None|1|gpu|N/A|1|n1|/e\n";
        let places: Vec<(u64, Option<(u32, u32)>)> = parse_squeue(text).iter().map(|j| (j.job_id, j.place)).collect();
        assert_eq!(places, [(5, Some((2, 3))), (6, Some((1, 3))), (7, Some((3, 3))), (8, Some((1, 1))), (9, None)]);
    }

    #[test]
    fn durations_and_gpus_read_as_slurm_prints_them() {
        assert_eq!(parse_duration("1-02:03:04"), Some(93_784.0));
        assert_eq!(parse_duration("00:12"), Some(12.0));
        assert_eq!(parse_duration("01:02.500"), Some(62.5));
        assert_eq!(parse_duration("Unknown"), None);
        assert_eq!(gpus_of("billing=8,cpu=8,gres/gpu=4,mem=40G,node=1"), Some(4));
        assert_eq!(gpus_of("cpu=4,node=2"), Some(0));
    }

    #[test]
    fn sacct_lines_give_state_exit_and_reason() {
        let text = "41|COMPLETED|0:0|None|00:01:40|8|billing=8,cpu=8,gres/gpu=4,node=1|05:10.250|nid001\n42|CANCELLED by 1000|0:15|None|00:00:03|8|cpu=8|00:00.100|nid002\n43|FAILED|2:0|NonZeroExitCode|00:00:01|2|cpu=2|00:00.010|n1\n44|OUT_OF_MEMORY|0:125|OutOfMemory|00:00:09|2|cpu=2|00:02.000|n1\nnoise\n";
        let jobs = parse_sacct(text);
        let ended = jobs[0].status(true);
        assert_eq!((ended.elapsed_s, ended.cpus, ended.gpus, ended.cpu_used_s), (Some(100.0), Some(8), Some(4), Some(310.25)));
        assert_eq!(ended.hours_held().map(|(cpu, gpu)| (cpu * 9.0, gpu * 9.0)), Some((2.0, 1.0)));
        let states: Vec<(u64, &str)> = jobs.iter().map(|j| (j.job_id, j.state.as_str())).collect();
        assert_eq!(states, [(41, "COMPLETED"), (42, "CANCELLED"), (43, "FAILED"), (44, "OUT_OF_MEMORY")]);
        assert_eq!(jobs[1].exit, Some(ExitRecord { code: None, signal: Some(15), error: None, time_limit_s: None }));
        assert_eq!(jobs[2].exit, Some(ExitRecord { code: Some(2), signal: None, error: None, time_limit_s: None }));
    }

    #[test]
    fn scontrol_output_is_read_by_key() {
        // As `scontrol show job` prints a job that ran past its limit (Slurm 22.05).
        let text = "JobId=2 JobName=long\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)\n   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15\n   RunTime=00:01:05 TimeLimit=00:01:00 TimeMin=N/A\n   Partition=debug AllocNode:Sid=localhost:1\n   NodeList=node[1-2]\n   NumNodes=2 NumCPUs=4 NumTasks=4 CPUs/Task=1\n   TRES=cpu=4,node=2,billing=4\n   Command=/runs/r1/job.sbatch\n   StdOut=/runs/r1/job.log\n";
        let job = parse_scontrol(text).unwrap();
        let ended = job.status(true);
        assert_eq!((ended.nodes.as_deref(), ended.elapsed_s, ended.cpus, ended.gpus), (Some("node[1-2]"), Some(65.0), Some(4), Some(0)));
        assert_eq!(job.job_id, 2);
        assert_eq!((job.state.as_str(), job.reason.as_str()), ("TIMEOUT", "TimeLimit"));
        assert_eq!(job.command.as_deref(), Some("/runs/r1/job.sbatch"));
        assert_eq!(job.exit, Some(ExitRecord { code: None, signal: Some(15), error: None, time_limit_s: None }));
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
        let failed = JobInfo {
            exit: Some(ExitRecord { code: Some(1), signal: None, error: None, time_limit_s: None }),
            ..info("FAILED", "NonZeroExitCode")
        };
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
