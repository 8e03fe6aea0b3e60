//! The gateway's tunnel port: TLS control connections from agents (authenticated by their
//! route credential, kept alive by heartbeats) and plain data connections that present a
//! single-use ticket. The first four bytes tell them apart: a data connection starts with
//! `SVCD`, a control connection with a TLS record. They are read (within 10 s), not peeked:
//! the TLS acceptor gets a stream that gives them back first, so waiting for them costs no
//! polling.
//!
//! Until its ticket is read (data) or its `Hello` is (control), a connection is pending
//! ([`super::pending`]): each source has at most `tunnel_pending_per_source` such connections
//! (more are closed at once, counted `pending_limit`), and at the gateway's cap the oldest is
//! closed (counted `evicted`). Each step has `tunnel_step_timeout` (10 s).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::pending::{PendingSlot, Port};
use super::replay::Replay;
use super::replicas::{Ask, Replica};
use super::{Gateway, GatewayError};
use relay_wire::accept::Backoff;
use relay_wire::wire::{self, Control, DATA_MAGIC, TICKET_LEN};

/// The TLS configuration of the tunnel port.
pub(super) fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<ServerConfig>, GatewayError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| GatewayError::Tls(e.into()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| GatewayError::Tls(e.into()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
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
        let Some(pending) = gw.admit(Port::Tunnel, peer, gw.config.tunnel_pending_per_source).await else {
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

/// What a tunnel connection turned out to be once it is no longer pending.
enum Established {
    /// A data connection that presented this ticket.
    Data(TcpStream, [u8; TICKET_LEN]),
    /// A control connection and its `Hello` (boxed: a TLS stream is large, and one per
    /// agent).
    Control(Box<TlsStream<Replay<TcpStream>>>, Hello),
}

/// One tunnel connection: pending until it is established (or closed to make room, or out of
/// time), then a data connection handed over or an agent's session.
async fn connection(gw: &Gateway, stream: TcpStream, mut pending: PendingSlot, acceptor: &TlsAcceptor, id: u64) {
    let _ = stream.set_nodelay(true);
    let step = gw.config.tunnel_step_timeout;
    let established = tokio::select! {
        established = establish(gw, stream, acceptor, step) => established,
        () = pending.evicted() => return gw.metrics.tunnel("evicted"),
    };
    drop(pending);
    match established {
        Some(Established::Data(stream, ticket)) => data_connection(gw, stream, ticket),
        Some(Established::Control(tls, hello)) => control_connection(gw, tls, hello, id).await,
        None => {}
    }
}

/// Reads a connection's tag, then its ticket (data) or its TLS handshake and `Hello`
/// (control), each within `step`; `None` (counted where it says something) if it fails.
async fn establish(gw: &Gateway, mut stream: TcpStream, acceptor: &TlsAcceptor, step: Duration) -> Option<Established> {
    let (mut head, got) = tokio::time::timeout(step, first_bytes(&mut stream)).await.ok()??;
    if head.starts_with(DATA_MAGIC) {
        let read = tokio::time::timeout(step, stream.read_exact(&mut head[got..])).await;
        if !matches!(read, Ok(Ok(_))) {
            return None;
        }
        let mut ticket = [0u8; TICKET_LEN];
        ticket.copy_from_slice(&head[DATA_MAGIC.len()..]);
        return Some(Established::Data(stream, ticket));
    }
    let Ok(Ok(mut tls)) = tokio::time::timeout(step, acceptor.accept(Replay::new(&head[..got], stream))).await else {
        gw.metrics.tunnel("tls_failed");
        return None;
    };
    let hello = tokio::time::timeout(step, wire::read_frame(&mut tls)).await;
    let Ok(Ok(Control::Hello { route_id, credential, replica })) = hello else {
        gw.metrics.tunnel("no_hello");
        return None;
    };
    Some(Established::Control(Box::new(tls), Hello { route_id, credential, replica }))
}

/// A data connection's head: its tag, then its ticket.
type DataHead = [u8; DATA_MAGIC.len() + TICKET_LEN];

/// Reads at least the four-byte tag, and at most a data connection's whole head (which its
/// agent sends at once): the head and how much of it came. `None` if the peer closed first.
async fn first_bytes(stream: &mut TcpStream) -> Option<(DataHead, usize)> {
    let mut head: DataHead = [0u8; DATA_MAGIC.len() + TICKET_LEN];
    let mut got = 0;
    while got < DATA_MAGIC.len() {
        match stream.read(&mut head[got..]).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got += n,
        }
    }
    Some((head, got))
}

/// A data connection that presented `ticket`: it goes to the public connection that asked for
/// it.
fn data_connection(gw: &Gateway, stream: TcpStream, ticket: [u8; TICKET_LEN]) {
    let waiting = gw.tickets.lock().ok().and_then(|mut p| p.remove(&ticket));
    match waiting {
        Some(tx) => {
            let _ = tx.send(stream);
        }
        None => gw.metrics.tunnel("unknown_ticket"),
    }
}

/// An agent's control connection, its `Hello` read: refused, or one of its route's replicas
/// until it closes, its heartbeats stop, or a newer session of the same replica takes over.
async fn control_connection(gw: &Gateway, mut tls: Box<TlsStream<Replay<TcpStream>>>, hello: Hello, id: u64) {
    let Hello { route_id, credential, replica } = hello;
    let presented = wire::sha256_hex(credential.as_bytes());
    let route = gw.route(&route_id);
    let refuse = |reason: String| Control::Refused { reason };
    let Some(route) = route.filter(|r| r.credential_sha256.eq_ignore_ascii_case(&presented)) else {
        gw.metrics.tunnel("refused");
        let reason = format!("route \"{route_id}\" is unknown here or its credential is wrong");
        let _ = wire::write_frame(&mut tls, &refuse(reason)).await;
        return;
    };
    if !wire::valid_replica_name(&replica) {
        gw.metrics.tunnel("refused");
        let reason =
            format!("the replica name is not usable: at most {} bytes of A-Z a-z 0-9 . _ -", wire::REPLICA_NAME_MAX);
        let _ = wire::write_frame(&mut tls, &refuse(reason)).await;
        return;
    }
    let (connect, mut asks) = mpsc::channel::<Ask>(256);
    let Ok(session) = gw.replicas.join(&route_id, &replica, id, connect) else {
        gw.metrics.tunnel("replica_limit");
        let reason = format!("route \"{route_id}\" has {} agents connected here already", wire::MAX_REPLICAS);
        let _ = wire::write_frame(&mut tls, &refuse(reason)).await;
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

/// An agent's `Hello`, as the gateway reads it.
struct Hello {
    route_id: String,
    credential: String,
    replica: String,
}

/// Answers a session's heartbeats and passes it `Connect` requests until it closes, goes
/// silent for [`wire::dead_after`] the heartbeat, or is retired.
async fn serve_session(
    gw: &Gateway,
    tls: Box<TlsStream<Replay<TcpStream>>>,
    session: &Replica,
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
    loop {
        tokio::select! {
            frame = frames.recv() => match frame {
                Some(Control::Ping { seq, ready, acme }) => {
                    deadline = tokio::time::Instant::now() + dead_after;
                    gw.replicas.heard(session, ready, acme);
                    if !send(&mut writer, &Control::Pong { seq }, heartbeat).await { break; }
                }
                Some(_) => {}
                None => break,
            },
            ask = asks.recv() => match ask {
                Some(Ask { ticket, acme_only }) => {
                    let m = Control::Connect { ticket: wire::hex(&ticket), acme_only };
                    if !send(&mut writer, &m, heartbeat).await { break; }
                }
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
