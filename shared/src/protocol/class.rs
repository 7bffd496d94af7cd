//! A class of many Scalebooks: each learner runs their own server, under their own account, and
//! it follows the instructor's through the instructor's **class listener** (a second listener
//! that only reads and follows, over TLS). This module holds what crosses between them: the
//! class link a learner is given, how a follower introduces itself (and, if the learner
//! allows, summarises its own runs), the instructor's roster of followers, and how a follower
//! tells its own pages where it stands with the class.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{RunId, RunState};
use crate::Problems;
use crate::layout::{DEFAULT_ORDER, Layout, Sizes};

/// The scheme of a class link: it is not a web page, so it must not look like one.
pub const CLASS_LINK_SCHEME: &str = "scalebook-class";
/// The length of a follower token in hex digits (128 random bits).
pub const FOLLOWER_TOKEN_LEN: usize = 32;
/// The length of a certificate fingerprint in hex digits (SHA-256).
pub const FINGERPRINT_LEN: usize = 64;
/// The longest name a follower may go by.
pub const MAX_FOLLOWER_NAME_LEN: usize = 32;
/// The most runs a follower summarises for the instructor.
pub const MAX_SUMMARISED_RUNS: usize = 32;
/// The most bytes of run summaries one roster carries (in the order followers joined); the
/// followers past it are listed without their runs.
pub const MAX_ROSTER_RUN_BYTES: usize = 512 << 10;
/// The longest host name a class link may carry.
pub const MAX_HOST_LEN: usize = 253;
/// The most points one `shared_points` message carries: well within a message's size limit.
pub const MAX_SHARED_POINTS: usize = 200;
/// What a shared run's copy is called on the instructor's server, before the follower's name.
const SHARED_PREFIX: &str = "l-";

/// What a learner needs to follow a class: where the instructor's class listener is, the
/// follower token it accepts, and the SHA-256 fingerprint of its self-signed certificate,
/// which the follower pins (no certificate authority is involved, so the fingerprint is what
/// tells the real class listener from anyone in between).
///
/// Written `scalebook-class://HOST:PORT/#token=TOKEN&sha256=FINGERPRINT`, or for a class
/// listener's Unix socket `scalebook-class:///PATH#token=...` (an empty host and the socket's
/// path, as `file:///` links write theirs), and `&invite=NAME` for an invitation: the secrets
/// sit in the fragment, which no client sends to a server, so the link never lands in a
/// request log.
///
/// The room's link (no `invite`) identifies a follower by the Unix account its server runs
/// as, which the class listener asks the kernel for: it admits followers on its own host only.
/// An invitation is one learner's: its token is made for that name, and the follower is that
/// invited learner wherever it connects from.
#[derive(Clone, PartialEq, Eq)]
pub struct ClassLink {
    pub address: ClassAddress,
    pub token: String,
    /// Lowercase hex, [`FINGERPRINT_LEN`] digits.
    pub fingerprint: String,
    /// The invited learner's name (see [`invitation_name_ok`]); `None`: the room's link.
    pub invite: Option<String>,
}

/// Where a class listener listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassAddress {
    /// A TCP port, reached from anywhere the network allows.
    Tcp { host: String, port: u16 },
    /// A Unix socket (its absolute path), reached from the listener's own host: in a directory
    /// only the instructor can write, nobody else can take its place.
    Unix(String),
}

impl fmt::Display for ClassAddress {
    /// `host:port` (`[v6]:port`), or the socket's path, as a person reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassAddress::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            ClassAddress::Tcp { host, port } => write!(f, "{host}:{port}"),
            ClassAddress::Unix(path) => f.write_str(path),
        }
    }
}

impl fmt::Debug for ClassLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClassLink({}, token .., sha256 {}, invite {:?})", self.address, self.fingerprint, self.invite)
    }
}

impl fmt::Display for ClassLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.address {
            ClassAddress::Tcp { .. } => write!(f, "{CLASS_LINK_SCHEME}://{}/", self.address)?,
            ClassAddress::Unix(path) => write!(f, "{CLASS_LINK_SCHEME}://{path}")?,
        }
        write!(f, "#token={}&sha256={}", self.token, self.fingerprint)?;
        match &self.invite {
            Some(name) => write!(f, "&invite={name}"),
            None => Ok(()),
        }
    }
}

