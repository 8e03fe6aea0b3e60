//! The gateway's tunnel port: TLS 1.3 control connections from agents (authenticated by a
//! proof their route key signs over the session, kept alive by heartbeats) and plain data connections that present a
//! single-use ticket. The first four bytes tell them apart: a data connection starts with
//! `SVCD`, a control connection with a TLS record. They are read, not peeked: the TLS
//! acceptor gets a stream that gives them back first, so waiting for them costs no polling.
//!
//! Until its ticket is read (data) or its TLS handshake is done and its `Hello` accepted
//! (control), a connection is pending ([`super::pending`]), counted per source in two
//! stages: before its first bytes, then in its handshake. A source at its cap in a stage
//! (`tunnel_pending_per_source`) has its oldest connection there closed for the newcomer
//! (counted `pending_limit`), at the gateway's cap the oldest pending connection is (counted
//! `evicted`). A data connection whose whole head has come when it is chosen for closing goes
//! on instead: it proved itself in time. The first bytes have `tunnel_step_timeout` (10 s), a
//! data connection's ticket must follow its tag within [`TICKET_AFTER_TAG`] (its agent sends
//! both at once), and the handshake and the `Hello` have a step each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::pending::{Admitted, Evicted, PendingSlot, Stage};
use super::replay::Replay;
use super::replicas::{Ask, Replica};
use super::{Gateway, GatewayError, RouteConfig};
use relay_wire::accept::Backoff;
use relay_wire::challenge::verify_hello;
use relay_wire::wire::{self, Control, DATA_MAGIC, TICKET_LEN};

/// How long a data connection's ticket may take after its tag: its agent writes both at
/// once, so they come in one segment, or within a round trip if the segment is split.
pub(super) const TICKET_AFTER_TAG: Duration = Duration::from_secs(1);

/// The TLS configuration of the tunnel port.
pub(super) fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<ServerConfig>, GatewayError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| GatewayError::Tls(e.into()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| GatewayError::Tls(e.into()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        // TLS 1.3 alone: an agent's `Hello` is bound to the session's exporter, which only
        // TLS 1.3 makes unique to one session ([`wire::session_binding`]).
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| GatewayError::Tls(e.into()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| GatewayError::Tls(e.into()))?;
    Ok(Arc::new(config))
}

pub(super) async fn accept_loop(gw: Arc<Gateway>, listener: TcpListener, tls: Arc<ServerConfig>) {
    let acceptor = TlsAcceptor::from(tls);
    let sessions = Arc::new(AtomicU64::new(0));
    let mut backoff = Backoff::default();
    loop {
        let (stream, peer) = match backoff.accept(&listener).await {
            Ok(accepted) => accepted,
            Err(_) => {
                gw.metrics.accept_error("tunnel");
                continue;
            }
        };
        // Never `None` with a cap above 0: a source at its cap replaces its oldest.
        let Some(pending) = gw.admit(Stage::TunnelHead, peer, gw.config.tunnel_pending_per_source).await else {
            gw.metrics.tunnel("pending_limit");
            continue;
        };
        let (gw, acceptor, sessions) = (gw.clone(), acceptor.clone(), sessions.clone());
        tokio::spawn(async move {
            let id = sessions.fetch_add(1, Ordering::Relaxed);
            connection(&gw, stream, pending, &acceptor, id).await;
        });
    }
}

/// Counts a pending tunnel connection closed to make room.
fn count_evicted(gw: &Gateway, why: Evicted) {
    gw.metrics.tunnel(match why {
        Evicted::Cap => "evicted",
        Evicted::SourceCap => "pending_limit",
    });
}

/// One tunnel connection: pending until it is established (or closed to make room, or out of
/// time), then a data connection handed over or an agent's session.
async fn connection(gw: &Gateway, mut stream: TcpStream, mut pending: PendingSlot, acceptor: &TlsAcceptor, id: u64) {
    gw.tunnel_sockets.accepted(&stream);
    let step = gw.config.tunnel_step_timeout;
    let mut head = Head::default();
    let kind = tokio::select! {
        // Progress first: a head complete in the same wake-up as an eviction is taken.
        biased;
        kind = head.read(&mut stream, step) => kind,
        why = pending.evicted() => match head.last_look(&stream) {
            // Its whole head had come, unread: a data connection that proved itself in time
            // (its ticket is checked next, as any other).
            Some(Kind::Data(ticket)) => Some(Kind::Data(ticket)),
            _ => return count_evicted(gw, why),
        },
    };
    match kind {
        Some(Kind::Data(ticket)) => {
            drop(pending);
            data_connection(gw, stream, ticket);
        }
        Some(Kind::Tls) => {
            match pending.advance(Stage::TunnelHandshake, gw.config.tunnel_pending_per_source) {
                Ok(Admitted::Free) => {}
                Ok(Admitted::Evicted(_)) => tokio::task::yield_now().await,
                Err(_) => return gw.metrics.tunnel("pending_limit"),
            }
            let authenticated = tokio::select! {
                biased;
                why = pending.evicted() => return count_evicted(gw, why),
                authenticated = authenticate(gw, stream, &head, acceptor, step) => authenticated,
            };
            drop(pending);
            if let Some((tls, hello, route)) = authenticated {
                control_connection(gw, tls, hello, route, id).await;
            }
        }
        // Closed, or out of time.
        None => {}
    }
}

/// What a tunnel connection's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A data connection, and the ticket it presents.
    Data([u8; TICKET_LEN]),
    /// Anything else: a TLS handshake, or garbage its acceptor refuses.
    Tls,
}

