//! The per-launch tokens. On a shared login node every user can reach every localhost port, and
//! jupyter-server-proxy forwards the user's cookies to whatever listens there; so the API and
//! the WebSocket answer only requests that carry a token printed at start, in the page's header
//! ([`TOKEN_HEADER`]) or as `Authorization: Bearer ...`, in a WebSocket's first message (the
//! page's socket), or in
//! the URL (`?token=...`, the old links' way, still accepted). No link Scalebook prints carries
//! a token where a server would log it: the links keep it in the fragment (`#token=...`), which
//! browsers never send. Cookies are never looked at.
//!
//! There are two tokens, one per [`Role`]: the instructor's, and the viewer's handed to the
//! room. The viewer's is derived from the instructor's by a one-way hash (or given), so a
//! learner holding it cannot work out the instructor's. The token a request carries decides
//! its role, which travels in the request's extensions to the handlers that enforce it.
//!
//! The static files (the page shell, the compiled front-end, the chapter texts) are public
//! tutorial material and carry no data, so they load without the token: the page reads it from
//! its link's fragment and sends it with every API call and the WebSocket.

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use scalebook_shared::protocol::{ErrorCode, FollowerIdentity, Role, TOKEN_HEADER};

use crate::Error;
use crate::class::{ClassKey, Pass};
use crate::gate::Connection;
use crate::refusal::ApiError;
pub use crate::token::Token;

/// A server's two tokens (on a TCP port; a private Unix socket has none).
#[derive(Debug, Clone)]
pub struct Tokens {
    instructor: Token,
    viewer: Token,
}

impl Tokens {
    /// The instructor's token and the viewer's: `viewer` when given, else derived.
    pub fn new(instructor: Token, viewer: Option<Token>) -> Result<Tokens, Error> {
        let viewer = viewer.unwrap_or_else(|| instructor.viewer());
        if instructor.matches(viewer.as_str()) {
            return Err(Error::SameTokens);
        }
        Ok(Tokens { instructor, viewer })
    }

    pub fn instructor(&self) -> &Token {
        &self.instructor
    }

    pub fn viewer(&self) -> &Token {
        &self.viewer
    }

    /// The role of a request presenting `presented`, if it is one of the tokens. Both
    /// comparisons always run, so the time taken says nothing about which token was close.
    pub fn role_of(&self, presented: &str) -> Option<Role> {
        let instructor = self.instructor.matches(presented);
        let viewer = self.viewer.matches(presented);
        match (instructor, viewer) {
            (true, _) => Some(Role::Instructor),
            (false, true) => Some(Role::Viewer),
            (false, false) => None,
        }
    }
}

/// Who may come in through one listener, and as what.
#[derive(Clone)]
pub enum Keyring {
    /// A private Unix socket: only its owner can connect, and every connection is theirs.
    Private,
    /// The main listener's two links: the instructor's and the viewer's.
    Links(Arc<Tokens>),
    /// The class listener: the current follower token, and nothing else (never the
    /// instructor's, whose server it is).
    Class(Arc<ClassKey>),
}

impl Keyring {
    /// The role of a client presenting `presented`, if this listener takes it. The class
    /// listener's followers are admitted by [`authorize`] alone, which also says who they are.
    pub fn role_of(&self, presented: &str) -> Option<Role> {
        match self {
            Keyring::Private => Some(Role::Instructor),
            Keyring::Links(tokens) => tokens.role_of(presented),
            Keyring::Class(_) => None,
        }
    }
}

/// Who a follower that came in with `pass` on `connection` is: the invited learner, or with the
/// room's link the Unix account of its server (which must be on this host); else the refusal.
fn follower_identity(pass: Pass, connection: Option<&Connection>) -> Result<FollowerIdentity, String> {
    match pass {
        Pass::Invited(name) => Ok(FollowerIdentity::Invited { name }),
        Pass::Room => connection.and_then(Connection::account).map(|user| FollowerIdentity::Account { user }).ok_or_else(|| {
            "this is the room's class link, which identifies a learner by their account on the instructor's host; from another host, join with an invitation of your own: ask your instructor for one (Class panel, Invite)".to_owned()
        }),
    }
}

/// How a request came in: with its role decided, or (a WebSocket opened without a token,
/// as the page opens it so that no URL carries the token) still to show a token in its first
/// message, checked against the keyring.
#[derive(Clone)]
pub enum Admission {
    Role(Role),
    Pending(Keyring),
}

/// The token a request presents: in the page's header ([`TOKEN_HEADER`]), as a bearer token
/// (other clients), or as the `token` query parameter (the old links' way, still accepted).
fn presented(request: &Request) -> Option<&str> {
    let headers = request.headers();
    let from_page = headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok());
    let from_bearer = || headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let from_query = || request.uri().query().and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    from_page.or_else(from_bearer).or_else(from_query)
}

