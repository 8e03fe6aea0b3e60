//! The agent's side of the tunnel: a TLS control connection it dials to the gateway and
//! authenticates with the route credential; a data connection dialed per client connection
//! the gateway announces. The job accepts no inbound connection.
//!
//! The control connection sends a heartbeat every `heartbeat_secs` (1 s by default), saying
//! whether the app is ready ([`crate::readiness`]; at once when that changes), and is
//! declared dead after three heartbeats without an answer, and never under 5 s
//! (`relay_wire::wire::dead_after`), so a dead path is noticed within 10 s; then the agent
//! reconnects with exponential backoff (0.25 s doubling to 10 s) and full jitter.
//!
//! After the first (sent at once), heartbeats fall on whole multiples of the heartbeat on the
//! host's clock ([`until_next_beat`]): every agent of a host pings in the same instant, so a
//! coordinator running many of them serves their pings in one wake instead of one wake each
//! (issue 44, point 5). A ping told early (a change of readiness, an ACME challenge) does not
//! move the grid, so pings are never more than 1.1 heartbeats apart (and a busy host's delay).
//!
//! An agent holds one such tunnel per gateway of its route ([`Link`]): the coordinator's
//! gateway, whose certificate its CA signs, and gateway hosts, each recognised by its
//! certificate's SHA-256 ([`pinned_config`]).
//!
//! Each session offers to hold a few data connections dialed ahead of any client
//! ([`pool`]): a gateway that knows pools hands their tickets in `Pool` frames and gives a
//! new client one of them, sparing it the `Connect` round trip and the dial.

mod pool;

use std::sync::Arc;
use std::time::Duration;

use crate::wire::{self, Control, DATA_MAGIC, TICKET_LEN};
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncWriteExt;
use tokio_rustls::TlsConnector;

use crate::config::{AgentConfig, PinnedGateway};
use crate::serve::{self, Context};

/// Why a control session ended.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// Connecting or talking failed.
    #[error("{0}")]
    Io(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The gateway refused the credential (retrying will not help until the route changes).
    #[error("the gateway refused this agent: {0}")]
    Refused(String),
    /// No heartbeat answer in time.
    #[error("no heartbeat answer for {0:?}: the path to the gateway is dead")]
    Dead(Duration),
}

/// One gateway the agent tunnels to: where, the name it checks, and how it trusts it.
#[derive(Debug, Clone)]
pub struct Link {
    /// The tunnel address, `HOST:PORT`.
    pub address: String,
    /// The server name sent and checked.
    pub server_name: ServerName<'static>,
    /// Trusts the gateway's CA, or pins its certificate.
    pub tls: Arc<ClientConfig>,
}

impl Link {
    /// The coordinator's gateway: `gateway`, its certificate naming `gateway_name`, signed by
    /// the CA in `ca_pem`.
    pub fn trusting(config: &AgentConfig, ca_pem: &str) -> Result<Link, TunnelError> {
        let server_name = ServerName::try_from(config.gateway_name.clone()).map_err(|e| TunnelError::Io(e.into()))?;
        Ok(Link { address: config.gateway.to_string(), server_name, tls: client_config(ca_pem)? })
    }

    /// A gateway host, recognised by its certificate's digest.
    pub fn pinned(gateway: &PinnedGateway) -> Result<Link, TunnelError> {
        let host = gateway
            .address
            .rsplit_once(':')
            .map(|(host, _)| host.trim_start_matches('[').trim_end_matches(']'))
            .ok_or_else(|| TunnelError::Io(format!("{}: not HOST:PORT", gateway.address).into()))?;
        let server_name = ServerName::try_from(host.to_owned()).map_err(|e| TunnelError::Io(e.into()))?;
        Ok(Link { address: gateway.address.clone(), server_name, tls: pinned_config(&gateway.tunnel_sha256)? })
    }
}

/// The tunnels to the route's gateway hosts, started and stopped as the coordinator's list
/// changes (the tunnel to the coordinator's gateway runs beside them for ever). A stopped
/// tunnel's open connections go on: each data connection is a task of its own.
pub struct Tunnels {
    ctx: Arc<Context>,
    config: AgentConfig,
    running: std::sync::Mutex<std::collections::HashMap<PinnedGateway, tokio::task::AbortHandle>>,
}

