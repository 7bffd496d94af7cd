//! The class of many servers. Every learner runs their own Scalebook, under their own account,
//! and it follows the instructor's: the instructor's server opens a **class listener** (TLS,
//! follower token only: it serves the presentation and the instructor's runs, and nothing that
//! launches, cancels or submits), and each learner's server joins it with the class link
//! ([`follow`]), relaying to its own pages. The instructor sees the room as a roster
//! (`crate::classroom`), and charts the runs learners share beside their own ([`shared`]).
//!
//! The class link's token lives in a file of the class directory, so a restart of the
//! instructor's server keeps the room; a new link replaces it and disconnects every follower
//! that joined with the old one.

pub mod copy;
pub mod follow;
pub mod listener;
pub mod shared;
pub mod tls;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::time::Duration;

use scalebook_shared::protocol::{ClassAddress, ClassLink, FOLLOWER_TOKEN_LEN, INVITATION_SEPARATOR, RunRecord, invitation_name_ok};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::Error;
use crate::runs::is_class_run;
use crate::token::Token;

/// Whether the class listener shows a run to its followers: the instructor's own runs only
/// (not a learner's run of `--viewer-runs`, nor the runs of a class this server follows).
pub fn for_followers(record: &RunRecord) -> bool {
    record.learner.is_none() && !is_class_run(record)
}

/// A close code of the protocol's own: the class listener ended this follower's connection
/// (removed by the instructor, or its class link replaced); the reason says which.
pub const CLOSE_DISMISSED: u16 = 4403;

/// The follower token's file in the class directory.
const TOKEN_FILE: &str = "follower-token";

/// The class listener's half of the class link: where it is, its certificate's fingerprint,
/// and the follower token, which the instructor can replace at any time; and whether it
/// listens there now.
pub struct ClassKey {
    dir: PathBuf,
    /// Where the room's link leads: the Unix socket when there is one (every follower it admits
    /// is on this host), else the TCP port.
    room: ClassAddress,
    /// Where invitations lead: the TCP port when there is one (an invited learner may be on
    /// another host), else the socket.
    invited: ClassAddress,
    fingerprint: String,
    token: watch::Sender<Token>,
    /// Why the class listener does not listen now (its port taken), while it tries again.
    unbound: watch::Sender<Option<String>>,
}

impl ClassKey {
    /// The key of the class listener at `room` (and `invited`, see [`ClassKey`]), with the token
    /// kept in `dir` (or a new one written there).
    pub fn open(dir: &Path, room: ClassAddress, invited: ClassAddress, fingerprint: String) -> Result<ClassKey, Error> {
        let kept = std::fs::read_to_string(dir.join(TOKEN_FILE)).ok().map(|text| text.trim().to_owned());
        let token = match kept.filter(|t| t.len() == FOLLOWER_TOKEN_LEN).map(|t| Token::given(&t)) {
            Some(Ok(token)) => token,
            _ => new_token(dir)?,
        };
        let unbound = watch::Sender::new(None);
        Ok(ClassKey { dir: dir.to_owned(), room, invited, fingerprint, token: watch::Sender::new(token), unbound })
    }

    /// Says why the class listener does not listen now (`None`: it listens), for the
    /// instructor's page.
    pub fn set_unbound(&self, why: Option<String>) {
        self.unbound.send_replace(why);
    }

    /// Why the class listener does not listen now, and every change from now on.
    pub fn unbound(&self) -> watch::Receiver<Option<String>> {
        self.unbound.subscribe()
    }

    /// The class link learners on this host join with (the room's).
    pub fn link(&self) -> ClassLink {
        ClassLink {
            address: self.room.clone(),
            token: self.token.borrow().as_str().to_owned(),
            fingerprint: self.fingerprint.clone(),
            invite: None,
        }
    }

    /// The class link of the learner `name` alone: an invitation, valid from any host until
    /// the next class link (its token is derived from the room's).
    pub fn invitation(&self, name: &str) -> Result<ClassLink, Error> {
        if !invitation_name_ok(name) {
            let rule = format!("{name:?} cannot be invited: 1 to 32 lowercase letters, digits, `_` or `-`, starting with a letter");
            return Err(Error::ClassRule { field: "name", rule });
        }
        let token = invitation_token(&self.token.borrow(), name);
        Ok(ClassLink { address: self.invited.clone(), token: token.as_str().to_owned(), invite: Some(name.to_owned()), ..self.link() })
    }

    /// What `presented` lets in, if anything: the room's token, or an invitation's
    /// (`NAME~TOKEN`, the token made for that name).
    pub fn admit(&self, presented: &str) -> Option<Pass> {
        let room = self.token.borrow();
        match presented.split_once(INVITATION_SEPARATOR) {
            Some((name, token)) if invitation_name_ok(name) => {
                invitation_token(&room, name).matches(token).then(|| Pass::Invited(name.to_owned()))
            }
            Some(_) => None,
            None => room.matches(presented).then_some(Pass::Room),
        }
    }

    /// Replaces the follower token (kept for restarts); every follower that joined with the
    /// old one hears of it through [`ClassKey::changes`] and is disconnected.
    pub fn renew(&self) -> Result<(), Error> {
        self.token.send_replace(new_token(&self.dir)?);
        tracing::info!("a new class link was made: followers of the old one are disconnected");
        Ok(())
    }

    /// Every change of the token from now on.
    pub fn changes(&self) -> watch::Receiver<Token> {
        self.token.subscribe()
    }
}

