//! The operator's Ed25519 key (ring; PKCS#8 in a PEM `PRIVATE KEY` block, kept on the host
//! with mode 0600) and the tunnel port's self-signed certificate.

use base64::Engine as _;
use ring::signature::{Ed25519KeyPair, KeyPair as _};

const PEM_LABEL: &str = "PRIVATE KEY";

/// Why a key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The random number generator or the key library failed.
    #[error("cannot generate a key: {0}")]
    Generate(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The text is not an Ed25519 PKCS#8 key in PEM.
    #[error("not an Ed25519 private key in PEM (PKCS#8 `PRIVATE KEY`): {0}")]
    Parse(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The operator's key pair.
#[derive(Debug)]
pub struct OperatorKey {
    pair: Ed25519KeyPair,
    pem: String,
}

impl OperatorKey {
    /// A new random key.
    pub fn generate() -> Result<OperatorKey, KeyError> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            // ring is built without `std` here: its errors are no `std::error::Error`.
            .map_err(|e| KeyError::Generate(e.to_string().into()))?;
        OperatorKey::from_pkcs8(pkcs8.as_ref())
    }

    /// Reads a key from its PEM text.
    pub fn from_pem(text: &str) -> Result<OperatorKey, KeyError> {
        let begin = format!("-----BEGIN {PEM_LABEL}-----");
        let end = format!("-----END {PEM_LABEL}-----");
        let inner = text
            .trim()
            .strip_prefix(&begin)
            .and_then(|rest| rest.strip_suffix(&end))
            .ok_or_else(|| KeyError::Parse(format!("expected one {begin} block").into()))?;
        let b64: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| KeyError::Parse(e.into()))?;
        OperatorKey::from_pkcs8(&der)
    }

    fn from_pkcs8(der: &[u8]) -> Result<OperatorKey, KeyError> {
        let pair =
            Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(|e| KeyError::Parse(e.to_string().into()))?;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let mut pem = format!("-----BEGIN {PEM_LABEL}-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str(&format!("-----END {PEM_LABEL}-----\n"));
        Ok(OperatorKey { pair, pem })
    }

    /// The PEM text (what the key file holds).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The raw 32-byte public key, base64: what the coordinator records.
    pub fn public_key(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.pair.public_key().as_ref())
    }

    /// The signature of `message`, base64.
    pub fn sign(&self, message: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.pair.sign(message).as_ref())
    }
}

/// Whether the file's mode lets anyone but its owner read or write it (the mode, if so);
/// `None` when it cannot be read. A key file must be its owner's alone (0600).
pub fn shared_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

/// A tunnel certificate and its key, both PEM.
#[derive(Debug, Clone)]
pub struct TunnelCert {
    /// The self-signed certificate naming the gateway hostname.
    pub cert_pem: String,
    /// Its ECDSA P-256 key.
    pub key_pem: String,
}

/// A new self-signed certificate for the tunnel port, naming `hostname`. It has its own key
/// (not the operator's), so the identity key never serves TLS.
pub fn tunnel_cert(hostname: &str) -> Result<TunnelCert, KeyError> {
    let certified =
        rcgen::generate_simple_self_signed(vec![hostname.to_owned()]).map_err(|e| KeyError::Generate(e.into()))?;
    Ok(TunnelCert { cert_pem: certified.cert.pem(), key_pem: certified.signing_key.serialize_pem() })
}

/// Why a certificate and key do not make a TLS server identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The certificate file is not PEM.
    #[error("the certificate is not PEM: {0}")]
    CertificatePem(#[source] rustls::pki_types::pem::Error),
    /// It holds no certificate.
    #[error("the certificate file holds no certificate")]
    NoCertificate,
    /// The key file is not PEM.
    #[error("the key is not PEM: {0}")]
    KeyPem(#[source] rustls::pki_types::pem::Error),
    /// They do not go together (or rustls refuses them).
    #[error("the certificate and key do not make a TLS identity: {0}")]
    Mismatch(#[source] rustls::Error),
}

/// Whether a certificate chain and a key (PEM) make a usable TLS server identity with the
/// ring provider; the reason when not.
pub fn check_tls_identity(cert_pem: &str, key_pem: &str) -> Result<(), IdentityError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(IdentityError::CertificatePem)?;
    if certs.is_empty() {
        return Err(IdentityError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(IdentityError::KeyPem)?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(IdentityError::Mismatch)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map(|_| ())
        .map_err(IdentityError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_and_sign() {
        let key = OperatorKey::generate().expect("key");
        assert!(key.pem().starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let again = OperatorKey::from_pem(key.pem()).expect("parses");
        assert_eq!(again.public_key(), key.public_key());
        assert_eq!(again.pem(), key.pem());
        let raw = base64::engine::general_purpose::STANDARD.decode(key.public_key()).expect("b64");
        let sig = base64::engine::general_purpose::STANDARD.decode(key.sign(b"hello")).expect("b64");
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &raw)
            .verify(b"hello", &sig)
            .expect("verifies");
        assert!(OperatorKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----").is_err());
        assert!(OperatorKey::from_pem("hello").is_err());
    }

    #[test]
    fn tunnel_certificates_are_usable_and_mismatches_are_caught() {
        let a = tunnel_cert("gw1.example.test").expect("a");
        let b = tunnel_cert("gw1.example.test").expect("b");
        check_tls_identity(&a.cert_pem, &a.key_pem).expect("usable");
        assert!(check_tls_identity(&a.cert_pem, &b.key_pem).is_err(), "key of another certificate");
        assert!(check_tls_identity("nothing", &a.key_pem).is_err());
    }
}
