//! Learner runs: what the room may launch when the instructor allows it (`--viewer-runs N`,
//! `--learner-config NAME`), who a learner is, and how many runs each may hold.
//!
//! A viewer connection launches under a learner identity: a private key the page keeps (or a
//! fresh random one) and the public name derived from it one way, recorded on its runs. The
//! key is a convenience, not a login: a learner who clears it becomes a new learner with a
//! fresh quota, which is why the whole room's learner runs are bounded too
//! ([`MAX_ACTIVE_LEARNER_RUNS`]).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use scalebook_shared::config::ConfigFile;
use scalebook_shared::protocol::{Learner, LearnerIdentity, LearnerKey, LearnerRuns, RunId, RunRecord};
use sha2::{Digest, Sha256};

use crate::rate::{KeyedRates, RateLimiter};
use crate::token::hex;

/// What a learner's public name is hashed from, before the key: keeps this hash from equalling
/// any other use of SHA-256 over the same text.
const LEARNER_DERIVATION: &[u8] = b"scalebook learner v1\0";

/// The configs learners may launch when `--viewer-runs` is given without `--learner-config`
/// (those of them the served config file has): the two that train in seconds to minutes on a
/// laptop's cores.
pub const DEFAULT_LEARNER_CONFIGS: [&str; 2] = ["cpu_tiny", "cpu_short"];

/// The most learner runs queued or running at once on this server, whoever launched them. The
/// per-learner quota alone does not bound the room: a learner who clears their key (or opens a
/// private window) is a new learner. Beyond this, launches are refused until runs end, so the
/// queue (and the run directories it creates) stays bounded whatever the room does.
pub const MAX_ACTIVE_LEARNER_RUNS: usize = 256;

/// The learner settings of `scalebook serve`: `per_learner` runs at once each, of at most
/// `ranks` ranks, of the configs `named` (or the defaults the served file has), each stopped
/// after `time_limit_minutes`. An unknown name is an error naming the flag, so a typo stops the
/// server at start instead of refusing every learner's launch. The memory share is set beside
/// it, from the machine ([`memory_share`]).
pub fn settings(
    per_learner: u32,
    ranks: u32,
    named: &[String],
    served: &ConfigFile,
    time_limit_minutes: u32,
) -> Result<LearnerRuns, String> {
    let known = |name: &str| served.names().any(|n| n == name);
    if let Some(unknown) = named.iter().find(|name| !known(name)) {
        let names: Vec<&str> = served.names().collect();
        return Err(format!("--learner-config {unknown}: the config file has no such config (it has {})", names.join(", ")));
    }
    if per_learner == 0 {
        return Ok(LearnerRuns::default());
    }
    let configs: Vec<String> = match named.is_empty() {
        true => DEFAULT_LEARNER_CONFIGS.iter().copied().filter(|name| known(name)).map(str::to_owned).collect(),
        false => named.to_vec(),
    };
    if configs.is_empty() {
        let defaults = DEFAULT_LEARNER_CONFIGS.join(" and ");
        return Err(format!("--viewer-runs {per_learner}: the config file has neither {defaults}: name the configs with --learner-config"));
    }
    if time_limit_minutes == 0 {
        return Err("--learner-time-limit 0: a learner's run needs at least a minute".into());
    }
    Ok(LearnerRuns { per_learner, configs, time_limit_minutes, ranks, memory_share_bytes: None })
}

/// The memory one learner's run may use, all its ranks together: `share_gib` as the instructor
/// set it (`--learner-memory-share`), else the machine's `memory_bytes` over the learner runs
/// it runs at once (`max_local_ranks` ranks train at once, a learner's run has up to
/// `learner_ranks`; at least one run). A share that is not a positive number stops the server.
pub fn memory_share(share_gib: Option<f64>, memory_bytes: u64, max_local_ranks: usize, learner_ranks: u32) -> Result<u64, String> {
    match share_gib {
        Some(gib) if gib.is_finite() && gib > 0.0 => Ok((gib * f64::from(1u32 << 30)) as u64),
        Some(gib) => Err(format!("--learner-memory-share {gib}: a learner's run needs some memory (a number of GiB above 0)")),
        None => Ok(memory_bytes / (max_local_ranks / learner_ranks.max(1) as usize).max(1) as u64),
    }
}