/// A tunnel connection's first bytes, at most a data connection's whole head (which its agent
/// sends at once): kept across reads, so that a connection closed to make room can still be
/// finished with what has come.
#[derive(Debug)]
struct Head {
    bytes: [u8; DATA_MAGIC.len() + TICKET_LEN],
    got: usize,
}

impl Default for Head {
    fn default() -> Head {
        Head { bytes: [0; DATA_MAGIC.len() + TICKET_LEN], got: 0 }
    }
}

impl Head {
    /// What the bytes so far say: a data connection once its whole head has come, TLS as
    /// soon as four bytes are not the tag.
    fn kind(&self) -> Option<Kind> {
        if self.got < DATA_MAGIC.len() {
            return None;
        }
        if !self.bytes.starts_with(DATA_MAGIC) {
            return Some(Kind::Tls);
        }
        let ticket: [u8; TICKET_LEN] = self.bytes[DATA_MAGIC.len()..].try_into().ok()?;
        (self.got == self.bytes.len()).then_some(Kind::Data(ticket))
    }

    /// The bytes read so far (given back to a TLS acceptor).
    fn read_so_far(&self) -> &[u8] {
        &self.bytes[..self.got]
    }

    /// Reads until [`Head::kind`] says: the tag within `step`, a data connection's ticket
    /// within [`TICKET_AFTER_TAG`] of its tag. `None` if the peer closed, failed or took
    /// longer. Cancel-safe: what was read stays here.
    async fn read(&mut self, stream: &mut TcpStream, step: Duration) -> Option<Kind> {
        let mut deadline = Instant::now() + step;
        let mut tagged = false;
        loop {
            if let Some(kind) = self.kind() {
                return Some(kind);
            }
            if !tagged && self.got >= DATA_MAGIC.len() {
                tagged = true;
                deadline = deadline.min(Instant::now() + TICKET_AFTER_TAG);
            }
            match tokio::time::timeout_at(deadline, stream.read(&mut self.bytes[self.got..])).await {
                Ok(Ok(n)) if n > 0 => self.got += n,
                _ => return None,
            }
        }
    }

    /// Reads what has come already, without waiting, and says what it is. Reads the socket
    /// itself: the runtime learns that bytes came only at its next poll of the sockets, and
    /// this is the last look before the connection is closed.
    fn last_look(&mut self, stream: &TcpStream) -> Option<Kind> {
        let socket = socket2::SockRef::from(stream);
        while self.kind().is_none() {
            // Non-blocking (the runtime's sockets are): "would block" ends the look.
            match std::io::Read::read(&mut &*socket, &mut self.bytes[self.got..]) {
                Ok(n) if n > 0 => self.got += n,
                _ => break,
            }
        }
        self.kind()
    }
}

