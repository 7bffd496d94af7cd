//! The per-launch token. On a shared login node every user can reach every localhost port, and
//! jupyter-server-proxy forwards the user's cookies to whatever listens there; so the API and
//! the WebSocket answer only requests that carry the token printed at start, in the URL
//! (`?token=...`, what a browser can put on a WebSocket) or as `Authorization: Bearer ...`.
//! Cookies are never looked at.
//!
//! The static files (the page shell, the compiled front-end, the chapter texts) are public
//! tutorial material and carry no data, so they load without the token: the page reads it from
//! its own URL and sends it with every API call and the WebSocket.

use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::Error;
use crate::gate::Connection;

/// A secret shared by the server and the page it prints the URL of.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// 32 random bytes from the operating system, as 64 hex digits.
    pub fn generate() -> Result<Token, Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A token chosen by the user (`--token`), which must be usable in a URL as is.
    pub fn given(text: &str) -> Result<Token, Error> {
        let url_safe = text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if url_safe && (16..=256).contains(&text.len()) { Ok(Token(text.to_owned())) } else { Err(Error::BadToken) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the first difference is, so the token cannot be
    /// guessed one character at a time from response times.
    fn matches(&self, presented: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), presented.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The token a request presents: the `token` query parameter or a bearer token.
fn presented(request: &Request) -> Option<&str> {
    let from_query = request.uri().query().and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    let from_header = || request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    from_query.or_else(from_header)
}

/// Middleware: refuses requests without the right token (when the server has one; on a
/// private Unix socket it has none).
pub async fn require_token(State(token): State<Option<Arc<Token>>>, request: Request, next: Next) -> Response {
    let Some(token) = token else { return next.run(request).await };
    let message = match presented(&request) {
        Some(given) if token.matches(given) => {
            // The connection is no longer a stranger's (see `gate`).
            if let Some(ConnectInfo(connection)) = request.extensions().get::<ConnectInfo<Connection>>() {
                connection.authenticated();
            }
            return next.run(request).await;
        }
        Some(_) => "wrong token: open the URL `scalebook serve` printed, which ends in ?token=...",
        None => "missing token: open the URL `scalebook serve` printed (it ends in ?token=...), or send `Authorization: Bearer TOKEN`",
    };
    (StatusCode::UNAUTHORIZED, Json(json!({ "code": "unauthorized", "message": message }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

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
