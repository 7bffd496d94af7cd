//! The class panel's decisions, apart from the page: whether the link a learner pastes is one
//! (each problem named as [`ClassLink::parse`] names it), and where this server stands with its
//! class, in words.

use scalebook_shared::Problems;
use scalebook_shared::protocol::{ClassLink, ClassState, MAX_INVITATION_NAME_LEN, invitation_name_ok};

/// What the "Join a class" field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkCheck {
    /// Nothing yet: nothing to complain about, nothing to join.
    Empty,
    /// Not a class link: every problem, each naming its part of the link.
    Broken(Problems),
    /// A class link, ready to join.
    Ready(ClassLink),
}

/// Checks the field's `text` as the learner types or pastes it.
pub fn check_link(text: &str) -> LinkCheck {
    if text.trim().is_empty() {
        return LinkCheck::Empty;
    }
    match ClassLink::parse(text) {
        Ok(link) => LinkCheck::Ready(link),
        Err(problems) => LinkCheck::Broken(problems),
    }
}

/// What a pasted link that is one says it is: the room's, or one learner's invitation.
pub fn link_words(link: &ClassLink) -> String {
    match &link.invite {
        Some(name) => format!("an invitation for {name} to the class at {}", link.address()),
        None => format!("a class link to {}", link.address()),
    }
}

/// What is wrong with `name` as the learner an invitation is for (`None`: nothing, or nothing
/// typed yet).
pub fn invitation_problem(name: &str) -> Option<String> {
    (!name.is_empty() && !invitation_name_ok(name)).then(|| {
        format!("name: 1 to {MAX_INVITATION_NAME_LEN} lowercase letters, digits, `_` or `-`, starting with a letter (their user name, say)")
    })
}

/// Where this server stands with the class it follows, as the panel says it.
pub fn state_words(state: &ClassState) -> String {
    match state {
        ClassState::Alone => "not in a class".into(),
        ClassState::Connecting { address, attempt: 0, .. } => format!("reaching {address}…"),
        // As the connection indicator counts: the attempt now under way; and what the last one
        // met (a port someone else holds is tried for as long as it takes).
        ClassState::Connecting { address, attempt, warning } => match warning {
            Some(warning) => format!("reaching {address}, attempt {}… (the last one: {warning})", attempt + 1),
            None => format!("reaching {address}, attempt {}…", attempt + 1),
        },
        ClassState::Joined { address } => format!("following the class at {address}"),
        ClassState::Refused { address, reason } => format!("refused by {address}: {reason}"),
    }
}

/// A stable name of the state, for styling and tests.
pub fn state_name(state: &ClassState) -> &'static str {
    match state {
        ClassState::Alone => "alone",
        ClassState::Connecting { .. } => "connecting",
        ClassState::Joined { .. } => "joined",
        ClassState::Refused { .. } => "refused",
    }
}

/// Whether the panel offers "Join a class": on a learner's own server; not on one that holds a
/// class of its own (`has_listener`), unless it is in another class anyway (then it says so).
pub fn offers_join(has_listener: bool, state: &ClassState) -> bool {
    !has_listener || *state != ClassState::Alone
}

/// The command that serves with a class listener, as the README's "A class of many
/// Scalebooks" gives it: what the panel tells an instructor whose server has none.
pub const HOLD_COMMAND: &str = "scalebook serve --class-listen 0.0.0.0:8443";

/// Whether the panel says how to hold a class: on a server without a class listener, where
/// "Join a class" would otherwise be all it offers, so an instructor learns how to start one.
pub fn offers_hold(has_listener: bool) -> bool {
    !has_listener
}

/// Whether the page offers to present: not while this server follows a class, whose
/// instructor's presentation it relays as its own (a page already presenting may stop).
pub fn offers_present(presenting: bool, state: &ClassState) -> bool {
    presenting || *state == ClassState::Alone
}

