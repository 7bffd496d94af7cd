//! The class listener as `serve` opens it: a TCP port (`--class-listen`), a Unix socket
//! (`--class-socket`), or both, sharing one certificate, one class key and one app.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::ServiceExt;
use axum::extract::Request;
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use scalebook_server::class::listener::{self, TlsListener};
use scalebook_server::class::tls::Identity;
use scalebook_server::class::{self, ClassKey};
use scalebook_server::gate::{Connection, Door, GateLimits, GatedListener};
use scalebook_server::routes;
use scalebook_server::state::AppState;
use scalebook_shared::protocol::{ClassAddress, MAX_SOCKET_PATH_LEN, socket_path_ok};
use tokio::net::{TcpListener, UnixListener};

/// How long a connection to the class listener has to show the follower token: a follower
/// does in well under a second (its TLS handshake, then its first request); a silent
/// connection holds a descriptor no longer than this.
const CLASS_STRANGER_DEADLINE: Duration = Duration::from_secs(5);
/// The share of the process's descriptors the class listener may hold as connections (see
/// `serve`'s `MAIN_SHARE`), its two doors together.
const CLASS_SHARE: u64 = 4;

/// Where the class listener listens, as `serve`'s flags say.
pub struct ClassDoors {
    pub tcp: Option<SocketAddr>,
    pub socket: Option<PathBuf>,
    /// The host name learners reach the TCP port by.
    pub host: Option<String>,
    /// Where its certificate and token are kept.
    pub dir: Option<PathBuf>,
}

/// The class listener: its key, its TLS settings, and its doors until it serves (the TCP
/// port's, or what kept it from listening: it tries again as it serves).
pub struct ClassListener {
    pub key: Arc<ClassKey>,
    tls: Arc<rustls::ServerConfig>,
    tcp: Option<(SocketAddr, std::io::Result<TcpListener>)>,
    socket: Option<UnixListener>,
    /// The process's limit on open files, which its connections are sized by.
    descriptors: u64,
}

impl ClassListener {
    /// The class listener of `doors`, or `None` when no flag asks for one. A fixed port that
    /// is taken does not stop the server (anyone on a shared login node can take it while this
    /// one is down): it is said once in the log and on the instructor's page, and tried again
    /// as it serves. A port of the system's choosing (0) that cannot be had, or a socket that
    /// cannot be made safely, is a setting to fix: the server stops.
    pub async fn bind(doors: ClassDoors, descriptors: u64) -> anyhow::Result<Option<ClassListener>> {
        if doors.tcp.is_none() && doors.socket.is_none() {
            return Ok(None);
        }
        let dir = class::directory(doors.dir.as_deref())?;
        let socket_path = doors.socket.as_deref().map(std::path::absolute).transpose()?;
        let socket_address = socket_path.as_deref().map(socket_address).transpose()?;
        let machine = nix::unistd::gethostname().ok().and_then(|name| name.into_string().ok()).unwrap_or_else(|| "localhost".into());
        let (tcp, tcp_address) = match doors.tcp {
            Some(addr) => {
                let host = doors.host.unwrap_or_else(|| if addr.ip().is_unspecified() { machine.clone() } else { addr.ip().to_string() });
                let (tcp, port) = bind_tcp(addr).await?;
                (Some((addr, tcp)), Some(ClassAddress::Tcp { host, port }))
            }
            None => (None, None),
        };
        let socket = socket_path.as_deref().map(listener::bind_socket).transpose()?;
        let mut names = vec![machine, "localhost".into()];
        if let Some(ClassAddress::Tcp { host, .. }) = &tcp_address {
            names.insert(0, host.clone());
        }
        let identity = Identity::load_or_make(&dir, names)?;
        let (room, invited) = match (socket_address, tcp_address) {
            (Some(socket), Some(tcp)) => (socket, tcp),
            (Some(only), None) | (None, Some(only)) => (only.clone(), only),
            (None, None) => unreachable!("one door at least, checked above"),
        };
        let key = Arc::new(ClassKey::open(&dir, room, invited, identity.fingerprint())?);
        if let Some((addr, Err(e))) = &tcp {
            key.set_unbound(Some(listener::unbound_words(*addr, e)));
        }
        Ok(Some(ClassListener { key, tls: identity.server_config()?, tcp, socket, descriptors }))
    }

