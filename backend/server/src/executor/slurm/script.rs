//! The batch script of a Slurm run, in the shape of the tutorial's `submit_*.sh`: `#SBATCH`
//! lines from the resolved job, the environment the ranks meet through, and `srun` starting
//! the trainer with exactly the arguments a local run gets.
//!
//! Two kinds of text reach the script. `#SBATCH` values are checked words (the cluster file's
//! when it loads, the browser's by `shared` before a launch is planned, the run directory's
//! here), because sbatch reads those lines with its own parser, not a shell's. Everything else
//! goes through [`quote`], so a value is always one shell word, whatever characters it holds.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use scalebook_shared::protocol::SlurmJob;
use scalebook_shared::rundir::{self, ExitRecord};

use crate::Error;

/// The first port of the per-job rendezvous range (the tutorial's `MASTER_PORT`).
const BASE_PORT: u32 = 29500;

/// What the script runs and where, besides the job's settings.
pub struct ScriptInput<'a> {
    /// One line saying what this job is (a comment at the top).
    pub title: &'a str,
    pub job: &'a SlurmJob,
    /// Where the job writes its log and exit status (absolute).
    pub run_dir: &'a Path,
    /// The directory the trainer runs in: relative data paths in configs resolve from it.
    pub workdir: &'a Path,
    pub trainer: &'a Path,
    pub args: &'a [OsString],
}

/// The script, or why it cannot be written (a server path that no `#SBATCH` line can carry).
pub fn render(input: &ScriptInput<'_>) -> Result<String, Error> {
    let job = input.job;
    let log = slurm_path(&input.run_dir.join(rundir::JOB_LOG))?;
    let mut out = String::from("#!/bin/bash\n");
    let _ = writeln!(out, "# {}", input.title.replace('\n', " "));
    out.push_str("# Rendered by `scalebook serve`, submitted with `sbatch --parsable`.\n");
    let mut option = |name: &str, value: &dyn std::fmt::Display| {
        let _ = writeln!(out, "#SBATCH --{name}={value}");
    };
    option("job-name", &job.job_name);
    option("account", &job.account);
    option("qos", &job.qos);
    if let Some(reservation) = &job.reservation {
        option("reservation", reservation);
    }
    if let Some(constraint) = &job.constraint {
        option("constraint", constraint);
    }
    option("nodes", &job.nodes);
    option("ntasks-per-node", &job.tasks_per_node);
    if job.gpus_per_node > 0 {
        option("gpus-per-node", &job.gpus_per_node);
    }
    option("cpus-per-task", &job.cpus_per_task);
    option("time", &job.time);
    if let Some(image) = &job.image {
        option("image", image);
    }
    if !job.modules.is_empty() {
        option("module", &job.modules.join(","));
    }
    // The log every viewer follows, inside the run directory (where `%x-%j.out` would go);
    // a resumed or requeued attempt adds to it rather than wiping the first one's.
    option("output", &log);
    option("open-mode", &"append");
    // A job whose node fails goes back to the queue and, finding its checkpoint, goes on.
    out.push_str("#SBATCH --requeue\n");

    let mut body = String::new();
    let exit = quote(&utf8(&input.run_dir.join(rundir::EXIT))?);
    body.push_str("\n# The run's files are yours only, whatever umask the compute node's shell starts with.\n");
    body.push_str("umask 077\n");
    body.push_str("\n# An earlier attempt's status is not this one's.\n");
    let _ = writeln!(body, "rm -f {exit}");
    let _ = writeln!(body, "cd {}", quote(&utf8(input.workdir)?));
    body.push_str("export HDF5_USE_FILE_LOCKING=FALSE\n");
    body.push_str("# Rank 0's node hosts the rendezvous; the port differs per job, so jobs sharing a node never meet.\n");
    body.push_str("export MASTER_ADDR=$(hostname)\n");
    let _ = writeln!(body, "export MASTER_PORT=$(( {BASE_PORT} + SLURM_JOB_ID % 1000 ))");
    body.push_str("export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n");
    body.push_str("# A checkpoint from an earlier attempt (a lost node, a requeue, this script submitted again): go on from it.\n");
    let position = utf8(&rundir::RunDir::new(input.run_dir).checkpoint_position())?;
    let _ = writeln!(body, "RESUME=; [ -f {} ] && RESUME=--resume\n", quote(&position));
    body.push_str("set -x\n");
    // A rank that dies ends the step: the others would only wait on it in their next collective.
    let mut command = vec!["srun".to_owned(), "--label".to_owned(), "--kill-on-bad-exit=1".to_owned()];
    if job.image.is_some() {
        command.push("shifter".to_owned());
    }
    command.push(quote(&utf8(input.trainer)?));
    for arg in input.args {
        let arg = arg.to_str().ok_or_else(|| Error::SlurmScript(format!("the trainer argument {arg:?} is not UTF-8")))?;
        command.push(quote(arg));
    }
    command.push("$RESUME".to_owned());
    let _ = writeln!(body, "{}", command.join(" "));
    body.push_str("status=$?\nset +x\n");
    body.push_str("# How the ranks ended, for a server that finds the job gone from Slurm's memory.\n");
    // The exit record's own shape, with the shell's `$status` for the code.
    let record = ExitRecord::template_with_code("$status").replace('"', "\\\"");
    let _ = writeln!(body, "echo \"{record}\" > {exit}");
    body.push_str("exit $status\n");
    Ok(out + &body)
}

