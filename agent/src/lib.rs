//! The job-side agent: keeps the job's TLS private key (it never leaves the state directory),
//! gets one certificate for all the route's hostnames by CSR (from the development CA, or from
//! an ACME CA by TLS-ALPN-01 answered through the gateway), renews it before expiry and
//! replaces it when the coordinator adds or removes a hostname, holds the outbound tunnel to
//! the gateway, terminates TLS for every tunneled client connection, serves `/health` and
//! `/.well-known/svc/challenge`, and proxies the rest to the local app.
//!
//! `svc agent run --config STATE_DIR/agent.json` runs [`run`].

#![forbid(unsafe_code)]

pub mod acme;
pub mod acme_turn;
pub mod app_socket;
pub mod cert;
pub mod config;
pub mod dial;
pub mod gateways;
pub mod hostnames;
mod http;
pub mod invariants;
mod issue;
mod lifecycle;
pub mod readiness;
pub mod serve;
pub mod tunnel;

use std::path::Path;
use std::sync::Arc;

pub use config::{AgentConfig, CertificateSource, PinnedGateway};
pub use http::CallError;
// The protocol and shared parts live in `relay-wire`; here under their old names too.
pub use relay_wire::{accept, challenge, files, idle, wire};

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The key or the first certificate could not be had.
    #[error(transparent)]
    Cert(#[from] cert::CertError),
    /// The tunnel could not be set up.
    #[error(transparent)]
    Tunnel(#[from] tunnel::TunnelError),
    /// The direct listener could not bind.
    #[error("cannot listen on {0}")]
    Listen(String),
}

/// Runs the agent for ever: key, tunnel, certificate (renewed, and replaced when the route's
/// hostnames change), serving.
///
/// The tunnel comes up before the first certificate: an ACME CA validates TLS-ALPN-01
/// through it. Until a certificate is installed, client handshakes fail (no certificate).
pub async fn run(config: AgentConfig, state_dir: &Path) -> Result<(), AgentError> {
    let key = cert::load_or_create_key(state_dir)?;
    let current = Arc::new(cert::CurrentCert::default());
    let names = Arc::new(hostnames::Hostnames::new(&config.hostname));
    let ctx = serve::Context::new(config.clone(), current.clone(), names.clone());
    readiness::start(&ctx);
    if let Some(addr) = config.direct_listen {
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| AgentError::Listen(format!("{addr}: {e}")))?;
        tracing::info!("svc agent: direct HTTPS on {}", listener.local_addr().unwrap_or(addr));
        tokio::spawn(serve::direct(ctx.clone(), listener));
    }
    let ca_pem = fs_err::read_to_string(&config.gateway_ca).map_err(|e| tunnel::TunnelError::Io(e.into()))?;
    // A tunnel to every gateway of the route: the coordinator's, and each gateway host's (as
    // launched, then as the coordinator lists them).
    let link = tunnel::Link::trusting(&config, &ca_pem)?;
    tokio::spawn(tunnel::run(ctx.clone(), config.clone(), link));
    let hosts = Arc::new(tunnel::Tunnels::new(ctx, config.clone()));
    hosts.reconcile(&config.pinned_gateways);
    lifecycle::run(config, key, current, names, hosts, state_dir.to_owned()).await;
    Ok(())
}
