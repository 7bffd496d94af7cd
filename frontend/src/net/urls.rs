//! Every URL the page uses, built relative to `document.baseURI`, so the same build works at
//! `/` and under any proxy prefix (jupyter-server-proxy strips `{base}/proxy/PORT` and the page
//! never learns it); and the per-launch access token, which the API and the WebSocket need.
//! The token never travels in a URL the page builds: proxies and servers log request lines,
//! so it goes in a header of its own (HTTP) or in the first message (the WebSocket).

use wasm_bindgen::JsValue;

use super::session_storage;

/// Where this tab keeps the token (see [`session_storage`]).
const TOKEN_KEY: &str = "scalebook-token";

/// What to do when the server refuses this page's token, said wherever a refusal shows: the
/// page cannot mend a wrong or missing token, only the printed link can.
pub const UNAUTHORIZED_HINT: &str =
    "open the link Scalebook printed when it started (the one ending in #token=…), or ask whoever started it for that link";

/// The fragment of an address split into the token it carries (`token=...`) and the rest,
/// which is the chapter route (`/slug`) if any. Parts are joined by `&`, in any order:
/// `#token=T`, `#/slug&token=T` and `#token=T&/slug` all carry `T`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// The token, when the fragment names a non-empty one.
    pub token: Option<String>,
    /// What the address keeps after `#` once the token is taken out (empty: no fragment).
    pub rest: String,
}

impl Fragment {
    /// Reads `fragment` (what follows `#`, without it).
    pub fn parse(fragment: &str) -> Fragment {
        let mut token = None;
        let mut rest = Vec::new();
        for part in fragment.split('&') {
            match part.strip_prefix("token=") {
                Some(value) => token = Some(value.to_owned()).filter(|t| !t.is_empty()),
                None if part.is_empty() => {}
                None => rest.push(part),
            }
        }
        Fragment { token, rest: rest.join("&") }
    }
}

/// Reads the token from the address the user opened (the fragment `#token=...` that
/// Scalebook prints, or the older query `?token=...`), keeps it for this tab and removes it
/// from the address bar, so it does not end up on a projector, in a screenshot or in history.
/// The chapter route (`#/slug`), if the address has one, stays. Says whether the address
/// carried a token: at start, or later when the link is pasted into the open tab.
pub fn adopt_token_from_address() -> bool {
    let window = leptos::prelude::window();
    let Ok(address) = web_sys::Url::new(&window.location().href().unwrap_or_default()) else { return false };
    let params = address.search_params();
    let from_query = params.get("token");
    let hash = address.hash();
    let fragment = Fragment::parse(hash.strip_prefix('#').unwrap_or(&hash));
    let from_fragment =
        fragment.token.as_deref().map(|t| js_sys::decode_uri_component(t).map(String::from).unwrap_or_else(|_| t.to_owned()));
    // The fragment is the form Scalebook prints now: it wins over a leftover query.
    let token = from_fragment.or(from_query.clone());
    if let (Some(token), Some(storage)) = (&token, session_storage()) {
        let _ = storage.set_item(TOKEN_KEY, token);
    }
    let fragment_changed = hash.strip_prefix('#').unwrap_or(&hash) != fragment.rest;
    if from_query.is_none() && !fragment_changed {
        return token.is_some();
    }
    params.delete("token");
    let query = params.to_string().as_string().filter(|q| !q.is_empty()).map(|q| format!("?{q}")).unwrap_or_default();
    let hash = if fragment.rest.is_empty() { String::new() } else { format!("#{}", fragment.rest) };
    let cleaned = format!("{}{query}{hash}", address.pathname());
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&cleaned));
    }
    token.is_some()
}

/// This tab's token, if its address ever carried one.
pub fn token() -> Option<String> {
    session_storage()?.get_item(TOKEN_KEY).ok().flatten()
}

/// `path` resolved against the page's base URI (never against the origin's root).
pub fn resolve(path: &str) -> String {
    let base = leptos::prelude::document().base_uri().ok().flatten().unwrap_or_default();
    web_sys::Url::new_with_base(path, &base).map(|u| u.href()).unwrap_or_else(|_| path.to_owned())
}

/// An API URL (`api/<path>`). It carries no token: [`super::fetch`] sends it in a header.
pub fn api(path: &str) -> String {
    resolve(&format!("api/{path}"))
}

/// The URL of a `code` block's listing (item `item` of the source file `path`): the server's
/// answer to a query, or, in the static edition, which no server answers, the file the export
/// wrote for it.
pub fn code_listing(path: &str, item: &str) -> String {
    match crate::edition::is_static() {
        true => api(&scalebook_shared::edition::code_listing(path, item)),
        false => api(&format!("code?path={}&item={}", encode(path), encode(item))),
    }
}

fn encode(text: &str) -> String {
    String::from(js_sys::encode_uri_component(text))
}

/// Whether `url` is one of this server's API URLs (the only requests that get the token).
pub fn is_api(url: &str) -> bool {
    url.starts_with(&resolve("api/"))
}

/// The WebSocket URL: the API's `ws` endpoint with the scheme switched (`https` → `wss`). The
/// token goes in the socket's first message (`hello`), not here.
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

    fn fragment(token: Option<&str>, rest: &str) -> Fragment {
        Fragment { token: token.map(str::to_owned), rest: rest.to_owned() }
    }

    #[wasm_bindgen_test]
    fn the_token_leaves_the_fragment_and_the_chapter_route_stays() {
        assert_eq!(Fragment::parse("token=3f9c"), fragment(Some("3f9c"), ""));
        assert_eq!(Fragment::parse("/rank-groups&token=3f9c"), fragment(Some("3f9c"), "/rank-groups"));
        assert_eq!(Fragment::parse("token=3f9c&/rank-groups"), fragment(Some("3f9c"), "/rank-groups"));
        // No token: the fragment is left as it is.
        assert_eq!(Fragment::parse("/rank-groups"), fragment(None, "/rank-groups"));
        assert_eq!(Fragment::parse(""), fragment(None, ""));
        // An empty token is no token, but it is still taken out of the address.
        assert_eq!(Fragment::parse("token=&/a"), fragment(None, "/a"));
    }

    #[wasm_bindgen_test]
    fn websocket_urls_keep_everything_but_the_scheme() {
        assert_eq!(to_websocket_scheme("http://h:1/user/a/proxy/8080/api/ws"), "ws://h:1/user/a/proxy/8080/api/ws");
        assert_eq!(to_websocket_scheme("https://hub.example/x/api/ws"), "wss://hub.example/x/api/ws");
    }

    #[wasm_bindgen_test]
    fn paths_resolve_below_the_page_not_the_origin_and_carry_no_token() {
        let base = leptos::prelude::document().base_uri().ok().flatten().unwrap();
        let without_query = base.split(['?', '#']).next().unwrap();
        let directory = &without_query[..=without_query.rfind('/').unwrap()];
        assert_eq!(resolve("chapters/index.json"), format!("{directory}chapters/index.json"));
        assert_eq!(api("configs.yaml"), format!("{directory}api/configs.yaml"));
        assert_eq!(websocket(), to_websocket_scheme(&format!("{directory}api/ws")));
        assert!(is_api(&api("runs/r1/maps")));
        assert!(!is_api(&resolve("chapters/index.json")));
    }
}
