//! Talking to the server: URLs relative to the page, the access token, HTTP fetches and the
//! WebSocket with its reconnection.

pub mod fetch;
pub mod urls;
pub mod ws;
