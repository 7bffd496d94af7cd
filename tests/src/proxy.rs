//! A stand-in for jupyter-server-proxy: serves `/user/<name>/proxy/<port>/...` by forwarding
//! it to `127.0.0.1:<port>/...` with the prefix stripped (WebSocket upgrades included), and
//! answers 404 outside the prefix. It can also cut every connection and refuse new ones for a
//! while, as a proxy restart or a network drop would.
//!
//! One request per connection: the proxy asks both sides to close after each plain HTTP
//! exchange, so it only has to read one request head per connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

const MAX_HEAD: usize = 64 << 10;

pub struct PrefixProxy {
    addr: SocketAddr,
    prefix: String,
    cut: broadcast::Sender<()>,
    refuse_until: Arc<Mutex<Option<Instant>>>,
    task: JoinHandle<()>,
}

impl PrefixProxy {
    /// Listens on a free port and forwards `/user/learner/proxy/<upstream port>/...`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<PrefixProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let prefix = format!("/user/learner/proxy/{}", upstream.port());
        let (cut, _) = broadcast::channel(4);
        let refuse_until = Arc::new(Mutex::new(None));
        let task = tokio::spawn(accept_loop(listener, upstream, prefix.clone(), cut.clone(), refuse_until.clone()));
        Ok(PrefixProxy { addr, prefix, cut, refuse_until, task })
    }

    /// The address a user would open: the proxy's origin and prefix, with `rest` after it
    /// (e.g. `/?token=...`, or `?token=...` without the trailing slash).
    pub fn url(&self, rest: &str) -> String {
        format!("http://{}{}{rest}", self.addr, self.prefix)
    }

    /// `/user/learner/proxy/<upstream port>`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Drops every open connection now and refuses new ones for `pause`.
    pub fn cut_for(&self, pause: Duration) {
        if let Ok(mut until) = self.refuse_until.lock() {
            *until = Some(Instant::now() + pause);
        }
        let _ = self.cut.send(());
    }
}

impl Drop for PrefixProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    prefix: String,
    cut: broadcast::Sender<()>,
    refuse_until: Arc<Mutex<Option<Instant>>>,
) {
    while let Ok((client, _)) = listener.accept().await {
        let refusing = refuse_until.lock().ok().and_then(|u| *u).is_some_and(|u| Instant::now() < u);
        if refusing {
            drop(client);
            continue;
        }
        let prefix = prefix.clone();
        let mut cut = cut.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = serve(client, upstream, &prefix) => {}
                _ = cut.recv() => {}
            }
        });
    }
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, prefix: &str) -> anyhow::Result<()> {
    let (head, body_start) = read_head(&mut client).await?;
    let Some(head) = rewrite(&head, prefix) else {
        let body = "not under the proxy prefix";
        let reply = format!("HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        client.write_all(reply.as_bytes()).await?;
        return Ok(());
    };
    let mut server = TcpStream::connect(upstream).await.context("upstream")?;
    server.write_all(head.as_bytes()).await?;
    server.write_all(&body_start).await?;
    copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

/// The request head (up to the blank line) and any bytes read after it.
async fn read_head(client: &mut TcpStream) -> anyhow::Result<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buffer).into_owned(), rest));
        }
        if buffer.len() > MAX_HEAD {
            bail!("request head too long");
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            bail!("client closed before sending a request");
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// The head with the prefix stripped from the path and, for plain HTTP, `Connection: close`;
/// `None` for a path outside the prefix.
fn rewrite(head: &str, prefix: &str) -> Option<String> {
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.splitn(3, ' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let rest = target.strip_prefix(prefix)?;
    let path = match rest {
        "" => "/".to_owned(),
        r if r.starts_with('/') => r.to_owned(),
        r if r.starts_with('?') => format!("/{r}"),
        _ => return None,
    };
    let upgrade = head.to_ascii_lowercase().contains("\r\nupgrade:");
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        if !upgrade && line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    if !upgrade {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_the_prefix_and_closes_plain_requests() {
        let head = "GET /user/learner/proxy/8080/api/configs.yaml?token=t HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n";
        let out = rewrite(head, "/user/learner/proxy/8080").unwrap();
        assert_eq!(out, "GET /api/configs.yaml?token=t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(
            rewrite("GET /user/learner/proxy/8080 HTTP/1.1\r\n\r\n", "/user/learner/proxy/8080").unwrap().lines().next(),
            Some("GET / HTTP/1.1")
        );
        assert_eq!(rewrite("GET /other HTTP/1.1\r\n\r\n", "/user/learner/proxy/8080"), None);
        assert_eq!(rewrite("GET /user/learner/proxy/80801/x HTTP/1.1\r\n\r\n", "/user/learner/proxy/8080"), None);
    }

    #[test]
    fn websocket_upgrades_keep_their_headers() {
        let head = "GET /user/learner/proxy/1/api/ws?token=t HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
        let out = rewrite(head, "/user/learner/proxy/1").unwrap();
        assert!(out.starts_with("GET /api/ws?token=t HTTP/1.1\r\n"));
        assert!(out.contains("Connection: Upgrade\r\n") && !out.contains("close"));
    }
}