/// A data connection that presented `ticket`: it goes to the public connection that asked for
/// it, or into its session's pool if the ticket was handed ahead.
fn data_connection(gw: &Gateway, stream: TcpStream, ticket: [u8; TICKET_LEN]) {
    let waiting = gw.tickets.lock().ok().and_then(|mut p| p.remove(&ticket));
    match waiting {
        Some(tx) => {
            let _ = tx.send(stream);
        }
        None => {
            if gw.pools.arrived(&ticket, stream).is_err() {
                gw.metrics.tunnel("unknown_ticket");
            }
        }
    }
}

/// A control connection's TLS handshake (its first bytes in `head`) and `Hello`, each within
/// `step`, and the `Hello`'s route and route key's proof checked: the session to serve, or `None`
/// (counted, and a refusal told within `step`).
async fn authenticate(
    gw: &Gateway,
    stream: TcpStream,
    head: &Head,
    acceptor: &TlsAcceptor,
    step: Duration,
) -> Option<(Box<TlsStream<Replay<TcpStream>>>, Hello, Arc<RouteConfig>)> {
    let Ok(Ok(tls)) = tokio::time::timeout(step, acceptor.accept(Replay::new(head.read_so_far(), stream))).await else {
        gw.metrics.tunnel("tls_failed");
        return None;
    };
    let mut tls = Box::new(tls);
    let Some(binding) = wire::session_binding(tls.get_ref().1) else {
        gw.metrics.tunnel("tls_failed");
        return None;
    };
    let hello = tokio::time::timeout(step, wire::read_frame(&mut tls)).await;
    let Ok(Ok(Control::Hello { route_id, proof, replica, pool })) = hello else {
        gw.metrics.tunnel("no_hello");
        return None;
    };
    let refuse = |reason: String| Control::Refused { reason };
    let proven = |r: &Arc<RouteConfig>| verify_hello(&r.route_public_key, &route_id, &replica, &binding, &proof);
    let Some(route) = gw.route(&route_id).filter(proven) else {
        gw.metrics.tunnel("refused");
        let reason = format!("route \"{route_id}\" is unknown here or its route key's proof is wrong");
        send(&mut tls, &refuse(reason), step).await;
        return None;
    };
    if !wire::valid_replica_name(&replica) {
        gw.metrics.tunnel("refused");
        let reason =
            format!("the replica name is not usable: at most {} bytes of A-Z a-z 0-9 . _ -", wire::REPLICA_NAME_MAX);
        send(&mut tls, &refuse(reason), step).await;
        return None;
    }
    Some((tls, Hello { route_id, replica, pool }, route))
}

/// An agent's control connection, its `Hello` accepted for `route`: one of the route's
/// replicas until it closes, its heartbeats stop, or a newer session of the same replica takes
/// over; or refused if the route has its most replicas here.
async fn control_connection(
    gw: &Gateway,
    mut tls: Box<TlsStream<Replay<TcpStream>>>,
    hello: Hello,
    route: Arc<RouteConfig>,
    id: u64,
) {
    let Hello { route_id, replica, pool } = hello;
    let refuse = |reason: String| Control::Refused { reason };
    let (connect, mut asks) = mpsc::channel::<Ask>(256);
    let pool = usize::from(pool.min(wire::POOL_MAX)).min(gw.config.pool_per_replica);
    let Ok(session) = gw.replicas.join(&route_id, &replica, id, connect, pool) else {
        gw.metrics.tunnel("replica_limit");
        let reason = format!("route \"{route_id}\" has {} agents connected here already", wire::MAX_REPLICAS);
        send(&mut tls, &refuse(reason), gw.config.tunnel_step_timeout).await;
        return;
    };
    let welcome = Control::Welcome { heartbeat_secs: gw.config.announced_heartbeat().as_secs() };
    if send(&mut tls, &welcome, gw.config.tunnel_step_timeout).await {
        gw.metrics.tunnel("accepted");
        let _presence = gw.accounting.agent(&route.route_id);
        drop(route);
        serve_session(gw, tls, &session, &mut asks).await;
    }
    gw.replicas.leave(&route_id, &session);
    gw.pools.close(&session.pool);
    // `Connect`s it never passed on: their connections ask another replica at once rather
    // than wait out their time.
    asks.close();
    while let Ok(ask) = asks.try_recv() {
        gw.withdraw(&ask.ticket);
    }
}

