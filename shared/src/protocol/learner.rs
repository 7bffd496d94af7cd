//! Who a learner is when the instructor lets the room launch small runs of its own: a private
//! key a viewer page keeps, the public name derived from it and recorded on its runs, and what
//! the room may launch. Beside the classroom and the runs, which both use it.

use serde::{Deserialize, Serialize};

/// A fixed number of lowercase hex digits: the shape of a learner's key and name, checked
/// wherever one is read, so neither can carry anything else into a record or a page. `OLD` is
/// a length an earlier version wrote, still read (a record kept from then).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HexName<const LEN: usize, const OLD: usize = LEN>(String);

impl<const LEN: usize, const OLD: usize> HexName<LEN, OLD> {
    pub fn parse(text: &str) -> Result<HexName<LEN, OLD>, String> {
        if (text.len() == LEN || text.len() == OLD) && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(HexName(text.to_owned()))
        } else {
            Err(format!("must be {LEN} lowercase hex digits"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<const LEN: usize, const OLD: usize> TryFrom<String> for HexName<LEN, OLD> {
    type Error = String;
    fn try_from(text: String) -> Result<HexName<LEN, OLD>, String> {
        HexName::parse(&text)
    }
}

impl<const LEN: usize, const OLD: usize> From<HexName<LEN, OLD>> for String {
    fn from(name: HexName<LEN, OLD>) -> String {
        name.0
    }
}

impl<const LEN: usize, const OLD: usize> std::fmt::Display for HexName<LEN, OLD> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The length of a [`LearnerKey`] in hex digits.
pub const LEARNER_KEY_LEN: usize = 32;
/// The length of a [`Learner`] name in hex digits: 128 bits, so that no one finds a key of
/// another learner's name by trying keys (48 bits, as names had before, took hours on a GPU).
pub const LEARNER_LEN: usize = 32;
/// The length of the names that earlier versions recorded on runs: still read, never made
/// (no key's name has it now, so such a run is no learner's to act on).
pub const OLD_LEARNER_LEN: usize = 12;

/// A learner's private key: the server hands one to a viewer page, which keeps it and presents
/// it again after a reload, so its runs stay its own. Only its hash, [`Learner`], is ever shown
/// to anyone else.
pub type LearnerKey = HexName<LEARNER_KEY_LEN>;

/// A learner as the others see them: a public name derived one way from their key, recorded
/// on the runs they launch (a run without one is the instructor's).
pub type Learner = HexName<LEARNER_LEN, OLD_LEARNER_LEN>;

/// What the room may do beyond reading, as the instructor started the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnerRuns {
    /// Runs one learner may have queued or running at once (`--viewer-runs N`); 0: none.
    pub per_learner: u32,
    /// The configs a learner may launch (the instructor's learner configs), CPU only.
    pub configs: Vec<String>,
    /// Minutes a learner's run may train before it is stopped (`--learner-time-limit`).
    #[serde(default)]
    pub time_limit_minutes: u32,
    /// The most ranks one learner's run may have (`--learner-ranks`): the distributed
    /// chapters' hands-on layouts need two. A run larger than the machine's
    /// `--max-local-ranks` waits for the machine and then runs alone.
    #[serde(default = "one_rank")]
    pub ranks: u32,
    /// The memory one learner's run may use, all its ranks together, in bytes
    /// (`--learner-memory-share`; by default the machine's memory over the learner runs it
    /// runs at once). `None` from a server that predates the share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_share_bytes: Option<u64>,
}

/// What a server that predates `--learner-ranks` allowed.
fn one_rank() -> u32 {
    1
}

impl LearnerRuns {
    /// How long a learner's run may train (`None`: learners launch nothing).
    pub fn time_limit(&self) -> Option<std::time::Duration> {
        (self.per_learner > 0 && self.time_limit_minutes > 0)
            .then(|| std::time::Duration::from_secs(u64::from(self.time_limit_minutes) * 60))
    }
}

/// The identity a viewer connection launches under (sent in `welcome` to a viewer page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnerIdentity {
    /// To keep, and present again in `hello` after a reload.
    pub key: LearnerKey,
    /// How its runs are marked (`RunRecord::learner`).
    pub learner: Learner,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learner_keys_and_names_are_fixed_length_hex() {
        assert!(LearnerKey::parse(&"0a".repeat(16)).is_ok());
        assert!(LearnerKey::parse("0A0A").is_err());
        assert!(LearnerKey::parse(&"g".repeat(32)).is_err());
        assert!(Learner::parse(&"0123456789abcdef".repeat(2)).is_ok());
        assert!(Learner::parse("0123456789ab").is_ok(), "a name an earlier version recorded");
        assert!(Learner::parse("0123456789abc").is_err());
        assert!(LearnerKey::parse(&"0a".repeat(6)).is_err(), "no old length for keys");
        assert!(serde_json::from_str::<Learner>(r#""../x""#).is_err());
    }
}