/// Whether the learner may paste a link to join: not while a class is joined or being reached
/// (leave it first); again after a refusal, which nothing retries.
pub fn may_join(state: &ClassState) -> bool {
    matches!(state, ClassState::Alone | ClassState::Refused { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn fields(text: &str) -> Vec<String> {
        match check_link(text) {
            LinkCheck::Broken(problems) => problems.0.into_iter().map(|p| p.field).collect(),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn a_link_says_whose_it_is() {
        let room = format!("scalebook-class://h:1/#token={}&sha256={}", "0a".repeat(16), "ab".repeat(32));
        let LinkCheck::Ready(link) = check_link(&room) else { panic!("not a link") };
        assert_eq!(link_words(&link), "a class link to h:1");
        let LinkCheck::Ready(invitation) = check_link(&format!("{room}&invite=ada")) else { panic!("not a link") };
        assert_eq!(link_words(&invitation), "an invitation for ada to the class at h:1");
    }

    #[test]
    fn an_invitations_name_is_checked_as_it_is_typed() {
        assert_eq!(invitation_problem(""), None);
        assert_eq!(invitation_problem("ada_l"), None);
        for bad in ["Ada", "ada l", "1ada"] {
            assert!(invitation_problem(bad).unwrap().starts_with("name: "), "{bad}");
        }
    }

    #[test]
    fn the_link_field_names_each_broken_part_and_nothing_while_empty() {
        assert_eq!(check_link(""), LinkCheck::Empty);
        assert_eq!(check_link("  \n"), LinkCheck::Empty);
        // A web address pasted by mistake: the scheme is named, nothing else.
        assert_eq!(fields("http://login01:8443/#token=x"), ["class_link"]);
        // Half a link (cut off after the host): every missing part.
        assert_eq!(fields("scalebook-class://login01"), ["class_link.port", "class_link.token", "class_link.sha256"]);
        let fingerprint = "ab".repeat(32);
        assert_eq!(fields(&format!("scalebook-class://login01:8443/#token={TOKEN}&sha256={}", &fingerprint[..10])), ["class_link.sha256"]);
        let text = format!(" scalebook-class://login01:8443/#token={TOKEN}&sha256={fingerprint}\n");
        let LinkCheck::Ready(link) = check_link(&text) else { panic!("a whole link is ready") };
        assert_eq!(link.address(), "login01:8443");
    }

    #[test]
    fn the_class_state_reads_as_words() {
        let address = || "login01:8443".to_owned();
        assert_eq!(state_words(&ClassState::Alone), "not in a class");
        assert_eq!(state_words(&ClassState::Connecting { address: address(), attempt: 0, warning: None }), "reaching login01:8443…");
        let retrying = ClassState::Connecting { address: address(), attempt: 2, warning: None };
        assert_eq!(state_words(&retrying), "reaching login01:8443, attempt 3…");
        let squatted = ClassState::Connecting { address: address(), attempt: 2, warning: Some("not the instructor's".into()) };
        assert_eq!(state_words(&squatted), "reaching login01:8443, attempt 3… (the last one: not the instructor's)");
        assert!(!may_join(&squatted), "still in the class: it comes back by itself");
        assert_eq!(state_words(&ClassState::Joined { address: address() }), "following the class at login01:8443");
        let refused = ClassState::Refused { address: address(), reason: "removed by the instructor".into() };
        assert_eq!(state_words(&refused), "refused by login01:8443: removed by the instructor");
        assert!(may_join(&ClassState::Alone) && may_join(&refused));
        assert!(!may_join(&ClassState::Joined { address: address() }));
        assert_eq!(state_name(&refused), "refused");
    }

    #[test]
    fn a_server_in_a_class_neither_presents_nor_offers_its_own_class_a_second_one() {
        let joined = ClassState::Joined { address: "login01:8443".into() };
        // A learner's own server: join, and no presenting while in the class.
        assert!(offers_join(false, &ClassState::Alone) && offers_join(false, &joined));
        assert!(offers_present(false, &ClassState::Alone) && !offers_present(false, &joined));
        assert!(offers_present(true, &joined), "a page presenting may still stop");
        // The instructor's server, with its class listener: no "Join a class" to confuse.
        assert!(!offers_join(true, &ClassState::Alone));
        assert!(offers_join(true, &joined), "in a class all the same: say so, with Leave");
    }

    #[test]
    fn a_server_without_a_class_listener_says_how_to_hold_a_class() {
        assert!(offers_hold(false) && !offers_hold(true));
        // The flag `scalebook serve` starts a class listener with, and an address to listen on.
        assert!(HOLD_COMMAND.starts_with("scalebook serve --class-listen "), "{HOLD_COMMAND}");
        assert!(HOLD_COMMAND.rsplit(' ').next().is_some_and(|address| address.parse::<std::net::SocketAddr>().is_ok()));
    }
}
