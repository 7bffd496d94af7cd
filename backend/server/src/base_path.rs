//! Serving under a URL prefix (`--base-path`), for jupyter-server-proxy's keep-prefix form
//! (`absolute_url: True`), where the app sees `/user/NAME/proxy/absolute/8080/...`.
//!
//! The prefix is stripped before routing, and a path outside it is routed unchanged, so one
//! server answers both the keep-prefix form and the stripping form (`/...`): a user who picks
//! the wrong proxy setting still gets the app. `/base` and `/base/` both reach the page (the
//! page itself adds the missing slash before loading anything relative).

use axum::extract::Request;
use axum::http::Uri;
use axum::http::uri::PathAndQuery;

use crate::Error;

/// A normalised prefix: starts with `/`, no trailing `/`, never just `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasePath(String);

impl BasePath {
    /// `None` for an empty prefix or `/` (serving at the root needs no stripping).
    pub fn parse(text: &str) -> Result<Option<BasePath>, Error> {
        let trimmed = text.trim_matches('/');
        if trimmed.is_empty() {
            return Ok(None);
        }
        let chars_ok = trimmed.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '/'));
        let segments_ok = trimmed.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
        if chars_ok && segments_ok { Ok(Some(BasePath(format!("/{trimmed}")))) } else { Err(Error::BadBasePath(text.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path below the prefix (`/base` -> `/`, `/base/api/x` -> `/api/x`), or `None` for
    /// a path outside it (`/basement` is outside `/base`).
    fn strip<'a>(&self, path: &'a str) -> Option<&'a str> {
        match path.strip_prefix(self.0.as_str())? {
            "" => Some("/"),
            rest if rest.starts_with('/') => Some(rest),
            _ => None,
        }
    }

    /// Rewrites a request under the prefix to the path below it.
    pub fn rewrite(&self, mut request: Request) -> Request {
        let uri = request.uri();
        if let Some(rest) = self.strip(uri.path()) {
            let path_and_query = match uri.query() {
                Some(q) => format!("{rest}?{q}"),
                None => rest.to_owned(),
            };
            let mut parts = uri.clone().into_parts();
            if let Ok(pq) = PathAndQuery::try_from(path_and_query) {
                parts.path_and_query = Some(pq);
                if let Ok(new_uri) = Uri::from_parts(parts) {
                    *request.uri_mut() = new_uri;
                }
            }
        }
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(base: &BasePath, uri: &str) -> String {
        let request = Request::builder().uri(uri).body(axum::body::Body::empty()).unwrap();
        base.rewrite(request).uri().to_string()
    }

    #[test]
    fn prefixes_are_normalised_and_odd_ones_refused() {
        assert_eq!(BasePath::parse("").unwrap(), None);
        assert_eq!(BasePath::parse("/").unwrap(), None);
        assert_eq!(BasePath::parse("user/ann/proxy/absolute/8080/").unwrap().unwrap().as_str(), "/user/ann/proxy/absolute/8080");
        for bad in ["/a/../b", "/a//b", "/a b", "/a?x", "/a%2F"] {
            assert!(BasePath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_under_the_prefix_lose_it_and_others_pass_unchanged() {
        let base = BasePath::parse("/user/ann/proxy/absolute/8080").unwrap().unwrap();
        assert_eq!(rewritten(&base, "/user/ann/proxy/absolute/8080"), "/");
        assert_eq!(rewritten(&base, "/user/ann/proxy/absolute/8080/"), "/");
        assert_eq!(rewritten(&base, "/user/ann/proxy/absolute/8080/api/runs?token=t"), "/api/runs?token=t");
        assert_eq!(rewritten(&base, "/user/ann/proxy/absolute/80801/x"), "/user/ann/proxy/absolute/80801/x");
        assert_eq!(rewritten(&base, "/api/health?token=t"), "/api/health?token=t");
    }
}
