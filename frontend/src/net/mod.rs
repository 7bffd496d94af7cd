//! Talking to the server: URLs relative to the page, the access token, HTTP fetches (with the
//! token in a header) and the WebSocket with its reconnection.

pub mod fetch;
pub mod fetched;
pub mod object_url;
pub mod urls;
pub mod ws;

/// This tab's sessionStorage: it survives reloads of the tab, is never sent anywhere by the
/// browser (unlike a cookie, which a proxy would forward to other users' servers on a shared
/// login node), and dies with the tab.
pub fn session_storage() -> Option<web_sys::Storage> {
    leptos::prelude::window().session_storage().ok().flatten()
}