/// Ended runs kept per learner; launching more removes their oldest.
pub const MAX_STORED_RUNS: usize = 20;

/// New learner identities handed out at once, and then one per [`NEW_IDENTITY_EVERY`]: a room
/// arriving together gets its identities, a client churning through fresh ones (to escape the
/// per-learner quota) soon gets none.
pub const NEW_IDENTITY_BURST: f64 = 150.0;
pub const NEW_IDENTITY_EVERY: Duration = Duration::from_secs(5);
/// New learner identities one client address may take at once (then one per
/// [`NEW_IDENTITY_EVERY`]): the server's tokens are the room's, and one client churning
/// through fresh identities would otherwise take them all, leaving none for a learner arriving
/// late. As many as a room behind one proxy launches at once ([`LAUNCH_BURST`]).
pub const NEW_IDENTITY_CLIENT_BURST: f64 = LAUNCH_BURST;
/// Learners remembered as handed out; past this the oldest half is forgotten (they come back
/// through their runs, or cost a token again).
const KNOWN_LEARNERS: usize = 100_000;

/// Who may launch as which learner: an identity this server handed out, or one with runs here,
/// costs nothing; any other (a fresh one, or a key never seen) costs a token of its client's,
/// and one from one bucket for the whole server.
pub struct Identities {
    state: Mutex<IdentityState>,
    clients: KeyedRates<Option<IpAddr>>,
}

struct IdentityState {
    tokens: RateLimiter,
    known: VecDeque<Learner>,
}

impl Default for Identities {
    fn default() -> Identities {
        let tokens = RateLimiter::new(1.0 / NEW_IDENTITY_EVERY.as_secs_f64(), NEW_IDENTITY_BURST, Instant::now());
        let clients = KeyedRates::new(NEW_IDENTITY_EVERY, NEW_IDENTITY_CLIENT_BURST, KNOWN_CLIENTS);
        Identities { state: Mutex::new(IdentityState { tokens, known: VecDeque::new() }), clients }
    }
}

impl Identities {
    /// `identity` when this server knows its learner (`has_runs`, or handed out before), or a
    /// token is left to `client` and to the server; `None` otherwise.
    pub fn admit(&self, identity: LearnerIdentity, has_runs: bool, client: Option<IpAddr>) -> Option<LearnerIdentity> {
        let mut st = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if has_runs || st.known.contains(&identity.learner) {
            return Some(identity);
        }
        let now = Instant::now();
        if !self.clients.allow(client, now) || !st.tokens.allow(now) {
            return None;
        }
        if st.known.len() >= KNOWN_LEARNERS {
            st.known.drain(..KNOWN_LEARNERS / 2);
        }
        st.known.push_back(identity.learner.clone());
        Some(identity)
    }
}

/// Learner launches one client address may make at once, and then one per
/// [`LAUNCH_EVERY`]: a room behind one proxy (a JupyterHub's) launches its first runs
/// together, while one client opening many connections, each a fresh learner with its own
/// quota, fills the room's [`MAX_ACTIVE_LEARNER_RUNS`] in minutes rather than seconds.
pub const LAUNCH_BURST: f64 = 64.0;
pub const LAUNCH_EVERY: Duration = Duration::from_secs(1);
/// Client addresses whose rates are remembered (see [`KeyedRates`]).
const KNOWN_CLIENTS: usize = 4096;

/// The launch rate of each client address, bounding learner launches whoever they claim to be.
pub struct LaunchRates(KeyedRates<Option<IpAddr>>);

impl Default for LaunchRates {
    fn default() -> LaunchRates {
        LaunchRates(KeyedRates::new(LAUNCH_EVERY, LAUNCH_BURST, KNOWN_CLIENTS))
    }
}

