//! The door every connection passes before the HTTP server sees it (TCP, or the class
//! listener's Unix socket). The token is checked
//! per request ([`crate::auth`]), so until a connection has shown it, it is a stranger's:
//! strangers get a short deadline and a small share of the server, and when a new one needs
//! room the oldest is closed; a connection that has shown the token is limited only by the
//! global cap and an idle timeout. So no number of silent or half-sent connections can lock the
//! owner out (their own new connection always gets in, at the cost of the oldest stranger), and
//! none lingers.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::time::{Instant, Sleep};

/// How many connections the server holds, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct GateLimits {
    /// All connections at once; beyond it, new ones are closed at once.
    pub max_connections: usize,
    /// Connections that have not shown the token; beyond it, the oldest is closed.
    pub max_strangers: usize,
    /// How long a stranger has to show the token (its request headers included).
    pub stranger_deadline: Duration,
    /// How long a connection that showed the token may stay silent both ways (WebSockets get
    /// a heartbeat well within it).
    pub idle_timeout: Duration,
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits {
            max_connections: 2048,
            max_strangers: 256,
            stranger_deadline: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl GateLimits {
    /// These limits with at most `1/share` of `descriptors` (the process's limit on open
    /// files) as connections, and a quarter of those as strangers: each listener takes its share,
    /// and what is left keeps runs' files, logs and trainers' pipes open, so no listener's
    /// crowd takes the descriptors another listener (the owner's) or the runs need.
    pub fn sharing(self, descriptors: u64, share: u64) -> GateLimits {
        let max_connections = self.max_connections.min(usize::try_from(descriptors / share.max(1)).unwrap_or(usize::MAX)).max(16);
        GateLimits { max_connections, max_strangers: self.max_strangers.min(max_connections / 4), ..self }
    }
}

/// Raises this process's soft limit on open files to its hard limit (at most 2^20), and
/// returns the limit it has then: every connection is a descriptor, and the usual soft limit
/// of 1,024 is fewer than a class of followers and the owner's pages need together.
pub fn raise_descriptor_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    let wanted = hard.min(1 << 20);
    if wanted > soft && setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok() {
        tracing::debug!(from = soft, to = wanted, "raised the limit on open files");
        return wanted;
    }
    soft
}

/// Where a connection comes from, as the listening socket tells it on accepting it.
#[derive(Debug, Clone, Copy)]
pub enum Origin {
    /// A TCP client: its end, and this server's end.
    Tcp { peer: SocketAddr, local: SocketAddr },
    /// A process on this host through a Unix socket: the uid the kernel credits it with.
    Unix { uid: Option<u32> },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Tcp { peer, .. } => write!(f, "{peer}"),
            Origin::Unix { uid: Some(uid) } => write!(f, "uid {uid} (Unix socket)"),
            Origin::Unix { uid: None } => f.write_str("a Unix socket's client"),
        }
    }
}

/// A listening socket the gate stands before.
pub trait Door: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static;

    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Stream, Origin)>> + Send;
    /// This end, as axum's listener reports it.
    fn origin(&self) -> io::Result<Origin>;
}

impl Door for TcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept(&mut self) -> io::Result<(Self::Stream, Origin)> {
        let (stream, peer) = TcpListener::accept(self).await?;
        // (A socket just accepted knows its own address; should it not, the port's own stands in.)
        let local = stream.local_addr().or_else(|_| self.local_addr())?;
        Ok((stream, Origin::Tcp { peer, local }))
    }

    fn origin(&self) -> io::Result<Origin> {
        let local = self.local_addr()?;
        Ok(Origin::Tcp { peer: local, local })
    }
}

impl Door for UnixListener {
    type Stream = tokio::net::UnixStream;

    async fn accept(&mut self) -> io::Result<(Self::Stream, Origin)> {
        let (stream, _) = UnixListener::accept(self).await?;
        let uid = stream.peer_cred().ok().map(|credentials| credentials.uid());
        Ok((stream, Origin::Unix { uid }))
    }

    fn origin(&self) -> io::Result<Origin> {
        Ok(Origin::Unix { uid: Some(nix::unistd::getuid().as_raw()) })
    }
}

/// A listener whose connections pass the gate.
pub struct GatedListener<D: Door = TcpListener> {
    listener: D,
    gate: Arc<Gate>,
}

impl<D: Door> GatedListener<D> {
    pub fn new(listener: D, limits: GateLimits) -> GatedListener<D> {
        GatedListener { listener, gate: Arc::new(Gate { limits, state: Mutex::default(), next_id: AtomicU64::new(0) }) }
    }
}

