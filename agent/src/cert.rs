//! The job's key and certificate. The key is generated once (ECDSA P-256, rcgen), kept as
//! `key.pem` (mode 0600) in the state directory, and never sent anywhere: certificates are
//! obtained by CSR. The current certificate lives behind a resolver that new handshakes read,
//! so renewal swaps it without touching open connections. The same resolver answers ACME
//! TLS-ALPN-01 validation handshakes (RFC 8737) while a challenge is pending: see
//! [`crate::issue`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rcgen::KeyPair;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read or written (the error names it).
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Key or certificate handling failed.
    #[error("certificate: {0}")]
    Cert(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The issuer refused or could not be reached.
    #[error("the issuer: {0}")]
    Issuer(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The job's key, loaded or created in `state_dir/key.pem`.
pub fn load_or_create_key(state_dir: &Path) -> Result<KeyPair, CertError> {
    let path = state_dir.join("key.pem");
    if path.exists() {
        let pem = fs_err::read_to_string(&path).map_err(CertError::Io)?;
        return KeyPair::from_pem(&pem).map_err(|e| CertError::Cert(e.into()));
    }
    crate::files::create_private_dir(state_dir).map_err(CertError::Io)?;
    let key = KeyPair::generate().map_err(|e| CertError::Cert(e.into()))?;
    crate::files::write_private(&path, key.serialize_pem().as_bytes()).map_err(CertError::Io)?;
    Ok(key)
}

/// The ALPN protocol of ACME TLS-ALPN-01 validation handshakes (RFC 8737).
pub use relay_wire::alpn::ACME_TLS_ALPN;

/// The certificate new handshakes use, and the TLS-ALPN-01 challenge certificates (by server
/// name) while an ACME validation is pending.
#[derive(Debug, Default)]
pub struct CurrentCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    challenges: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    /// Whether a challenge is pending: each tunnel tells its gateway at once, so that the
    /// route's ACME validations come to this replica ([`relay_wire::wire::Control::Ping`]).
    pending: tokio::sync::watch::Sender<bool>,
    /// Told at each install: readiness is asked again at once ([`crate::readiness`]).
    installed: tokio::sync::Notify,
}

impl CurrentCert {
    /// Installs a chain (PEM) for the job's key.
    pub fn install(&self, chain_pem: &str, key: &KeyPair) -> Result<(), CertError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| CertError::Cert(e.into()))?;
        let der =
            PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).map_err(|e| CertError::Cert(e.into()))?;
        let provider = rustls::crypto::ring::default_provider();
        let certified = CertifiedKey::from_der(chain, der, &provider).map_err(|e| CertError::Cert(e.into()))?;
        if let Ok(mut current) = self.current.write() {
            *current = Some(Arc::new(certified));
        }
        self.installed.notify_one();
        Ok(())
    }

    /// Resolves at the next install (or at once if one happened since the last call).
    pub async fn installed(&self) {
        self.installed.notified().await;
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
            self.pending.send_replace(true);
        }
    }

    /// Stops answering TLS-ALPN-01 handshakes for `server_name`.
    pub fn clear_challenge(&self, server_name: &str) {
        if let Ok(mut challenges) = self.challenges.write() {
            challenges.remove(&server_name.to_ascii_lowercase());
            self.pending.send_replace(!challenges.is_empty());
        }
    }

    /// Whether a challenge is pending, as it changes.
    pub fn pending(&self) -> tokio::sync::watch::Receiver<bool> {
        self.pending.subscribe()
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

/// Writes the chain next to the key (`cert.pem`), for people and tools to inspect.
pub fn save_chain(state_dir: &Path, chain_pem: &str) -> Result<PathBuf, CertError> {
    let path = state_dir.join("cert.pem");
    crate::files::write_private(&path, chain_pem.as_bytes()).map_err(CertError::Io)?;
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

/// What a leaf certificate says about itself: for checks and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafFacts {
    /// The serial number, lower-case hex of its DER bytes.
    pub serial_hex: String,
    /// The end of its validity.
    pub not_after: SystemTime,
    /// Its DNS subject alternative names.
    pub dns_names: Vec<String>,
}

/// Reads a certificate (DER).
pub fn leaf_facts(der: &[u8]) -> Result<LeafFacts, CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| CertError::Cert(e.into()))?;
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
    let dns_names = cert
        .subject_alternative_name()
        .map_err(|e| CertError::Cert(e.into()))?
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(LeafFacts {
        serial_hex: crate::wire::hex(cert.raw_serial()),
        not_after: SystemTime::UNIX_EPOCH + Duration::from_secs(not_after),
        dns_names,
    })
}

/// The first certificate of a chain (PEM), parsed.
pub fn chain_leaf_facts(chain_pem: &str) -> Result<LeafFacts, CertError> {
    let leaf = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()
        .ok_or_else(|| CertError::Cert("no certificate in the chain".into()))?
        .map_err(|e| CertError::Cert(e.into()))?;
    leaf_facts(&leaf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issue::csr;
    use rcgen::CertificateParams;

    #[test]
    fn one_csr_names_every_hostname_and_the_leaf_facts_read_back() {
        let key = KeyPair::generate().expect("key");
        let names = vec!["app.localhost".to_owned(), "shop.localhost".to_owned()];
        let request = csr(&names, &key).expect("csr");
        let parsed = rcgen::CertificateSigningRequestParams::from_der(request.der()).expect("parses");
        let listed: Vec<String> = parsed
            .params
            .subject_alt_names
            .iter()
            .filter_map(|san| match san {
                rcgen::SanType::DnsName(n) => Some(n.as_str().to_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(listed, names);

        let mut params = CertificateParams::new(names.clone()).expect("params");
        params.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x01, 0xab]));
        params.not_after = rcgen::date_time_ymd(2031, 2, 3);
        let cert = params.self_signed(&key).expect("cert");
        let facts = chain_leaf_facts(&cert.pem()).expect("facts");
        assert_eq!(facts.serial_hex, "01ab");
        assert_eq!(facts.dns_names, names);
        assert_eq!(facts.not_after.duration_since(SystemTime::UNIX_EPOCH).expect("after").as_secs(), 1_927_843_200);
    }
}
