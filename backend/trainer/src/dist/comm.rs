//! The process groups of a layout, as the tutorial's `utils/comm.py` builds them: for every
//! token (dp, tp, cp, pp, tp-cp, dp-cp) the group that holds this rank, with Megatron's rank
//! generator semantics from `shared::layout`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use scalebook_shared::layout::{Layout, Token};
use tch::Device;

use super::RankEnv;
use crate::Error;
use crate::ffi::{ProcessGroup, ReduceOp, Store};

/// The tokens the tutorial builds groups for (`init_model_parallel_info`), in its order.
pub const BUILT_TOKENS: [Token; 6] = [Token::DP, Token::TP, Token::CP, Token::PP, Token::TP_CP, Token::DP_CP];

pub struct Comm {
    env: RankEnv,
    layout: Layout,
    /// Shared with what issues collectives outside a call (the overlapped gradient reducer).
    groups: HashMap<Token, Rc<ProcessGroup>>,
    // Declared last: dropped after the groups that use it. None for a single process.
    _store: Option<Store>,
}

impl Comm {
    /// Meets the other ranks at the store and joins this rank's group of every token, over
    /// NCCL when `device` is a GPU and Gloo otherwise. A peer that never comes ends this with an
    /// error after `timeout`.
    pub fn init(env: RankEnv, layout: Layout, device: Device, timeout: Duration) -> Result<Comm, Error> {
        if layout.world() as usize != env.world {
            return Err(Error::Environment(format!(
                "the layout {} needs {} ranks but WORLD_SIZE is {}",
                layout.effective_order(),
                layout.world(),
                env.world
            )));
        }
        let store =
            if env.world > 1 { Some(Store::connect(&env.master_addr, env.master_port, env.world, env.rank == 0, timeout)?) } else { None };
        let gloo_host = env.is_loopback().then_some("127.0.0.1");
        let rank = env.rank as u32;
        let mut groups = HashMap::new();
        for token in BUILT_TOKENS {
            let index =
                layout.group_index_of(token, rank).ok_or_else(|| Error::Environment(format!("rank {rank} is in no {token} group")))?;
            let size = layout.group_size(token) as usize;
            let member = layout.group_rank(token, rank).unwrap_or(0) as usize;
            let group = ProcessGroup::new(store.as_ref(), &format!("{token}/{index}"), member, size, device, timeout, gloo_host)?;
            groups.insert(token, Rc::new(group));
        }
        Ok(Comm { env, layout, groups, _store: store })
    }

    /// One process: every group has one member and every collective is a no-op.
    pub fn single(layout: Layout) -> Result<Comm, Error> {
        Comm::init(RankEnv::single(), layout, Device::Cpu, Duration::from_secs(1))
    }

    pub fn env(&self) -> &RankEnv {
        &self.env
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// This rank's group of `token`.
    pub fn group(&self, token: Token) -> &ProcessGroup {
        &self.groups[&token]
    }

    /// This rank's group of `token`, to keep.
    pub fn shared_group(&self, token: Token) -> Rc<ProcessGroup> {
        Rc::clone(&self.groups[&token])
    }

    pub fn rank(&self, token: Token) -> usize {
        self.group(token).rank()
    }

    pub fn size(&self, token: Token) -> usize {
        self.group(token).size()
    }

    /// Rank 0 of the world writes the run's outputs.
    pub fn is_root(&self) -> bool {
        self.env.rank == 0
    }

    /// World rank 0's `value` on every rank. Ranks that each read their own clock (a run
    /// started without `--seed`) can disagree, and a seed must not: tp and cp cut their
    /// shards from one model initialised from it, and the samplers shard one shuffled order.
    /// Rank 0 has coordinate 0 everywhere, so its dp group holds it after the first
    /// broadcast, and every tp-cp group's rank 0 is in that dp group for the second; every
    /// pipeline rank 0 then holds it, for the third.
    pub fn agree(&self, value: i64) -> Result<i64, Error> {
        let mut t = tch::Tensor::from(value);
        for token in [Token::DP, Token::TP_CP, Token::PP] {
            self.group(token).broadcast(&mut t, 0)?;
        }
        Ok(i64::try_from(&t)?)
    }

    /// The largest of every rank's `value`, on every rank: the maximum over the dp group, then
    /// over the tp-cp group, then over the pipeline, which together reach every rank of the world.
    pub fn max(&self, value: f64) -> Result<f64, Error> {
        let mut t = tch::Tensor::from(value);
        for token in [Token::DP, Token::TP_CP, Token::PP] {
            self.group(token).all_reduce(&mut t, ReduceOp::Max)?;
        }
        Ok(f64::try_from(&t)?)
    }
}
