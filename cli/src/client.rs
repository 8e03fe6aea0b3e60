//! A small blocking HTTP/1.1 client for the services' JSON APIs (hyper on a current-thread
//! tokio runtime: the CLI makes one or two requests per run), over TLS for `https://` (rustls
//! on ring; the CAs of `--ca`, else the system's roots). A bearer token goes over plain
//! `http://` only to loopback.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

/// How long one request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request failed before a response arrived.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The server URL is not usable.
    #[error("the server URL \"{0}\" is not valid: use http://HOST:PORT or https://HOST[:PORT]")]
    BadUrl(String),
    /// A token would cross the network in clear.
    #[error(
        "refusing to send the token to \"{0}\" over plain http://, which is only for loopback (127.0.0.1, ::1, \
         localhost): use https:// (with --ca FILE, or SVC_CA, for a private or development CA)"
    )]
    TokenInClear(String),
    /// The CA file could not be used.
    #[error("cannot use the CA file {path}: {reason}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No `--ca` and the system has no root certificates.
    #[error("no root certificates found on this system to check {0}; pass --ca FILE (or set SVC_CA)")]
    NoRoots(String),
    /// The TLS handshake failed (most often: a certificate this client does not trust).
    #[error(
        "TLS with {url} failed: {reason}; if its certificate comes from a private or development CA, pass \
         --ca FILE (or set SVC_CA) with that CA's PEM"
    )]
    Tls {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
    /// Connecting or exchanging failed.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
}

impl ClientError {
    /// The stable code of the JSON error envelope.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ClientError::BadUrl(_) => "invalid_url",
            ClientError::TokenInClear(_) => "token_in_clear",
            ClientError::Ca { .. } => "invalid_ca_file",
            ClientError::NoRoots(_) => "no_root_certificates",
            ClientError::Tls { .. } => "tls_failed",
            ClientError::Unreachable { .. } => "unreachable",
        }
    }
}

/// A response: status, headers, body.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: hyper::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The body as JSON (`null` if it is not JSON).
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A header's value as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A service at a base URL, with an optional bearer token.
#[derive(Clone)]
pub(crate) struct Client {
    base: String,
    host: String,
    port: u16,
    token: Option<String>,
    /// For `https://`.
    tls: Option<TlsConnector>,
    /// Where to connect instead of the URL's host (curl's `--resolve`).
    connect_to: Option<SocketAddr>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("base", &self.base).field("https", &self.tls.is_some()).finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `server` (`http://` or `https://`); `ca` is a PEM file of the CAs to trust
    /// for https (default: the system's roots).
    pub(crate) fn new(server: &str, token: Option<String>, ca: Option<&Path>) -> Result<Client, ClientError> {
        let base = server.trim_end_matches('/').to_owned();
        let uri: Uri = base.parse().map_err(|_| ClientError::BadUrl(server.to_owned()))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(ClientError::BadUrl(server.to_owned())),
        };
        let host = uri.host().ok_or_else(|| ClientError::BadUrl(server.to_owned()))?.to_owned();
        if !https && token.is_some() && !is_loopback(&host) {
            return Err(ClientError::TokenInClear(server.to_owned()));
        }
        let tls = if https { Some(connector(ca, server)?) } else { None };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Client { host, port, token, base, tls, connect_to: None })
    }

    /// The same client connecting to `addr`, as curl's `--resolve` does: the URL's host is
    /// still the name TLS sends (SNI) and checks the certificate against, and the `Host`.
    pub(crate) fn connecting_to(self, addr: SocketAddr) -> Client {
        Client { connect_to: Some(addr), ..self }
    }

    /// The base URL, as given.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; `path` starts with `/api/...`.
    pub(crate) fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        extra: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| self.unreachable(e.to_string()))?;
        runtime.block_on(async {
            tokio::time::timeout(TIMEOUT, self.exchange(method, path, body, extra))
                .await
                .unwrap_or_else(|_| Err(self.unreachable(format!("no answer within {} s", TIMEOUT.as_secs()))))
        })
    }

    fn unreachable(&self, reason: String) -> ClientError {
        ClientError::Unreachable { url: self.base.clone(), reason }
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        extra: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let stream = match self.connect_to {
            Some(addr) => tokio::net::TcpStream::connect(addr).await,
            None => tokio::net::TcpStream::connect((host, self.port)).await,
        }
        .map_err(|e| self.unreachable(e.to_string()))?;
        let request = self.request(method, path, body, extra)?;
        match &self.tls {
            None => self.exchange_over(stream, request).await,
            Some(connector) => {
                let name = ServerName::try_from(host.to_owned()).map_err(|_| ClientError::BadUrl(self.base.clone()))?;
                let stream = connector
                    .connect(name, stream)
                    .await
                    .map_err(|e| ClientError::Tls { url: self.base.clone(), reason: e.to_string() })?;
                self.exchange_over(stream, request).await
            }
        }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        extra: &[(&str, &str)],
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let uri_path = match self.base.split_once("://").and_then(|(_, rest)| rest.split_once('/')) {
            Some((_, prefix)) => format!("/{prefix}{path}"),
            None => path.to_owned(),
        };
        let mut request = Request::builder()
            .method(method)
            .uri(uri_path)
            .header(hyper::header::HOST, format!("{}:{}", self.host, self.port))
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, concat!("svc/", env!("CARGO_PKG_VERSION")));
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| self.unreachable(e.to_string()))
    }

    async fn exchange_over<I>(&self, io: I, request: Request<Full<Bytes>>) -> Result<Response, ClientError>
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| self.unreachable(agent::acme::error_chain(&e)))?;
        tokio::spawn(connection);
        let response =
            sender.send_request(request).await.map_err(|e| self.unreachable(agent::acme::error_chain(&e)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| self.unreachable(agent::acme::error_chain(&e)))?
            .to_bytes();
        Ok(Response { status, headers, body: body.to_vec() })
    }
}

