//! A checkpoint read under another layout than the one that wrote it, resharded at load as
//! PyTorch's distributed checkpoint (DCP) does. Whatever its form, one file per model shard
//! (DDP, one rank, a pipeline) or a ZeRO run's file per dp rank with the [`ShardLayout`] it was
//! cut in, a [`Saved`] answers with the tensors a one-rank run names (`blocks.0.attn.q.weight`,
//! `adam.exp_avg.blocks.0.attn.q.weight`): whole, or any range of their elements. A ZeRO rank
//! asks only for the ranges its own shards cover, so it opens only the files that hold them;
//! a rank without ZeRO reads every file. No file is read twice.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::Error;

/// The name of unit `u`'s shard, as the optimizer's state names it (and a checkpoint's file the
/// parameters' shard).
pub(super) fn shard_name(u: usize) -> String {
    format!("zero.{u:04}")
}

/// How a ZeRO run's checkpoint was cut over dp: enough for any later layout to find every
/// element of every tensor in the dp ranks' files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardLayout {
    /// The dp ranks the units were cut over: one file each.
    pub dp: usize,
    /// ZeRO's stage of the run that wrote it (the units are DDP's buckets at stages 1 and 2,
    /// the blocks at stage 3); any stage reads any.
    pub stage: usize,
    /// The optimizer's state slots, each a prefix of its keys (`adam.exp_avg.`).
    pub slots: Vec<Slot>,
    pub units: Vec<UnitLayout>,
}

/// One slot of the optimizer's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub prefix: String,
    /// One value per element of a unit (Adam's moments), cut as the parameters are; otherwise
    /// one value per unit, the same for each of its parameters (Adam's step counter), which
    /// every rank's file holds whole.
    pub per_element: bool,
}

/// One unit: its parameters lie one after the other in a flat buffer of `chunk * dp`
/// elements, of which dp rank r's file holds elements `r * chunk ..(r + 1) * chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitLayout {
    pub chunk: i64,
    /// The zeros after the last parameter that make the buffer a multiple of dp.
    pub padding: i64,
    pub members: Vec<MemberLayout>,
}

/// A parameter's place in its unit's buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberLayout {
    pub name: String,
    pub shape: Vec<i64>,
    pub offset: i64,
}

impl MemberLayout {
    fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// A checkpoint as found on disk, read as one rank's tensors.
pub enum Saved {
    /// Every tensor of a model shard in one file (`path`).
    Whole { path: PathBuf, tensors: HashMap<String, Tensor> },
    /// A ZeRO run's checkpoint, one file per dp rank, each read when first needed.
    Sharded(Sharded),
}

impl Saved {
    /// Tensor `key` whole: an error naming the checkpoint where it has none.
    pub fn required(&self, key: &str) -> Result<Tensor, Error> {
        let path = match self {
            Saved::Whole { path, .. } => path,
            Saved::Sharded(sharded) => &sharded.layout_path,
        };
        self.whole(key)?.ok_or_else(|| missing(path, key))
    }

    /// Tensor `key` whole, as a one-rank run saves it (`None`: the checkpoint has none).
    pub fn whole(&self, key: &str) -> Result<Option<Tensor>, Error> {
        match self {
            Saved::Whole { tensors, .. } => Ok(tensors.get(key).map(Tensor::shallow_clone)),
            Saved::Sharded(sharded) => sharded.whole(key),
        }
    }

    /// Elements `start..start + len` of tensor `key` flattened: an error where the checkpoint
    /// has no such tensor, or fewer elements.
    pub fn elements(&self, key: &str, start: i64, len: i64) -> Result<Tensor, Error> {
        match self {
            Saved::Whole { path, tensors } => {
                let t = tensors.get(key).ok_or_else(|| missing(path, key))?;
                if start + len > t.numel() as i64 {
                    let message = format!("{key} has {} elements, this run needs {}", t.numel(), start + len);
                    return Err(Error::Resume { path: path.clone(), message });
                }
                Ok(t.reshape([-1]).narrow(0, start, len))
            }
            Saved::Sharded(sharded) => sharded.elements(key, start, len),
        }
    }

