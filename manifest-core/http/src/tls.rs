//! The server side of TLS: rustls on the ring provider, HTTP/1.1 by ALPN, from a PEM
//! certificate chain and key (files, or issued in memory by the development CA).

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{0}")]
    Read(
        /// The cause, which names the file (`fs-err`).
        #[source]
        std::io::Error,
    ),
    /// No PEM certificate in the chain.
    #[error("{what} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)")]
    NoCertificate {
        /// The file, or what it is.
        what: String,
    },
    /// The key is not a PEM private key.
    #[error("{what} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {reason}")]
    Key {
        /// The file, or what it is.
        what: String,
        /// Why.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, for one).
    #[error("the certificate and key cannot serve TLS: {0}")]
    Config(#[source] rustls::Error),
}

/// A server certificate and key, ready to serve TLS.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// From PEM files: the certificate chain (leaf first) and its private key.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let read = |path: &Path| fs_err::read(path).map_err(TlsError::Read);
        Tls::from_named_pem(&read(cert)?, &cert.display().to_string(), &read(key)?, &key.display().to_string())
    }

    /// From PEM text: the certificate chain (leaf first) and its private key.
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Tls, TlsError> {
        Tls::from_named_pem(chain, "the certificate chain", key, "the private key")
    }

    fn from_named_pem(chain: &[u8], chain_name: &str, key: &[u8], key_name: &str) -> Result<Tls, TlsError> {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(chain).filter_map(Result::ok).collect();
        if certs.is_empty() {
            return Err(TlsError::NoCertificate { what: chain_name.to_owned() });
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| TlsError::Key { what: key_name.to_owned(), reason: e.to_string() })?;
        let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}
