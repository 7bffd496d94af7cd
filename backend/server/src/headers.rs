//! Security headers on every response. The page holds the token in its address, so it must
//! never be framed by another site (`frame-ancestors`), leak its address to another
//! (`Referrer-Policy`), run a script it did not ship (`Content-Security-Policy`, which allows the
//! page's own files, its WebAssembly, and its one inline script by hash), or have a file
//! sniffed into another type (`X-Content-Type-Options`).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::static_files::PAGE;

/// The headers for the page in `static_dir`, whose inline scripts are allowed by their hash
/// (read once at start: the page changes only with a rebuild, which restarts the server).
pub fn for_page(static_dir: &Path) -> Result<HeaderMap, Error> {
    let page = std::fs::read_to_string(static_dir.join(PAGE))?;
    let hashes: Vec<String> = inline_scripts(&page)
        .map(|script| format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script.as_bytes()))))
        .collect();
    let policy = format!(
        "default-src 'self'; script-src 'self' 'wasm-unsafe-eval' {}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; \
         connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'; object-src 'none'",
        hashes.join(" ")
    );
    let mut headers = HeaderMap::new();
    let policy = HeaderValue::from_str(&policy).map_err(|e| Error::Io(std::io::Error::other(e)))?;
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("SAMEORIGIN"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
    Ok(headers)
}

/// The text of each `<script>` without a `src`, exactly as the browser hashes it.
fn inline_scripts(page: &str) -> impl Iterator<Item = &str> {
    page.split("<script").skip(1).filter_map(|rest| {
        let (tag, body) = rest.split_once('>')?;
        let (script, _) = body.split_once("</script>")?;
        (!tag.contains("src=")).then_some(script)
    })
}

/// Adds `headers` to every response that does not set them itself.
pub async fn add(State(headers): State<Arc<HeaderMap>>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    for (name, value) in headers.iter() {
        response.headers_mut().entry(name).or_insert_with(|| value.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_inline_scripts_are_hashed_and_exactly() {
        let page = "<head><script>\n  fix();\n</script><script type=\"module\" src=\"boot.js\"></script></head>";
        assert_eq!(inline_scripts(page).collect::<Vec<_>>(), ["\n  fix();\n"]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("dist")).unwrap();
        std::fs::write(dir.path().join(PAGE), page).unwrap();
        let csp = for_page(dir.path()).unwrap()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_owned();
        // printf '\n  fix();\n' | openssl dgst -sha256 -binary | base64
        assert!(csp.contains("script-src 'self' 'wasm-unsafe-eval' 'sha256-STt1lwmjmCqd69iaduVgfksP+IWCVB+2eRa1kbVoaoE=';"), "{csp}");
        assert!(csp.contains("frame-ancestors 'self'"), "{csp}");
    }
}