/// What a follower came in with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    /// The room's link: the follower is the Unix account its connection belongs to.
    Room,
    /// An invitation for this learner.
    Invited(String),
}

/// What an invitation's token is hashed from, before the room's token and the name.
const INVITATION_DERIVATION: &[u8] = b"scalebook class invitation v1\0";

/// The token of `name`'s invitation: the first 128 bits of SHA-256 over a fixed prefix, the
/// room's token and the name. Whoever holds one invitation can neither work out the room's
/// token nor another learner's invitation; a new class link makes new ones.
fn invitation_token(room: &Token, name: &str) -> Token {
    let digest =
        Sha256::new().chain_update(INVITATION_DERIVATION).chain_update(room.as_str()).chain_update(b"\0").chain_update(name).finalize();
    Token::from_digest(&digest[..FOLLOWER_TOKEN_LEN / 2])
}

/// The longest wait between two attempts to reach a class listener that is away, or to listen
/// on a class port someone else holds.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The wait after `failures` failures in a row: a quarter second, doubling, at most
/// [`MAX_BACKOFF`], each shortened by a random part of up to half, so a room of followers that
/// lost the class together does not come back in one burst.
pub fn backoff(failures: u32) -> Duration {
    let full = Duration::from_millis(250).saturating_mul(1 << failures.saturating_sub(1).min(5)).min(MAX_BACKOFF);
    let mut byte = [0u8; 1];
    let jitter = getrandom::fill(&mut byte).map_or(0.0, |()| f64::from(byte[0]) / 255.0);
    full.mul_f64(1.0 - jitter / 2.0)
}

/// A new follower token, written to the class directory (readable by its owner only).
fn new_token(dir: &Path) -> Result<Token, Error> {
    let token = Token::random::<{ FOLLOWER_TOKEN_LEN / 2 }>()?;
    tls::write_private(&dir.join(TOKEN_FILE), token.as_str().as_bytes())?;
    Ok(token)
}

/// The class directory: where the certificate, its key and the follower token are kept, made
/// private to its owner. By default `$XDG_DATA_HOME/scalebook/class` (`~/.local/share/...`):
/// per user, outside any shared install.
pub fn directory(given: Option<&Path>) -> Result<PathBuf, Error> {
    use std::os::unix::fs::PermissionsExt;

    let dir = match given {
        Some(dir) => dir.to_owned(),
        None => {
            let data = std::env::var_os("XDG_DATA_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
            let data = data.or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")));
            data.ok_or_else(|| Error::Class("neither $XDG_DATA_HOME nor $HOME is set: give --class-dir".into()))?.join("scalebook/class")
        }
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp() -> ClassAddress {
        ClassAddress::Tcp { host: "h".into(), port: 1 }
    }

    #[test]
    fn the_token_is_kept_across_restarts_until_renewed() {
        let dir = tempfile::tempdir().unwrap();
        let key = ClassKey::open(dir.path(), tcp(), tcp(), "ab".repeat(32)).unwrap();
        let link = key.link();
        assert_eq!(link.token.len(), FOLLOWER_TOKEN_LEN);
        assert_eq!(ClassLink::parse(&link.to_string()).unwrap(), link);
        let again = ClassKey::open(dir.path(), tcp(), tcp(), "ab".repeat(32)).unwrap();
        assert_eq!(again.link(), link);
        let changes = key.changes();
        key.renew().unwrap();
        assert!(changes.has_changed().unwrap());
        assert!(key.admit(&link.token).is_none() && key.admit(&key.link().token) == Some(Pass::Room));
        assert_eq!(ClassKey::open(dir.path(), tcp(), tcp(), "ab".repeat(32)).unwrap().link(), key.link());
    }

    #[test]
    fn an_invitation_lets_in_its_learner_only_until_the_next_class_link() {
        let dir = tempfile::tempdir().unwrap();
        let socket = ClassAddress::Unix("/srv/class/class.sock".into());
        let key = ClassKey::open(dir.path(), socket.clone(), tcp(), "ab".repeat(32)).unwrap();
        let ada = key.invitation("ada").unwrap();
        assert_eq!((&key.link().address, &ada.address), (&socket, &tcp()), "the room on this host's socket, Ada from anywhere");
        assert_eq!(ada.token.len(), FOLLOWER_TOKEN_LEN);
        assert_ne!(ada.token, key.link().token, "an invitation is not the room's link");
        assert_eq!(key.admit(&ada.bearer()), Some(Pass::Invited("ada".into())));
        // Ada's token under another name, the room's token as an invitation, a bad name.
        assert_eq!(key.admit(&format!("bob~{}", ada.token)), None);
        assert_eq!(key.admit(&format!("ada~{}", key.link().token)), None);
        assert_eq!(key.admit(&format!("Ada~{}", ada.token)), None);
        assert!(key.invitation("Ada L.").unwrap_err().to_string().starts_with("name:"));
        key.renew().unwrap();
        assert_eq!(key.admit(&ada.bearer()), None, "a new class link ends the invitations");
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap_less_a_random_part() {
        for (failures, full) in [(1, Duration::from_millis(250)), (2, Duration::from_millis(500)), (30, MAX_BACKOFF)] {
            let waits: Vec<Duration> = (0..20).map(|_| backoff(failures)).collect();
            assert!(waits.iter().all(|w| *w <= full && *w >= full / 2), "{failures}: {waits:?}");
        }
    }
}
