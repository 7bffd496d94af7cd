//! A real Slurm cluster for one test, of one node or several: Debian's `slurm-wlm` and
//! `munge`, run as root with every file (config, munge key and socket, state, spool, pid
//! files, logs) in a scratch directory and ports of its own, so tests can run side by side.
//! Several nodes are several slurmd on this machine (Debian's build has multiple-slurmd
//! support), each with its own name, address on the loopback (127.0.0.2, 127.0.0.3, ...), port,
//! spool, pid file and log: a job's tasks land on `node1`, `node2`, ... as on real nodes, and
//! `SLURMD_NODENAME` says which. Dropping the guard (also on a panic) cancels its jobs and
//! stops the daemons by their pid files.
//!
//! The client commands are reached through a directory of small wrappers that point them at
//! this cluster's `slurm.conf`; the server under test is handed that directory as its Slurm
//! commands, as a site would hand it the real ones ([`SlurmCluster::serve_args`]).
//!
//! It lives here, beside the server's own starter, because the server's Slurm tests and the
//! browser tests both run it. Being test equipment, it panics with the daemons' logs when the
//! cluster cannot start.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The client commands the wrappers provide.
const CLIENTS: [&str; 7] = ["sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "srun"];
pub struct SlurmCluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
    /// The wrapped client commands (`--slurm-bin-dir`).
    pub bin: PathBuf,
    /// The nodes' names: `localhost` alone, or `node1` ... `nodeN`.
    pub nodes: Vec<String>,
    /// Daemons started so far, with their pid files.
    started: Vec<(&'static str, PathBuf)>,
    jobs: JobBlock,
}

/// Where a Slurm or munge program is installed, or a failure saying how to install it.
fn program(name: &str) -> PathBuf {
    let found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("{name} is not installed: the Slurm tests need Debian's slurm-wlm and munge (./scalebook.sh setup)"))
}

/// The test cluster as `clusters.yaml` describes it to the server: CPU nodes, no GPU figures,
/// the data where the local executor has it (the server's working directory is the nodes').
pub const CLUSTERS: &str = "testbox:
  executor: slurm
  description: 'the test cluster on this machine'
  gpus_per_node: 0
  data_root: data/synthetic
  slurm:
    account: scalebook
    qos: normal
    time: '00:10:00'
    cpus_per_task: 1
";