impl LaunchRates {
    /// Whether a learner launch from `client` at `now` may go ahead; `None` (a connection the
    /// gate did not see) shares one bucket.
    pub fn allow(&self, client: Option<IpAddr>, now: Instant) -> bool {
        self.0.allow(client, now)
    }
}

/// What a client launching faster than [`LaunchRates`] allows is told.
pub fn launch_rate_refusal() -> String {
    format!(
        "this address launched {LAUNCH_BURST} learner runs just now, the most it may at once; then one every {} s: try again in a few seconds",
        LAUNCH_EVERY.as_secs()
    )
}

/// The learner a key stands for: the first 128 bits of SHA-256 over a fixed prefix and the key,
/// as 32 hex digits. The same key always gives the same name (a reloaded page finds its runs),
/// and the name cannot be turned back into the key, so showing it to the room lets no one act
/// as its learner.
pub fn identity(key: LearnerKey) -> LearnerIdentity {
    let digest = Sha256::new().chain_update(LEARNER_DERIVATION).chain_update(key.as_str().as_bytes()).finalize();
    let learner = Learner::parse(&hex(&digest[..LEARNER_NAME_BYTES]))
        .unwrap_or_else(|_| unreachable!("{LEARNER_NAME_BYTES} bytes are a learner's hex digits"));
    LearnerIdentity { key, learner }
}

/// The bytes of the digest a learner's name shows ([`scalebook_shared::protocol::LEARNER_LEN`] hex digits).
const LEARNER_NAME_BYTES: usize = scalebook_shared::protocol::LEARNER_LEN / 2;

/// A new learner: 16 random bytes from the operating system as the key.
pub fn new_identity() -> Result<LearnerIdentity, getrandom::Error> {
    let mut bytes = [0u8; scalebook_shared::protocol::LEARNER_KEY_LEN / 2];
    getrandom::fill(&mut bytes)?;
    let key = LearnerKey::parse(&hex(&bytes)).unwrap_or_else(|_| unreachable!("random bytes are a key's hex digits"));
    Ok(identity(key))
}

/// Who launches a learner's run, and how many runs they may hold at once: checked by the run
/// manager under its lock as the run is created, so two pages of one learner cannot both take
/// the last place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnerLaunch {
    pub learner: Learner,
    pub per_learner: u32,
}

/// Why `learner` may not have another run now, given every run's record: they have
/// `per_learner` queued or running already, or the room has [`MAX_ACTIVE_LEARNER_RUNS`].
pub fn quota_refusal<'a>(records: impl IntoIterator<Item = &'a RunRecord>, learner: &Learner, per_learner: u32) -> Option<String> {
    let active = records.into_iter().filter(|r| !r.state().is_final()).filter_map(|r| r.learner.as_ref());
    let (mut theirs, mut all) = (0usize, 0usize);
    for owner in active {
        all += 1;
        theirs += usize::from(owner == learner);
    }
    if theirs >= per_learner as usize {
        Some(format!(
            "you have {theirs} runs queued or running, the most a learner may have at once ({per_learner}): wait for one to end, or cancel one"
        ))
    } else if all >= MAX_ACTIVE_LEARNER_RUNS {
        Some(format!(
            "the room has {all} learner runs queued or running, the most this server takes ({MAX_ACTIVE_LEARNER_RUNS}): wait for some to end"
        ))
    } else {
        None
    }
}

