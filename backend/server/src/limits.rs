//! What one launch may ask of this machine and its files, beyond `shared`'s rules for a valid
//! config: data read only from the directories the instructor allows (the project's `data/`,
//! each `--data-root`, a cluster's `data_root`), statistics files that are small regular files,
//! and no local run larger than the machine (its cores and memory) or longer than any course;
//! and what learners may launch at all.
//! Each refusal names the field and the bound.

use std::io;
use std::path::{Component, Path, PathBuf};

use scalebook_shared::Problems;
use scalebook_shared::config::{DataPathKind, MAX_STATS_FILE_BYTES, TrainConfig};
use scalebook_shared::launch;
use scalebook_shared::protocol::LearnerRuns;

/// Data-loading workers one rank may start, per core of the machine.
const WORKERS_PER_CORE: usize = 4;
/// The most optimizer steps a local run may plan (its learning-rate horizon): years of CPU
/// time, yet far below the integer overflows a hostile config aims at.
pub const MAX_LOCAL_ITERS: usize = 100_000_000;

#[derive(Debug, Clone)]
pub struct LaunchLimits {
    /// The directories runs may read data from, each canonical.
    pub data_roots: Vec<PathBuf>,
    /// Where a relative data path resolves from: the trainer's working directory.
    pub workdir: PathBuf,
    pub cores: usize,
    pub memory_bytes: u64,
    /// What learners may launch from the viewer link (none unless the server was started
    /// with `--viewer-runs`; see [`crate::learners`]).
    pub learners: LearnerRuns,
}

impl LaunchLimits {
    /// The limits of this machine, with `workdir/data` (when it exists) and `roots` as the
    /// data directories. A root that does not exist is an error: a typo would refuse every run.
    pub fn of_this_machine(workdir: &Path, roots: &[PathBuf]) -> io::Result<LaunchLimits> {
        let mut data_roots = Vec::new();
        if let Ok(project_data) = std::fs::canonicalize(workdir.join("data")) {
            data_roots.push(project_data);
        }
        for root in roots {
            let root = std::fs::canonicalize(workdir.join(root))
                .map_err(|e| io::Error::new(e.kind(), format!("--data-root {}: {e}", root.display())))?;
            data_roots.push(root);
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(LaunchLimits { data_roots, workdir: workdir.to_owned(), cores, memory_bytes: total_memory()?, learners: LearnerRuns::default() })
    }

    /// Checks a run of `world` ranks on this machine.
    /// `overrides` are the launch's: a model too large is blamed on the size key they changed.
    pub fn check_local(&self, config: &TrainConfig, world: u32, overrides: &[String], problems: &mut Problems) {
        let max_workers = WORKERS_PER_CORE * self.cores;
        if config.num_data_workers > max_workers {
            problems.push(
                "num_data_workers",
                format!(
                    "{} is more than the {max_workers} a local run may start per rank ({WORKERS_PER_CORE} per core)",
                    config.num_data_workers
                ),
            );
        }
        if config.num_iters > MAX_LOCAL_ITERS {
            problems.push("num_iters", format!("{} is more than the {MAX_LOCAL_ITERS} steps a local run may plan", config.num_iters));
        }
        problems.0.extend(launch::machine_memory_problems(config, world, self.memory_bytes, overrides).0);
        for (key, kind, path) in config.data_paths() {
            self.check_local_path(key, kind, &path, problems);
        }
    }

    /// Checks a Slurm run's data paths. The cluster's files cannot be looked at from here, so
    /// the check is by name: inside the cluster's `data_root` or a listed root, with no `..`.
    pub fn check_slurm(&self, config: &TrainConfig, data_root: &str, problems: &mut Problems) {
        let cluster_root = self.workdir.join(data_root);
        for (key, _, path) in config.data_paths() {
            let Some(full) = self.lexical(key, &path, problems) else { continue };
            if !full.starts_with(&cluster_root) && !self.data_roots.iter().any(|root| full.starts_with(root)) {
                problems.push(key, format!("`{path}` is outside the cluster's data_root {data_root} {}", self.allowed_hint()));
            }
        }
    }

    fn check_local_path(&self, key: &str, kind: DataPathKind, path: &str, problems: &mut Problems) {
        let Some(full) = self.lexical(key, path, problems) else { return };
        // Symbolic links are followed first: a link inside a data directory pointing at
        // `/dev/zero` or someone's home is judged by where it leads.
        let (resolved, metadata) = match std::fs::canonicalize(&full) {
            Ok(resolved) => {
                let metadata = std::fs::metadata(&resolved).ok();
                (resolved, metadata)
            }
            // Not there (yet): nothing can be read through it; the trainer will say so.
            Err(_) => (full, None),
        };
        if !self.data_roots.iter().any(|root| resolved.starts_with(root)) {
            problems.push(key, format!("`{path}` is outside the data directories this server reads from {}", self.allowed_hint()));
            return;
        }
        let Some(metadata) = metadata else { return };
        match kind {
            DataPathKind::Directory if !metadata.is_dir() => problems.push(key, format!("`{path}` is not a directory of HDF5 files")),
            DataPathKind::StatsFile | DataPathKind::Climatology if !metadata.is_file() => {
                problems.push(key, format!("`{path}` is not a regular file"));
            }
            DataPathKind::StatsFile if metadata.len() > MAX_STATS_FILE_BYTES => problems.push(
                key,
                format!("`{path}` has {} bytes, more than the {MAX_STATS_FILE_BYTES} a statistics file may have", metadata.len()),
            ),
            _ => {}
        }
    }

    /// `path` made absolute from the working directory, or `None` (with the problem) when it
    /// climbs with `..`.
    fn lexical(&self, key: &str, path: &str, problems: &mut Problems) -> Option<PathBuf> {
        let path = Path::new(path);
        if path.components().any(|c| c == Component::ParentDir) {
            problems.push(key, format!("`{}` climbs with `..`: name the data by a path inside a data directory", path.display()));
            return None;
        }
        Some(self.workdir.join(path))
    }

    fn allowed_hint(&self) -> String {
        let roots: Vec<String> = self.data_roots.iter().map(|r| r.display().to_string()).collect();
        match roots.is_empty() {
            true => "(none is allowed: start the server with --data-root DIR)".into(),
            false => format!("({}; more with --data-root DIR)", roots.join(", ")),
        }
    }
}

/// The machine's memory, from the kernel (`MemTotal` of `/proc/meminfo`).
fn total_memory() -> io::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| io::Error::other("/proc/meminfo has no MemTotal line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(overrides: &[&str]) -> TrainConfig {
        let mut config = TrainConfig::default();
        config.set_data_dir("data/synthetic");
        config.apply_overrides(overrides).unwrap();
        config
    }