/// The longest name an invitation may be for.
pub const MAX_INVITATION_NAME_LEN: usize = 32;
/// What separates an invited name from its token in the bearer a follower presents.
pub const INVITATION_SEPARATOR: char = '~';
/// The longest socket path a class link may carry (what a Unix socket's address holds).
pub const MAX_SOCKET_PATH_LEN: usize = 107;

/// Whether `name` may be invited: 1 to [`MAX_INVITATION_NAME_LEN`] lowercase letters, digits,
/// `_` or `-`, starting with a letter (a Unix user name's shape, and nothing a link, a bearer
/// or a run id would need to escape).
pub fn invitation_name_ok(name: &str) -> bool {
    name.len() <= MAX_INVITATION_NAME_LEN
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// Whether `path` may name a class listener's socket in a link: absolute, at most
/// [`MAX_SOCKET_PATH_LEN`] bytes of letters, digits, `/`, `.`, `_`, `-` or `+` (nothing a link
/// would need to escape), and no `..`.
pub fn socket_path_ok(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= MAX_SOCKET_PATH_LEN
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'+'))
        && !path.split('/').any(|part| part == "..")
}

fn lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The address part of a link (what comes before `#`), checked.
fn parse_address(address: &str, problems: &mut Problems) -> Option<ClassAddress> {
    if address.starts_with('/') {
        if !socket_path_ok(address) {
            problems.push(
                "class_link.socket",
                format!(
                    "a socket's path is absolute, at most {MAX_SOCKET_PATH_LEN} letters, digits, `/`, `.`, `_`, `-` or `+`, without `..`"
                ),
            );
            return None;
        }
        return Some(ClassAddress::Unix(address.to_owned()));
    }
    let address = address.trim_end_matches('/');
    let (host, port) = match address.strip_prefix('[') {
        Some(v6) => v6.split_once("]:").unwrap_or((v6, "")),
        None => address.rsplit_once(':').unwrap_or((address, "")),
    };
    let host_ok = !host.is_empty()
        && host.len() <= MAX_HOST_LEN
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    if !host_ok {
        problems.push("class_link.host", "the host is a name or an address of letters, digits, `.`, `-` (and `:` in IPv6)");
    }
    let port = port.parse::<u16>().ok().filter(|&p| p > 0);
    if port.is_none() {
        problems.push("class_link.port", "the link names a port from 1 to 65535 after the host (HOST:PORT)");
    }
    Some(ClassAddress::Tcp { host: host.to_owned(), port: port? }).filter(|_| host_ok)
}

impl ClassLink {
    /// Reads a class link as a learner pastes it (surrounding blanks ignored), naming what is
    /// wrong with it: the field of the link and the rule.
    pub fn parse(text: &str) -> Result<ClassLink, Problems> {
        let mut problems = Problems::default();
        let text = text.trim();
        let Some(rest) = text.strip_prefix(CLASS_LINK_SCHEME).and_then(|r| r.strip_prefix("://")) else {
            problems.push("class_link", format!("a class link starts with {CLASS_LINK_SCHEME}:// (ask your instructor for theirs)"));
            return Err(problems);
        };
        let (address, fragment) = rest.split_once('#').unwrap_or((rest, ""));
        let address = parse_address(address, &mut problems);
        let field = |name: &str| fragment.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('=')).unwrap_or("");
        let (token, fingerprint, invite) = (field("token"), field("sha256"), field("invite"));
        if !lower_hex(token, FOLLOWER_TOKEN_LEN) {
            problems
                .push("class_link.token", format!("the link's #token= is {FOLLOWER_TOKEN_LEN} lowercase hex digits: copy the whole link"));
        }
        if !lower_hex(fingerprint, FINGERPRINT_LEN) {
            problems
                .push("class_link.sha256", format!("the link's &sha256= is {FINGERPRINT_LEN} lowercase hex digits: copy the whole link"));
        }
        let invite = (!invite.is_empty()).then(|| invite.to_owned());
        if invite.as_deref().is_some_and(|name| !invitation_name_ok(name)) {
            problems.push(
                "class_link.invite",
                format!("the link's &invite= is 1 to {MAX_INVITATION_NAME_LEN} lowercase letters, digits, `_` or `-`: copy the whole link"),
            );
        }
        match (problems.is_empty(), address) {
            (true, Some(address)) => Ok(ClassLink { address, token: token.to_owned(), fingerprint: fingerprint.to_owned(), invite }),
            _ => Err(problems),
        }
    }

    /// What the follower presents to the class listener: the room's token, or for an
    /// invitation `NAME~TOKEN` (the listener checks the token against the name).
    pub fn bearer(&self) -> String {
        match &self.invite {
            Some(name) => format!("{name}{INVITATION_SEPARATOR}{}", self.token),
            None => self.token.clone(),
        }
    }

    /// Where the class listener is, as a person reads it (no secrets).
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// The host HTTP and TLS name the class listener by: the link's host, or `localhost` for a
    /// socket (the listener's certificate names it; the pinned fingerprint is what is checked).
    pub fn host_name(&self) -> &str {
        match &self.address {
            ClassAddress::Tcp { host, .. } => host,
            ClassAddress::Unix(_) => "localhost",
        }
    }

    /// `host:port` for HTTP's `Host` and the WebSocket's URL (`localhost` for a socket).
    pub fn authority(&self) -> String {
        match &self.address {
            ClassAddress::Tcp { .. } => self.address(),
            ClassAddress::Unix(_) => self.host_name().to_owned(),
        }
    }
}

