//! The job's key and certificate. The key is generated once (ECDSA P-256, rcgen), kept as
//! `key.pem` (mode 0600) in the state directory, and never sent anywhere: certificates are
//! obtained by CSR. The current certificate lives behind a resolver that new handshakes read,
//! so renewal swaps it without touching open connections. The same resolver answers ACME
//! TLS-ALPN-01 validation handshakes (RFC 8737) while a challenge is pending: see
//! [`crate::acme`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::{AgentConfig, CertificateSource};

/// Why a certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// Key or certificate handling failed.
    #[error("certificate: {0}")]
    Cert(String),
    /// The issuer refused or could not be reached.
    #[error("the issuer: {0}")]
    Issuer(String),
}

/// The job's key, loaded or created in `state_dir/key.pem`.
pub fn load_or_create_key(state_dir: &Path) -> Result<KeyPair, CertError> {
    let path = state_dir.join("key.pem");
    if path.exists() {
        let pem = std::fs::read_to_string(&path).map_err(|e| CertError::Io(format!("{}: {e}", path.display())))?;
        return KeyPair::from_pem(&pem).map_err(|e| CertError::Cert(e.to_string()));
    }
    std::fs::create_dir_all(state_dir).map_err(|e| CertError::Io(format!("{}: {e}", state_dir.display())))?;
    let key = KeyPair::generate().map_err(|e| CertError::Cert(e.to_string()))?;
    crate::files::write_private(&path, key.serialize_pem().as_bytes())
        .map_err(|e| CertError::Io(format!("{}: {e}", path.display())))?;
    Ok(key)
}

/// The ALPN protocol of ACME TLS-ALPN-01 validation handshakes (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The certificate new handshakes use, and the TLS-ALPN-01 challenge certificates (by server
/// name) while an ACME validation is pending.
#[derive(Debug, Default)]
pub struct CurrentCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    challenges: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl CurrentCert {
    /// Installs a chain (PEM) for the job's key.
    pub fn install(&self, chain_pem: &str, key: &KeyPair) -> Result<(), CertError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| CertError::Cert(e.to_string()))?;
        let der = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())
            .map_err(|e| CertError::Cert(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        let certified = CertifiedKey::from_der(chain, der, &provider).map_err(|e| CertError::Cert(e.to_string()))?;
        if let Ok(mut current) = self.current.write() {
            *current = Some(Arc::new(certified));
        }
        Ok(())
    }

    /// Whether a certificate is installed.
    pub fn is_ready(&self) -> bool {
        self.current.read().map(|c| c.is_some()).unwrap_or(false)
    }

    /// Answers TLS-ALPN-01 handshakes for `server_name` with `certificate` (self-signed,
    /// carrying the acmeIdentifier extension) until [`CurrentCert::clear_challenge`].
    pub fn set_challenge(&self, server_name: &str, certificate: Arc<CertifiedKey>) {
        if let Ok(mut challenges) = self.challenges.write() {
            challenges.insert(server_name.to_ascii_lowercase(), certificate);
        }
    }

    /// Stops answering TLS-ALPN-01 handshakes for `server_name`.
    pub fn clear_challenge(&self, server_name: &str) {
        if let Ok(mut challenges) = self.challenges.write() {
            challenges.remove(&server_name.to_ascii_lowercase());
        }
    }
}

impl ResolvesServerCert for CurrentCert {
    /// A handshake that offers exactly the ALPN protocol `acme-tls/1` is an ACME validation
    /// (RFC 8737 section 3): it gets the pending challenge certificate for its server name, or
    /// nothing (the handshake fails). Every other handshake gets the current certificate.
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme =
            hello.alpn().is_some_and(|mut offered| offered.next() == Some(ACME_TLS_ALPN) && offered.next().is_none());
        if acme {
            let name = hello.server_name()?.to_ascii_lowercase();
            return self.challenges.read().ok()?.get(&name).cloned();
        }
        self.current.read().ok()?.clone()
    }
}

/// Obtains a certificate for the hostname from the configured source; returns the chain PEM
/// and how long it is valid. An ACME source answers its TLS-ALPN-01 challenge through
/// `current` (the tunnel must be up) and keeps its account in `state_dir`.
pub async fn obtain(
    config: &AgentConfig,
    key: &KeyPair,
    current: &CurrentCert,
    state_dir: &Path,
) -> Result<(String, Duration), CertError> {
    let csr = csr(&config.hostname, key)?;
    match &config.certificate {
        CertificateSource::Acme { directory_url, contact, directory_ca } => {
            let acme = crate::acme::AcmeSource { directory_url, contact, directory_ca: directory_ca.as_deref() };
            crate::acme::obtain(&acme, &config.hostname, csr.der(), current, state_dir).await
        }
        CertificateSource::DevCa { url, validity_secs } => {
            let csr_pem = csr.pem().map_err(|e| CertError::Cert(e.to_string()))?;
            let body = serde_json::json!({
                "routeId": config.route_id, "credential": config.credential, "csr": csr_pem,
                "validitySecs": validity_secs,
            });
            let chain = post_json(url, "/api/dev-ca/sign", &body).await?;
            Ok((chain, Duration::from_secs(*validity_secs)))
        }
    }
}

/// A CSR for `hostname` signed by the job's key.
fn csr(hostname: &str, key: &KeyPair) -> Result<rcgen::CertificateSigningRequest, CertError> {
    let params = CertificateParams::new(vec![hostname.to_owned()]).map_err(|e| CertError::Cert(e.to_string()))?;
    params.serialize_request(key).map_err(|e| CertError::Cert(e.to_string()))
}

/// Writes the chain next to the key (`cert.pem`), for people and tools to inspect.
pub fn save_chain(state_dir: &Path, chain_pem: &str) -> Result<PathBuf, CertError> {
    let path = state_dir.join("cert.pem");
    std::fs::write(&path, chain_pem).map_err(|e| CertError::Io(format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// When to renew a certificate valid for `lifetime`: after two thirds of it.
pub fn renew_after(lifetime: Duration) -> Duration {
    lifetime * 2 / 3
}

/// `SystemTime` is only used for logs; renewal runs on the monotonic clock.
pub fn now_unix() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

async fn post_json(base: &str, path: &str, body: &serde_json::Value) -> Result<String, CertError> {
    let authority = base.trim_start_matches("http://").trim_end_matches('/');
    let stream =
        tokio::net::TcpStream::connect(authority).await.map_err(|e| CertError::Issuer(format!("{base}: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| CertError::Issuer(e.to_string()))?;
    tokio::spawn(connection);
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap_or_default())))
        .map_err(|e| CertError::Issuer(e.to_string()))?;
    let response = sender.send_request(request).await.map_err(|e| CertError::Issuer(e.to_string()))?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| CertError::Issuer(e.to_string()))?.to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status.is_success() { Ok(text) } else { Err(CertError::Issuer(format!("{status}: {text}"))) }
}
