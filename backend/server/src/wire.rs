//! The wire encoding of the protocol: every server message is one JSON text frame.

use axum::extract::ws::Utf8Bytes;

/// A message (or a reply with its request id) as one WebSocket text frame.
pub fn encode(message: &impl serde::Serialize) -> Utf8Bytes {
    // Serialising plain data (no maps with non-string keys) cannot fail.
    Utf8Bytes::from(serde_json::to_string(message).unwrap_or_default())
}
