//! The page, the built front-end and the chapter files, delivered fast and never stale.
//!
//! - The page is `dist/index.html`, written by the build from `frontend/index.html`; it names
//!   the directory of the module's files by their content's hash (`dist/scalebook-<hash>/`: the
//!   glue, the main module, and the parts fetched when a chapter first needs them).
//! - Those files never change under their name, so browsers may keep them for a year
//!   without asking again; everything else (the page, `boot.js`, the style, the chapters, which
//!   instructors edit while serving) is `no-cache`: reused only after a conditional request
//!   (`If-Modified-Since`) says it is unchanged. An upgrade therefore always reaches a browser.
//! - The build writes gzip and brotli copies of the module's files (`.gz`, `.br`), picked by the
//!   request's `Accept-Encoding`; the other files are compressed as they are sent.
//!   jupyter-server-proxy passes compressed responses through unchanged, so this is the only
//!   place compression can happen.

use std::path::{Path, PathBuf};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};

use crate::Error;

/// The page, relative to the static directory.
pub const PAGE: &str = "dist/index.html";
/// What the browser may cache for good: the module's files, in a directory named by their
/// content's hash.
const IMMUTABLE_PREFIX: &str = "/dist/scalebook-";

/// Checks that the front-end was built into `dir` before the server starts (the page is
/// written last, after the module it names).
pub fn check(dir: &Path) -> Result<(), Error> {
    if dir.join(PAGE).is_file() { Ok(()) } else { Err(Error::FrontendNotBuilt { dir: dir.to_owned(), missing: PAGE }) }
}

/// The router serving `dir` at the root, with `/` answered by the page.
pub fn router<S: Clone + Send + Sync + 'static>(dir: PathBuf) -> Router<S> {
    let page = ServeFile::new(dir.join(PAGE)).precompressed_br().precompressed_gzip();
    let files = ServeDir::new(&dir).precompressed_br().precompressed_gzip();
    Router::new()
        .route_service("/", page.clone())
        .route_service("/index.html", page)
        .fallback_service(files)
        .layer(CompressionLayer::new().br(true).gzip(true))
        .layer(middleware::from_fn(cache_control))
        .layer(middleware::from_fn(no_nul))
}

/// A path with a NUL byte (`%00`) names no file: not found, said before the file service
/// asks the file system, which cannot take such a name (a `HEAD` would answer 500).
async fn no_nul(request: Request, next: Next) -> Response {
    if request.uri().path().contains("%00") {
        return StatusCode::NOT_FOUND.into_response();
    }
    next.run(request).await
}

async fn cache_control(request: Request, next: Next) -> Response {
    let immutable = request.uri().path().starts_with(IMMUTABLE_PREFIX);
    let mut response = next.run(request).await;
    if response.status().is_success() || response.status() == axum::http::StatusCode::NOT_MODIFIED {
        let policy = if immutable { "public, max-age=31536000, immutable" } else { "no-cache" };
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(policy));
    }
    response
}
