//! The local launcher (`scalebook-train launch --nproc N -- train ...`), the tutorial's
//! `srun` + `export_DDP_vars.sh` for one machine: N rank processes with the standard
//! environment, their output forwarded line by line with a rank prefix, and all of them torn
//! down as soon as one fails, so a broken rank never leaves the others waiting forever.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;
use crate::ffi;

/// How long stopped ranks get to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// A free TCP port on this machine for the rendezvous store.
pub fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Environment(format!("no free port: {e}")))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| Error::Environment(format!("no free port: {e}")))
}

/// How the launch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every rank exited with status 0.
    Success,
    /// Rank `rank` failed first with exit `code` (None: killed by a signal); the rest were stopped.
    RankFailed { rank: usize, code: Option<i32> },
}

/// Starts `nproc` copies of `program args` as ranks 0..nproc and waits for them.
pub fn run(program: &Path, args: &[String], nproc: usize, port: u16) -> Result<Outcome, Error> {
    let mut children = Vec::with_capacity(nproc);
    // Like torchrun: unless told otherwise, split the cores between the ranks so their
    // OpenMP pools do not oversubscribe the machine.
    let cores = thread::available_parallelism().map_or(1, usize::from);
    let threads = std::env::var("OMP_NUM_THREADS").unwrap_or_else(|_| (cores / nproc).max(1).to_string());
    // OpenMP's threads spin while they wait unless told otherwise; with another program on
    // the cores, a rank's threads then wait on each other at every operation (cpu_tiny on two
    // threads: 58 samples/s against 489 with passive waits, 521 on one thread; BENCHMARKS.md).
    let wait_policy = std::env::var("OMP_WAIT_POLICY").unwrap_or_else(|_| "PASSIVE".to_owned());
    let shared_gpus = gpus_shared(nproc, super::env::visible_gpus());
    if let Some(gpus) = shared_gpus {
        eprintln!(
            "[launch] {nproc} ranks share {gpus} GPU(s): each rank is an NCCL host of its own (NCCL_HOSTID), so NCCL \
             carries their collectives over sockets; right, but far slower than NVLink"
        );
    }
    for rank in 0..nproc {
        let mut cmd = Command::new(program);
        cmd.env("OMP_NUM_THREADS", &threads).env("OMP_WAIT_POLICY", &wait_policy);
        if shared_gpus.is_some() && std::env::var_os("NCCL_HOSTID").is_none() {
            cmd.env("NCCL_HOSTID", format!("scalebook-rank-{rank}"));
        }
        cmd.args(args)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", nproc.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ffi::kill_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(mut child) => {
                forward(child.stdout.take(), rank, false);
                forward(child.stderr.take(), rank, true);
                children.push(child);
            }
            Err(e) => {
                stop(&mut children);
                return Err(Error::Environment(format!("cannot start rank {rank} ({}): {e}", program.display())));
            }
        }
    }
    let outcome = supervise(&mut children);
    if let Outcome::RankFailed { rank, code } = &outcome {
        let how = code.map_or_else(|| "was killed by a signal".to_owned(), |c| format!("exited with status {c}"));
        eprintln!("[launch] rank {rank} {how}; stopping the other ranks");
        stop(&mut children);
    }
    Ok(outcome)
}

/// The number of GPUs when `nproc` ranks must share them (more ranks than GPUs), else None.
/// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"); ranks that each
/// name a host of their own pass that check and talk over its socket transport.
fn gpus_shared(nproc: usize, gpus: usize) -> Option<usize> {
    (gpus > 0 && nproc > gpus).then_some(gpus)
}

/// Waits until all ranks succeed or one fails.
fn supervise(children: &mut [Child]) -> Outcome {
    let mut done = vec![false; children.len()];
    loop {
        for (rank, child) in children.iter_mut().enumerate() {
            if done[rank] {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) if status.success() => done[rank] = true,
                Ok(Some(status)) => return Outcome::RankFailed { rank, code: status.code() },
                Ok(None) => {}
                Err(_) => return Outcome::RankFailed { rank, code: None },
            }
        }
        if done.iter().all(|d| *d) {
            return Outcome::Success;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM to every rank still running, then SIGKILL to those still there after the grace.
fn stop(children: &mut [Child]) {
    for child in children.iter() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    }
    let deadline = Instant::now() + GRACE;
    for child in children.iter_mut() {
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Copies a rank's output to ours line by line with a `[rank N] ` prefix, so interleaved
/// lines stay attributable.
fn forward(stream: Option<impl Read + Send + 'static>, rank: usize, to_stderr: bool) {
    let Some(stream) = stream else { return };
    thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "[rank {rank}] {line}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "[rank {rank}] {line}");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::gpus_shared;

    #[test]
    fn ranks_share_gpus_only_when_there_are_more_ranks_than_gpus() {
        assert_eq!(gpus_shared(2, 0), None, "a CPU run has no GPU to share");
        assert_eq!(gpus_shared(4, 4), None);
        assert_eq!(gpus_shared(2, 1), Some(1));
        assert_eq!(gpus_shared(8, 4), Some(4));
    }
}
