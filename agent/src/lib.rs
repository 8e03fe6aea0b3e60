//! The job-side agent: keeps the job's TLS private key (it never leaves the state directory),
//! gets a certificate for the route's hostname by CSR (from the development CA, or from an
//! ACME CA by TLS-ALPN-01 answered through the gateway) and renews it before expiry, holds the
//! outbound tunnel to the gateway, terminates TLS for every tunneled client connection, serves
//! `/health` and `/.well-known/svc/challenge`, and proxies the rest to the local app.
//!
//! `svc agent run --config STATE_DIR/agent.json` runs [`run`].

#![forbid(unsafe_code)]

pub mod acme;
pub mod cert;
pub mod challenge;
pub mod config;
pub mod files;
pub mod serve;
pub mod tunnel;
pub mod wire;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use config::{AgentConfig, CertificateSource};

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

/// Runs the agent for ever: key, tunnel, certificate (and its renewal), serving.
///
/// The tunnel comes up before the first certificate: an ACME CA validates TLS-ALPN-01
/// through it. Until a certificate is installed, client handshakes fail (no certificate).
pub async fn run(config: AgentConfig, state_dir: &Path) -> Result<(), AgentError> {
    let key = cert::load_or_create_key(state_dir)?;
    let current = Arc::new(cert::CurrentCert::default());
    let ctx = serve::Context::new(config.clone(), current.clone());
    if let Some(addr) = config.direct_listen {
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| AgentError::Listen(format!("{addr}: {e}")))?;
        eprintln!("svc agent: direct HTTPS on {}", listener.local_addr().unwrap_or(addr));
        let ctx = ctx.clone();
        tokio::spawn(async move {
            while let Ok((stream, peer)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve::connection(ctx.clone(), stream, Some(peer)));
            }
        });
    }
    let ca_pem = std::fs::read_to_string(&config.gateway_ca)
        .map_err(|e| tunnel::TunnelError::Io(format!("{}: {e}", config.gateway_ca.display())))?;
    let tls = tunnel::client_config(&ca_pem)?;
    tokio::spawn(tunnel::run(ctx, config.clone(), tls));

    let lifetime = first_certificate(&config, &key, &current, state_dir).await;
    renew(config, key, current, state_dir.to_owned(), lifetime).await;
    Ok(())
}

/// Gets the first certificate, retrying every 2 s (the issuer may still be starting); an ACME
/// CA's retries double up to 5 minutes, to stay within public CAs' failed-validation limits.
async fn first_certificate(
    config: &AgentConfig,
    key: &rcgen::KeyPair,
    current: &cert::CurrentCert,
    state_dir: &Path,
) -> Duration {
    let cap = match config.certificate {
        CertificateSource::DevCa { .. } => Duration::from_secs(2),
        CertificateSource::Acme { .. } => Duration::from_secs(300),
    };
    let mut wait = Duration::from_secs(2);
    loop {
        match install(config, key, current, state_dir).await {
            Ok(lifetime) => return lifetime,
            Err(e) => {
                eprintln!("svc agent: certificate: {e}; retrying in {} s", wait.as_secs());
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(cap);
            }
        }
    }
}

async fn install(
    config: &AgentConfig,
    key: &rcgen::KeyPair,
    current: &cert::CurrentCert,
    state_dir: &Path,
) -> Result<Duration, cert::CertError> {
    let (chain, lifetime) = cert::obtain(config, key, current, state_dir).await?;
    current.install(&chain, key)?;
    cert::save_chain(state_dir, &chain)?;
    eprintln!("svc agent: certificate for {} installed (valid {} s)", config.hostname, lifetime.as_secs());
    Ok(lifetime)
}

/// Renews after two thirds of each certificate's lifetime; on failure retries every 10 s
/// (or sooner for short certificates) while the old one is still valid.
async fn renew(
    config: AgentConfig,
    key: rcgen::KeyPair,
    current: Arc<cert::CurrentCert>,
    state_dir: std::path::PathBuf,
    mut lifetime: Duration,
) {
    loop {
        tokio::time::sleep(cert::renew_after(lifetime)).await;
        loop {
            match install(&config, &key, &current, &state_dir).await {
                Ok(l) => {
                    lifetime = l;
                    break;
                }
                Err(e) => {
                    eprintln!("svc agent: renewal: {e}; retrying");
                    tokio::time::sleep((lifetime / 20).clamp(Duration::from_secs(1), Duration::from_secs(10))).await;
                }
            }
        }
    }
}
