//! Plain HTTP GETs for the files the page reads once (chapters, configs, clusters, baseline)
//! and the pictures it shows (weather maps). Everything live goes over the WebSocket: proxies
//! buffer ordinary responses. API requests carry the token in Scalebook's own header
//! ([`TOKEN_HEADER`]), never in the URL, which proxies and servers write to their logs, nor in
//! `Authorization`, which Jupyter's proxy would take for a JupyterHub token and send its hub.

use gloo_net::http::{Request, Response};
use scalebook_shared::protocol::TOKEN_HEADER;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use super::urls;

/// The body of `url` as text, or a message saying why not (the server's own message for an
/// API error, e.g. a missing token).
pub async fn text(url: &str) -> Result<String, String> {
    get(url).await?.text().await.map_err(|e| e.to_string())
}

/// The body of `url` as bytes (a binary file: the baseline's event file), or why not.
pub async fn bytes(url: &str) -> Result<Vec<u8>, String> {
    get(url).await?.binary().await.map_err(|e| e.to_string())
}

/// The body of `url` as a blob (a picture, shown through an object URL), or why not. gloo's
/// response has no blob: the browser's own response gives it.
pub async fn blob(url: &str) -> Result<web_sys::Blob, String> {
    let response = web_sys::Response::from(get(url).await?);
    let body = JsFuture::from(response.blob().map_err(|e| describe(&e))?).await.map_err(|e| describe(&e))?;
    body.dyn_into().map_err(|_| "the server's answer is not a file".to_owned())
}

/// The response to a GET of `url` when it succeeded; the server's message when it did not.
async fn get(url: &str) -> Result<Response, String> {
    let mut request = Request::get(url);
    // Only the API needs the token; the page's own files (chapters, the baseline) never see it.
    if let Some(token) = urls::token().filter(|_| urls::is_api(url)) {
        request = request.header(TOKEN_HEADER, &token);
    }
    let response = request.send().await.map_err(|e| format!("cannot reach the server: {e}"))?;
    if response.ok() {
        return Ok(response);
    }
    let body = response.text().await.map_err(|e| e.to_string())?;
    Err(error_message(response.status(), &body))
}

/// The API answers errors as `{"code": ..., "message": ...}`; anything else is shown as is.
fn error_message(status: u16, body: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(200).collect());
    match status {
        401 => format!("HTTP 401: {message}: {}", urls::UNAUTHORIZED_HINT),
        _ => format!("HTTP {status}: {message}"),
    }
}

fn describe(value: &wasm_bindgen::JsValue) -> String {
    value.as_string().or_else(|| js_sys::JSON::stringify(value).ok().and_then(|s| s.as_string())).unwrap_or_else(|| "unknown error".into())
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn api_errors_show_the_servers_message() {
        let body = r#"{"code": "unauthorized", "message": "missing token"}"#;
        assert_eq!(error_message(401, body), format!("HTTP 401: missing token: {}", urls::UNAUTHORIZED_HINT));
        assert_eq!(error_message(404, "Not Found\n"), "HTTP 404: Not Found");
    }
}