/// Writes `frame` within `limit`: `false` if it failed or did not finish (a peer that stops
/// reading must not hold a session's loop, which watches its heartbeats and its retirement).
async fn send<W: tokio::io::AsyncWrite + Unpin>(writer: &mut W, frame: &Control, limit: Duration) -> bool {
    matches!(tokio::time::timeout(limit, wire::write_frame(writer, frame)).await, Ok(Ok(())))
}

/// An agent's accepted `Hello`: its route, which of its replicas it serves, and the most
/// pre-dialed data connections it offers to hold.
struct Hello {
    route_id: String,
    replica: String,
    pool: u8,
}

/// Answers a session's heartbeats and passes it `Connect` requests until it closes, goes
/// silent for [`wire::dead_after`] the heartbeat, or is retired; keeps its pool filled
/// (looked at with each heartbeat, and when a connection is taken from it).
async fn serve_session(
    gw: &Gateway,
    tls: Box<TlsStream<Replay<TcpStream>>>,
    session: &Arc<Replica>,
    asks: &mut mpsc::Receiver<Ask>,
) {
    let (mut reader, mut writer) = tokio::io::split(tls);
    let (frames_tx, mut frames) = mpsc::channel(16);
    let read_task = tokio::spawn(async move {
        while let Ok(frame) = wire::read_frame(&mut reader).await {
            if frames_tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    let heartbeat = gw.config.announced_heartbeat();
    let dead_after = wire::dead_after(heartbeat);
    let mut deadline = tokio::time::Instant::now() + dead_after;
    // When the agent last heard from us (the `Welcome` was just sent).
    let mut told = tokio::time::Instant::now();
    loop {
        tokio::select! {
            frame = frames.recv() => match frame {
                Some(Control::Ping { seq, ready, acme }) => {
                    let now = tokio::time::Instant::now();
                    deadline = now + dead_after;
                    gw.replicas.heard(session, ready, acme);
                    match refill(gw, session, &mut writer, heartbeat).await {
                        Some(true) => told = now,
                        Some(false) => {}
                        None => break,
                    }
                    if pong_due(told, now, heartbeat) {
                        if !send(&mut writer, &Control::Pong { seq }, heartbeat).await { break; }
                        told = now;
                    }
                }
                Some(_) => {}
                None => break,
            },
            ask = asks.recv() => match ask {
                Some(Ask { ticket, acme_only }) => {
                    let m = Control::Connect { ticket: wire::hex(&ticket), acme_only };
                    if !send(&mut writer, &m, heartbeat).await { break; }
                    told = tokio::time::Instant::now();
                }
                None => break,
            },
            () = session.pool.wanted() => match refill(gw, session, &mut writer, heartbeat).await {
                Some(true) => told = tokio::time::Instant::now(),
                Some(false) => {}
                None => break,
            },
            () = session.retired() => {
                gw.metrics.tunnel("replaced");
                let reason = format!("replaced by a newer session of replica \"{}\"", session.name);
                send(&mut writer, &Control::Refused { reason }, heartbeat).await;
                break;
            }
            () = tokio::time::sleep_until(deadline) => {
                gw.metrics.tunnel("heartbeat_lost");
                break;
            }
        }
    }
    read_task.abort();
}

/// Whether a `Ping` heard at `now` gets a `Pong`, the agent having last heard from us at
/// `told`: at most every other heartbeat. The agent only needs to hear something within
/// [`wire::dead_after`] (three heartbeats, at least 5 s), so two heartbeats of silence at most
/// leave it a heartbeat of slack, and an idle session's pongs cost half what they did (each
/// one a TLS record through the agent's egress broker and back). The agent's pings stay every
/// heartbeat: they are what takes a silent replica out of rotation within 2.5 heartbeats.
fn pong_due(told: Instant, now: Instant, heartbeat: Duration) -> bool {
    now.saturating_duration_since(told) >= heartbeat * 3 / 2
}

/// Hands `session` the tickets that bring its pool back to its target, if it offered one:
/// whether a `Pool` frame was written, `None` if it could not be.
async fn refill<W: tokio::io::AsyncWrite + Unpin>(
    gw: &Gateway,
    session: &Arc<Replica>,
    writer: &mut W,
    limit: Duration,
) -> Option<bool> {
    if !session.pool.offered() {
        return Some(false);
    }
    let tickets = gw.pools.refill(&session.pool, gw.replicas.in_rotation_now(session));
    if tickets.is_empty() {
        return Some(false);
    }
    let tickets = tickets.iter().map(|t| wire::hex(t)).collect();
    send(writer, &Control::Pool { tickets }, limit).await.then_some(true)
}

#[cfg(test)]
pub(crate) mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A connected pair on loopback: the peer's end and the gateway's (the pool's tests too).
    pub(crate) async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let peer = TcpStream::connect(listener.local_addr().expect("bound")).await.expect("connect");
        let (ours, _) = listener.accept().await.expect("accept");
        (peer, ours)
    }

    fn data_head(ticket: &[u8; TICKET_LEN]) -> Vec<u8> {
        [DATA_MAGIC.as_slice(), ticket].concat()
    }

    #[tokio::test]
    async fn a_head_says_data_with_its_whole_ticket_and_tls_after_four_other_bytes() {
        let step = Duration::from_secs(10);
        let ticket = [7u8; TICKET_LEN];
        let (mut peer, mut ours) = pair().await;
        // Split anywhere: the tag, then the ticket in two pieces.
        let head = data_head(&ticket);
        for piece in [&head[..2], &head[2..10], &head[10..]] {
            peer.write_all(piece).await.expect("write");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(Head::default().read(&mut ours, step).await, Some(Kind::Data(ticket)));

        let (mut peer, mut ours) = pair().await;
        peer.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05]).await.expect("write");
        let mut head = Head::default();
        assert_eq!(head.read(&mut ours, step).await, Some(Kind::Tls), "without waiting for 36 bytes");
        assert_eq!(head.read_so_far().len(), 5);
    }

    /// Pings every heartbeat, on time or each up to 0.45 of one late: every other one is
    /// answered, and the agent never goes longer than two heartbeats (and a late ping's delay)
    /// without a word, well within its `dead_after`.
    #[test]
    fn every_other_ping_is_answered_and_the_agent_hears_well_within_its_dead_after() {
        let heartbeat = Duration::from_secs(1);
        for late in [Duration::ZERO, Duration::from_millis(450)] {
            let start = Instant::now();
            let (mut told, mut pongs, mut longest) = (start, 0, Duration::ZERO);
            for i in 0..20u32 {
                let now = start + heartbeat * i + late * (i % 2);
                if pong_due(told, now, heartbeat) {
                    longest = longest.max(now - told);
                    (told, pongs) = (now, pongs + 1);
                }
            }
            assert!((9..=10).contains(&pongs), "{pongs} pongs for 20 pings ({late:?} late)");
            assert!(longest <= heartbeat * 2 + late, "{longest:?} of silence ({late:?} late)");
            assert!(longest + heartbeat <= wire::dead_after(heartbeat), "{longest:?}: a heartbeat of slack");
        }
    }

    /// A data connection's ticket must follow its tag within a second, whatever the step.
    #[tokio::test]
    async fn a_tag_without_its_ticket_is_let_go_after_a_second() {
        let (mut peer, mut ours) = pair().await;
        peer.write_all(DATA_MAGIC).await.expect("write");
        let start = std::time::Instant::now();
        assert_eq!(Head::default().read(&mut ours, Duration::from_secs(10)).await, None);
        let waited = start.elapsed();
        assert!(
            waited >= TICKET_AFTER_TAG - Duration::from_millis(50) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
    }

    /// A connection chosen for closing before its head was read is finished with what came.
    #[tokio::test]
    async fn the_last_look_finishes_a_head_that_came_unread() {
        let ticket = [9u8; TICKET_LEN];
        let (mut peer, ours) = pair().await;
        peer.write_all(&data_head(&ticket)).await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(Head::default().last_look(&ours), Some(Kind::Data(ticket)));

        let (mut peer, ours) = pair().await;
        peer.write_all(&data_head(&ticket)[..20]).await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(Head::default().last_look(&ours), None, "a ticket not whole is not taken");

        let (_silent, ours) = pair().await;
        assert_eq!(Head::default().last_look(&ours), None, "nothing came: no wait");
    }
}
