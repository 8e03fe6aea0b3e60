//! The HTTPS client of the checks that go through the public path: route validation and the
//! demo's wait for its URL. It dials an address it is given, never a name (what was checked
//! is what is dialed), sends the hostname as SNI, trusts only the roots it is given, and
//! speaks HTTP/1.1 on the one connection it made, showing the certificate the server
//! presented.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use x509_parser::error::X509Error;

/// Why trusted roots cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// A PEM block is not a certificate.
    #[error("not a PEM certificate: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// A certificate is not usable as a trust anchor.
    #[error("not a usable CA certificate: {0}")]
    Unusable(#[source] rustls::Error),
    /// The text holds no certificate.
    #[error("no CA certificate in the PEM text")]
    Empty,
}

/// Why a GET through [`get`] or [`Connection::get`] had no answer.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// The trusted roots.
    #[error(transparent)]
    Roots(#[from] RootsError),
    /// A step did not complete in its time.
    #[error("{0}")]
    Timeout(&'static str),
    /// The TCP connection failed.
    #[error("{0}")]
    Connect(#[source] std::io::Error),
    /// The TLS handshake failed.
    #[error("TLS: {0}")]
    Handshake(#[source] HandshakeError),
    /// The request could not be made (a path that is not a URI path).
    #[error("{0}")]
    Request(#[source] hyper::http::Error),
    /// HTTP failed on the connection.
    #[error("{0}")]
    Http(#[source] hyper::Error),
}

/// A client configuration trusting only the certificates in `roots_pem`, offering ALPN
/// `http/1.1`, without session resumption: every handshake sees, and verifies, the
/// certificate the server serves now.
pub fn client_config(roots_pem: &str) -> Result<Arc<ClientConfig>, RootsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
        let cert = cert.map_err(RootsError::Pem)?;
        roots.add(cert).map_err(RootsError::Unusable)?;
    }
    if roots.is_empty() {
        return Err(RootsError::Empty);
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(RootsError::Unusable)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// Why a TLS connection could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The name cannot be a TLS server name.
    #[error("{0:?} is not a valid TLS server name")]
    Name(String),
    /// TLS itself failed: rustls's reason (an invalid certificate, an alert from the server).
    #[error("{0}")]
    Tls(rustls::Error),
    /// The connection closed or failed before the handshake completed.
    #[error("the connection failed during the TLS handshake: {0}")]
    Io(std::io::Error),
}

/// One HTTPS connection, ready for requests.
pub struct Connection {
    sender: SendRequest<Empty<Bytes>>,
    host: String,
    leaf: Option<CertificateDer<'static>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("host", &self.host).finish_non_exhaustive()
    }
}

/// Runs the TLS handshake on `tcp` with SNI `host`, then HTTP/1.1.
pub async fn handshake(tcp: TcpStream, tls: Arc<ClientConfig>, host: &str) -> Result<Connection, HandshakeError> {
    let name = ServerName::try_from(host.to_owned()).map_err(|_| HandshakeError::Name(host.to_owned()))?;
    let stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.map_err(|e| {
        // tokio-rustls wraps rustls's own error in the io::Error; keep it typed.
        match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(tls) => HandshakeError::Tls(tls.clone()),
            None => HandshakeError::Io(e),
        }
    })?;
    let leaf = stream.get_ref().1.peer_certificates().and_then(|c| c.first()).cloned();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| HandshakeError::Io(std::io::Error::other(e)))?;
    tokio::spawn(connection);
    Ok(Connection { sender, host: host.to_owned(), leaf })
}

/// The serial number (lower-case hex of its DER bytes) and the end of validity of a
/// certificate (DER): what a check reports of the certificate a server presented.
pub fn serial_and_expiry(der: &[u8]) -> Result<(String, SystemTime), x509_parser::nom::Err<X509Error>> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)?;
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
    Ok((relay_wire::wire::hex(cert.raw_serial()), SystemTime::UNIX_EPOCH + Duration::from_secs(not_after)))
}

impl Connection {
    /// The leaf certificate the server presented (DER).
    pub fn leaf(&self) -> Option<&CertificateDer<'static>> {
        self.leaf.as_ref()
    }

    /// `GET path` on this connection: (status, body).
    pub async fn get(&mut self, path: &str) -> Result<(u16, Bytes), GetError> {
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, &self.host)
            .body(Empty::<Bytes>::new())
            .map_err(GetError::Request)?;
        self.sender.ready().await.map_err(GetError::Http)?;
        let response = self.sender.send_request(request).await.map_err(GetError::Http)?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(GetError::Http)?.to_bytes();
        Ok((status, body))
    }
}

/// Time allowed for each step of [`get`].
const STEP: Duration = Duration::from_secs(5);

/// One HTTPS GET to `addr` for `host`, trusting only `ca_pem`: (status, body). Each step
/// (connect, handshake, answer) may take 5 s.
pub async fn get(addr: SocketAddr, ca_pem: &str, host: &str, path: &str) -> Result<(u16, Bytes), GetError> {
    let tls = client_config(ca_pem)?;
    let tcp = tokio::time::timeout(STEP, TcpStream::connect(addr))
        .await
        .map_err(|_| GetError::Timeout("no connection within 5 s"))?
        .map_err(GetError::Connect)?;
    let mut connection = tokio::time::timeout(STEP, handshake(tcp, tls, host))
        .await
        .map_err(|_| GetError::Timeout("TLS handshake timed out"))?
        .map_err(GetError::Handshake)?;
    tokio::time::timeout(STEP, connection.get(path)).await.map_err(|_| GetError::Timeout("no answer within 5 s"))?
}