    fn limits(dir: &Path) -> LaunchLimits {
        std::fs::create_dir_all(dir.join("data/synthetic/stats")).unwrap();
        std::fs::create_dir_all(dir.join("data/synthetic/train")).unwrap();
        std::fs::write(dir.join("data/synthetic/stats/global_means.npy"), b"small").unwrap();
        let mut limits = LaunchLimits::of_this_machine(dir, &[]).unwrap();
        (limits.cores, limits.memory_bytes) = (2, 24 << 30);
        limits
    }

    fn fields(limits: &LaunchLimits, config: &TrainConfig) -> Vec<String> {
        let mut problems = Problems::default();
        limits.check_local(config, 1, &[], &mut problems);
        problems.0.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn the_project_data_is_allowed_and_the_rest_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let limits = limits(dir.path());
        assert_eq!(fields(&limits, &config(&[])), Vec::<String>::new());
        let hostile = config(&["global_means_path=/dev/zero", "train_data_path=/etc", "valid_data_path=data/../../x"]);
        assert_eq!(fields(&limits, &hostile), ["train_data_path", "valid_data_path", "global_means_path"]);
        // A link inside the data directory is judged by where it leads.
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("data/synthetic/stats/global_stds.npy")).unwrap();
        assert_eq!(fields(&limits, &config(&[])), ["global_stds_path"]);
    }

    #[test]
    fn statistics_files_must_be_small_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let limits = limits(dir.path());
        let big = dir.path().join("data/synthetic/stats/global_means.npy");
        std::fs::File::create(&big).unwrap().set_len(MAX_STATS_FILE_BYTES + 1).unwrap();
        let mut problems = Problems::default();
        limits.check_local(&config(&[]), 1, &[], &mut problems);
        assert!(problems.to_string().contains("more than the 1048576"), "{problems}");
        let directory = config(&["global_means_path=data/synthetic/train"]);
        assert_eq!(fields(&limits, &directory), ["global_means_path"]);
    }

    #[test]
    fn sizes_beyond_the_machine_are_refused_with_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let limits = limits(dir.path());
        let greedy = config(&["num_data_workers=1000000", "depth=1000000", "num_iters=4294967295"]);
        let mut problems = Problems::default();
        limits.check_local(&greedy, 1, &[], &mut problems);
        let text = problems.to_string();
        for (field, bound) in [("num_data_workers", "8 a local run"), ("num_iters", "100000000"), ("depth", "this machine has 24 GiB")] {
            assert!(problems.0.iter().any(|p| p.field == field && p.message.contains(bound)), "{field}: {text}");
        }
        // A model made too large by its embed_dim is blamed on embed_dim.
        let wide = ["embed_dim=100000".to_owned()];
        let mut problems = Problems::default();
        limits.check_local(&config(&["embed_dim=100000"]), 1, &wide, &mut problems);
        assert_eq!(problems.0.iter().map(|p| p.field.as_str()).collect::<Vec<_>>(), ["embed_dim"], "{problems}");
    }

    #[test]
    fn slurm_data_must_lie_in_the_clusters_root_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let limits = limits(dir.path());
        let mut problems = Problems::default();
        let mut on_cluster = TrainConfig::default();
        on_cluster.set_data_dir("/pscratch/era5");
        limits.check_slurm(&on_cluster, "/pscratch/era5", &mut problems);
        assert!(problems.is_empty(), "{problems}");
        on_cluster.apply_overrides(&["global_stds_path=/dev/zero", "train_data_path=/pscratch/era5/../../etc"]).unwrap();
        limits.check_slurm(&on_cluster, "/pscratch/era5", &mut problems);
        let fields: Vec<&str> = problems.0.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["train_data_path", "global_stds_path"]);
    }
}
