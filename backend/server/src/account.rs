//! Whose is a connection from this host: the Unix account of the process at the other end of a
//! TCP connection, as the kernel reports it. A learner's server on the instructor's host joins
//! with the room's class link, which everyone in the room holds; what tells learner1 from
//! learner2 is the account their server runs as, and only the kernel can say that. Every TCP
//! socket on the host is a row of `/proc/net/tcp` (or `tcp6`) with its two addresses and the
//! user that made it: the follower's socket is the row whose own address is the connection's
//! far end and whose far address is this listener's end. A connection from another host has
//! no such row (its socket is on that host), so it has no account here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The tables of this host's TCP sockets, IPv4 and IPv6.
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// The Unix account of the process holding the other end of the connection from `peer` to
/// `local` (this listener's end), when that process is on this host.
pub fn of_peer(local: SocketAddr, peer: SocketAddr) -> Option<String> {
    let uid = TABLES.iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        owner_in(&text, unmapped(peer), unmapped(local))
    })?;
    Some(name(uid))
}

/// The name of the account `uid` (through NSS), or `uidN` for one without a name.
pub fn name(uid: u32) -> String {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten();
    if user.is_none() {
        tracing::warn!(uid, "a follower's account has no name: it is shown by its number");
    }
    user.map_or_else(|| format!("uid{uid}"), |user| user.name)
}

/// The uid of the socket in `table` (a `/proc/net/tcp*` text) whose own address is `near` and
/// whose far address is `far`.
fn owner_in(table: &str, near: SocketAddr, far: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (own, other, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (address(own)? == near && address(other)? == far).then(|| uid.parse().ok()).flatten()
    })
}

/// An address as the kernel writes it in `/proc/net/tcp*`: the IP as 32-bit words in the
/// host's byte order, in hex, a colon, the port in hex.
fn address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Option<Vec<[u8; 4]>> =
        (0..ip.len() / 8).map(|i| ip.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok()).map(u32::to_ne_bytes)).collect();
    let bytes: Vec<u8> = words?.concat();
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(unmapped(SocketAddr::new(ip, port)))
}

/// An IPv4 address in IPv6's clothes (`::ffff:a.b.c.d`, as a dual-stack listener sees an IPv4
/// client) as the IPv4 address it is, so both tables compare alike.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, |v4| SocketAddr::new(IpAddr::V4(v4), addr.port())),
        IpAddr::V4(_) => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_addresses_read_as_they_are_written() {
        // 127.0.0.1:34125 on a little-endian host, ::1:8443 and ::ffff:127.0.0.1:80.
        if cfg!(target_endian = "little") {
            assert_eq!(address("0100007F:854D"), Some("127.0.0.1:34125".parse().unwrap()));
            assert_eq!(address("00000000000000000000000001000000:20FB"), Some("[::1]:8443".parse().unwrap()));
            assert_eq!(address("0000000000000000FFFF00000100007F:0050"), Some("127.0.0.1:80".parse().unwrap()));
        }
        assert_eq!(address("zz:1"), None);
    }

    #[test]
    fn a_connection_from_this_host_belongs_to_whoever_made_its_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (served, peer) = listener.accept().unwrap();
        let me = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap().name;
        assert_eq!(of_peer(served.local_addr().unwrap(), peer), Some(me));
        assert_eq!(peer, client.local_addr().unwrap());
        // No socket of this host has that pair of ends the other way round but the listener's.
        let elsewhere: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        assert_eq!(of_peer(served.local_addr().unwrap(), elsewhere), None, "an address of another host has no account here");
    }
}