/// `text` as one shell word: bare when it holds only characters no shell treats specially,
/// else in single quotes (inside which nothing is special; a `'` itself becomes `'\''`).
pub fn quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:,@+".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A path for an `#SBATCH` line: sbatch splits those lines on blanks, reads quotes itself and
/// expands `%` patterns in file names, so only plain characters are accepted.
fn slurm_path(path: &Path) -> Result<String, Error> {
    let text = utf8(path)?;
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+,@".contains(c);
    if text.chars().all(plain) {
        Ok(text)
    } else {
        Err(Error::SlurmScript(format!(
            "the runs directory path {text:?} cannot go in an #SBATCH line: use a path of letters, digits and _-./+,@ for --runs-dir"
        )))
    }
}

fn utf8(path: &Path) -> Result<String, Error> {
    path.to_str().map(str::to_owned).ok_or_else(|| Error::SlurmScript(format!("the path {} is not UTF-8", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> SlurmJob {
        SlurmJob {
            job_name: "vit-era5-dp".into(),
            account: "trn011".into(),
            qos: "regular".into(),
            reservation: Some("dl4sci".into()),
            constraint: Some("gpu&hbm80g".into()),
            nodes: 2,
            tasks_per_node: 4,
            gpus_per_node: 4,
            cpus_per_task: 32,
            time: "01:00:00".into(),
            image: Some("nersc/pytorch:24.08.01".into()),
            modules: vec!["gpu".into(), "nccl-plugin".into()],
        }
    }

    fn render_with(job: &SlurmJob, run_dir: &str, args: &[&str]) -> Result<String, Error> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        render(&ScriptInput {
            title: "Scalebook run r1: bs64_opt on perlmutter",
            job,
            run_dir: Path::new(run_dir),
            workdir: Path::new("/home/me/my scalebook"),
            trainer: Path::new("/home/me/bin/scalebook-train"),
            args: &args,
        })
    }

    /// Runs `script` in bash with a `printf` standing in for every command word after `srun`'s
    /// options, so the test sees the words exactly as the shell split them.
    fn shell_words(text: &str) -> Vec<String> {
        let script = format!("printf '%s\\n' {text}");
        let out = std::process::Command::new("bash").arg("-c").arg(&script).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_script_has_the_tutorials_shape() {
        let script = render_with(&job(), "/scratch/runs/r1", &["train", "--config", "bs64_opt", "--run-dir", "/scratch/runs/r1"]).unwrap();
        let sbatch: Vec<&str> = script.lines().filter(|l| l.starts_with("#SBATCH")).collect();
        assert_eq!(
            sbatch,
            [
                "#SBATCH --job-name=vit-era5-dp",
                "#SBATCH --account=trn011",
                "#SBATCH --qos=regular",
                "#SBATCH --reservation=dl4sci",
                "#SBATCH --constraint=gpu&hbm80g",
                "#SBATCH --nodes=2",
                "#SBATCH --ntasks-per-node=4",
                "#SBATCH --gpus-per-node=4",
                "#SBATCH --cpus-per-task=32",
                "#SBATCH --time=01:00:00",
                "#SBATCH --image=nersc/pytorch:24.08.01",
                "#SBATCH --module=gpu,nccl-plugin",
                "#SBATCH --output=/scratch/runs/r1/job.log",
                "#SBATCH --open-mode=append",
                "#SBATCH --requeue",
            ]
        );
        // sbatch stops reading options at the first command: every #SBATCH line comes first.
        let first_command = script.lines().position(|l| !l.is_empty() && !l.starts_with('#')).unwrap();
        assert!(script.lines().skip(first_command).all(|l| !l.starts_with("#SBATCH")));
        for line in [
            "umask 077",
            "rm -f /scratch/runs/r1/exit.json",
            "cd '/home/me/my scalebook'",
            "export HDF5_USE_FILE_LOCKING=FALSE",
            "export MASTER_ADDR=$(hostname)",
            "export MASTER_PORT=$(( 29500 + SLURM_JOB_ID % 1000 ))",
            "RESUME=; [ -f /scratch/runs/r1/checkpoints/last.json ] && RESUME=--resume",
            "srun --label --kill-on-bad-exit=1 shifter /home/me/bin/scalebook-train train --config bs64_opt --run-dir /scratch/runs/r1 $RESUME",
            "echo \"{\\\"code\\\":$status,\\\"signal\\\":null}\" > /scratch/runs/r1/exit.json",
        ] {
            assert!(script.lines().any(|l| l == line), "no line {line:?} in:\n{script}");
        }
        let syntax = std::process::Command::new("bash").arg("-n").arg("-c").arg(&script).status().unwrap();
        assert!(syntax.success(), "bash -n rejects:\n{script}");
    }

    #[test]
    fn cpu_jobs_ask_for_no_gpus_and_run_without_a_container() {
        let cpu = SlurmJob { gpus_per_node: 0, constraint: None, reservation: None, image: None, modules: vec![], ..job() };
        let script = render_with(&cpu, "/r/1", &["train"]).unwrap();
        for absent in ["--gpus-per-node", "--constraint", "--reservation", "--image", "--module", "shifter"] {
            assert!(!script.contains(absent), "{absent} in:\n{script}");
        }
        assert!(script.contains("\nsrun --label --kill-on-bad-exit=1 /home/me/bin/scalebook-train train $RESUME\n"), "{script}");
    }

    #[test]
    fn quoting_keeps_every_value_one_literal_word() {
        let hostile = [
            "plain",
            "",
            "--set=expdir=-rf; ls $HOME",
            "it's",
            "'",
            "a\nb",
            "$(touch /tmp/pwned)",
            "`id`",
            "*",
            "~root",
            "a\\b",
            "x=y",
            "!!",
            "\"quoted\"",
            "tab\there",
        ];
        let words: Vec<String> = hostile.iter().map(|h| quote(h)).collect();
        // A newline inside a word would split printf's output; compare it separately.
        let printed = shell_words(&words.join(" ")).join("\n");
        assert_eq!(printed, hostile.join("\n"));
        assert_eq!(quote("/srv/runs/r1"), "/srv/runs/r1");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn hostile_arguments_reach_srun_as_single_words() {
        let script = render_with(&job(), "/r/1", &["train", "--set=expdir=$(reboot); x", "--set=a='b'"]).unwrap();
        let srun = script.lines().find(|l| l.starts_with("srun ")).unwrap();
        let words = shell_words(srun.strip_prefix("srun ").unwrap());
        assert_eq!(
            words,
            [
                "--label",
                "--kill-on-bad-exit=1",
                "shifter",
                "/home/me/bin/scalebook-train",
                "train",
                "--set=expdir=$(reboot); x",
                "--set=a='b'"
            ]
        );
    }

    #[test]
    fn a_runs_directory_no_sbatch_line_can_carry_is_refused() {
        for bad in ["/runs/a b", "/runs/100%", "/runs/x\n#SBATCH --uid=0", "/runs/'q'"] {
            let err = render_with(&job(), bad, &["train"]).unwrap_err().to_string();
            assert!(err.contains("cannot go in an #SBATCH line"), "{bad}: {err}");
        }
    }
}