/// Who a follower is, and what it shares: sent by a follower server to the class listener when
/// it joins and whenever this changes (at most every few seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Introduction {
    /// The learner's Unix user, or the name they chose (see [`Introduction::problems`]).
    pub name: String,
    /// The learner's own runs, only when they allow it (`None`: not shared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<RunSummary>>,
}

impl Introduction {
    /// Every problem, each naming its field: the instructor's page shows these names and
    /// numbers to the room, so they are short, plain and bounded.
    pub fn problems(&self) -> Problems {
        let mut problems = Problems::default();
        if !follower_name_ok(&self.name) {
            problems.push(
                "name",
                format!("1 to {MAX_FOLLOWER_NAME_LEN} letters, digits, spaces, `.`, `_` or `-`, starting with a letter or digit"),
            );
        }
        let runs = self.runs.as_deref().unwrap_or_default();
        if runs.len() > MAX_SUMMARISED_RUNS {
            problems.push("runs", format!("{} runs, at most {MAX_SUMMARISED_RUNS} are summarised", runs.len()));
        }
        for (i, run) in runs.iter().enumerate() {
            if !run.problems_free() {
                problems
                    .push(format!("runs[{i}]"), "a config name too long or not plain text, a layout no run has, or a number not finite");
            }
        }
        problems
    }
}

/// Whether `name` may stand for a follower (see [`Introduction::problems`]).
pub fn follower_name_ok(name: &str) -> bool {
    name.len() <= MAX_FOLLOWER_NAME_LEN
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-'))
}

/// The id of the instructor's copy of run `run` shared by the follower whose identity's key
/// is `name` ([`FollowerIdentity::key`]; `l-WHO-RUN`, its dots and other signs made `_`), or
/// `None` when it would be too long for a run id. The instructor's page and server both name
/// the copy by it.
pub fn shared_copy_id(name: &str, run: &RunId) -> Option<RunId> {
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    RunId::parse(&format!("{SHARED_PREFIX}{name}-{run}")).ok()
}

/// One of a learner's own runs, as the instructor's roster shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSummary {
    pub id: RunId,
    pub config: String,
    pub layout: Sizes,
    pub state: RunState,
    /// The latest `Loss/train` the run reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// The latest samples per second it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_sec: Option<f64>,
}

impl RunSummary {
    fn problems_free(&self) -> bool {
        let plain = self.config.len() <= 64 && self.config.chars().all(|c| c.is_ascii_graphic() || c == ' ');
        let finite = |value: Option<f64>| value.is_none_or(f64::is_finite);
        plain && self.layout().is_some() && finite(self.loss) && finite(self.samples_per_sec)
    }

    /// The run's layout (`None`: sizes no layout has).
    pub fn layout(&self) -> Option<Layout> {
        Layout::new(self.layout, DEFAULT_ORDER).ok()
    }

    /// The layout in the tutorial's words (`tp=2 cp=1 dp=2`).
    pub fn layout_text(&self) -> String {
        format!("tp={} cp={} dp={}", self.layout.tp, self.layout.cp, self.layout.dp)
    }
}

/// A follower's number on the class listener, for as long as it stays connected (the
/// instructor removes a follower by it).
pub type FollowerId = u64;