impl Tunnels {
    /// No tunnel to a gateway host yet.
    pub fn new(ctx: Arc<Context>, config: AgentConfig) -> Tunnels {
        Tunnels { ctx, config, running: std::sync::Mutex::default() }
    }

    /// Holds a tunnel to each gateway of `wanted` and to no other host; how many tunnels were
    /// started or stopped. A gateway whose address does not read is skipped, saying so.
    pub fn reconcile(&self, wanted: &[PinnedGateway]) -> usize {
        let Ok(mut running) = self.running.lock() else { return 0 };
        let before = running.len();
        running.retain(|gateway, task| {
            let keep = wanted.contains(gateway);
            if !keep {
                tracing::info!("svc agent: {} no longer serves the route; its tunnel is closed", gateway.address);
                task.abort();
            }
            keep
        });
        let mut changed = before - running.len();
        for gateway in wanted {
            if running.contains_key(gateway) {
                continue;
            }
            match Link::pinned(gateway) {
                Ok(link) => {
                    let task = tokio::spawn(run(self.ctx.clone(), self.config.clone(), link));
                    running.insert(gateway.clone(), task.abort_handle());
                    changed += 1;
                }
                Err(e) => tracing::warn!("svc agent: gateway {}: {e}; not tunnelling to it", gateway.address),
            }
        }
        changed
    }

    /// The gateway hosts tunnelled to now.
    pub fn hosts(&self) -> Vec<PinnedGateway> {
        self.running.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default()
    }
}

impl Drop for Tunnels {
    fn drop(&mut self) {
        if let Ok(running) = self.running.lock() {
            for task in running.values() {
                task.abort();
            }
        }
    }
}