    /// Every tensor, named as a one-rank run names them: what a rank without ZeRO restores.
    pub fn into_whole(self) -> Result<HashMap<String, Tensor>, Error> {
        match self {
            Saved::Whole { tensors, .. } => Ok(tensors),
            Saved::Sharded(sharded) => sharded.into_whole(),
        }
    }
}

/// The error for a tensor the checkpoint at `path` lacks.
fn missing(path: &Path, key: &str) -> Error {
    Error::Resume { path: path.to_owned(), message: format!("the checkpoint has no {key}") }
}

/// Where a one-rank run's tensor lies in a sharded checkpoint.
enum Place<'a> {
    /// A parameter (`prefix` empty) or a per-element slot of its state: `unit`'s member.
    Elements { prefix: &'a str, unit: usize, member: &'a MemberLayout },
    /// A per-unit slot (`prefix`) of a parameter of `unit`.
    PerUnit { prefix: &'a str, unit: usize, member: &'a MemberLayout },
    /// Anything else (the loss scale, untrained buffers): whole in every file.
    Everywhere,
}

/// A ZeRO run's checkpoint: its layout and its dp ranks' files.
pub struct Sharded {
    layout: ShardLayout,
    /// The layout's file, which the errors name.
    layout_path: PathBuf,
    /// Dp rank r's file at r.
    files: Vec<PathBuf>,
    /// Each parameter's unit and index among its members.
    places: HashMap<String, (usize, usize)>,
    /// The files read so far, by dp rank.
    read: RefCell<HashMap<usize, HashMap<String, Tensor>>>,
}

