//! The tunnel between an agent and the gateway (spoken by both: `relay-api` uses it), and
//! the PROXY protocol v2 header.
//!
//! Design (measured in `docs/performance.md`): one TLS **control connection** per agent,
//! which the agent dials and authenticates with its route key, plus one plain TCP
//! **data connection** per public client connection, dialed by the agent when the gateway
//! asks for it over the control connection, like rathole and bore. A data connection carries
//! only the client's own TLS bytes (which the gateway cannot read) and, when the route opts
//! in, a PROXY v2 header; it proves itself with a single-use 32-byte ticket. No multiplexer
//! window can throttle a stream, and each stream gets the kernel's own flow control.
//!
//! Control messages are JSON frames: a 4-byte big-endian length, then the JSON object.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use crate::hex::{hex, unhex};

/// The first bytes of a data connection (a control connection starts with a TLS record).
pub const DATA_MAGIC: &[u8; 4] = b"SVCD";

/// A data connection's ticket length.
pub const TICKET_LEN: usize = 32;

/// The longest replica name an agent may give in its `Hello`.
pub const REPLICA_NAME_MAX: usize = 64;

/// The most agents (replicas) one route may have connected to one gateway at once: a
/// manifest's `jobs` is at most 256.
pub const MAX_REPLICAS: usize = 256;

/// Whether `name` is a replica name a `Hello` may carry (empty: the route's one agent).
pub fn valid_replica_name(name: &str) -> bool {
    name.len() <= REPLICA_NAME_MAX && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// How long a control connection may stay silent before either side closes it: three
/// heartbeats, and never under 5 s, so a busy host's late heartbeat does not cost a
/// reconnection. (A gateway stops routing to a silent agent much sooner: 2.5 heartbeats.)
pub fn dead_after(heartbeat: std::time::Duration) -> std::time::Duration {
    (heartbeat * 3).max(std::time::Duration::from_secs(5))
}

/// The largest control frame accepted.
const MAX_FRAME: usize = 64 * 1024;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Agent to gateway, first: who it is. Made by [`Control::hello`].
    Hello {
        /// The route the agent serves.
        route_id: String,
        /// The route key's signature over the route, the replica and this TLS session's
        /// [`session_binding`] ([`crate::challenge::verify_hello`]): the gateway checks it with
        /// the route's public key and keeps nothing it could present itself, and a gateway host
        /// that relays it to another gateway presents it on another session, where it fails.
        proof: String,
        /// Which of the route's replicas (its jobs) the agent serves: a newer session of the
        /// same replica takes over from the older one. Empty (absent on the wire): the
        /// route's one agent. At most [`REPLICA_NAME_MAX`] bytes of `A-Z a-z 0-9 . _ -`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        replica: String,
        /// The most pre-dialed data connections the agent will hold for this session
        /// ([`Control::Pool`]); 0 (absent on the wire): it takes no `Pool` frame, and every
        /// data connection is asked for by a `Connect`, as before pools. Made by
        /// [`Control::with_pool`]; not part of the proof (an offer, not an identity).
        #[serde(default, skip_serializing_if = "is_zero")]
        pool: u8,
    },
    /// Gateway to agent: accepted; send a `Ping` at least this often.
    Welcome {
        /// Seconds between heartbeats.
        heartbeat_secs: u64,
    },
    /// Gateway to agent: refused, and why (the connection then closes).
    Refused {
        /// What to fix.
        reason: String,
    },
    /// Gateway to agent: dial a data connection presenting this ticket (hex).
    Connect {
        /// 32 bytes, hex.
        ticket: String,
        /// The connection passed the route's allow-list only as an ACME tls-alpn-01
        /// validation: the agent completes the TLS handshake and nothing more, whatever a
        /// second ClientHello (after a HelloRetryRequest) asks for.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        acme_only: bool,
    },
    /// Gateway to agent, only on a session whose `Hello` offered a pool: dial one data
    /// connection per ticket ahead of any client, present the ticket, and hold it, reading
    /// nothing, until its first byte: [`POOL_SERVE`] or [`POOL_ACME_ONLY`], then what a
    /// `Connect`ed data connection gets (a PROXY v2 header if the route has one, the client's
    /// bytes). The gateway never has more tickets out, or connections held, than the offer.
    Pool {
        /// 32 bytes each, hex.
        tickets: Vec<String>,
    },
    /// Agent to gateway: heartbeat.
    Ping {
        /// Echoed in the `Pong`.
        seq: u64,
        /// Whether the agent's app answers its health path now. Absent: the agent does not
        /// watch its app, and is taken as ready.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ready: Option<bool>,
        /// The agent has an ACME tls-alpn-01 challenge pending for its route's names: the
        /// gateway sends the route's ACME validations (`acme-tls/1` alone) to this replica,
        /// since the CA's ClientHello does not say whose order it checks. Sent at once when
        /// it changes; absent on the wire when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        acme: bool,
    },
    /// Gateway to agent: heartbeat answer.
    Pong {
        /// The `Ping`'s.
        seq: u64,
    },
}

