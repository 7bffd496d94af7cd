//! Where this process sits in a distributed job, read from the environment the way the
//! tutorial's scripts provide it: torchrun-style variables (RANK, LOCAL_RANK, WORLD_SIZE,
//! MASTER_ADDR, MASTER_PORT, set by `scalebook-train launch`), or, when those are absent,
//! Slurm's (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS and the first host of the node list), so
//! `srun scalebook-train train ...` works unchanged.

use crate::Error;

/// The tutorial's `export_DDP_vars.sh` port.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: usize,
    pub local_rank: usize,
    pub world: usize,
    pub master_addr: String,
    pub master_port: u16,
}

impl RankEnv {
    /// The single-process case: rank 0 of 1.
    pub fn single() -> RankEnv {
        RankEnv { rank: 0, local_rank: 0, world: 1, master_addr: "127.0.0.1".into(), master_port: DEFAULT_MASTER_PORT }
    }

    pub fn from_env() -> Result<RankEnv, Error> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Same as [`RankEnv::from_env`] over any variable lookup (testable without touching the
    /// process environment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<RankEnv, Error> {
        let num = |key: &str| -> Result<Option<usize>, Error> {
            get(key)
                .map(|v| v.trim().parse().map_err(|_| Error::Environment(format!("{key}={v:?} is not a non-negative integer"))))
                .transpose()
        };
        let (rank, local_rank, world) = match (num("WORLD_SIZE")?, num("SLURM_NTASKS")?) {
            (Some(world), _) => (num("RANK")?.unwrap_or(0), num("LOCAL_RANK")?.unwrap_or(0), world),
            (None, Some(world)) => (num("SLURM_PROCID")?.unwrap_or(0), num("SLURM_LOCALID")?.unwrap_or(0), world),
            (None, None) => return Ok(RankEnv::single()),
        };
        if world == 0 || rank >= world {
            return Err(Error::Environment(format!("rank {rank} is outside a world of {world}")));
        }
        let master_addr = match get("MASTER_ADDR") {
            Some(addr) => addr,
            None => match get("SLURM_STEP_NODELIST").or_else(|| get("SLURM_JOB_NODELIST")).or_else(|| get("SLURM_NODELIST")) {
                Some(list) => first_host(&list)?,
                None if world == 1 => "127.0.0.1".into(),
                None => return Err(Error::Environment("MASTER_ADDR is not set and there is no Slurm node list".into())),
            },
        };
        let master_port = match get("MASTER_PORT") {
            Some(p) => p.trim().parse().map_err(|_| Error::Environment(format!("MASTER_PORT={p:?} is not a port number")))?,
            None => DEFAULT_MASTER_PORT,
        };
        Ok(RankEnv { rank, local_rank, world, master_addr, master_port })
    }

    /// This rank's GPU: one per local rank, counted within CUDA_VISIBLE_DEVICES, and shared
    /// round-robin where the node has fewer GPUs than ranks (the launcher then gives each rank
    /// an NCCL host of its own, see [`super::launch`]).
    pub fn gpu(&self) -> tch::Device {
        tch::Device::Cuda(gpu_of(self.local_rank, visible_gpus()))
    }

    /// Whether every rank is on this machine's loopback (the local launcher).
    pub fn is_loopback(&self) -> bool {
        matches!(self.master_addr.as_str(), "127.0.0.1" | "localhost" | "::1")
    }
}

/// The GPUs this process sees (within CUDA_VISIBLE_DEVICES); 0 on a CPU build or machine.
pub(super) fn visible_gpus() -> usize {
    usize::try_from(tch::Cuda::device_count()).unwrap_or(0)
}

/// The GPU of local rank `local_rank` among `gpus` visible ones (round-robin).
fn gpu_of(local_rank: usize, gpus: usize) -> usize {
    local_rank % gpus.max(1)
}

/// The first host of a Slurm node list: `nid[001234-001237,001240],login01` -> `nid001234`.
pub fn first_host(list: &str) -> Result<String, Error> {
    let bad = || Error::Environment(format!("cannot read the Slurm node list {list:?}"));
    let list = list.trim();
    let head_end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..head_end];
    if list[head_end..].starts_with('[') {
        let inner = &list[head_end + 1..list.find(']').ok_or_else(bad)?];
        let first = inner.split([',', '-']).next().ok_or_else(bad)?;
        if prefix.is_empty() && first.is_empty() {
            return Err(bad());
        }
        return Ok(format!("{prefix}{first}"));
    }
    if prefix.is_empty() { Err(bad()) } else { Ok(prefix.to_owned()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<RankEnv, Error> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RankEnv::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn ranks_beyond_the_gpus_share_them_round_robin() {
        assert_eq!([0, 1, 2, 3].map(|r| gpu_of(r, 4)), [0, 1, 2, 3]);
        assert_eq!([0, 1, 2, 3].map(|r| gpu_of(r, 2)), [0, 1, 0, 1]);
        assert_eq!([0, 1].map(|r| gpu_of(r, 1)), [0, 0]);
        assert_eq!(gpu_of(3, 0), 0, "no GPU: the CPU path never asks, but the answer stays in range");
    }

    #[test]
    fn node_lists_give_their_first_host() {
        assert_eq!(first_host("nid[001234-001237,001240]").unwrap(), "nid001234");
        assert_eq!(first_host("nid001234").unwrap(), "nid001234");
        assert_eq!(first_host("login01,login02").unwrap(), "login01");
        assert_eq!(first_host("gpu[07,09]").unwrap(), "gpu07");
        assert!(first_host("").is_err());
    }

    #[test]
    fn launcher_variables_win_over_slurm() {
        let e = env(&[
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "4000"),
            ("SLURM_NTASKS", "8"),
        ])
        .unwrap();
        assert_eq!(e, RankEnv { rank: 3, local_rank: 1, world: 4, master_addr: "127.0.0.1".into(), master_port: 4000 });
    }

    #[test]
    fn slurm_alone_is_enough() {
        let e = env(&[("SLURM_PROCID", "5"), ("SLURM_LOCALID", "1"), ("SLURM_NTASKS", "8"), ("SLURM_JOB_NODELIST", "nid[000100-000101]")])
            .unwrap();
        assert_eq!(e, RankEnv { rank: 5, local_rank: 1, world: 8, master_addr: "nid000100".into(), master_port: DEFAULT_MASTER_PORT });
    }

    #[test]
    fn no_variables_means_one_process_and_bad_ones_are_named() {
        assert_eq!(env(&[]).unwrap(), RankEnv::single());
        let err = env(&[("WORLD_SIZE", "two")]).unwrap_err().to_string();
        assert!(err.contains("WORLD_SIZE"), "{err}");
        assert!(env(&[("WORLD_SIZE", "2"), ("RANK", "2"), ("MASTER_ADDR", "h")]).is_err());
        assert!(env(&[("WORLD_SIZE", "2"), ("RANK", "1")]).unwrap_err().to_string().contains("MASTER_ADDR"));
    }
}
