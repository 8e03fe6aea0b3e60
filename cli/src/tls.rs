//! The server certificate of `svc serve` and `svc relay serve`: the given PEM files, or one
//! issued by the development CA (`--dev-tls`), or none (plain HTTP, loopback only).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::args::ListenerArgs;

/// A development certificate is issued at each start, valid for a year.
const DEV_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// The listener's TLS, and for `--dev-tls` the CA certificate clients must trust.
pub(crate) struct ServerTls {
    pub(crate) tls: svc_http::Tls,
    pub(crate) dev_ca: Option<PathBuf>,
}

/// Why the listener's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerTlsError {
    /// The certificate or key files (`--tls-cert`, `--tls-key`), or a development certificate.
    #[error(transparent)]
    Tls(#[from] svc_http::TlsError),
    /// The development CA could not be opened.
    #[error("the development CA: {0}")]
    DevCa(#[source] relay_api::ca::CaError),
    /// It could not issue a certificate.
    #[error("a development certificate: {0}")]
    DevCertificate(#[source] relay_api::ca::CaError),
}

/// The TLS the flags ask for; `dev_ca_dir` holds (or receives) the development CA.
pub(crate) fn server_tls(
    args: &ListenerArgs,
    dev_ca_dir: &Path,
    listen: SocketAddr,
) -> Result<Option<ServerTls>, ServerTlsError> {
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let tls = svc_http::Tls::from_files(cert, key)?;
        return Ok(Some(ServerTls { tls, dev_ca: None }));
    }
    if !args.dev_tls {
        return Ok(None);
    }
    let ca = relay_api::ca::DevCa::open(dev_ca_dir).map_err(ServerTlsError::DevCa)?;
    let (chain, key) = ca.issue(&dev_names(listen), DEV_VALIDITY).map_err(ServerTlsError::DevCertificate)?;
    let tls = svc_http::Tls::from_pem(chain.as_bytes(), key.as_bytes())?;
    Ok(Some(ServerTls { tls, dev_ca: Some(ca.cert_path.clone()) }))
}

/// The names a development certificate covers: loopback, and the listen address if it is a
/// specific one.
fn dev_names(listen: SocketAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    let ip = listen.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    names
}
