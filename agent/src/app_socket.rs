//! Reaching the app: the agent proxies to `127.0.0.1:PORT`, a loopback port any process of
//! the host could also listen on. Jobs share the host's network, so another tenant's job
//! could bind the port first (or bind `127.0.0.1` while the app listens on `::1`) and receive
//! this route's decrypted traffic. So every connection to the app is checked: the socket that
//! accepted it must belong to the agent's own uid, which only its own job has when the
//! service gives each job a uid of its own. The check reads the kernel's socket table
//! (`/proc/net/tcp`, `/proc/net/tcp6`) for the accepting end of this very connection, so no
//! listener can be swapped in between.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Connects to the app, refusing a connection accepted by another user's socket.
#[derive(Debug, Clone)]
pub struct AppConnector {
    inner: HttpConnector,
    /// The uid the app's socket must have; `None`: not checked (a service not running jobs
    /// under their own uid, where every job shares the service's).
    owner: Option<u32>,
}

impl AppConnector {
    /// A connector checking sockets against this process's own uid, when it is a job's own
    /// (not root).
    pub fn new() -> AppConnector {
        let mut inner = HttpConnector::new();
        inner.set_nodelay(true);
        AppConnector { inner, owner: own_uid().filter(|uid| *uid != 0) }
    }
}

impl Default for AppConnector {
    fn default() -> AppConnector {
        AppConnector::new()
    }
}

impl tower_service::Service<Uri> for AppConnector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<TcpStream>>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_ready(cx).map_err(io::Error::other)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let owner = self.owner;
        Box::pin(async move {
            let io = connecting.await.map_err(io::Error::other)?;
            if let Some(owner) = owner {
                let stream = io.inner();
                let (local, peer) = (stream.local_addr()?, stream.peer_addr()?);
                match accepting_uid(peer, local) {
                    Some(uid) if uid == owner => {}
                    found => {
                        let refused = format!(
                            "{peer} is not the app's: its socket belongs to uid {}, not this job's {owner}; nothing \
                             is sent to it",
                            found.map_or_else(|| "unknown".to_owned(), |u| u.to_string())
                        );
                        log_now_and_then(&refused);
                        return Err(io::Error::new(io::ErrorKind::PermissionDenied, refused));
                    }
                }
            }
            Ok(io)
        })
    }
}

/// Prints `message` to the agent's log, at most once every 10 s (a squatter must not fill it).
fn log_now_and_then(message: &str) {
    static LAST: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let Ok(mut last) = LAST.lock() else { return };
    if last.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(10)) {
        *last = Some(std::time::Instant::now());
        tracing::warn!("svc agent: {message}");
    }
}

/// This process's effective uid (`/proc/self/status`).
fn own_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The uid of the socket at `server` whose peer is `client`: the end that accepted a
/// connection made from `client` to `server`.
fn accepting_uid(server: SocketAddr, client: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .into_iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|text| find_uid(&text, server, client))
}

/// In a `/proc/net/tcp*` table, the uid of the socket with local address `local` and remote
/// address `remote` (IPv4 also matched in its IPv4-mapped IPv6 form).
fn find_uid(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (l, r, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (same(parse_addr(l)?, local) && same(parse_addr(r)?, remote)).then(|| uid.parse().ok())?
    })
}

fn same(seen: SocketAddr, wanted: SocketAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    seen.port() == wanted.port() && canonical(seen.ip()) == canonical(wanted.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word of the
/// address is printed as the host reads it from memory (network order bytes).
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(addr.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_tables_are_read_as_the_kernel_writes_them() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                  0: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000 2000000001        0 1 1\n";
        let server: SocketAddr = "127.0.0.1:8080".parse().expect("addr");
        let client: SocketAddr = "127.0.0.1:54321".parse().expect("addr");
        if cfg!(target_endian = "little") {
            assert_eq!(find_uid(v4, server, client), Some(2_000_000_001));
            assert_eq!(find_uid(v4, client, server), None, "the other end");
            // A dual-stack listener's socket, seen in tcp6 with IPv4-mapped addresses.
            let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                      0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 1 1\n";
            assert_eq!(find_uid(v6, server, client), Some(1000));
        }
    }

    #[tokio::test]
    async fn a_connection_to_our_own_listener_is_ours() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let server = listener.local_addr().expect("addr");
        let stream = TcpStream::connect(server).await.expect("connect");
        let client = stream.local_addr().expect("addr");
        assert_eq!(accepting_uid(server, client), own_uid(), "the accepting end is this process's");
    }
}
