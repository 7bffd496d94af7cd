//! The WebSocket endpoint (`/api/ws`, behind the token check): one task per connection that
//! reads the client's messages, writes everything the server has for it, and sends a heartbeat
//! every 20 s so proxies (which drop sockets idle for 60 s) keep the connection.

mod limits;
mod outbox;
mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::response::Response;
use scalebook_shared::protocol::{Role, ServerMessage};
use tokio::time::{Instant, interval_at};

use self::session::{Session, forward_audience, forward_presentations, forward_updates};
use crate::clock::now;
use crate::state::AppState;
use crate::wire::encode;

/// Messages queued for one connection; a connection this far behind slows its subscriptions
/// down until they resynchronise from the run's files.
const OUT_QUEUE: usize = 1024;
/// How long a close frame may take to leave: a peer that reads nothing gets none.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times the protocol limit a frame may be before the socket layer itself refuses it
/// (closing the connection); below that, an oversize message gets an error and is dropped.
const HARD_LIMIT_FACTOR: usize = 16;

/// The connection keeps the role of the token its upgrade carried (see [`crate::auth`]).
pub async fn upgrade(State(state): State<Arc<AppState>>, Extension(role): Extension<Role>, upgrade: WebSocketUpgrade) -> Response {
    let hard_limit = state.ws.max_message_bytes * HARD_LIMIT_FACTOR;
    upgrade.max_message_size(hard_limit).max_frame_size(hard_limit).on_upgrade(move |socket| connection(state, role, socket))
}

async fn connection(state: Arc<AppState>, role: Role, mut socket: WebSocket) {
    let (out, mut outgoing) = outbox::outbox(OUT_QUEUE, state.ws.max_queued_bytes);
    let watchdog = out.clone();
    let updates = tokio::spawn(forward_updates(state.runs.clone(), out.clone()));
    let presentations = tokio::spawn(forward_presentations(state.classroom.presentations(), out.clone()));
    let audience = (role == Role::Instructor).then(|| tokio::spawn(forward_audience(state.classroom.audiences(), out.clone())));
    let period = state.ws.heartbeat;
    let mut heartbeat = interval_at(Instant::now() + period, period);
    let mut session = Session::new(state, role, out);
    let opened = Instant::now();
    let mut received = 0u64;
    tracing::info!(?role, "websocket opened");
    'connection: loop {
        let replies = tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    received += 1;
                    session.receive(text.as_str()).await
                }
                Some(Ok(Message::Binary(_))) => {
                    received += 1;
                    session.receive_binary()
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => vec![],
                Some(Ok(Message::Close(_))) | None => break,
                // Broken, or a frame over the hard limit: say so in a close frame.
                Some(Err(e)) => {
                    close(&mut socket, close_code::PROTOCOL, &e.to_string()).await;
                    break;
                }
            },
            () = watchdog.overflowed() => {
                too_slow(&mut socket).await;
                break;
            }
            Some(text) = outgoing.recv() => {
                // A peer that stopped reading blocks this send; its backlog passing the bound
                // ends the wait (the frame half sent is of no use to a dropped connection).
                tokio::select! {
                    sent = socket.send(Message::Text(text)) => if sent.is_err() { break },
                    () = watchdog.overflowed() => {
                        log_too_slow();
                        break;
                    }
                }
                vec![]
            }
            _ = heartbeat.tick() => vec![ServerMessage::Heartbeat { time: now() }.into()],
        };
        for reply in replies {
            if socket.send(Message::Text(encode(&reply))).await.is_err() {
                break 'connection;
            }
        }
    }
    updates.abort();
    presentations.abort();
    if let Some(audience) = audience {
        audience.abort();
    }
    tracing::info!(received, seconds = opened.elapsed().as_secs(), "websocket closed");
}

/// Drops a connection whose backlog passed its bound, telling it to come back.
async fn too_slow(socket: &mut WebSocket) {
    log_too_slow();
    close(socket, close_code::AGAIN, "too slow for what it subscribed to: reconnect to resume").await;
}

fn log_too_slow() {
    tracing::warn!("websocket too slow for its subscriptions: dropped");
}

/// Ends the connection with a close frame saying why (its reason cut to what a frame holds),
/// unless the peer does not even read that.
async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let reason: String = reason.chars().take(100).collect();
    let frame = Message::Close(Some(CloseFrame { code, reason: reason.into() }));
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, socket.send(frame)).await;
}
