//! The WebSocket to the server, kept open: when it drops (a proxy's idle timeout, a laptop
//! lid, a restarted server) it reconnects with growing pauses and tells its owner, who
//! resubscribes from the last sequence numbers it saw. A silent socket (no heartbeat for
//! well over the server's 20 s period) counts as dropped, since a dead TCP connection can take
//! minutes to report itself. A socket the server refused for its token is not tried again
//! (the same token would be refused again, every half second) until the page gets another.
//!
//! Each connection is one of gloo's `WebSocket`s, read by a task of its own (see [`read`]).
//! The socket is not split into gloo's sink and stream: those two halves share it, so dropping
//! the sink would not close it, and the page must be able to close it at once (refused, silent)
//! and to tell whether it is open before sending. Only the handle holds the socket; its reader
//! looks at it through a weak reference, so dropping it closes the socket and ends the reader.

use std::cell::RefCell;
use std::future::poll_fn;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Sink, Stream};
use gloo_net::websocket::futures::WebSocket;
use gloo_net::websocket::{Message, State, WebSocketError};
use leptos::prelude::*;
use scalebook_shared::protocol::{ClientRequest, ServerReply};

/// What the connection indicator shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    Connecting,
    Open,
    /// Dropped; `attempt` reconnections have failed so far.
    Reconnecting {
        attempt: u32,
    },
    /// The server refused this page's token; given up until the page is opened again.
    Refused,
}

impl ConnectionState {
    pub fn label(self) -> String {
        match self {
            ConnectionState::Connecting => "connecting…".into(),
            ConnectionState::Open => "connected".into(),
            ConnectionState::Reconnecting { attempt: 0 } => "reconnecting…".into(),
            ConnectionState::Reconnecting { attempt } => format!("reconnecting… (attempt {})", attempt + 1),
            ConnectionState::Refused => "refused this page's link".into(),
        }
    }

    /// A stable name for styling and tests.
    pub fn name(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "connecting",
            ConnectionState::Open => "open",
            ConnectionState::Reconnecting { .. } => "reconnecting",
            ConnectionState::Refused => "refused",
        }
    }
}

/// The pause before reconnection attempt `failures + 1`: 0.5 s, doubling, at most 10 s.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << failures.min(5)).min(10_000))
}

/// How long a socket may stay silent before it is taken for dead: the server's heartbeat
/// comes every 20 s, so two missed ones and some slack.
const SILENCE_LIMIT_MS: f64 = 50_000.0;
const WATCHDOG_PERIOD: Duration = Duration::from_secs(5);

/// A handle to the one connection; cheap to clone.
#[derive(Clone)]
pub struct Socket(Rc<RefCell<Inner>>);

struct Inner {
    url: String,
    /// The current connection's socket; its reader holds only a weak reference.
    ws: Option<Rc<RefCell<WebSocket>>>,
    state: RwSignal<ConnectionState>,
    on_open: Rc<dyn Fn()>,
    on_message: Rc<dyn Fn(ServerReply)>,
    failures: u32,
    last_heard_ms: f64,
}

impl Socket {
    /// Connects to `url` and keeps reconnecting. `on_open` runs after every (re)connection,
    /// `on_message` for every message.
    pub fn start(
        url: String,
        state: RwSignal<ConnectionState>,
        on_open: impl Fn() + 'static,
        on_message: impl Fn(ServerReply) + 'static,
    ) -> Socket {
        let socket = Socket(Rc::new(RefCell::new(Inner {
            url,
            ws: None,
            state,
            on_open: Rc::new(on_open),
            on_message: Rc::new(on_message),
            failures: 0,
            last_heard_ms: js_sys::Date::now(),
        })));
        socket.connect();
        let weak = Rc::downgrade(&socket.0);
        set_interval(move || with_socket(&weak, |s| s.check_silence()), WATCHDOG_PERIOD);
        socket
    }

    /// Sends `message` if the socket is open; `false` when it is not (the caller says so).
    pub fn send(&self, message: &ClientRequest) -> bool {
        let inner = self.0.borrow();
        let Some(ws) = &inner.ws else { return false };
        let mut ws = ws.borrow_mut();
        // gloo's sink is ready whenever the socket is open, and sends at once; on a closing or
        // closed socket the browser would drop the message without an error, hence the check.
        match (ws.state(), serde_json::to_string(message)) {
            (State::Open, Ok(text)) => Pin::new(&mut *ws).start_send(Message::Text(text)).is_ok(),
            _ => false,
        }
    }

    fn connect(&self) {
        let url = self.0.borrow().url.clone();
        let ws = match WebSocket::open(&url) {
            Ok(ws) => Rc::new(RefCell::new(ws)),
            Err(_) => return self.abandon(),
        };
        let reader = read(Rc::downgrade(&self.0), Rc::downgrade(&ws));
        self.0.borrow_mut().ws = Some(ws);
        wasm_bindgen_futures::spawn_local(reader);
    }

