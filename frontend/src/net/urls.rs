//! Every URL the page uses, built relative to `document.baseURI`, so the same build works at
//! `/` and under any proxy prefix (jupyter-server-proxy strips `{base}/proxy/PORT` and the page
//! never learns it); and the per-launch access token, which the API and the WebSocket need.

use wasm_bindgen::JsValue;

/// Where this tab keeps the token: sessionStorage survives reloads of the tab but is never
/// sent anywhere by the browser, unlike a cookie (which the proxy would forward to other
/// users' servers on a shared login node).
const TOKEN_KEY: &str = "scalebook-token";

/// Reads `?token=` from the address the user opened, keeps it for this tab and removes it
/// from the address bar, so it does not end up on a projector, in a screenshot or in history.
pub fn adopt_token_from_address() {
    let window = leptos::prelude::window();
    let location = window.location();
    let Ok(search) = location.search() else { return };
    let Ok(address) = web_sys::Url::new(&location.href().unwrap_or_default()) else { return };
    let params = address.search_params();
    let Some(token) = params.get("token") else { return };
    if let Some(storage) = session_storage() {
        let _ = storage.set_item(TOKEN_KEY, &token);
    }
    if search.is_empty() {
        return;
    }
    params.delete("token");
    let rest = params.to_string().as_string().unwrap_or_default();
    let query = if rest.is_empty() { String::new() } else { format!("?{rest}") };
    let cleaned = format!("{}{query}{}", address.pathname(), address.hash());
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&cleaned));
    }
}

pub fn token() -> Option<String> {
    session_storage()?.get_item(TOKEN_KEY).ok().flatten()
}

fn session_storage() -> Option<web_sys::Storage> {
    leptos::prelude::window().session_storage().ok().flatten()
}

/// `path` resolved against the page's base URI (never against the origin's root).
pub fn resolve(path: &str) -> String {
    let base = leptos::prelude::document().base_uri().ok().flatten().unwrap_or_default();
    web_sys::Url::new_with_base(path, &base).map(|u| u.href()).unwrap_or_else(|_| path.to_owned())
}

/// An API URL (`api/<path>`) carrying the token.
pub fn api(path: &str) -> String {
    let url = resolve(&format!("api/{path}"));
    match token() {
        Some(token) => {
            let separator = if url.contains('?') { '&' } else { '?' };
            let token = String::from(js_sys::encode_uri_component(&token));
            format!("{url}{separator}token={token}")
        }
        None => url,
    }
}

/// The WebSocket URL: the API's `ws` endpoint with the scheme switched (`https` → `wss`).
pub fn websocket() -> String {
    to_websocket_scheme(&api("ws"))
}

pub fn to_websocket_scheme(http_url: &str) -> String {
    if let Some(rest) = http_url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = http_url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        http_url.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn websocket_urls_keep_everything_but_the_scheme() {
        assert_eq!(to_websocket_scheme("http://h:1/user/a/proxy/8080/api/ws?token=t"), "ws://h:1/user/a/proxy/8080/api/ws?token=t");
        assert_eq!(to_websocket_scheme("https://hub.example/x/api/ws"), "wss://hub.example/x/api/ws");
    }

    #[wasm_bindgen_test]
    fn paths_resolve_below_the_page_not_the_origin() {
        let base = leptos::prelude::document().base_uri().ok().flatten().unwrap();
        let without_query = base.split(['?', '#']).next().unwrap();
        let directory = &without_query[..=without_query.rfind('/').unwrap()];
        assert_eq!(resolve("chapters/index.json"), format!("{directory}chapters/index.json"));
        assert!(api("configs.yaml").starts_with(&format!("{directory}api/configs.yaml")));
    }
}
