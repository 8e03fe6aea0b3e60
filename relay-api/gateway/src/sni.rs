//! Reading the server name from a ClientHello without terminating TLS: the bytes go through
//! rustls's `Acceptor` (which parses the ClientHello and stops), and are kept so the same
//! bytes can be forwarded to the job, which does the handshake.

use std::time::Duration;

use rustls::server::Acceptor;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Why a connection carries no routable server name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloError {
    /// The ClientHello was not complete within the time limit.
    Timeout,
    /// The ClientHello is larger than the limit.
    TooLarge,
    /// The bytes are not a TLS ClientHello.
    Invalid,
    /// The ClientHello names no server.
    NoSni,
    /// The client closed first.
    Closed,
}

impl HelloError {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            HelloError::Timeout => "client_hello_timeout",
            HelloError::TooLarge => "client_hello_too_large",
            HelloError::Invalid => "invalid_client_hello",
            HelloError::NoSni => "no_sni",
            HelloError::Closed => "closed_before_hello",
        }
    }
}

pub use relay_wire::alpn::ROUTE_ALPN_PREFIX;

/// A read ClientHello: the server name (lower case), what its ALPN asks of the routing, and
/// every byte read so far.
#[derive(Debug)]
pub struct Hello {
    /// The SNI host name, lower case.
    pub server_name: String,
    /// The route asked for by an ALPN protocol `svc-route/<route ID>`, if one was offered.
    pub route_id: Option<String>,
    /// Whether the only ALPN protocol offered is `acme-tls/1` (an ACME server's tls-alpn-01
    /// validation).
    pub acme_tls: bool,
    /// The token of an ALPN protocol `svc-probe/<token>`, if one was offered (the
    /// coordinator's validation: `relay_wire::alpn::ProbeSigner::probe_alpn`).
    pub probe: Option<Vec<u8>>,
    /// The replica asked for by an ALPN protocol `svc-replica/<name>`, if one was offered
    /// (honoured only beside a probe token).
    pub replica: Option<String>,
    /// The bytes read from the client, to forward unchanged.
    pub bytes: Vec<u8>,
}

/// Reads from `stream` until the ClientHello is complete, at most `max_bytes` within `limit`.
pub async fn read_client_hello(stream: &mut TcpStream, max_bytes: usize, limit: Duration) -> Result<Hello, HelloError> {
    tokio::time::timeout(limit, read(stream, max_bytes)).await.unwrap_or(Err(HelloError::Timeout))
}

async fn read(stream: &mut TcpStream, max_bytes: usize) -> Result<Hello, HelloError> {
    let mut acceptor = Acceptor::default();
    let mut bytes = Vec::new();
    loop {
        let room = max_bytes.saturating_sub(bytes.len());
        if room == 0 {
            return Err(HelloError::TooLarge);
        }
        // Read straight into the kept bytes, at most 4 KiB at a time and never past the limit.
        let start = bytes.len();
        bytes.reserve(room.min(4096));
        let n = (&mut *stream).take(room as u64).read_buf(&mut bytes).await.map_err(|_| HelloError::Closed)?;
        if n == 0 {
            return Err(HelloError::Closed);
        }
        let mut fresh = &bytes[start..];
        while !fresh.is_empty() {
            // rustls buffers at most one large message; a full buffer means an oversized hello.
            if acceptor.read_tls(&mut fresh).map_err(|_| HelloError::Invalid)? == 0 {
                return Err(HelloError::TooLarge);
            }
        }
        match acceptor.accept() {
            Ok(None) => continue,
            Ok(Some(accepted)) => {
                let hello = accepted.client_hello();
                let name = hello.server_name().map(str::to_ascii_lowercase);
                // Read in place: every public connection passes here.
                let route_id = hello
                    .alpn()
                    .and_then(|mut offered| offered.find_map(|p| p.strip_prefix(ROUTE_ALPN_PREFIX)))
                    .and_then(|id| std::str::from_utf8(id).ok())
                    .map(str::to_owned);
                let probe = hello
                    .alpn()
                    .and_then(|mut offered| offered.find_map(|p| p.strip_prefix(relay_wire::alpn::PROBE_ALPN_PREFIX)))
                    .map(<[u8]>::to_vec);
                let replica = hello
                    .alpn()
                    .and_then(|mut offered| offered.find_map(|p| p.strip_prefix(relay_wire::alpn::REPLICA_ALPN_PREFIX)))
                    .and_then(|name| std::str::from_utf8(name).ok())
                    .map(str::to_owned);
                let acme_tls = hello.alpn().is_some_and(|mut offered| {
                    offered.next() == Some(relay_wire::alpn::ACME_TLS_ALPN) && offered.next().is_none()
                });
                return match name {
                    Some(server_name) => Ok(Hello { server_name, route_id, acme_tls, probe, replica, bytes }),
                    None => Err(HelloError::NoSni),
                };
            }
            Err(_) => return Err(HelloError::Invalid),
        }
    }
}