    fn opened(&self) {
        let on_open = {
            let mut inner = self.0.borrow_mut();
            inner.failures = 0;
            inner.last_heard_ms = js_sys::Date::now();
            inner.state.set(ConnectionState::Open);
            inner.on_open.clone()
        };
        on_open();
    }

    fn received(&self, message: Message) {
        let on_message = {
            let mut inner = self.0.borrow_mut();
            inner.last_heard_ms = js_sys::Date::now();
            inner.on_message.clone()
        };
        let Message::Text(text) = message else { return };
        match serde_json::from_str::<ServerReply>(&text) {
            Ok(message) => on_message(message),
            Err(e) => leptos::logging::warn!("ignoring a message this page does not understand ({e}): {text:.200}"),
        }
    }

    /// Closes the socket for good: the server refused this page's token.
    pub fn give_up(&self) {
        let mut inner = self.0.borrow_mut();
        inner.ws = None;
        inner.state.set(ConnectionState::Refused);
    }

    /// Connects again at once after [`Socket::give_up`] (the page has another token now).
    pub fn try_again(&self) {
        {
            let mut inner = self.0.borrow_mut();
            if inner.state.get_untracked() != ConnectionState::Refused {
                return;
            }
            inner.failures = 0;
            inner.state.set(ConnectionState::Connecting);
        }
        self.connect();
    }

    /// Drops the current socket (closed, failed or silent) and schedules the next attempt,
    /// unless the page gave up on it.
    fn abandon(&self) {
        let (delay, weak) = {
            let mut inner = self.0.borrow_mut();
            // Dropping gloo's socket closes it and stops its events.
            inner.ws = None;
            if inner.state.get_untracked() == ConnectionState::Refused {
                return;
            }
            let attempt = inner.failures;
            inner.failures = inner.failures.saturating_add(1);
            inner.state.set(ConnectionState::Reconnecting { attempt });
            (backoff(attempt), Rc::downgrade(&self.0))
        };
        set_timeout(move || with_socket(&weak, |s| s.connect()), delay);
    }

    fn check_silence(&self) {
        let silent = {
            let inner = self.0.borrow();
            inner.state.get_untracked() == ConnectionState::Open && js_sys::Date::now() - inner.last_heard_ms > SILENCE_LIMIT_MS
        };
        if silent {
            self.abandon();
        }
    }
}

/// Reads one connection until it ends: says when it opens, hands on every message, and
/// abandons the socket when it closes (or never opened). It ends quietly once the handle has
/// dropped the socket (refused, silent), whose events are then no longer this page's business.
async fn read(socket: Weak<RefCell<Inner>>, ws: Weak<RefCell<WebSocket>>) {
    // gloo's sink turns ready when the socket stops connecting: opened, or failed to.
    match poll_socket(&ws, |ws, cx| Pin::new(&mut *ws).poll_ready(cx).map(|_| matches!(ws.state(), State::Open))).await {
        None => return,
        Some(true) => with_socket(&socket, |s| s.opened()),
        // It never opened: its stream brings the error and then the close.
        Some(false) => {}
    }
    while let Some(event) = poll_socket(&ws, |ws, cx| Pin::new(ws).poll_next(cx)).await {
        match event {
            Some(Ok(message)) => with_socket(&socket, |s| s.received(message)),
            // The browser's `error` event: its `close` follows.
            Some(Err(WebSocketError::ConnectionError)) => {}
            Some(Err(_)) | None => return with_socket(&socket, |s| s.abandon()),
        }
    }
}

/// Polls the connection's socket with `poll`; `None` once the handle has dropped it.
fn poll_socket<T>(
    ws: &Weak<RefCell<WebSocket>>,
    mut poll: impl FnMut(&mut WebSocket, &mut Context<'_>) -> Poll<T>,
) -> impl Future<Output = Option<T>> {
    poll_fn(move |cx| match ws.upgrade() {
        Some(ws) => {
            let mut ws = ws.borrow_mut();
            poll(&mut ws, cx).map(Some)
        }
        None => Poll::Ready(None),
    })
}

fn with_socket(weak: &Weak<RefCell<Inner>>, f: impl FnOnce(&Socket)) {
    if let Some(inner) = weak.upgrade() {
        f(&Socket(inner));
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn reconnection_pauses_double_up_to_ten_seconds() {
        let pauses: Vec<u64> = (0..8).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(pauses, [500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(10));
    }

    #[wasm_bindgen_test]
    fn the_indicator_names_each_state() {
        assert_eq!(ConnectionState::Open.label(), "connected");
        assert_eq!(ConnectionState::Reconnecting { attempt: 2 }.label(), "reconnecting… (attempt 3)");
        assert_eq!(ConnectionState::Reconnecting { attempt: 0 }.name(), "reconnecting");
        assert_eq!(ConnectionState::Refused.name(), "refused");
    }
}
