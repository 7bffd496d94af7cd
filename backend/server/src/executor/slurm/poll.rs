//! One polling cycle over every Slurm job the server watches, with the load a shared login
//! node can bear: one `squeue` for all of them (the whole queue, which slurmctld sends squeue
//! anyway: a pending job's place is counted among everyone's); for the jobs that left the
//! queue, one batched
//! `sacct` where the site keeps accounting, else `scontrol show job` for each of those (they
//! are few: a job leaves the queue once). Whether the site has accounting is found out once.
//!
//! Job ids get reused (after a wrap-around, or on a test cluster whose state was reset), so a
//! job is recognised by its id *and* its script path, which is inside the run directory.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::states::{self, JobInfo, SACCT_FORMAT, SQUEUE_FORMAT};
use super::{Output, SlurmCommands, run};
use crate::Error;

/// A job to look up.
#[derive(Debug, Clone)]
pub struct JobRef {
    pub job_id: u64,
    pub slurm_cluster: Option<String>,
    /// The script it was submitted with (absolute), as squeue and scontrol report it.
    pub script: PathBuf,
}

/// What a cycle learnt about one job.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// Slurm's word on the job (boxed: a cycle holds one for every job it watches).
    Seen(Box<JobInfo>),
    /// Slurm no longer knows the job, or its id now names another job.
    Gone,
}

pub struct Poller {
    commands: SlurmCommands,
    /// Whether `sacct` works here: unknown until first asked.
    accounting: Mutex<Option<bool>>,
    /// When squeue last answered (seconds since the Unix epoch): the age of every Slurm
    /// run's state.
    answered_at: Mutex<Option<f64>>,
}

impl Poller {
    pub fn new(commands: SlurmCommands) -> Poller {
        Poller { commands, accounting: Mutex::new(None), answered_at: Mutex::new(None) }
    }

