//! What `scalebook serve` prints as it starts, read: the class link, the viewer link, and last
//! the ready line with the URL to open (`backend/server/src/cli/serve.rs` keeps their shape
//! stable for tests and wrappers). The token is taken out of a URL here and nowhere else.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// The start of the line that says the server listens; it comes after every other line it
/// prints at start, so by then the links are in.
pub const READY: &str = "Scalebook is ready: ";
const VIEWER_LINK: &str = "Viewer link";
const CLASS_LINK: &str = "Class link";

/// What a server printed by the time it was ready.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announcement {
    /// What followed [`READY`]: `http://127.0.0.1:PORT/#token=HEX` (with a base path before
    /// the `/#`), `http://127.0.0.1:PORT/` when it has no tokens, or `unix:PATH (no token: ...)`.
    pub url: String,
    /// The viewer link, when it printed one (links with tokens, on TCP).
    pub viewer_url: Option<String>,
    /// The class link, when it printed one (`--class-listen` with `--print-links` or a terminal).
    pub class_link: Option<String>,
}

/// The lines read so far: each link is kept until the ready line comes.
#[derive(Default)]
struct Reading {
    viewer_url: Option<String>,
    class_link: Option<String>,
}

impl Reading {
    /// Takes in one line of output; the announcement once `line` is the ready line.
    fn line(&mut self, line: &str) -> Option<Announcement> {
        // A link line explains itself first and ends with the link.
        let link = || line.split_whitespace().last().map(str::to_owned);
        if line.starts_with(VIEWER_LINK) {
            self.viewer_url = link();
        } else if line.starts_with(CLASS_LINK) {
            self.class_link = link();
        } else if let Some(url) = line.strip_prefix(READY) {
            return Some(Announcement {
                url: url.trim().to_owned(),
                viewer_url: self.viewer_url.take(),
                class_link: self.class_link.take(),
            });
        }
        None
    }
}

/// The token a link carries, in its fragment (`#token=HEX`, as the server prints it) or its
/// query (`?token=HEX`, as a page may be opened); `None` when it has none.
pub fn token_of(url: &str) -> Option<&str> {
    let (_, rest) = url.rsplit_once("#token=").or_else(|| url.rsplit_once("?token="))?;
    rest.split('&').next()
}

/// `http://HOST:PORT` of an HTTP link, without path or fragment; `None` for anything else
/// (a Unix socket's `unix:PATH`).
pub fn origin_of(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://")?;
    let host = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..url.len() - rest.len() + host])
}

/// Reads a server's `output` on a thread of its own until the ready line, and returns what it
/// announced; the thread then goes on draining the output, so the server never blocks on a
/// full pipe. Fails when `within` passes first, or at once when the output ends first (the
/// server exited).
pub fn announced(output: impl Read + Send + 'static, within: Duration) -> io::Result<Announcement> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reading = Reading::default();
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(announcement) = reading.line(&line) {
                let _ = tx.send(announcement);
            }
        }
    });
    rx.recv_timeout(within).map_err(|e| match e {
        RecvTimeoutError::Timeout => io::Error::new(io::ErrorKind::TimedOut, format!("no `{READY}` line within {} s", within.as_secs())),
        RecvTimeoutError::Disconnected => io::Error::new(io::ErrorKind::UnexpectedEof, format!("its output ended before a `{READY}` line")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:41234/#token=3f9c";

    fn read(text: &str) -> Vec<Announcement> {
        let mut reading = Reading::default();
        text.lines().filter_map(|line| reading.line(line)).collect()
    }

    #[test]
    fn the_links_printed_before_the_ready_line_are_announced_with_it() {
        let printed = "Class link (learners join with it: scalebook serve --follow LINK, or the page's Join a class): scalebook-class://h:9/#token=ab&sha256=cd\n\
             Instructor link (launches and cancels runs: keep it to yourself): http://127.0.0.1:41234/#token=3f9c\n\
             Viewer link (share this one with the room: it follows and reads, never launches): http://127.0.0.1:41234/#token=77aa\n\
             Scalebook is ready: http://127.0.0.1:41234/#token=3f9c\n";
        let announced = read(printed);
        assert_eq!(
            announced,
            [Announcement {
                url: URL.into(),
                viewer_url: Some("http://127.0.0.1:41234/#token=77aa".into()),
                class_link: Some("scalebook-class://h:9/#token=ab&sha256=cd".into()),
            }]
        );
    }

    #[test]
    fn a_server_without_links_announces_only_its_url() {
        let unix = "Scalebook is ready: unix:/tmp/s.sock (no token: only you can open it)";
        assert_eq!(read(unix), [Announcement { url: "unix:/tmp/s.sock (no token: only you can open it)".into(), ..Default::default() }]);
        assert_eq!(read("starting\nScalebook is ready: http://[::1]:80/ \n")[0].url, "http://[::1]:80/");
        assert!(read("Scalebook is starting\nViewer link: x\n").is_empty());
    }

    #[test]
    fn tokens_come_from_the_fragment_or_the_query() {
        assert_eq!(token_of(URL), Some("3f9c"));
        assert_eq!(token_of("http://h:1/base/#token=3f9c"), Some("3f9c"));
        assert_eq!(token_of("http://h:1/?token=3f9c"), Some("3f9c"));
        assert_eq!(token_of("scalebook-class://h:9/#token=ab&sha256=cd"), Some("ab"));
        assert_eq!(token_of("http://h:1/"), None);
        assert_eq!(token_of("unix:/tmp/s.sock (no token: only you can open it)"), None);
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(origin_of(URL), Some("http://127.0.0.1:41234"));
        assert_eq!(origin_of("http://127.0.0.1:41234/base/#token=1"), Some("http://127.0.0.1:41234"));
        assert_eq!(origin_of("http://h:1"), Some("http://h:1"));
        assert_eq!(origin_of("unix:/tmp/s.sock"), None);
    }

    #[test]
    fn output_is_read_to_the_ready_line_or_fails_when_it_ends_first() {
        let output = format!("Viewer link (share): {URL}\n{READY}{URL}\nafter\n");
        let announcement = announced(io::Cursor::new(output), Duration::from_secs(5)).unwrap();
        assert_eq!((announcement.url.as_str(), announcement.viewer_url.as_deref()), (URL, Some(URL)));
        let ended = announced(io::Cursor::new("error: no such flag\n"), Duration::from_secs(5)).unwrap_err();
        assert_eq!(ended.kind(), io::ErrorKind::UnexpectedEof);
    }
}
