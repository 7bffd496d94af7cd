//! Plain HTTP GETs for the files the page reads once (chapters, configs, clusters, baseline).
//! Everything live goes over the WebSocket: proxies buffer ordinary responses.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// The body of `url` as text, or a message saying why not (the server's own message for an
/// API error, e.g. a missing token).
pub async fn text(url: &str) -> Result<String, String> {
    let response = get(url).await?;
    let body = JsFuture::from(response.text().map_err(|e| describe(&e))?).await.map_err(|e| describe(&e))?;
    Ok(body.as_string().unwrap_or_default())
}

/// The body of `url` as bytes (a binary file: the baseline's event file), or why not.
pub async fn bytes(url: &str) -> Result<Vec<u8>, String> {
    let response = get(url).await?;
    let body = JsFuture::from(response.array_buffer().map_err(|e| describe(&e))?).await.map_err(|e| describe(&e))?;
    Ok(js_sys::Uint8Array::new(&body).to_vec())
}

/// The response to a GET of `url` when it succeeded; the server's message when it did not.
async fn get(url: &str) -> Result<web_sys::Response, String> {
    let window = leptos::prelude::window();
    let response = JsFuture::from(window.fetch_with_str(url)).await.map_err(|e| format!("cannot reach the server: {}", describe(&e)))?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| "the fetch did not return a response".to_owned())?;
    if response.ok() {
        return Ok(response);
    }
    let body = JsFuture::from(response.text().map_err(|e| describe(&e))?).await.map_err(|e| describe(&e))?;
    Err(error_message(response.status(), &body.as_string().unwrap_or_default()))
}

/// The API answers errors as `{"code": ..., "message": ...}`; anything else is shown as is.
fn error_message(status: u16, body: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(200).collect());
    format!("HTTP {status}: {message}")
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
        let body = r#"{"code": "unauthorized", "message": "missing token: open the URL"}"#;
        assert_eq!(error_message(401, body), "HTTP 401: missing token: open the URL");
        assert_eq!(error_message(404, "Not Found\n"), "HTTP 404: Not Found");
    }
}