/// Who a follower is, as the class listener established it when the follower connected
/// (never as the follower says): the roster, the copies of a learner's runs, Remove and the
/// head count go by it. The name a follower introduces itself by stays a label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum FollowerIdentity {
    /// The Unix account the follower's server runs as, which the kernel reported for its
    /// connection (a follower on the class listener's own host, with the room's link).
    Account { user: String },
    /// The learner an invitation was made for (a follower from anywhere, with that invitation).
    Invited { name: String },
}

impl FollowerIdentity {
    /// The identity as a run id's part and a copy's owner: the account's name, or `invited.NAME`
    /// (a `.` no invitation has, so no invited learner takes an account's copies).
    pub fn key(&self) -> String {
        match self {
            FollowerIdentity::Account { user } => user.clone(),
            FollowerIdentity::Invited { name } => format!("invited.{name}"),
        }
    }
}

impl fmt::Display for FollowerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FollowerIdentity::Account { user } => write!(f, "account {user}"),
            FollowerIdentity::Invited { name } => write!(f, "invited as {name}"),
        }
    }
}

/// One follower as the instructor's roster shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Follower {
    pub id: FollowerId,
    /// Who it is (see [`FollowerIdentity`]).
    pub identity: FollowerIdentity,
    /// Its introduction's name (`?` until it introduced itself).
    pub name: String,
    /// Whether one of its pages follows the presentation (`false`: it broke away).
    pub following: bool,
    /// Seconds since the Unix epoch when it joined.
    pub since: f64,
    /// Its runs, when its learner shares them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<RunSummary>>,
}