/// Loopback: 127.0.0.0/8, ::1 (and its IPv4-mapped form), `localhost`.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// The TLS client: the CAs of `ca`, else the system's roots.
fn connector(ca: Option<&Path>, server: &str) -> Result<TlsConnector, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let bad = |reason: String| ClientError::Ca { path: path.to_owned(), reason };
            let pem = fs_err::read(path).map_err(|e| bad(e.to_string()))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                roots.add(cert.map_err(|e| bad(e.to_string()))?).map_err(|e| bad(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("it holds no PEM certificate".to_owned()));
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                return Err(ClientError::NoRoots(server.to_owned()));
            }
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Tls { url: server.to_owned(), reason: e.to_string() })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(Client::new("http://127.0.0.1:8080/", None, None).is_ok());
        assert!(matches!(Client::new("127.0.0.1:8080", None, None), Err(ClientError::BadUrl(_))));
        assert!(matches!(Client::new("ftp://svc.example", None, None), Err(ClientError::BadUrl(_))));
    }

    #[test]
    fn a_token_goes_over_plain_http_only_to_loopback() {
        let token = || Some("svc_secret".to_owned());
        for loopback in
            ["http://127.0.0.1:8080", "http://127.3.2.1", "http://[::1]:80", "http://localhost:1", "http://LOCALHOST"]
        {
            assert!(Client::new(loopback, token(), None).is_ok(), "{loopback}");
        }
        for remote in
            ["http://192.0.2.7:8080", "http://svc.example.com", "http://[2001:db8::1]", "http://localhost.example"]
        {
            let refused = Client::new(remote, token(), None).expect_err(remote);
            assert!(matches!(refused, ClientError::TokenInClear(_)), "{remote}");
            assert!(refused.to_string().contains("use https://"), "{refused}");
        }
        // Without a token (a public schema), plain http anywhere is the caller's choice.
        assert!(Client::new("http://192.0.2.7:8080", None, None).is_ok());
    }

    #[test]
    fn https_takes_a_ca_file_and_names_a_bad_one() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here").expect("write");
        let refused = Client::new("https://svc.example", None, Some(&empty)).expect_err("no certificate");
        assert!(matches!(refused, ClientError::Ca { .. }), "{refused}");
        assert!(refused.to_string().contains("empty.pem"), "{refused}");
        let missing = Client::new("https://svc.example", None, Some(&dir.join("missing.pem")));
        assert!(matches!(missing, Err(ClientError::Ca { .. })));
    }
}