    /// When Slurm last answered a poll, if it has.
    pub fn answered_at(&self) -> Option<f64> {
        *self.answered_at.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn commands(&self) -> &SlurmCommands {
        &self.commands
    }

    /// Whether the site keeps accounting, once a cycle has found out.
    pub fn accounting(&self) -> Option<bool> {
        *self.accounting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_accounting(&self, on: bool) {
        *self.accounting.lock().unwrap_or_else(|p| p.into_inner()) = Some(on);
    }

    /// Slurm's word on every job of `jobs`, in the same order; `None` where no command
    /// answered this cycle (the next one asks again).
    pub async fn observe(&self, jobs: &[JobRef]) -> Vec<Option<Observation>> {
        let mut seen = vec![None; jobs.len()];
        // One query per Slurm cluster; on almost every site that is one query.
        let mut groups: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
        for (i, job) in jobs.iter().enumerate() {
            groups.entry(job.slurm_cluster.as_deref()).or_default().push(i);
        }
        for (cluster, members) in groups {
            let cluster_arg = cluster.map(|c| format!("--clusters={c}"));
            let queue = match self.squeue(cluster_arg.as_deref()).await {
                Ok(queue) => {
                    *self.answered_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(crate::clock::now());
                    queue
                }
                Err(e) => {
                    tracing::warn!("cannot poll Slurm: {e}");
                    continue;
                }
            };
            // Jobs that left the queue, and ours that ended while Slurm still lists them: their
            // last word (how long they ran, what they held) is asked of sacct or scontrol, once.
            let mut left = Vec::new();
            for &i in &members {
                match queue.iter().find(|info| info.job_id == jobs[i].job_id) {
                    Some(info) => {
                        let observation = recognise(info, &jobs[i]);
                        if !states::is_live(&info.state) && matches!(observation, Observation::Seen(_)) {
                            left.push(i);
                        }
                        seen[i] = Some(observation);
                    }
                    None => left.push(i),
                }
            }
            if !left.is_empty() && self.accounting() != Some(false) {
                match self.sacct(&ids(jobs, &left), cluster_arg.as_deref()).await {
                    // sacct lags just after a job ends: the ones it lacks go to scontrol.
                    Ok(Some(found)) => left.retain(|&i| match found.iter().rfind(|info| info.job_id == jobs[i].job_id) {
                        Some(info) => {
                            seen[i] = Some(Observation::Seen(Box::new(info.clone())));
                            false
                        }
                        None => true,
                    }),
                    Ok(None) => {}
                    Err(e) => tracing::warn!("{e}"),
                }
            }
            for i in left {
                match self.scontrol(&jobs[i], cluster_arg.as_deref()).await {
                    Ok(observation) => seen[i] = Some(observation),
                    // squeue's word, if it had one, stands.
                    Err(e) => tracing::warn!("{e}"),
                }
            }
        }
        seen
    }

    /// Every job in the queue (in any state Slurm still remembers), the pending ones numbered.
    async fn squeue(&self, cluster: Option<&str>) -> Result<Vec<JobInfo>, Error> {
        let format = format!("--format={SQUEUE_FORMAT}");
        let output = self.query(&self.commands.squeue, &["--noheader", "--states=all", &format], cluster).await?;
        match output {
            out if out.success => Ok(states::parse_squeue(&out.stdout)),
            out => Err(out.refusal("squeue")),
        }
    }

    /// `sacct` for jobs that left the queue, or `None` when the site keeps no accounting,
    /// which switches this server to `scontrol` for good.
    async fn sacct(&self, ids: &str, cluster: Option<&str>) -> Result<Option<Vec<JobInfo>>, Error> {
        let format = format!("--format={SACCT_FORMAT}");
        let jobs = format!("--jobs={ids}");
        let output = self.query(&self.commands.sacct, &["-X", "--noheader", "--parsable2", &format, &jobs], cluster).await?;
        if output.success {
            self.set_accounting(true);
            return Ok(Some(states::parse_sacct(&output.stdout)));
        }
        if format!("{}{}", output.stdout, output.stderr).contains("accounting storage is disabled") {
            self.set_accounting(false);
            tracing::info!("this Slurm keeps no accounting: jobs that left the queue are looked up with scontrol");
            return Ok(None);
        }
        Err(output.refusal("sacct"))
    }

    async fn scontrol(&self, job: &JobRef, cluster: Option<&str>) -> Result<Observation, Error> {
        let id = job.job_id.to_string();
        let output = self.query(&self.commands.scontrol, &["show", "job", &id], cluster).await?;
        if !output.success {
            return if output.stderr.contains("Invalid job id") { Ok(Observation::Gone) } else { Err(output.refusal("scontrol")) };
        }
        match states::parse_scontrol(&output.stdout) {
            Some(info) if info.job_id == job.job_id => Ok(recognise(&info, job)),
            _ => Err(Error::SlurmUnreadable { command: "scontrol", answer: output.stdout.lines().next().unwrap_or("").to_owned() }),
        }
    }

    async fn query(&self, program: &Path, args: &[&str], cluster: Option<&str>) -> Result<Output, Error> {
        // Options before the rest: scontrol reads none after its subcommand.
        let argv: Vec<&OsStr> = cluster.into_iter().chain(args.iter().copied()).map(OsStr::new).collect();
        run(program, &argv, None).await
    }
}

/// `info` as an observation of `job`: Slurm's word if the job runs `job`'s script, else the
/// id has been given to another job and ours is gone.
fn recognise(info: &JobInfo, job: &JobRef) -> Observation {
    match &info.command {
        Some(command) if Path::new(command) != job.script => Observation::Gone,
        _ => Observation::Seen(Box::new(info.clone())),
    }
}

fn ids(jobs: &[JobRef], members: &[usize]) -> String {
    members.iter().map(|&i| jobs[i].job_id.to_string()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_job_id_is_not_our_job() {
        let job = JobRef { job_id: 5, slurm_cluster: None, script: "/runs/r1/job.sbatch".into() };
        let ours = JobInfo {
            job_id: 5,
            state: "RUNNING".into(),
            reason: "None".into(),
            command: Some("/runs/r1/job.sbatch".into()),
            ..JobInfo::default()
        };
        assert_eq!(recognise(&ours, &job), Observation::Seen(Box::new(ours.clone())));
        let theirs = JobInfo { command: Some("/home/other/train.sh".into()), ..ours.clone() };
        assert_eq!(recognise(&theirs, &job), Observation::Gone);
        // sacct names no script: its word is taken.
        let from_sacct = JobInfo { command: None, ..ours };
        assert!(matches!(recognise(&from_sacct, &job), Observation::Seen(_)));
    }
}