/// Accepts exactly the certificate whose SHA-256 is the pin, whatever names it or signs it,
/// and checks the handshake's signatures with the provider's algorithms.
#[derive(Debug)]
struct Pinned {
    sha256: String,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if wire::sha256_hex(end_entity.as_ref()) == self.sha256 {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The client TLS configuration accepting only the certificate whose SHA-256 (lowercase hex)
/// is `sha256`.
pub fn pinned_config(sha256: &str) -> Result<Arc<ClientConfig>, TunnelError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        Pinned { sha256: sha256.to_ascii_lowercase(), algorithms: provider.signature_verification_algorithms };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TunnelError::Io(e.into()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The client TLS configuration trusting the gateway's CA.
pub fn client_config(ca_pem: &str) -> Result<Arc<ClientConfig>, TunnelError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| TunnelError::Io(format!("the gateway CA: {e}").into()))?;
        roots.add(cert).map_err(|e| TunnelError::Io(format!("the gateway CA: {e}").into()))?;
    }
    let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TunnelError::Io(e.into()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Keeps a control session to `link` up for ever, reconnecting with backoff and jitter.
pub async fn run(ctx: Arc<Context>, config: AgentConfig, link: Link) {
    let mut attempt = 0u32;
    loop {
        let started = tokio::time::Instant::now();
        let result = session(&ctx, &config, &link).await;
        match &result {
            Err(TunnelError::Refused(reason)) => tracing::warn!("svc agent: {}: {reason}", link.address),
            Err(e) => tracing::warn!("svc agent: tunnel to {}: {e}; reconnecting", link.address),
            Ok(()) => {}
        }
        // A session that lived a while resets the backoff.
        if started.elapsed() > Duration::from_secs(30) {
            attempt = 0;
        }
        tokio::time::sleep(backoff(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

/// Exponential backoff from 250 ms to 10 s, with full jitter.
fn backoff(attempt: u32) -> Duration {
    let cap = Duration::from_millis(250).saturating_mul(1 << attempt.min(6)).min(Duration::from_secs(10));
    let mut r = [0u8; 4];
    let _ = getrandom_fill(&mut r);
    cap.mul_f64(f64::from(u32::from_le_bytes(r)) / f64::from(u32::MAX)).max(Duration::from_millis(50))
}

fn getrandom_fill(buf: &mut [u8]) -> Result<(), ()> {
    use ring::rand::SecureRandom;
    ring::rand::SystemRandom::new().fill(buf).map_err(|_| ())
}

async fn session(ctx: &Arc<Context>, config: &AgentConfig, link: &Link) -> Result<(), TunnelError> {
    let io = |e: std::io::Error| TunnelError::Io(format!("{}: {e}", link.address).into());
    let tcp = crate::dial::Dial::process()
        .connect_within(link.address.as_str(), Duration::from_secs(10))
        .await
        .map_err(io)?;
    let handshake = TlsConnector::from(link.tls.clone()).connect(link.server_name.clone(), tcp);
    let mut stream = tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .map_err(|_| TunnelError::Io(format!("{}: TLS handshake timed out", link.address).into()))?
        .map_err(io)?;
    let replica = config.replica.as_deref().unwrap_or_default();
    let hello = Control::hello(&config.route_key, &config.route_id, replica, stream.get_ref().1)
        .ok_or_else(|| TunnelError::Io(format!("{}: the gateway's TLS session is not TLS 1.3", link.address).into()))?
        .with_pool(pool::OFFER);
    wire::write_frame(&mut stream, &hello).await.map_err(|e| TunnelError::Io(e.into()))?;
    let heartbeat = match wire::read_frame(&mut stream).await.map_err(|e| TunnelError::Io(e.into()))? {
        Control::Welcome { heartbeat_secs } => Duration::from_secs(heartbeat_secs.max(1)),
        Control::Refused { reason } => return Err(TunnelError::Refused(reason)),
        other => return Err(TunnelError::Io(format!("unexpected {other:?}").into())),
    };
    tracing::info!("svc agent: tunnel up to {} for route {}", link.address, config.route_id);
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel(64);
    let read_task = tokio::spawn(async move {
        while let Ok(frame) = wire::read_frame(&mut reader).await {
            if frames_tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    let dead_after = wire::dead_after(heartbeat);
    // The first ping at once (it tells readiness), the others on the host's grid.
    let (mut ping_now, mut beat_at) = (true, next_beat(heartbeat));
    let mut ready = ctx.ready.subscribe();
    let mut acme = ctx.cert.pending();
    let mut last_heard = tokio::time::Instant::now();
    let mut seq = 0u64;
    // What each data connection needs, shared: no copy of the configuration (and of its
    // secrets) per connection.
    let address: Arc<str> = Arc::from(link.address.as_str());
    let proxy_protocol = config.proxy_protocol;
    let pooled = pool::Held::default();
    let result = loop {
        tokio::select! {
            frame = frames.recv() => match frame {
                Some(Control::Connect { ticket, acme_only }) => {
                    last_heard = tokio::time::Instant::now();
                    if let Some(ticket) = wire::unhex::<TICKET_LEN>(&ticket) {
                        let data = data_connection(ctx.clone(), proxy_protocol, address.clone(), ticket, acme_only);
                        tokio::spawn(data);
                    }
                }
                Some(Control::Pool { tickets }) => {
                    last_heard = tokio::time::Instant::now();
                    pooled.dial_ahead(&tickets, ctx, proxy_protocol, &address);
                }
                Some(_) => last_heard = tokio::time::Instant::now(),
                None => break Err(TunnelError::Io("the gateway closed the tunnel".into())),
            },
            // Declared dead exactly `dead_after` after the last word from the gateway, not at
            // the next tick after that.
            () = tokio::time::sleep_until(last_heard + dead_after) => break Err(TunnelError::Dead(dead_after)),
            // A change of readiness is told at once, not at the next heartbeat (a closed
            // channel never happens: the context holds its sender).
            Ok(()) = ready.changed() => ping_now = true,
            // So is a pending ACME challenge: the CA may dial as soon as it is told.
            Ok(()) = acme.changed() => ping_now = true,
            () = tokio::time::sleep_until(beat_at), if !ping_now => {
                ping_now = true;
                beat_at = next_beat(heartbeat);
            }
            // `biased` would not do: a ready frame or the dead line must not wait on a ping.
            () = std::future::ready(()), if ping_now => {
                ping_now = false;
                seq += 1;
                // A write to a stopped peer may hang once buffers fill: bound it.
                let ping = Control::Ping { seq, ready: *ready.borrow_and_update(), acme: *acme.borrow_and_update() };
                match tokio::time::timeout(heartbeat, wire::write_frame(&mut writer, &ping)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => break Err(TunnelError::Io(e.into())),
                    Err(_) => {}
                }
            }
        }
    };
    read_task.abort();
    result
}

/// When the next heartbeat on the host's grid ([`until_next_beat`]) is due.
fn next_beat(heartbeat: Duration) -> tokio::time::Instant {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    tokio::time::Instant::now() + until_next_beat(since_epoch, heartbeat)
}

/// How long from `since_epoch` (the host's clock) to its next whole multiple of `heartbeat`
/// that is at least a tenth of a heartbeat away: a beat that fired a hair early (the
/// monotonic clock the timer uses and the host's clock drift apart) is not sent twice. So two
/// beats are at most 1.1 heartbeats apart, plus however late the host ran the timer.
fn until_next_beat(since_epoch: Duration, heartbeat: Duration) -> Duration {
    let period = heartbeat.as_nanos().max(1);
    let until = period - since_epoch.as_nanos() % period;
    let until = if until < period / 10 { until + period } else { until };
    // Below two periods, each from a `Duration`.
    Duration::from_nanos(u64::try_from(until).unwrap_or(u64::MAX))
}

/// A data connection for `ticket`; `acme_only`: the gateway let it past the route's
/// allow-list as an ACME validation, so it gets a TLS handshake and nothing more;
/// `proxy_protocol`: the gateway sends a PROXY v2 header first.
async fn data_connection(
    ctx: Arc<Context>,
    proxy_protocol: bool,
    address: Arc<str>,
    ticket: [u8; TICKET_LEN],
    acme_only: bool,
) {
    let Some(mut stream) = present(&address, &ticket).await else { return };
    let client = if proxy_protocol {
        match within_proxy_limit(wire::read_proxy_v2(&mut stream)).await {
            Some(client) => client,
            None => return,
        }
    } else {
        None
    };
    serve_data(ctx, client, stream, acme_only);
}

/// A data connection to the gateway at `address`, `ticket` presented; `None` if it failed.
async fn present(address: &str, ticket: &[u8; TICKET_LEN]) -> Option<crate::dial::Conn> {
    let mut stream = crate::dial::Dial::process().connect_within(address, Duration::from_secs(10)).await.ok()?;
    let mut head = [0u8; DATA_MAGIC.len() + TICKET_LEN];
    head[..DATA_MAGIC.len()].copy_from_slice(DATA_MAGIC);
    head[DATA_MAGIC.len()..].copy_from_slice(ticket);
    stream.write_all(&head).await.ok()?;
    Some(stream)
}

/// A data connection's PROXY v2 header, read by `read` within 10 s: the client's address
/// (`None` inside: the header has none), or `None` if it failed or took longer.
async fn within_proxy_limit(
    read: impl Future<Output = Result<Option<std::net::SocketAddr>, wire::WireError>>,
) -> Option<Option<std::net::SocketAddr>> {
    tokio::time::timeout(Duration::from_secs(10), read).await.ok()?.ok()
}

/// What a data connection gets once the gateway has bound it to `client` (its PROXY header
/// read, if it sends one): the client's bytes, served in a task of its own (`acme_only`: a
/// TLS handshake and nothing more). The task holds only the served connection for its life:
/// the caller's keeps room for the dial, the ticket and the PROXY header's read, and ends.
fn serve_data(ctx: Arc<Context>, client: Option<std::net::SocketAddr>, stream: crate::dial::Conn, acme_only: bool) {
    if acme_only {
        tokio::spawn(serve::acme_validation(ctx, stream));
    } else {
        tokio::spawn(serve::connection(ctx, stream, client));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::until_next_beat;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn heartbeats_fall_on_the_hosts_grid_at_most_a_tenth_of_a_heartbeat_late() {
        let ms = Duration::from_millis;
        assert_eq!(until_next_beat(ms(12_300), S), ms(700));
        assert_eq!(until_next_beat(ms(12_000), S), S, "a beat just due is the next one");
        assert_eq!(until_next_beat(ms(11_950), S), ms(1_050), "50 ms away is too close: the one after");
        assert_eq!(until_next_beat(ms(13_500), 2 * S), ms(500));
        // Agents starting at different times, each beating as told (up to 0.3 s late): every
        // beat lands on the grid, and none is more than 1.1 heartbeats (and its lateness) after
        // the one before.
        for start in [ms(123), ms(999), ms(40_017)] {
            let (mut now, mut last) = (start, start);
            for i in 0..50u64 {
                let late = ms(i * 7 % 300);
                let beat = now + until_next_beat(now, S);
                assert_eq!(beat.as_nanos() % S.as_nanos(), 0, "on the grid: {beat:?}");
                now = beat + late;
                assert!(now - last <= S + S / 10 + late, "{:?} between beats", now - last);
                last = now;
            }
        }
    }
}