struct Gate {
    limits: GateLimits,
    state: Mutex<GateState>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct GateState {
    open: usize,
    /// Strangers, oldest first: their id and socket.
    strangers: VecDeque<(u64, RawFd)>,
    /// Connections refused since the last warning, and when that was: a flood of them is said
    /// once every [`REFUSALS_SAID_EVERY`], not once a connection.
    refused: u64,
    refusals_said: Option<Instant>,
}

/// How often the log says how many connections the gate refused for want of room.
const REFUSALS_SAID_EVERY: Duration = Duration::from_secs(10);

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets `stream` in as a stranger, closing the oldest stranger if there is no room; `None`
    /// when the server holds all the connections it may.
    fn admit(self: &Arc<Self>, socket: RawFd, origin: Origin) -> Option<Arc<Visitor>> {
        let mut state = self.lock();
        if state.open >= self.limits.max_connections {
            return None;
        }
        if state.strangers.len() >= self.limits.max_strangers
            && let Some((_, fd)) = state.strangers.pop_front()
        {
            // Wakes its reader with an end of file; its stream then drops and leaves. Done under
            // the lock, which every stream takes before its socket closes: the descriptor is
            // still this connection's.
            let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        state.open += 1;
        state.strangers.push_back((id, socket));
        Some(Arc::new(Visitor { id, gate: self.clone(), authenticated: AtomicBool::new(false), origin }))
    }

    /// Counts a connection from `addr` refused for want of room, and says so in the log: the
    /// first of a flood at once, the rest counted every [`REFUSALS_SAID_EVERY`].
    fn refused(&self, addr: Origin) {
        let mut state = self.lock();
        state.refused += 1;
        let now = Instant::now();
        if state.refusals_said.is_none_or(|said| now.duration_since(said) >= REFUSALS_SAID_EVERY) {
            let max = self.limits.max_connections;
            tracing::warn!("{addr}: refused, the server holds {max} connections ({} refused since the last warning)", state.refused);
            (state.refused, state.refusals_said) = (0, Some(now));
        }
    }

    fn forget_stranger(state: &mut GateState, id: u64) {
        state.strangers.retain(|(stranger, _)| *stranger != id);
    }
}

/// One connection as the gate knows it; what a request handler gets as its `ConnectInfo`.
pub struct Visitor {
    id: u64,
    gate: Arc<Gate>,
    authenticated: AtomicBool,
    origin: Origin,
}

/// The connection a request came on (axum's `ConnectInfo` of the gated listener).
#[derive(Clone)]
pub struct Connection(Arc<Visitor>);

impl Connection {
    /// The connection showed the token: it is no longer a stranger.
    pub fn authenticated(&self) {
        if !self.0.authenticated.swap(true, Ordering::SeqCst) {
            Gate::forget_stranger(&mut self.0.gate.lock(), self.0.id);
        }
    }

    /// The address a TCP connection came from (its client's launches are rate-limited by it).
    pub fn peer(&self) -> Option<std::net::IpAddr> {
        match self.0.origin {
            Origin::Tcp { peer, .. } => Some(peer.ip()),
            Origin::Unix { .. } => None,
        }
    }

    /// The Unix account whose process holds the client's end, when it is on this host: the
    /// kernel's answer for a Unix socket, its table of TCP sockets for TCP (see `crate::account`).
    pub fn account(&self) -> Option<String> {
        match self.0.origin {
            Origin::Tcp { peer, local } => crate::account::of_peer(local, peer),
            Origin::Unix { uid } => uid.map(crate::account::name),
        }
    }
}

impl<D: Door> Connected<IncomingStream<'_, GatedListener<D>>> for Connection {
    fn connect_info(stream: IncomingStream<'_, GatedListener<D>>) -> Connection {
        Connection(stream.io().visitor.clone())
    }
}

impl<D: Door> Listener for GatedListener<D> {
    type Io = GatedStream<D::Stream>;
    type Addr = Origin;

    async fn accept(&mut self) -> (GatedStream<D::Stream>, Origin) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most often: wait for some to be freed.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(visitor) = self.gate.admit(stream.as_raw_fd(), addr) else {
                self.gate.refused(addr);
                continue;
            };
            let accepted = Instant::now();
            let deadline = Box::pin(tokio::time::sleep_until(accepted + self.gate.limits.stranger_deadline));
            return (GatedStream { stream, visitor, accepted, last_activity: accepted, deadline }, addr);
        }
    }

    fn local_addr(&self) -> io::Result<Origin> {
        self.listener.origin()
    }
}

/// A connection past the gate: a stream that ends itself when its deadline passes.
pub struct GatedStream<S> {
    stream: S,
    visitor: Arc<Visitor>,
    accepted: Instant,
    last_activity: Instant,
    deadline: Pin<Box<Sleep>>,
}

impl<S> GatedStream<S> {
    /// The connection as request handlers see it (for a listener layered on this one).
    pub fn connection(&self) -> Connection {
        Connection(self.visitor.clone())
    }

