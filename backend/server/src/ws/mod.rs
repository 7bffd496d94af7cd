//! The WebSocket endpoint (`/api/ws`, behind the token check): one task per connection that
//! reads the client's messages, writes everything the server has for it, and sends a heartbeat
//! every 20 s so proxies (which drop sockets idle for 60 s) keep the connection.

mod feeds;
mod outbox;
mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use scalebook_shared::protocol::{
    ClientMessage, ClientRequest, ErrorCode, ErrorReport, FollowerIdentity, Role, ServerMessage, ServerReply, request_id_of,
};
use tokio::time::{Instant, interval_at};

use self::session::Session;
use crate::auth::{Admission, Keyring};
use crate::class::CLOSE_DISMISSED;
use crate::clock::now;
use crate::gate::{Connection, GateLimits};
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
/// Heartbeats' worth of time a peer may take no frame at all before its connection is let go:
/// a browser tab reads its socket even in the background, a dead or stalled peer does not.
const STALLED_HEARTBEATS: u32 = 6;

/// The connection keeps the role of the token its upgrade carried (see [`crate::auth`]), or
/// takes the role of the token its first message carries.
/// A follower's identity comes from the class listener's admission (`crate::auth`).
pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    Extension(admission): Extension<Admission>,
    door: Option<Extension<ConnectInfo<Connection>>>,
    identity: Option<Extension<FollowerIdentity>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let hard_limit = state.ws.max_message_bytes * HARD_LIMIT_FACTOR;
    let door = door.map(|Extension(ConnectInfo(connection))| connection);
    let identity = identity.map(|Extension(identity)| identity);
    upgrade
        .max_message_size(hard_limit)
        .max_frame_size(hard_limit)
        .on_upgrade(move |socket| connection(state, admission, door, identity, socket))
}

async fn connection(
    state: Arc<AppState>,
    admission: Admission,
    door: Option<Connection>,
    identity: Option<FollowerIdentity>,
    mut socket: WebSocket,
) {
    let Some((role, first)) = admitted(admission, door.as_ref(), &mut socket).await else { return };
    let (out, outgoing) = outbox::outbox(OUT_QUEUE, state.ws.max_queued_bytes);
    let mut session = Session::new(state.clone(), role, out.clone(), door.as_ref().and_then(Connection::peer), identity);
    let tasks = feeds::start(&state, role, session.learners(), session.introduced(), out.clone());
    let opened = Instant::now();
    tracing::info!(?role, "websocket opened");
    let received = converse(&mut socket, &mut session, first, outgoing, &out, &state).await;
    for task in tasks {
        task.abort();
    }
    tracing::info!(received, seconds = opened.elapsed().as_secs(), "websocket closed");
}

/// The connection's role: the one its upgrade's token gave, or the one its first message's
/// token gives (with that message, to be answered); `None` when that message is not such a
/// `hello` (the socket is closed then).
async fn admitted(admission: Admission, door: Option<&Connection>, socket: &mut WebSocket) -> Option<(Role, Option<Utf8Bytes>)> {
    match admission {
        Admission::Role(role) => Some((role, None)),
        Admission::Pending(keyring) => {
            let (role, hello) = admit(socket, &keyring).await?;
            // No longer a stranger's (see `gate`).
            if let Some(door) = door {
                door.authenticated();
            }
            Some((role, Some(hello)))
        }
    }
}

/// The conversation: the first `hello` answered (when admission read it), then each message
/// of the client's answered, everything the feeds have for it delivered and a heartbeat each
/// period, until either side ends it, the client falls too far behind or is dismissed.
/// Returns how many messages the client sent.
async fn converse(
    socket: &mut WebSocket,
    session: &mut Session,
    first: Option<Utf8Bytes>,
    mut outgoing: outbox::Inbox,
    watchdog: &outbox::Outbox,
    state: &AppState,
) -> u64 {
    let period = state.ws.heartbeat;
    let stall = period * STALLED_HEARTBEATS;
    let mut heartbeat = interval_at(Instant::now() + period, period);
    let mut received = 0u64;
    let mut texts: Vec<Utf8Bytes> = match first {
        Some(hello) => session.receive(hello.as_str()).await.iter().map(encode).collect(),
        None => vec![],
    };
    loop {
        for text in texts.drain(..) {
            if !deliver(socket, text, stall, watchdog).await {
                return received;
            }
        }
        texts = tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    received += 1;
                    session.receive(text.as_str()).await.iter().map(encode).collect()
                }
                Some(Ok(Message::Binary(_))) => {
                    received += 1;
                    session.receive_binary().iter().map(encode).collect()
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => vec![],
                Some(Ok(Message::Close(_))) | None => return received,
                // Broken, or a frame over the hard limit: say so in a close frame.
                Some(Err(e)) => {
                    close(socket, close_code::PROTOCOL, &e.to_string()).await;
                    return received;
                }
            },
            () = watchdog.overflowed() => {
                too_slow(socket).await;
                return received;
            }
            reason = session.dismissed() => {
                tracing::info!("follower dismissed: {reason}");
                close(socket, CLOSE_DISMISSED, reason).await;
                return received;
            }
            Some(text) = outgoing.recv() => vec![text],
            _ = heartbeat.tick() => {
                let beat = ServerMessage::Heartbeat { time: now(), slurm_at: state.runs.slurm_answered_at() };
                vec![encode(&ServerReply::from(beat))]
            }
        };
    }
}

/// Waits for the first message of a socket opened without a token: a `hello` carrying one
/// the listener's keyring takes, within the strangers' deadline. Anything else is answered
/// `unauthorized` and the socket closed; nothing else is sent before.
async fn admit(socket: &mut WebSocket, keyring: &Keyring) -> Option<(Role, Utf8Bytes)> {
    let first = async {
        loop {
            match socket.recv().await {
                Some(Ok(Message::Text(text))) => return Some(text),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                _ => return None,
            }
        }
    };
    let first = tokio::time::timeout(GateLimits::default().stranger_deadline, first).await.ok().flatten()?;
    let role = match serde_json::from_str::<ClientRequest>(first.as_str()) {
        Ok(ClientRequest { message: ClientMessage::Hello { token: Some(token), .. }, .. }) => keyring.role_of(&token.0),
        _ => None,
    };
    if let Some(role) = role {
        return Some((role, first));
    }
    let report = ErrorReport::new(
        ErrorCode::Unauthorized,
        "the first message must be `hello` with this server's token: open the link Scalebook printed (it ends in #token=...)",
    );
    let reply = ServerReply::answer(request_id_of(first.as_str()), ServerMessage::Error(report));
    let _ = socket.send(Message::Text(encode(&reply))).await;
    close(socket, close_code::POLICY, "unauthorized").await;
    None
}

/// Sends one frame, `false` when the connection is to go: the send failed, or the peer took
/// nothing for `stall` (it stopped reading; a run's stream waits for it without ever passing
/// the queue's bound, so only this lets such a connection go), or its backlog passed the bound
/// meanwhile. The frame half sent is of no use to a dropped connection.
async fn deliver(socket: &mut WebSocket, text: Utf8Bytes, stall: Duration, watchdog: &outbox::Outbox) -> bool {
    tokio::select! {
        sent = socket.send(Message::Text(text)) => sent.is_ok(),
        () = tokio::time::sleep(stall) => {
            tracing::warn!(seconds = stall.as_secs(), "websocket took no frame for that long: dropped");
            false
        }
        () = watchdog.overflowed() => {
            log_too_slow();
            false
        }
    }
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