/// Middleware: refuses requests without a token the listener's keyring takes, and puts the
/// request's [`Admission`] in its extensions for the handlers. A WebSocket upgrade without a
/// token is let through as pending: the socket must show one first (see `crate::ws`).
///
/// A viewer or follower may only read: every API route is a GET today, and a request of any
/// other method from them is refused here, so a route added later that changes state is never
/// open to the room by accident.
pub async fn authorize(State(keyring): State<Keyring>, mut request: Request, next: Next) -> Response {
    let connection = request.extensions().get::<ConnectInfo<Connection>>().map(|ConnectInfo(c)| c.clone());
    let role = match (&keyring, presented(&request)) {
        (Keyring::Private, _) => Role::Instructor,
        (Keyring::Class(key), Some(given)) => match key.admit(given).map(|pass| follower_identity(pass, connection.as_ref())) {
            Some(Ok(identity)) => {
                request.extensions_mut().insert(identity);
                Role::Follower
            }
            Some(Err(why)) => return refusal(StatusCode::FORBIDDEN, &why),
            None => {
                return refusal(StatusCode::UNAUTHORIZED, "wrong token: the class link was replaced; ask your instructor for the new one");
            }
        },
        (_, Some(given)) => match keyring.role_of(given) {
            Some(role) => role,
            None => {
                return refusal(StatusCode::UNAUTHORIZED, "wrong token: open the link `scalebook serve` printed (it ends in #token=...)");
            }
        },
        // A follower server shows its token in the upgrade: who it is is decided there.
        (_, None) if is_websocket_upgrade(&request) && !matches!(keyring, Keyring::Class(_)) => {
            request.extensions_mut().insert(Admission::Pending(keyring));
            return next.run(request).await;
        }
        (_, None) => {
            return refusal(
                StatusCode::UNAUTHORIZED,
                "missing token: open the link `scalebook serve` printed (it ends in #token=...), or send `Authorization: Bearer TOKEN`",
            );
        }
    };
    // The connection is no longer a stranger's (see `gate`).
    if let Some(connection) = &connection {
        connection.authenticated();
    }
    if !role.may_launch() && !matches!(*request.method(), Method::GET | Method::HEAD) {
        return refusal(StatusCode::FORBIDDEN, "the viewer link only reads: only the instructor's link can change anything");
    }
    request.extensions_mut().insert(Admission::Role(role));
    next.run(request).await
}

fn is_websocket_upgrade(request: &Request) -> bool {
    request.headers().get(header::UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn refusal(status: StatusCode, message: &str) -> Response {
    let code = if status == StatusCode::FORBIDDEN { ErrorCode::Forbidden } else { ErrorCode::Unauthorized };
    ApiError::new(status, code, message).into_response()
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::token::hex;

    fn request(uri: &str, bearer: Option<&str>) -> Request {
        let mut builder = Request::builder().uri(uri);
        if let Some(b) = bearer {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn generated_tokens_are_long_random_and_url_safe() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.as_str().len(), 64);
        assert!(Token::given(a.as_str()).is_ok());
    }

    #[test]
    fn the_viewer_token_is_derived_one_way_and_is_url_safe() {
        let instructor = Token::given("classroom-demo-2025").unwrap();
        let viewer = instructor.viewer();
        // The same instructor token always gives the same viewer link (it survives a restart).
        assert_eq!(viewer.as_str(), Token::given("classroom-demo-2025").unwrap().viewer().as_str());
        assert_eq!(viewer.as_str().len(), 32);
        assert!(viewer.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert!(Token::given(viewer.as_str()).is_ok(), "a derived token must be a valid token");
        assert!(!viewer.as_str().contains(instructor.as_str()) && viewer.as_str() != instructor.as_str());
        assert_ne!(viewer.as_str(), Token::given("classroom-demo-2026").unwrap().viewer().as_str());
        // Pinned: a change of the derivation would change every class's viewer link.
        let expected = hex(&Sha256::digest(b"scalebook viewer token v1\0classroom-demo-2025")[..16]);
        assert_eq!(viewer.as_str(), expected);
    }

    #[test]
    fn the_token_presented_decides_the_role() {
        let tokens = Tokens::new(Token::given("instructor-0123456789").unwrap(), None).unwrap();
        let viewer = tokens.viewer().as_str().to_owned();
        for (uri, bearer, role) in [
            ("/api/runs?token=instructor-0123456789", None, Some(Role::Instructor)),
            (&format!("/api/runs?token={viewer}"), None, Some(Role::Viewer)),
            ("/api/runs", Some("instructor-0123456789"), Some(Role::Instructor)),
            ("/api/runs", Some(viewer.as_str()), Some(Role::Viewer)),
            ("/api/runs?token=instructor-012345678", None, None),
            ("/api/runs", Some(&viewer[1..]), None),
        ] {
            assert_eq!(presented(&request(uri, bearer)).and_then(|p| tokens.role_of(p)), role, "{uri} {bearer:?}");
        }
    }

    #[test]
    fn a_viewer_token_may_be_given_but_never_the_instructors() {
        let instructor = Token::given("instructor-0123456789").unwrap();
        let given = Tokens::new(instructor.clone(), Some(Token::given("room-token-0123456789").unwrap())).unwrap();
        assert_eq!(given.viewer().as_str(), "room-token-0123456789");
        assert!(matches!(Tokens::new(instructor.clone(), Some(instructor)), Err(Error::SameTokens)));
    }

    #[test]
    fn given_tokens_must_be_long_and_url_safe() {
        assert!(Token::given("classroom-demo-2025").is_ok());
        for bad in ["short", "has space in it!!", "a&token=b-padding-padding", ""] {
            assert!(Token::given(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_token_comes_from_the_query_or_a_bearer_header_and_must_match_exactly() {
        let token = Token::given("0123456789abcdef").unwrap();
        assert_eq!(presented(&request("/api/runs?x=1&token=abc", None)), Some("abc"));
        assert_eq!(presented(&request("/api/runs", Some("xyz"))), Some("xyz"));
        assert_eq!(presented(&request("/api/runs?mytoken=abc", None)), None);
        assert!(token.matches("0123456789abcdef"));
        for wrong in ["0123456789abcdeF", "0123456789abcde", "0123456789abcdef0", ""] {
            assert!(!token.matches(wrong), "{wrong}");
        }
    }
}