    /// Whether the connection's time is up (registering to be woken when it will be).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let limits = self.visitor.gate.limits;
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = match self.visitor.authenticated.load(Ordering::SeqCst) {
                true => self.last_activity + limits.idle_timeout,
                false => self.accepted + limits.stranger_deadline,
            };
            if due <= Instant::now() {
                return true;
            }
            self.deadline.as_mut().reset(due);
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the connection's time is up")
}

impl<S> Drop for GatedStream<S> {
    fn drop(&mut self) {
        // Before the socket closes (fields drop after this), so an eviction never shuts down
        // a descriptor that has been reused.
        let mut state = self.visitor.gate.lock();
        state.open -= 1;
        Gate::forget_stranger(&mut state, self.visitor.id);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for GatedStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.expired(cx) {
            return Poll::Ready(Err(timed_out()));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.last_activity = Instant::now();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for GatedStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.expired(cx) {
            return Poll::Ready(Err(timed_out()));
        }
        let written = Pin::new(&mut this.stream).poll_write(cx, data);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            this.last_activity = Instant::now();
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    #[test]
    fn each_listener_takes_its_share_of_the_descriptors() {
        let shared = GateLimits::default().sharing(1024, 4);
        assert_eq!((shared.max_connections, shared.max_strangers), (256, 64), "a quarter of 1,024, a quarter of those strangers");
        let plenty = GateLimits::default().sharing(1 << 20, 2);
        assert_eq!((plenty.max_connections, plenty.max_strangers), (2048, 256), "no more than the defaults");
        assert!(raise_descriptor_limit() >= 64);
    }

    fn limits() -> GateLimits {
        GateLimits {
            max_connections: 4,
            max_strangers: 2,
            stranger_deadline: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }

    async fn gated(limits: GateLimits) -> (GatedListener, std::net::SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (GatedListener::new(listener, limits), addr)
    }

    #[tokio::test]
    async fn a_new_stranger_closes_the_oldest_and_the_token_lifts_a_connection_out() {
        let (mut gate, addr) = gated(limits()).await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        let (mut a, _) = gate.accept().await;
        let _second = TcpStream::connect(addr).await.unwrap();
        let (b, _) = gate.accept().await;
        Connection(b.visitor.clone()).authenticated();
        let _third = TcpStream::connect(addr).await.unwrap();
        let (_c, _) = gate.accept().await;
        let _fourth = TcpStream::connect(addr).await.unwrap();
        let (_d, _) = gate.accept().await;
        // Strangers a, c, then d: a, the oldest, was closed for d; b showed the token.
        let mut buf = [0u8; 1];
        assert_eq!(a.read(&mut buf).await.unwrap(), 0, "the oldest stranger was not closed");
        let mut byte = [0u8; 1];
        assert_eq!(first.read(&mut byte).await.unwrap(), 0, "its peer sees the end");
        assert_eq!(gate.gate.lock().strangers.len(), 2);
    }

    #[tokio::test]
    async fn the_global_cap_refuses_new_connections_until_one_leaves() {
        let (mut gate, addr) = gated(GateLimits { max_connections: 1, ..limits() }).await;
        let _first = TcpStream::connect(addr).await.unwrap();
        let (held, _) = gate.accept().await;
        let accepting = tokio::spawn(async move { gate.accept().await });
        let mut refused = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(refused.read(&mut buf).await.unwrap(), 0, "over the cap: closed at once");
        drop(held);
        let _late = TcpStream::connect(addr).await.unwrap();
        let (_late_in, _) = tokio::time::timeout(Duration::from_secs(60), accepting).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn strangers_get_a_deadline_and_known_connections_an_idle_timeout() {
        let limits = GateLimits { stranger_deadline: Duration::from_secs(10), idle_timeout: Duration::from_secs(100), ..limits() };
        let (mut gate, addr) = gated(limits).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        let (mut stranger, _) = gate.accept().await;
        let mut peer = TcpStream::connect(addr).await.unwrap();
        let (mut known, _) = gate.accept().await;
        Connection(known.visitor.clone()).authenticated();
        let mut buf = [0u8; 8];
        let err = stranger.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // Traffic keeps a known connection open past the strangers' deadline...
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(50)).await;
            peer.write_all(b"x").await.unwrap();
            assert_eq!(known.read(&mut buf).await.unwrap(), 1);
        }
        // ...and silence ends it.
        let err = known.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_unix_sockets_client_is_the_account_the_kernel_credits_it_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("class.sock");
        let mut gate = GatedListener::new(UnixListener::bind(&path).unwrap(), limits());
        let _client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let (served, origin) = gate.accept().await;
        let me = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap().name;
        assert_eq!(served.connection().account(), Some(me));
        assert_eq!(origin.to_string(), format!("uid {} (Unix socket)", nix::unistd::getuid()));
        assert_eq!(gate.gate.lock().strangers.len(), 1, "a socket's client is a stranger until it shows its token");
    }
}
