//! The WebSocket to the server, kept open: when it drops (a proxy's idle timeout, a laptop
//! lid, a restarted server) it reconnects with growing pauses and tells its owner, who
//! resubscribes from the last sequence numbers it saw. A silent socket (no heartbeat for
//! well over the server's 20 s period) counts as dropped, since a dead TCP connection can take
//! minutes to report itself. A socket the server refused for its token is not tried again:
//! the same token would be refused again, every half second.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use leptos::prelude::*;
use scalebook_shared::protocol::{ClientRequest, ServerReply};
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

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
    ws: Option<WebSocket>,
    state: RwSignal<ConnectionState>,
    on_open: Rc<dyn Fn()>,
    on_message: Rc<dyn Fn(ServerReply)>,
    failures: u32,
    last_heard_ms: f64,
    handlers: Option<Handlers>,
    /// Handlers of a socket that has closed. One of them may be running when the socket is
    /// abandoned, so they are dropped only at the next connection.
    retired: Option<Handlers>,
}

struct Handlers {
    _open: Closure<dyn FnMut()>,
    _message: Closure<dyn FnMut(MessageEvent)>,
    _close: Closure<dyn FnMut(CloseEvent)>,
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
            handlers: None,
            retired: None,
        })));
        socket.connect();
        let weak = Rc::downgrade(&socket.0);
        set_interval(move || with_socket(&weak, |s| s.check_silence()), WATCHDOG_PERIOD);
        socket
    }

    /// Sends `message` if the socket is open; `false` when it is not (the caller says so).
    pub fn send(&self, message: &ClientRequest) -> bool {
        let inner = self.0.borrow();
        match (&inner.ws, serde_json::to_string(message)) {
            (Some(ws), Ok(text)) if ws.ready_state() == WebSocket::OPEN => ws.send_with_str(&text).is_ok(),
            _ => false,
        }
    }

    fn connect(&self) {
        let url = {
            let mut inner = self.0.borrow_mut();
            inner.retired = None;
            inner.url.clone()
        };
        let ws = match WebSocket::new(&url) {
            Ok(ws) => ws,
            Err(_) => return self.abandon(),
        };
        let weak = Rc::downgrade(&self.0);
        let open = {
            let weak = weak.clone();
            Closure::<dyn FnMut()>::new(move || with_socket(&weak, |s| s.opened()))
        };
        let message = {
            let weak = weak.clone();
            Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| with_socket(&weak, |s| s.received(&event)))
        };
        let close = Closure::<dyn FnMut(CloseEvent)>::new(move |_| with_socket(&weak, |s| s.abandon()));
        ws.set_onopen(Some(open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(close.as_ref().unchecked_ref()));
        let mut inner = self.0.borrow_mut();
        inner.ws = Some(ws);
        inner.handlers = Some(Handlers { _open: open, _message: message, _close: close });
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

    fn received(&self, event: &MessageEvent) {
        let on_message = {
            let mut inner = self.0.borrow_mut();
            inner.last_heard_ms = js_sys::Date::now();
            inner.on_message.clone()
        };
        let Some(text) = event.data().as_string() else { return };
        match serde_json::from_str::<ServerReply>(&text) {
            Ok(message) => on_message(message),
            Err(e) => leptos::logging::warn!("ignoring a message this page does not understand ({e}): {text:.200}"),
        }
    }

    /// Closes the socket for good: the server refused this page's token.
    pub fn give_up(&self) {
        let mut inner = self.0.borrow_mut();
        inner.close();
        inner.state.set(ConnectionState::Refused);
    }

    /// Drops the current socket (closed, failed or silent) and schedules the next attempt,
    /// unless the page gave up on it.
    fn abandon(&self) {
        let (delay, weak) = {
            let mut inner = self.0.borrow_mut();
            inner.close();
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

impl Inner {
    /// Closes the socket, if any, and retires its handlers (one of them may be running now).
    fn close(&mut self) {
        if let Some(ws) = self.ws.take() {
            ws.set_onopen(None);
            ws.set_onmessage(None);
            ws.set_onclose(None);
            let _ = ws.close();
        }
        if let Some(handlers) = self.handlers.take() {
            self.retired = Some(handlers);
        }
    }
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
