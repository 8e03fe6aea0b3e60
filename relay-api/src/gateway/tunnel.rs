//! The gateway's tunnel port: TLS control connections from agents (authenticated by their
//! route credential, kept alive by heartbeats) and plain data connections that present a
//! single-use ticket. The first four bytes tell them apart: a data connection starts with
//! `SVCD`, a control connection with a TLS record. They are read (within 10 s), not peeked:
//! the TLS acceptor gets a stream that gives them back first, so waiting for them costs no
//! polling.

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

use super::replay::Replay;
use super::{Gateway, GatewayError, Session};
use agent::accept::Backoff;
use agent::wire::{self, Control, DATA_MAGIC, TICKET_LEN};

/// Time allowed for each step before a tunnel connection is established: its first bytes, its
/// ticket, the TLS handshake, the `Hello`.
const STEP: Duration = Duration::from_secs(10);

/// The TLS configuration of the tunnel port.
pub(super) fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<ServerConfig>, GatewayError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| GatewayError::Tls(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| GatewayError::Tls(e.to_string()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| GatewayError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| GatewayError::Tls(e.to_string()))?;
    Ok(Arc::new(config))
}

pub(super) async fn accept_loop(gw: Arc<Gateway>, listener: TcpListener, tls: Arc<ServerConfig>) {
    let acceptor = TlsAcceptor::from(tls);
    let sessions = Arc::new(AtomicU64::new(0));
    let mut backoff = Backoff::default();
    loop {
        let mut stream = match backoff.accept(&listener).await {
            Ok((stream, _)) => stream,
            Err(_) => {
                gw.metrics.accept_error("tunnel");
                continue;
            }
        };
        let (gw, acceptor, sessions) = (gw.clone(), acceptor.clone(), sessions.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let Ok(Some((head, got))) = tokio::time::timeout(STEP, first_bytes(&mut stream)).await else { return };
            if head.starts_with(DATA_MAGIC) {
                data_connection(&gw, stream, head, got).await;
            } else {
                let id = sessions.fetch_add(1, Ordering::Relaxed);
                control_connection(&gw, Replay::new(&head[..got], stream), &acceptor, id).await;
            }
        });
    }
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

/// A data connection whose first `got` bytes of `head` (its `SVCD` at least) have been read:
/// the rest of its ticket, then it goes to the public connection that asked for it.
async fn data_connection(gw: &Gateway, mut stream: TcpStream, mut head: DataHead, got: usize) {
    let read = tokio::time::timeout(STEP, stream.read_exact(&mut head[got..])).await;
    if !matches!(read, Ok(Ok(_))) {
        return;
    }
    let mut ticket = [0u8; TICKET_LEN];
    ticket.copy_from_slice(&head[DATA_MAGIC.len()..]);
    let waiting = gw.pending.lock().ok().and_then(|mut p| p.remove(&ticket));
    match waiting {
        Some(tx) => {
            let _ = tx.send(stream);
        }
        None => gw.metrics.tunnel("unknown_ticket"),
    }
}

async fn control_connection(gw: &Gateway, stream: Replay<TcpStream>, acceptor: &TlsAcceptor, id: u64) {
    let Ok(Ok(mut tls)) = tokio::time::timeout(STEP, acceptor.accept(stream)).await else {
        return gw.metrics.tunnel("tls_failed");
    };
    let hello = tokio::time::timeout(STEP, wire::read_frame(&mut tls)).await;
    let Ok(Ok(Control::Hello { route_id, credential })) = hello else {
        return gw.metrics.tunnel("no_hello");
    };
    let presented = wire::sha256_hex(credential.as_bytes());
    let route = gw.route(&route_id);
    let Some(route) = route.filter(|r| r.credential_sha256.eq_ignore_ascii_case(&presented)) else {
        gw.metrics.tunnel("refused");
        let reason = format!("route \"{route_id}\" is unknown here or its credential is wrong");
        let _ = wire::write_frame(&mut tls, &Control::Refused { reason }).await;
        return;
    };
    let heartbeat = gw.config.heartbeat;
    if wire::write_frame(&mut tls, &Control::Welcome { heartbeat_secs: heartbeat.as_secs().max(1) }).await.is_err() {
        return;
    }
    gw.metrics.tunnel("accepted");
    // The newest agent of a route takes over: a restarted agent must not wait for the old
    // session to time out.
    let (connect, mut asks) = mpsc::channel::<[u8; TICKET_LEN]>(256);
    if let Ok(mut s) = gw.sessions.lock() {
        s.insert(route_id.clone(), Session { id, connect });
    }
    let _presence = gw.accounting.agent(&route.route_id);
    let (mut reader, mut writer) = tokio::io::split(tls);
    let (frames_tx, mut frames) = mpsc::channel(16);
    let read_task = tokio::spawn(async move {
        while let Ok(frame) = wire::read_frame(&mut reader).await {
            if frames_tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    let dead_after = heartbeat * 3;
    let mut deadline = tokio::time::Instant::now() + dead_after;
    loop {
        tokio::select! {
            frame = frames.recv() => match frame {
                Some(Control::Ping { seq }) => {
                    deadline = tokio::time::Instant::now() + dead_after;
                    if wire::write_frame(&mut writer, &Control::Pong { seq }).await.is_err() { break; }
                }
                Some(_) => {}
                None => break,
            },
            ask = asks.recv() => match ask {
                Some(ticket) => {
                    let m = Control::Connect { ticket: wire::hex(&ticket) };
                    if wire::write_frame(&mut writer, &m).await.is_err() { break; }
                }
                None => break,
            },
            () = tokio::time::sleep_until(deadline) => {
                gw.metrics.tunnel("heartbeat_lost");
                break;
            }
        }
    }
    read_task.abort();
    if let Ok(mut s) = gw.sessions.lock()
        && s.get(&route_id).is_some_and(|s| s.id == id)
    {
        s.remove(&route_id);
    }
}
