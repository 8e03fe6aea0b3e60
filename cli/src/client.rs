//! A small blocking HTTP/1.1 client for the service's JSON API (hyper on a current-thread
//! tokio runtime: the CLI makes one or two requests per run).

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;

/// How long one request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request failed before a response arrived.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The server URL is not usable.
    #[error("the server URL \"{0}\" is not valid: use http://HOST:PORT")]
    BadUrl(String),
    /// https needs TLS, which this build does not carry yet.
    #[error(
        "the server URL \"{0}\" is https: this build of svc speaks plain HTTP only; reach the service over http:// on loopback or a trusted network"
    )]
    Https(String),
    /// Connecting or exchanging failed.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
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
#[derive(Debug, Clone)]
pub(crate) struct Client {
    base: String,
    host: String,
    port: u16,
    token: Option<String>,
}

impl Client {
    pub(crate) fn new(server: &str, token: Option<String>) -> Result<Client, ClientError> {
        let base = server.trim_end_matches('/').to_owned();
        let uri: Uri = base.parse().map_err(|_| ClientError::BadUrl(server.to_owned()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(ClientError::Https(server.to_owned())),
            _ => return Err(ClientError::BadUrl(server.to_owned())),
        }
        let host = uri.host().ok_or_else(|| ClientError::BadUrl(server.to_owned()))?.to_owned();
        Ok(Client { host, port: uri.port_u16().unwrap_or(80), token, base })
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
        let stream =
            tokio::net::TcpStream::connect((host, self.port)).await.map_err(|e| self.unreachable(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.unreachable(e.to_string()))?;
        tokio::spawn(connection);
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
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| self.unreachable(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(|e| self.unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.map_err(|e| self.unreachable(e.to_string()))?.to_bytes();
        Ok(Response { status, headers, body: body.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(Client::new("http://127.0.0.1:8080/", None).is_ok());
        assert!(matches!(Client::new("https://svc.example", None), Err(ClientError::Https(_))));
        assert!(matches!(Client::new("127.0.0.1:8080", None), Err(ClientError::BadUrl(_))));
    }
}