impl Sharded {
    /// The checkpoint `layout_path` describes, whose rank r's file is `file(r, dp)`, with `dp`
    /// the ranks where the run's position says it was cut: the layout must agree, and every
    /// file must be there.
    pub fn open(layout_path: &Path, dp: usize, file: impl Fn(usize, usize) -> PathBuf) -> Result<Sharded, Error> {
        let fail = |path: &Path, message: String| Error::Resume { path: path.to_owned(), message };
        let text = std::fs::read_to_string(layout_path).map_err(|e| fail(layout_path, format!("cannot be read: {e}")))?;
        let layout: ShardLayout = serde_json::from_str(&text).map_err(|e| fail(layout_path, format!("is damaged: {e}")))?;
        if layout.dp != dp {
            return Err(fail(layout_path, format!("describes {} dp shards, the run's position {dp}", layout.dp)));
        }
        for (u, unit) in layout.units.iter().enumerate() {
            let mut used = 0;
            for member in &unit.members {
                if member.offset != used {
                    return Err(fail(layout_path, format!("unit {u}: {} lies at {}, after {used} elements", member.name, member.offset)));
                }
                used += member.numel();
            }
            if unit.chunk * dp as i64 != used + unit.padding {
                let message = format!("unit {u}: {used} elements and {} of padding in {dp} chunks of {}", unit.padding, unit.chunk);
                return Err(fail(layout_path, message));
            }
        }
        let files: Vec<PathBuf> = (0..dp).map(|r| file(r, dp)).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            return Err(fail(missing, format!("is missing: the checkpoint was cut in {dp} dp shards")));
        }
        let places = layout
            .units
            .iter()
            .enumerate()
            .flat_map(|(u, unit)| unit.members.iter().enumerate().map(move |(m, member)| (member.name.clone(), (u, m))))
            .collect();
        Ok(Sharded { layout, layout_path: layout_path.to_owned(), files, places, read: RefCell::new(HashMap::new()) })
    }

    /// Where `key` lies.
    fn place<'a>(&'a self, key: &'a str) -> Place<'a> {
        let member = |name: &str| self.places.get(name).map(|&(u, m)| (u, &self.layout.units[u].members[m]));
        if let Some((unit, member)) = member(key) {
            return Place::Elements { prefix: "", unit, member };
        }
        for slot in &self.layout.slots {
            if let Some((unit, member)) = key.strip_prefix(&slot.prefix).and_then(member) {
                let prefix = slot.prefix.as_str();
                return match slot.per_element {
                    true => Place::Elements { prefix, unit, member },
                    false => Place::PerUnit { prefix, unit, member },
                };
            }
        }
        Place::Everywhere
    }

    /// Reads dp rank `rank`'s file, unless it was read already.
    fn load(&self, rank: usize) -> Result<(), Error> {
        if self.read.borrow().contains_key(&rank) {
            return Ok(());
        }
        let path = &self.files[rank];
        let tensors =
            Tensor::load_multi(path).map_err(|e| Error::Resume { path: path.clone(), message: format!("cannot be read: {e}") })?;
        self.read.borrow_mut().insert(rank, tensors.into_iter().collect());
        Ok(())
    }

    /// Tensor `key` of dp rank `rank`'s file (`None`: the file has no such tensor).
    fn tensor(&self, rank: usize, key: &str) -> Result<Option<Tensor>, Error> {
        self.load(rank)?;
        Ok(self.read.borrow()[&rank].get(key).map(Tensor::shallow_clone))
    }

    /// The shard of `prefix` + unit `u` in rank `rank`'s file, which the layout says is there.
    fn shard(&self, rank: usize, prefix: &str, u: usize) -> Result<Tensor, Error> {
        let key = format!("{prefix}{}", shard_name(u));
        let path = &self.files[rank];
        let mismatch = |message: String| Error::Resume { path: path.clone(), message };
        let t =
            self.tensor(rank, &key)?.ok_or_else(|| mismatch(format!("has no {key}: it is no shard of {}", self.layout_path.display())))?;
        let chunk = self.layout.units[u].chunk;
        if t.numel() as i64 != chunk {
            return Err(mismatch(format!("holds {} elements of {key}, {} gives each rank {chunk}", t.numel(), self.layout_path.display())));
        }
        Ok(t)
    }

    /// A file already read where there is one (what every file holds is taken from it),
    /// else dp rank `otherwise`'s.
    fn any_file(&self, otherwise: usize) -> usize {
        self.read.borrow().keys().min().copied().unwrap_or(otherwise)
    }

    fn whole(&self, key: &str) -> Result<Option<Tensor>, Error> {
        match self.place(key) {
            Place::Elements { prefix, unit, member } => {
                Ok(Some(self.span(prefix, unit, member.offset, member.numel())?.view(member.shape.as_slice())))
            }
            Place::PerUnit { prefix, unit, member } => {
                let rank = self.any_file((member.offset / self.layout.units[unit].chunk) as usize);
                let key = format!("{prefix}{}", shard_name(unit));
                self.tensor(rank, &key)?.map(Some).ok_or_else(|| missing(&self.files[rank], &key))
            }
            Place::Everywhere => self.tensor(self.any_file(0), key),
        }
    }

    fn elements(&self, key: &str, start: i64, len: i64) -> Result<Tensor, Error> {
        let fail = |message: String| Error::Resume { path: self.layout_path.clone(), message };
        match self.place(key) {
            Place::Elements { prefix, unit, member } if start + len <= member.numel() => {
                self.span(prefix, unit, member.offset + start, len)
            }
            Place::Elements { member, .. } => Err(fail(format!("{key} has {} elements, this run needs {}", member.numel(), start + len))),
            _ => Err(fail(format!("has no parameter or per-element state {key}"))),
        }
    }

    /// Elements `start..start + len` of unit `u`'s buffer of `prefix`, from the files that
    /// hold them.
    fn span(&self, prefix: &str, u: usize, start: i64, len: i64) -> Result<Tensor, Error> {
        let chunk = self.layout.units[u].chunk;
        let end = start + len;
        let mut pieces = Vec::new();
        // The ranks whose chunk meets the span.
        for rank in (start / chunk) as usize..((end + chunk - 1) / chunk) as usize {
            let (lo, hi) = (start.max(rank as i64 * chunk), end.min((rank as i64 + 1) * chunk));
            pieces.push(self.shard(rank, prefix, u)?.narrow(0, lo - rank as i64 * chunk, hi - lo));
        }
        Ok(Tensor::f_cat(&pieces, 0)?)
    }

    fn into_whole(self) -> Result<HashMap<String, Tensor>, Error> {
        let mut out = HashMap::new();
        let prefixes: Vec<&str> = std::iter::once("").chain(self.layout.slots.iter().map(|s| s.prefix.as_str())).collect();
        for member in self.layout.units.iter().flat_map(|u| &u.members) {
            for prefix in &prefixes {
                let key = format!("{prefix}{}", member.name);
                let t = self.whole(&key)?.ok_or_else(|| missing(&self.layout_path, &key))?;
                out.insert(key, t);
            }
        }
        let shard_keys: Vec<String> =
            prefixes.iter().flat_map(|p| (0..self.layout.units.len()).map(move |u| format!("{p}{}", shard_name(u)))).collect();
        // What every file holds whole (the loss scale, untrained buffers), from the first.
        self.load(0)?;
        let read = self.read.borrow();
        out.extend(read[&0].iter().filter(|(k, _)| !shard_keys.contains(k)).map(|(k, t)| (k.clone(), t.shallow_clone())));
        Ok(out)
    }
}
