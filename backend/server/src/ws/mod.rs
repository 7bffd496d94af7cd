//! The WebSocket endpoint (`/api/ws`, behind the token check): one task per connection that
//! reads the client's messages, writes everything the server has for it, and sends a heartbeat
//! every 20 s so proxies (which drop sockets idle for 60 s) keep the connection.

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
use tokio::task::JoinHandle;
use tokio::time::{Instant, interval_at};

use self::session::{
    Session, forward_asks, forward_audience, forward_class_links, forward_class_states, forward_presentations, forward_presenter,
    forward_roster, forward_updates,
};
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
    let (role, first) = match admission {
        Admission::Role(role) => (role, None),
        Admission::Pending(keyring) => match admit(&mut socket, &keyring).await {
            Some((role, hello)) => {
                // No longer a stranger's (see `gate`).
                if let Some(door) = &door {
                    door.authenticated();
                }
                (role, Some(hello))
            }
            None => return,
        },
    };
    let (out, mut outgoing) = outbox::outbox(OUT_QUEUE, state.ws.max_queued_bytes);
    let watchdog = out.clone();
    let mut tasks: Vec<JoinHandle<()>> = vec![
        tokio::spawn(forward_presentations(state.classroom.presentations(role), out.clone())),
        tokio::spawn(forward_presenter(state.classroom.presenter_states(), out.clone())),
    ];
    if role == Role::Instructor {
        tasks.push(tokio::spawn(forward_audience(state.classroom.audiences(), out.clone())));
        tasks.push(tokio::spawn(forward_class_links(state.class.clone(), out.clone())));
        if state.class.is_some() {
            tasks.push(tokio::spawn(forward_roster(state.classroom.rosters(), out.clone())));
        }
    }
    if role != Role::Follower {
        tasks.push(tokio::spawn(forward_class_states(state.following.states(), out.clone())));
    }
    let period = state.ws.heartbeat;
    let stall = period * STALLED_HEARTBEATS;
    let mut heartbeat = interval_at(Instant::now() + period, period);
    let shared = state.shared.clone();
    let runs = state.runs.clone();
    let mut session = Session::new(state, role, out.clone(), door.as_ref().and_then(Connection::peer), identity);
    tasks.push(tokio::spawn(forward_updates(runs.clone(), role, session.learners(), out.clone())));
    if role == Role::Follower {
        tasks.push(tokio::spawn(forward_asks(shared, session.introduced(), out)));
    }
    let opened = Instant::now();
    let mut received = 0u64;
    tracing::info!(?role, "websocket opened");
    if let Some(hello) = first {
        for reply in session.receive(hello.as_str()).await {
            if socket.send(Message::Text(encode(&reply))).await.is_err() {
                return;
            }
        }
    }
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
            reason = session.dismissed() => {
                tracing::info!("follower dismissed: {reason}");
                close(&mut socket, CLOSE_DISMISSED, reason).await;
                break;
            }
            Some(text) = outgoing.recv() => {
                if !deliver(&mut socket, text, stall, &watchdog).await {
                    break;
                }
                vec![]
            }
            _ = heartbeat.tick() => vec![ServerMessage::Heartbeat { time: now(), slurm_at: runs.slurm_answered_at() }.into()],
        };
        for reply in replies {
            if !deliver(&mut socket, encode(&reply), stall, &watchdog).await {
                break 'connection;
            }
        }
    }
    for task in tasks {
        task.abort();
    }
    tracing::info!(received, seconds = opened.elapsed().as_secs(), "websocket closed");
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
