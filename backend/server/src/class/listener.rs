//! The class listener's doors: connections (TCP, or the Unix socket) pass the gate (strangers'
//! deadline, caps, idle timeout) and then a TLS handshake, each on its own task, so a client
//! that stalls its handshake holds up nobody else. A class port someone else holds (anyone on
//! a shared login node may bind it while the instructor's Scalebook is down) keeps neither the
//! server nor the class down: the server starts without its TCP listener, says so on the
//! instructor's page, and listens as soon as the port is free ([`listen_when_free`]). A socket
//! in a directory only the instructor can write cannot be taken at all ([`bind_socket`]).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::{ClassKey, backoff};
use crate::Error;
use crate::gate::{Connection, Door, GatedListener, GatedStream, Origin};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the HTTP server to take them.
const BACKLOG: usize = 64;

/// A listener of TLS connections for `axum::serve`.
pub struct TlsListener<S> {
    incoming: mpsc::Receiver<(TlsStream<GatedStream<S>>, Origin)>,
    local: Origin,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TlsListener<S> {
    /// Accepts from `gated` and completes each connection's handshake with `config`.
    pub fn new<D: Door<Stream = S>>(mut gated: GatedListener<D>, config: Arc<ServerConfig>) -> io::Result<TlsListener<S>> {
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

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Listener for TlsListener<S> {
    type Io = TlsStream<GatedStream<S>>;
    type Addr = Origin;

    async fn accept(&mut self) -> (Self::Io, Origin) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accepting task only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Origin> {
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

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Connected<IncomingStream<'_, TlsListener<S>>> for Connection {
    fn connect_info(stream: IncomingStream<'_, TlsListener<S>>) -> Connection {
        stream.io().get_ref().0.connection()
    }
}

/// Listens on the Unix socket `path` for learners on this host: in a directory that only
/// this user can write (so nobody else can put a socket of their own in its place, or take
/// its name while this server is down) and that others can enter; the socket itself open to
/// everyone (each connection is then whoever the kernel says its process runs as, and shows
/// the class's token like any follower). A socket left by a server that is gone is replaced;
/// one that a live server answers on is not.
pub fn bind_socket(path: &Path) -> Result<UnixListener, Error> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

    let refuse = |rule: String| Error::Class(format!("--class-socket {}: {rule}", path.display()));
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).ok_or_else(|| refuse("give the socket's absolute path".into()))?;
    let meta = std::fs::metadata(dir).map_err(|e| refuse(format!("its directory {}: {e} (make it: mkdir -m 711 DIR)", dir.display())))?;
    if meta.uid() != nix::unistd::getuid().as_raw() || meta.permissions().mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "its directory {} must be yours and writable by you alone (chmod 711), or someone else could put their socket in its place",
            dir.display()
        )));
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(refuse("it exists and is not a socket".into()));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(refuse("a running server listens on it".into()));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path).map_err(|e| refuse(format!("cannot listen on it: {e}")))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}