impl Control {
    /// The `Hello` an agent holding `key` sends for `route_id` and `replica` on the TLS
    /// session `tls`: `None` if the session cannot export keying material (not TLS 1.3, or
    /// its handshake not done).
    pub fn hello<D>(
        key: &crate::challenge::RouteKey,
        route_id: &str,
        replica: &str,
        tls: &rustls::ConnectionCommon<D>,
    ) -> Option<Control> {
        let binding = session_binding(tls)?;
        Some(Control::Hello {
            route_id: route_id.to_owned(),
            proof: key.hello_proof(route_id, replica, &binding),
            replica: replica.to_owned(),
            pool: 0,
        })
    }

    /// This `Hello` offering to hold `n` pre-dialed data connections (at most [`POOL_MAX`]);
    /// any other message unchanged.
    pub fn with_pool(self, n: u8) -> Control {
        match self {
            Control::Hello { route_id, proof, replica, .. } => {
                Control::Hello { route_id, proof, replica, pool: n.min(POOL_MAX) }
            }
            other => other,
        }
    }
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// The most pre-dialed data connections an agent offers, or a gateway holds, per session.
pub const POOL_MAX: u8 = 8;

/// A pooled data connection's first byte: serve the client that follows.
pub const POOL_SERVE: u8 = 0;

/// A pooled data connection's first byte: the client passed the route's allow-list only as an
/// ACME tls-alpn-01 validation (what `Connect`'s `acme_only` says): a TLS handshake and
/// nothing more.
pub const POOL_ACME_ONLY: u8 = 1;

/// The keying-material exporter's label for a `Hello`'s binding (RFC 8446 section 7.5).
const HELLO_EXPORTER_LABEL: &[u8] = b"EXPORTER-svc-tunnel-hello";

/// What a control connection's `Hello` proof is bound to: 32 bytes both ends of this one TLS
/// session derive (its keying-material exporter) and no other session shares. `None` before
/// the handshake ends, or on anything but TLS 1.3 (the tunnel port speaks only TLS 1.3; a
/// TLS 1.2 exporter without the extended master secret could be shared by two sessions).
pub fn session_binding<D>(tls: &rustls::ConnectionCommon<D>) -> Option<[u8; 32]> {
    if tls.protocol_version() != Some(rustls::ProtocolVersion::TLSv1_3) {
        return None;
    }
    tls.export_keying_material([0u8; 32], HELLO_EXPORTER_LABEL, None).ok()
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent something that is not a control frame.
    #[error("malformed control frame: {0}")]
    Malformed(String),
}

/// Writes one control frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, message: &Control) -> Result<(), WireError> {
    let body = serde_json::to_vec(message).map_err(|e| WireError::Malformed(e.to_string()))?;
    let len = u32::try_from(body.len()).map_err(|_| WireError::Malformed("frame too large".into()))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one control frame.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Control, WireError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(WireError::Malformed(format!("a {len}-byte frame is over the {MAX_FRAME}-byte limit")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(|e| WireError::Malformed(e.to_string()))
}

/// 32 random bytes.
pub fn new_ticket() -> Result<[u8; TICKET_LEN], getrandom::Error> {
    let mut t = [0u8; TICKET_LEN];
    getrandom::fill(&mut t)?;
    Ok(t)
}

/// SHA-256 of some bytes, lower-case hex (how the gateway keeps route credentials).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// The PROXY protocol v2 signature.
const PROXY_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The longest PROXY v2 header [`proxy_v2_header`] writes (IPv6 addresses).
pub const PROXY_V2_MAX: usize = 16 + 36;

/// The fixed part of a PROXY v2 header, before its addresses.
pub const PROXY_V2_FIXED: usize = 16;

/// A PROXY v2 header (`PROXY` command, TCP) for a connection from `client` to `local`.
pub fn proxy_v2_header(client: SocketAddr, local: SocketAddr) -> Vec<u8> {
    let mut h = Vec::with_capacity(PROXY_V2_MAX);
    write_proxy_v2_header(&mut h, client, local);
    h
}

/// [`proxy_v2_header`] appended to `h` (the gateway writes it in place, before the client's
/// first bytes).
pub fn write_proxy_v2_header(h: &mut Vec<u8>, client: SocketAddr, local: SocketAddr) {
    h.extend_from_slice(PROXY_SIGNATURE);
    h.push(0x21); // version 2, PROXY
    let (client, local) = match (client.ip(), local.ip()) {
        (IpAddr::V4(_), IpAddr::V6(l)) => {
            (client, SocketAddr::new(l.to_ipv4_mapped().map_or(l.into(), IpAddr::V4), local.port()))
        }
        _ => (client, local),
    };
    match (client.ip(), local.ip()) {
        (IpAddr::V4(c), IpAddr::V4(l)) => {
            h.push(0x11); // TCP over IPv4
            h.extend_from_slice(&12u16.to_be_bytes());
            h.extend_from_slice(&c.octets());
            h.extend_from_slice(&l.octets());
        }
        (c, l) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            h.push(0x21); // TCP over IPv6
            h.extend_from_slice(&36u16.to_be_bytes());
            h.extend_from_slice(&v6(c).octets());
            h.extend_from_slice(&v6(l).octets());
        }
    }
    h.extend_from_slice(&client.port().to_be_bytes());
    h.extend_from_slice(&local.port().to_be_bytes());
}

/// Reads a PROXY v2 header; the client's address (`None` for a `LOCAL` header or an address
/// family without one).
pub async fn read_proxy_v2<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<SocketAddr>, WireError> {
    let mut head = [0u8; PROXY_V2_FIXED];
    r.read_exact(&mut head).await?;
    read_proxy_v2_after(&head, r).await
}

/// [`read_proxy_v2`] once its fixed part `head` has been read (by a reader that took it with
/// what came before it, in one read).
pub async fn read_proxy_v2_after<R: AsyncRead + Unpin>(
    head: &[u8; PROXY_V2_FIXED],
    r: &mut R,
) -> Result<Option<SocketAddr>, WireError> {
    if &head[..12] != PROXY_SIGNATURE || head[12] >> 4 != 2 {
        return Err(WireError::Malformed("the data connection does not start with a PROXY v2 header".into()));
    }
    let len = u16::from_be_bytes([head[14], head[15]]) as usize;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    match head[12] & 0x0f {
        0 => return Ok(None), // LOCAL
        1 => {}               // PROXY
        // The specification: receivers must drop a connection with any other command.
        command => return Err(WireError::Malformed(format!("PROXY v2 command {command} is neither LOCAL nor PROXY"))),
    }
    Ok(match head[13] >> 4 {
        1 if len >= 12 => {
            let ip = std::net::Ipv4Addr::new(body[0], body[1], body[2], body[3]);
            Some(SocketAddr::new(ip.into(), u16::from_be_bytes([body[8], body[9]])))
        }
        2 if len >= 36 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            let ip = std::net::Ipv6Addr::from(octets);
            let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
            Some(SocketAddr::new(ip, u16::from_be_bytes([body[32], body[33]])))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let m = Control::Hello { route_id: "r1".into(), proof: "p".into(), replica: String::new(), pool: 2 };
        write_frame(&mut a, &m).await.expect("write");
        assert_eq!(read_frame(&mut b).await.expect("read"), m);
    }

    #[test]
    fn an_agent_without_replicas_speaks_the_old_words() {
        // An agent or gateway from before replicas reads and writes these frames as they were.
        let hello = Control::Hello { route_id: "r1".into(), proof: "p".into(), replica: String::new(), pool: 0 };
        assert_eq!(serde_json::to_string(&hello).expect("json"), r#"{"type":"hello","route_id":"r1","proof":"p"}"#);
        let old: Control =
            serde_json::from_str(r#"{"type":"hello","route_id":"r1","proof":"p"}"#).expect("an old hello");
        assert_eq!(old, hello, "an agent from before pools offers none");
        let pooled = hello.with_pool(2);
        assert_eq!(
            serde_json::to_string(&pooled).expect("json"),
            r#"{"type":"hello","route_id":"r1","proof":"p","pool":2}"#
        );
        assert!(matches!(pooled.with_pool(200), Control::Hello { pool: POOL_MAX, .. }), "capped");
        let ping: Control = serde_json::from_str(r#"{"type":"ping","seq":3}"#).expect("an old ping");
        assert_eq!(ping, Control::Ping { seq: 3, ready: None, acme: false });
        let ping = Control::Ping { seq: 4, ready: Some(false), acme: false };
        assert_eq!(serde_json::to_string(&ping).expect("json"), r#"{"type":"ping","seq":4,"ready":false}"#);
        let ping = Control::Ping { seq: 5, ready: Some(true), acme: true };
        assert_eq!(serde_json::to_string(&ping).expect("json"), r#"{"type":"ping","seq":5,"ready":true,"acme":true}"#);
    }

    #[test]
    fn replica_names_are_short_and_plain() {
        for good in ["", "0", "job-12", "web.a_b", &"x".repeat(REPLICA_NAME_MAX)] {
            assert!(valid_replica_name(good), "{good:?}");
        }
        for bad in ["a b", "é", "a/b", "x\n", &"x".repeat(REPLICA_NAME_MAX + 1), "{}\""] {
            assert!(!valid_replica_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_silent_path_is_dead_after_three_heartbeats_and_at_least_five_seconds() {
        use std::time::Duration;
        assert_eq!(dead_after(Duration::from_secs(1)), Duration::from_secs(5));
        assert_eq!(dead_after(Duration::from_secs(3)), Duration::from_secs(9));
    }

    #[tokio::test]
    async fn proxy_headers_round_trip_for_both_families() {
        for (client, local) in [
            ("203.0.113.7:50123", "127.0.0.1:8443"),
            ("[2001:db8::1]:443", "[::1]:8443"),
            ("198.51.100.2:1", "[::1]:8443"),
        ] {
            let (client, local): (SocketAddr, SocketAddr) =
                (client.parse().expect("addr"), local.parse().expect("addr"));
            let header = proxy_v2_header(client, local);
            let mut reader = header.as_slice();
            assert_eq!(read_proxy_v2(&mut reader).await.expect("read"), Some(client));
            assert!(reader.is_empty());
            assert!(header.len() <= PROXY_V2_MAX);
            // Appended after what comes first, and read with it (a pooled data connection's
            // first byte, then the header's fixed part: one read at the agent).
            let mut with_kind = vec![POOL_SERVE];
            write_proxy_v2_header(&mut with_kind, client, local);
            let fixed: [u8; PROXY_V2_FIXED] = with_kind[1..1 + PROXY_V2_FIXED].try_into().expect("fixed part");
            let mut rest = &with_kind[1 + PROXY_V2_FIXED..];
            assert_eq!(read_proxy_v2_after(&fixed, &mut rest).await.expect("read"), Some(client));
            assert!(rest.is_empty());
        }
    }
}
