//! The class listener's door: TCP connections pass the gate (strangers' deadline, caps, idle
//! timeout) and then a TLS handshake, each on its own task, so a client that stalls its
//! handshake holds up nobody else. A class port someone else holds (anyone on a shared login
//! node may bind it while the instructor's Scalebook is down) keeps neither the server nor the
//! class down: the server starts without its class listener, says so on the instructor's page,
//! and listens as soon as the port is free ([`listen_when_free`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::{ClassKey, backoff};
use crate::gate::{Connection, GatedListener, GatedStream};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the HTTP server to take them.
const BACKLOG: usize = 64;

/// A listener of TLS connections for `axum::serve`.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<GatedStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts from `gated` and completes each connection's handshake with `config`.
    pub fn new(mut gated: GatedListener, config: Arc<ServerConfig>) -> io::Result<TlsListener> {
        let local = gated.local_addr()?;
        let (send, incoming) = mpsc::channel(BACKLOG);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (stream, addr) = gated.accept().await;
                let (acceptor, handshaken) = (acceptor.clone(), send.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handshaken.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::info!(%addr, "class listener: TLS handshake failed: {e}"),
                        Err(_) => tracing::info!(%addr, "class listener: TLS handshake timed out"),
                    }
                });
                if send.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { incoming, local })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<GatedStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accepting task only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// Why the class listener does not listen on `addr`, as the instructor's page says it after
/// "Class listener not listening: " (and the log after "the class listener ").
pub fn unbound_words(addr: SocketAddr, error: &io::Error) -> String {
    format!(
        "cannot listen on {addr} ({error}): another program may hold the port; learners cannot join until it is free, and Scalebook tries again every few seconds"
    )
}

/// Listens on `addr` once it can, trying again with a capped backoff (the first attempt failed
/// already), and keeps `key` saying why it cannot meanwhile. Each failure after the first is
/// logged at debug only: the first was said once, and the page says the rest.
pub async fn listen_when_free(addr: SocketAddr, key: &ClassKey) -> TcpListener {
    let mut failures = 1u32;
    loop {
        tokio::time::sleep(backoff(failures)).await;
        match TcpListener::bind(addr).await {
            Ok(tcp) => {
                tracing::info!(%addr, "the class listener listens now");
                key.set_unbound(None);
                return tcp;
            }
            Err(e) => {
                tracing::debug!(%addr, failures, "the class listener still cannot listen: {e}");
                key.set_unbound(Some(unbound_words(addr, &e)));
                failures = failures.saturating_add(1);
            }
        }
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Connection {
        stream.io().get_ref().0.connection()
    }
}