    /// Serves followers until the process ends, at each door (the TCP port once it listens).
    pub async fn serve(self, state: Arc<AppState>) {
        let limits = self.limits();
        let router = routes::class_router(state, self.key.clone());
        if let Some(socket) = self.socket {
            tokio::spawn(serve_door(GatedListener::new(socket, limits), self.tls.clone(), router.clone()));
        }
        if let Some((addr, tcp)) = self.tcp {
            let tcp = match tcp {
                Ok(tcp) => tcp,
                Err(_) => listener::listen_when_free(addr, &self.key).await,
            };
            serve_door(GatedListener::new(tcp, limits), self.tls, router).await;
        }
    }

    /// Strangers get the gate's usual share (past it, the oldest is closed for a newcomer) and
    /// a short deadline, so no number of silent connections here takes the descriptors the
    /// owner's own listener needs; a follower closed early tries again after a backoff. Room
    /// for a full room of followers beside the strangers, so no number of silent connections
    /// keeps a follower out. (Each door has these limits; two doors halve their share.)
    fn limits(&self) -> GateLimits {
        let room = GateLimits::default();
        let doors = u64::from(self.tcp.is_some()) + u64::from(self.socket.is_some());
        GateLimits { stranger_deadline: CLASS_STRANGER_DEADLINE, max_connections: room.max_connections + room.max_strangers, ..room }
            .sharing(self.descriptors, CLASS_SHARE * doors)
    }
}

/// Binds `addr`: the listener (or why not, for a fixed port: retried later) and its port.
async fn bind_tcp(addr: SocketAddr) -> anyhow::Result<(std::io::Result<TcpListener>, u16)> {
    let tcp = TcpListener::bind(addr).await;
    let port = match &tcp {
        Ok(tcp) => tcp.local_addr()?.port(),
        Err(e) if addr.port() != 0 => {
            tracing::warn!("the class listener {}", listener::unbound_words(addr, e));
            addr.port()
        }
        Err(e) => anyhow::bail!("--class-listen: cannot listen on {addr}: {e}"),
    };
    Ok((tcp, port))
}

/// The socket `path` as a class link carries it.
fn socket_address(path: &std::path::Path) -> anyhow::Result<ClassAddress> {
    let text = path.to_str().filter(|text| socket_path_ok(text)).ok_or_else(|| {
        anyhow::anyhow!(
            "--class-socket {}: a class link carries the socket's path, which must be at most {MAX_SOCKET_PATH_LEN} letters, digits, `/`, `.`, `_`, `-` or `+`",
            path.display()
        )
    })?;
    Ok(ClassAddress::Unix(text.to_owned()))
}

/// Serves the class app at one door, its connections past the gate and a TLS handshake.
async fn serve_door<D: Door>(gated: GatedListener<D>, tls: Arc<rustls::ServerConfig>, router: axum::Router) {
    match TlsListener::new(gated, tls) {
        Ok(listener) => serve_tls(listener, router).await,
        Err(e) => tracing::warn!("the class listener cannot start: {e}"),
    }
}

async fn serve_tls<L>(listener: L, router: axum::Router)
where
    L: Listener,
    L::Addr: std::fmt::Debug,
    Connection: for<'a> Connected<IncomingStream<'a, L>>,
{
    let make = ServiceExt::<Request>::into_make_service_with_connect_info::<Connection>(router);
    if let Err(e) = axum::serve(listener, make).await {
        tracing::warn!("the class listener stopped: {e}");
    }
}