/// A block of job ids (`first`, then up to 99 more) that no other test cluster on this machine
/// uses while this one runs: a job's rendezvous port is derived from its id (`29500 + id % 1000`),
/// so clusters side by side, also in other test processes, must number their jobs apart, as jobs
/// that share a real node do. Block k is held by an advisory lock on `<scratch>/slurm-jobs-k`,
/// which ends with the cluster or with its process, however that ends.
struct JobBlock {
    first: u32,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl JobBlock {
    const BLOCKS: u32 = 10;

    fn reserve() -> JobBlock {
        let root = scratch_root();
        std::fs::create_dir_all(&root).unwrap();
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            for k in 0..Self::BLOCKS {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(root.join(format!("slurm-jobs-{k}")))
                    .unwrap();
                if let Ok(lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                    return JobBlock { first: 101 + 100 * k, _lock: lock };
                }
            }
            assert!(Instant::now() < deadline, "{} test Slurm clusters run on this machine already", Self::BLOCKS);
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The build tree's scratch directory (`<target>/tmp`, cargo's `CARGO_TARGET_TMPDIR`), found
/// from the test binary in `<target>/<profile>/deps/`.
fn scratch_root() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).map_or_else(std::env::temp_dir, |target| target.join("tmp"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl SlurmCluster {
    /// One node: starts munged, slurmctld and slurmd, and waits for the node to be idle.
    pub fn start(name: &str) -> SlurmCluster {
        SlurmCluster::with_nodes(name, 1)
    }

    /// `count` nodes of 2 CPUs each (one slurmd each), every one idle before this returns.
    pub fn with_nodes(name: &str, count: usize) -> SlurmCluster {
        let dir = scratch_root().join(format!("slurm-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let nodes: Vec<String> = match count {
            1 => vec!["localhost".to_owned()],
            n => (1..=n).map(|i| format!("node{i}")).collect(),
        };
        for sub in ["state", "spool", "log", "run", "bin"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for node in &nodes {
            std::fs::create_dir_all(dir.join("spool").join(node)).unwrap();
        }
        let munge = dir.join("munge");
        std::fs::create_dir_all(&munge).unwrap();
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o700)).unwrap();
        let jobs = JobBlock::reserve();
        let mut cluster = SlurmCluster { conf: dir.join("slurm.conf"), bin: dir.join("bin"), dir, nodes, started: Vec::new(), jobs };
        cluster.write_munge_key();
        let socket = munge.join("munge.socket");
        std::fs::write(&cluster.conf, cluster.slurm_conf(&socket, free_port())).unwrap();
        cluster.write_wrappers();

        let munged_pid = munge.join("munged.pid");
        let s = |p: &Path| p.to_str().unwrap().to_owned();
        cluster.daemon(
            "munged",
            &[
                format!("--key-file={}", s(&munge.join("munge.key"))),
                format!("--socket={}", s(&socket)),
                format!("--pid-file={}", s(&munged_pid)),
                format!("--log-file={}", s(&munge.join("munged.log"))),
                format!("--seed-file={}", s(&munge.join("munged.seed"))),
                // The scratch directory lives under the build tree, whose permissions munged
                // would otherwise insist on checking.
                "--force".into(),
            ],
            munged_pid,
        );
        let conf = s(&cluster.conf);
        let run = cluster.dir.join("run");
        cluster.daemon("slurmctld", &["-f".into(), conf.clone()], run.join("slurmctld.pid"));
        for node in cluster.nodes.clone() {
            let pid_file = run.join(format!("slurmd-{node}.pid"));
            match count {
                1 => cluster.daemon("slurmd", &["-f".into(), conf.clone()], pid_file),
                _ => cluster.daemon("slurmd", &["-f".into(), conf.clone(), "-N".into(), node], pid_file),
            }
        }
        cluster.wait_until_idle();
        cluster
    }

    /// The `serve` arguments of a server that submits to this cluster as `testbox` ([`CLUSTERS`]),
    /// polling it every second.
    pub fn serve_args(&self) -> Vec<String> {
        let clusters = self.dir.join("clusters.yaml");
        std::fs::write(&clusters, CLUSTERS).unwrap();
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        vec!["--clusters".into(), path(&clusters), "--slurm-bin-dir".into(), path(&self.bin), "--slurm-poll-secs".into(), "1".into()]
    }

    fn write_munge_key(&self) {
        let mut key = [0u8; 1024];
        getrandom::fill(&mut key).unwrap();
        let path = self.dir.join("munge/munge.key");
        let mut file = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(path).unwrap();
        file.write_all(&key).unwrap();
    }

    /// The smallest configuration that runs jobs on this machine: its nodes of 2 CPUs, one
    /// partition, no cgroups, no accounting database, time limits enforced at once. Every
    /// slurmd listens on every address, so each node has its own port.
    fn slurm_conf(&self, socket: &Path, ctld_port: u16) -> String {
        let d = self.dir.display();
        let nodes: String = match self.nodes.as_slice() {
            [one] => format!("NodeName={one} Port={} CPUs=2 RealMemory=2000 State=UNKNOWN\n", free_port()),
            many => many
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    format!("NodeName={n} NodeAddr=127.0.0.{} Port={} CPUs=2 RealMemory=2000 State=UNKNOWN\n", i + 2, free_port())
                })
                .collect(),
        };
        format!(
            "ClusterName=scalebook\n\
             SlurmctldHost=localhost\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             SlurmctldPort={ctld_port}\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={socket}\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool/%n\n\
             SlurmctldPidFile={d}/run/slurmctld.pid\n\
             SlurmdPidFile={d}/run/slurmd-%n.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd-%n.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             MpiDefault=none\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             AccountingStorageType=accounting_storage/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             ReturnToService=2\n\
             MinJobAge=120\n\
             OverTimeLimit=0\n\
             KillWait=5\n\
             FirstJobId={first_job}\n\
             {nodes}\
             PartitionName=debug Nodes={all} Default=YES MaxTime=INFINITE State=UP\n",
            socket = socket.display(),
            all = self.nodes.join(","),
            first_job = self.jobs.first,
        )
    }

    /// `bin/<command>`: the real command with this cluster's configuration, each call noted
    /// in `calls.log` (one line, the command's name) for tests that count them.
    fn write_wrappers(&self) {
        let calls = self.calls_log();
        for name in CLIENTS {
            let script = format!(
                "#!/bin/sh\necho {name} >> '{}'\nSLURM_CONF='{}' exec {} \"$@\"\n",
                calls.display(),
                self.conf.display(),
                program(name).display()
            );
            let path = self.bin.join(name);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// Starts a daemon (each forks into the background once it is ready) and notes its pid
    /// file for the stop.
    fn daemon(&mut self, name: &'static str, args: &[String], pid_file: PathBuf) {
        let output = Command::new(program(name)).args(args).env("SLURM_CONF", &self.conf).output().unwrap();
        assert!(output.status.success(), "{name} did not start: {}\n{}", String::from_utf8_lossy(&output.stderr), self.logs());
        self.started.push((name, pid_file));
    }

    /// Waits for every node to be idle (node by node: the grouped state reads `idle` while one
    /// node has not registered yet).
    fn wait_until_idle(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = self.client("sinfo", &["--noheader", "--Node", "--format=%N %T"]);
            let text = String::from_utf8_lossy(&state.stdout);
            let idle: Vec<&str> = text.lines().filter_map(|l| l.strip_suffix(" idle")).collect();
            if self.nodes.iter().all(|n| idle.contains(&n.as_str())) {
                return;
            }
            assert!(Instant::now() < deadline, "not every node became idle: {state:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn calls_log(&self) -> PathBuf {
        self.dir.join("calls.log")
    }

    /// How many times client command `name` has been called through the wrappers.
    pub fn calls(&self, name: &str) -> usize {
        std::fs::read_to_string(self.calls_log()).unwrap_or_default().lines().filter(|l| *l == name).count()
    }

    /// Runs a wrapped client command.
    pub fn client(&self, name: &str, args: &[&str]) -> Output {
        Command::new(self.bin.join(name)).args(args).output().unwrap()
    }

    /// The daemons' logs, for failure messages.
    pub fn logs(&self) -> String {
        let slurmd = self.nodes.iter().map(|n| format!("log/slurmd-{n}.log"));
        ["log/slurmctld.log".to_owned(), "munge/munged.log".to_owned()]
            .into_iter()
            .chain(slurmd)
            .map(|f| format!("--- {f}\n{}", std::fs::read_to_string(self.dir.join(&f)).unwrap_or_default()))
            .collect()
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        // munged, slurmctld and a slurmd per node: the cluster ran.
        if self.started.len() == 2 + self.nodes.len() {
            let _ = self.client("scancel", &["--user=root"]);
            std::thread::sleep(Duration::from_secs(1));
        }
        for (name, pid_file) in self.started.iter().rev() {
            let Some(pid) = std::fs::read_to_string(pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok()) else {
                eprintln!("warning: no pid file for {name} at {}", pid_file.display());
                continue;
            };
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while running(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Whether `pid` is still a live process: a zombie (state `Z`, ended but not reaped, as a
/// daemon is where no init reaps it) answers `kill(pid, 0)` too.
fn running(pid: nix::unistd::Pid) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').and_then(|end| stat.get(end + 2..end + 3)).map(|state| state == "Z"))
        .unwrap_or(false);
    nix::sys::signal::kill(pid, None).is_ok() && !zombie
}
