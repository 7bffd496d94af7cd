//! The class listener's door: TCP connections pass the gate (strangers' deadline, caps, idle
//! timeout) and then a TLS handshake, each on its own task, so a client that stalls its
//! handshake holds up nobody else.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::ServerConfig;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

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

impl Connected<IncomingStream<'_, TlsListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Connection {
        stream.io().get_ref().0.connection()
    }
}