/// The ended runs of `learner` among `records` (oldest first, as the run manager keeps them)
/// beyond the newest [`MAX_STORED_RUNS`]: the ones to remove.
pub fn beyond_kept<'a>(records: impl IntoIterator<Item = &'a RunRecord>, learner: &Learner) -> Vec<RunId> {
    let ended: Vec<&RunId> =
        records.into_iter().filter(|r| r.learner.as_ref() == Some(learner) && r.state().is_final()).map(|r| &r.id).collect();
    ended[..ended.len().saturating_sub(MAX_STORED_RUNS)].iter().map(|id| (*id).clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalebook_shared::protocol::RunState;

    fn served() -> ConfigFile {
        let path = format!("{}/../../config/ViT.yaml", std::env::var("CARGO_MANIFEST_DIR").unwrap());
        ConfigFile::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn key(text: &str) -> LearnerKey {
        LearnerKey::parse(text).unwrap()
    }

    #[test]
    fn a_learners_name_is_derived_one_way_from_their_key() {
        let key_a = key(&"0a".repeat(16));
        let a = identity(key_a.clone());
        assert_eq!(a.key, key_a);
        assert_eq!(identity(key_a.clone()).learner, a.learner, "the same key must name the same learner after a reload");
        assert_ne!(identity(key(&"0b".repeat(16))).learner, a.learner);
        assert!(!key_a.as_str().contains(a.learner.as_str()));
        // Pinned: a change of the derivation orphans every learner's runs (the move from 48 to
        // 128 bits did, once: runs recorded before are read, and are no one's to act on).
        let digest = Sha256::digest(format!("scalebook learner v1\0{}", "0a".repeat(16)).as_bytes());
        assert_eq!(a.learner.as_str(), hex(&digest[..16]));
        let (x, y) = (new_identity().unwrap(), new_identity().unwrap());
        assert_ne!(x.key, y.key);
        assert_eq!(identity(x.key.clone()).learner, x.learner);
    }

    #[test]
    fn settings_default_to_the_cpu_configs_and_name_an_unknown_one_by_its_flag() {
        let file = served();
        assert_eq!(settings(0, 2, &["cpu_tiny".into()], &file, 30).unwrap(), LearnerRuns::default());
        assert!(settings(0, 2, &["nope".into()], &file, 30).is_err(), "a typo must stop the server even before learners may launch");
        assert_eq!(settings(2, 2, &[], &file, 30).unwrap().configs, ["cpu_tiny", "cpu_short"]);
        assert_eq!(
            settings(1, 2, &["cpu_mp".into()], &file, 5).unwrap(),
            LearnerRuns { per_learner: 1, configs: vec!["cpu_mp".into()], time_limit_minutes: 5, ranks: 2, memory_share_bytes: None }
        );
        let err = settings(2, 2, &["cpu_tiny".into(), "cpu_huge".into()], &file, 30).unwrap_err();
        assert!(err.starts_with("--learner-config cpu_huge: the config file has no such config"), "{err}");
        let bare = ConfigFile::parse("only:\n  lr: 1.0e-3\n").unwrap();
        assert!(settings(1, 2, &[], &bare, 30).unwrap_err().contains("--learner-config"));
        assert!(settings(1, 2, &[], &file, 0).unwrap_err().starts_with("--learner-time-limit 0"));
    }

    #[test]
    fn one_client_launches_a_burst_then_at_the_rate_and_others_are_not_held_up() {
        let (rates, start) = (LaunchRates::default(), Instant::now());
        let (one, other) = (Some(IpAddr::from([10, 0, 0, 1])), Some(IpAddr::from([10, 0, 0, 2])));
        let burst = (0..100).filter(|_| rates.allow(one, start)).count();
        assert_eq!(burst, LAUNCH_BURST as usize);
        assert!(rates.allow(other, start), "another client launches while the first waits");
        assert!(!rates.allow(one, start + LAUNCH_EVERY / 2));
        assert!(rates.allow(one, start + LAUNCH_EVERY));
        // The room's 256 runs take this one client minutes, not seconds.
        let filled = (MAX_ACTIVE_LEARNER_RUNS as f64 - LAUNCH_BURST) * LAUNCH_EVERY.as_secs_f64();
        assert!(filled >= 180.0, "{filled} s");
        assert!(launch_rate_refusal().contains("64 learner runs just now"), "{}", launch_rate_refusal());
    }

    #[test]
    fn a_learner_runs_memory_share_is_the_machines_over_the_runs_it_runs_at_once() {
        let machine = 24 << 30;
        assert_eq!(memory_share(None, machine, 1, 2), Ok(machine), "one run at a time, even of two ranks");
        assert_eq!(memory_share(None, machine, 8, 2), Ok(6 << 30), "four runs of two ranks at once");
        assert_eq!(memory_share(Some(0.5), machine, 8, 2), Ok(1 << 29), "the instructor's share wins");
        assert!(memory_share(Some(0.0), machine, 8, 2).unwrap_err().starts_with("--learner-memory-share 0"));
    }

    #[test]
    fn a_learner_keeps_their_newest_ended_runs_and_every_active_one() {
        let (a, b) = (identity(key(&"0a".repeat(16))).learner, identity(key(&"0b".repeat(16))).learner);
        let mut records: Vec<RunRecord> = (0..MAX_STORED_RUNS as u32 + 3).map(|n| record(100 + n, Some(&a), RunState::Completed)).collect();
        records.insert(0, record(1, Some(&a), RunState::Running));
        records.insert(0, record(0, Some(&b), RunState::Failed));
        records.push(record(999, None, RunState::Completed));
        let ids: Vec<String> = beyond_kept(&records, &a).iter().map(ToString::to_string).collect();
        assert_eq!(ids, ["r100", "r101", "r102"]);
        assert!(beyond_kept(&records, &b).is_empty());
    }

    #[test]
    fn new_identities_cost_tokens_and_known_ones_do_not() {
        let identities = Identities::default();
        let client = |n: u8| Some(IpAddr::from([10, 0, 0, n]));
        // One client takes its share and no more: the rest are left to the room.
        let churner: Vec<Option<LearnerIdentity>> =
            (0..NEW_IDENTITY_CLIENT_BURST as usize + 5).map(|_| identities.admit(new_identity().unwrap(), false, client(1))).collect();
        assert_eq!(churner.iter().flatten().count(), NEW_IDENTITY_CLIENT_BURST as usize);
        let left = (NEW_IDENTITY_BURST - NEW_IDENTITY_CLIENT_BURST) as usize;
        let fresh: Vec<LearnerIdentity> = (0..left).map(|_| new_identity().unwrap()).collect();
        for (n, identity) in fresh.iter().enumerate() {
            assert!(identities.admit(identity.clone(), false, client(2 + (n % 50) as u8)).is_some(), "learner {n}");
        }
        // The server's bucket is empty: a key never seen is refused, a known or busy learner is not.
        assert!(identities.admit(new_identity().unwrap(), false, client(99)).is_none());
        assert!(identities.admit(fresh[7].clone(), false, client(1)).is_some());
        assert!(identities.admit(new_identity().unwrap(), true, client(1)).is_some());
    }

    fn record(n: u32, learner: Option<&Learner>, state: RunState) -> RunRecord {
        RunRecord::sample(&format!("r{n}"), f64::from(n), learner.cloned(), state)
    }

    #[test]
    fn the_quota_counts_a_learners_runs_until_they_end_and_the_rooms_too() {
        let (a, b) = (identity(key(&"0a".repeat(16))).learner, identity(key(&"0b".repeat(16))).learner);
        let mut records =
            vec![record(1, Some(&a), RunState::Running), record(2, Some(&a), RunState::Completed), record(3, None, RunState::Queued)];
        assert_eq!(quota_refusal(&records, &a, 2), None);
        records.push(record(4, Some(&a), RunState::Queued));
        let refusal = quota_refusal(&records, &a, 2).unwrap();
        assert!(refusal.contains("the most a learner may have at once (2)"), "{refusal}");
        assert_eq!(quota_refusal(&records, &b, 2), None);
        let room: Vec<RunRecord> = (0..MAX_ACTIVE_LEARNER_RUNS as u32).map(|n| record(n, Some(&a), RunState::Queued)).collect();
        assert!(quota_refusal(&room, &b, 2).unwrap().contains("(256)"));
    }
}