/// Where a follower server stands with the class it follows, told to its own pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ClassState {
    /// Following nobody.
    Alone,
    /// Reaching the class listener at `address` (again, after `attempt` failures), for as long
    /// as it takes: a class listener that is away, or a port someone else holds (the link's
    /// pinned certificate tells them apart), comes back by itself.
    Connecting {
        address: String,
        attempt: u32,
        /// What the last attempt met, for the learner (absent before the first failure).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// Following the class at `address`.
    Joined { address: String },
    /// The class listener refused this follower (removed, or its link replaced), or the link
    /// cannot be used; nothing is retried until the learner joins again. `reason` says what
    /// to do.
    Refused { address: String, reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn fingerprint() -> String {
        "ab".repeat(32)
    }

    #[test]
    fn a_class_link_reads_back_what_it_writes_with_the_secrets_in_the_fragment() {
        let tcp = |host: &str| ClassAddress::Tcp { host: host.into(), port: 8443 };
        let link = ClassLink { address: tcp("login01.example"), token: TOKEN.into(), fingerprint: fingerprint(), invite: None };
        let text = link.to_string();
        assert_eq!(text, format!("scalebook-class://login01.example:8443/#token={TOKEN}&sha256={}", fingerprint()));
        assert_eq!(ClassLink::parse(&format!("  {text}\n")).unwrap(), link);
        let v6 = ClassLink { address: tcp("::1"), ..link.clone() };
        assert_eq!(ClassLink::parse(&v6.to_string()).unwrap(), v6);
        assert_eq!(v6.address(), "[::1]:8443");
        assert!(!format!("{link:?}").contains(TOKEN), "Debug must not show the token");
        assert_eq!(link.bearer(), TOKEN);
        let invitation = ClassLink { invite: Some("ada".into()), ..link.clone() };
        assert!(invitation.to_string().ends_with("&invite=ada"));
        assert_eq!(ClassLink::parse(&invitation.to_string()).unwrap(), invitation);
        assert_eq!(invitation.bearer(), format!("ada~{TOKEN}"));
    }

    #[test]
    fn a_sockets_link_is_its_path_after_an_empty_host() {
        let path = "/srv/class/instructor+1/class.sock";
        let link = ClassLink { address: ClassAddress::Unix(path.into()), token: TOKEN.into(), fingerprint: fingerprint(), invite: None };
        assert_eq!(link.to_string(), format!("scalebook-class://{path}#token={TOKEN}&sha256={}", fingerprint()));
        assert_eq!(ClassLink::parse(&link.to_string()).unwrap(), link);
        assert_eq!((link.address(), link.authority()), (path.to_owned(), "localhost".to_owned()));
        let fields = |text: &str| ClassLink::parse(text).unwrap_err().0.into_iter().map(|p| p.field).collect::<Vec<_>>();
        let long = format!("/{}", "s".repeat(MAX_SOCKET_PATH_LEN));
        for bad in ["/srv/../etc/class.sock", "/srv/class sock", "/srv/cl%61ss", long.as_str()] {
            assert_eq!(fields(&format!("scalebook-class://{bad}#token={TOKEN}&sha256={}", fingerprint())), ["class_link.socket"], "{bad}");
        }
    }

    #[test]
    fn an_invitation_names_a_plain_learner() {
        let fields = |text: &str| ClassLink::parse(text).unwrap_err().0.into_iter().map(|p| p.field).collect::<Vec<_>>();
        let link = format!("scalebook-class://h:1/#token={TOKEN}&sha256={}", fingerprint());
        for bad in ["Ada", "1ada", "a~b", "a.b", &"a".repeat(MAX_INVITATION_NAME_LEN + 1)] {
            assert_eq!(fields(&format!("{link}&invite={bad}")), ["class_link.invite"], "{bad}");
        }
        assert!(invitation_name_ok("ada_l-2") && !invitation_name_ok(""));
        let invited = FollowerIdentity::Invited { name: "ada".into() };
        assert_ne!(invited.key(), FollowerIdentity::Account { user: "ada".into() }.key(), "an invitation takes no account's copies");
        assert_eq!(serde_json::to_value(&invited).unwrap(), serde_json::json!({"by": "invited", "name": "ada"}));
    }

    #[test]
    fn every_broken_part_of_a_link_is_named() {
        let fields = |text: &str| ClassLink::parse(text).unwrap_err().0.into_iter().map(|p| p.field).collect::<Vec<_>>();
        assert_eq!(fields("https://h:1/#token=x"), ["class_link"]);
        assert_eq!(fields("scalebook-class://h/#token=x&sha256=y"), ["class_link.port", "class_link.token", "class_link.sha256"]);
        assert_eq!(fields(&format!("scalebook-class://h o:1/#token={TOKEN}&sha256={}", fingerprint())), ["class_link.host"]);
        assert_eq!(fields(&format!("scalebook-class://h:0/#token={TOKEN}&sha256={}", fingerprint())), ["class_link.port"]);
        assert_eq!(
            fields(&format!("scalebook-class://h:1/#token={}&sha256={}", TOKEN.to_uppercase(), fingerprint())),
            ["class_link.token"]
        );
    }

    #[test]
    fn introductions_are_bounded_and_plain() {
        let run = RunSummary {
            id: RunId::parse("r1").unwrap(),
            config: "cpu_tiny".into(),
            layout: Sizes { tp: 1, cp: 1, dp: 2, pp: 1 },
            state: RunState::Running,
            loss: Some(0.5),
            samples_per_sec: None,
        };
        let good = Introduction { name: "learner1".into(), runs: Some(vec![run.clone()]) };
        assert!(good.problems().is_empty());
        let mut bad = Introduction { name: "<script>".into(), runs: Some(vec![run.clone(); MAX_SUMMARISED_RUNS + 1]) };
        if let Some(runs) = bad.runs.as_mut() {
            runs[1].loss = Some(f64::NAN);
            runs[2].layout.pp = 2;
        }
        let fields: Vec<String> = bad.problems().0.into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["name", "runs", "runs[1]", "runs[2]"]);
        assert_eq!(run.layout_text(), "tp=1 cp=1 dp=2");
        assert!(!follower_name_ok("") && !follower_name_ok(" x") && follower_name_ok("Ada L."));
    }

    #[test]
    fn a_shared_run_is_copied_under_its_learners_name_when_that_fits() {
        let run = RunId::parse("20261125-101500-3").unwrap();
        assert_eq!(shared_copy_id("Ada L.", &run).unwrap().as_str(), "l-Ada_L_-20261125-101500-3");
        assert_ne!(shared_copy_id("learner1", &run), shared_copy_id("learner2", &run));
        assert!(shared_copy_id(&"n".repeat(MAX_FOLLOWER_NAME_LEN), &RunId::parse(&"r".repeat(40)).unwrap()).is_none());
    }

    #[test]
    fn class_states_are_tagged() {
        let joined = ClassState::Joined { address: "h:1".into() };
        assert_eq!(serde_json::to_value(&joined).unwrap(), serde_json::json!({"state": "joined", "address": "h:1"}));
        assert_eq!(serde_json::from_str::<ClassState>(r#"{"state": "alone"}"#).unwrap(), ClassState::Alone);
    }
}
