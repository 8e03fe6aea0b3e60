//! The agent's calls to its coordinator: a JSON `POST` over plain HTTP/1.1 (the coordinator
//! of the embedded default listens on loopback), bounded in time.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// How long one call may take, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the coordinator had no usable answer; each names the URL.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing within [`CALL_TIMEOUT`].
    #[error("{url}: no answer within {} s", CALL_TIMEOUT.as_secs())]
    Timeout {
        /// Base and path.
        url: String,
    },
    /// Not an `http://` base.
    #[error("{base}: only http:// coordinator URLs are supported")]
    Scheme {
        /// The configured base.
        base: String,
    },
    /// The connection failed.
    #[error("{url}: {source}")]
    Connect {
        /// Base (and path, once connected).
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed on the connection.
    #[error("{url}: {source}")]
    Http {
        /// Base (and path, once connected).
        url: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The answer was longer than [`ANSWER_LIMIT`].
    #[error("{url}: the answer is longer than {} bytes", ANSWER_LIMIT)]
    TooLarge {
        /// Base and path.
        url: String,
    },
    /// The request could not be made.
    #[error("{url}: {source}")]
    Request {
        /// Base and path.
        url: String,
        /// Why.
        #[source]
        source: hyper::http::Error,
    },
    /// The coordinator refused.
    #[error("{url}: {status}: {text}")]
    Status {
        /// Base and path.
        url: String,
        /// Its status.
        status: hyper::StatusCode,
        /// What it said.
        text: String,
    },
}

/// The longest answer read from the coordinator: a route's hostnames, its gateway hosts and
/// the signed catalog are a few KiB; the channel need not be trusted, so it is bounded.
pub(crate) const ANSWER_LIMIT: usize = 1024 * 1024;

/// POSTs `body` as JSON to `base` + `path` (`base` is `http://HOST:PORT`); the response body
/// on a 2xx status, else an error naming the status and the coordinator's message.
pub(crate) async fn post_json(base: &str, path: &str, body: &serde_json::Value) -> Result<String, CallError> {
    tokio::time::timeout(CALL_TIMEOUT, post(base, path, body))
        .await
        .map_err(|_| CallError::Timeout { url: format!("{base}{path}") })?
}

async fn post(base: &str, path: &str, body: &serde_json::Value) -> Result<String, CallError> {
    let authority =
        base.strip_prefix("http://").ok_or_else(|| CallError::Scheme { base: base.to_owned() })?.trim_end_matches('/');
    let stream = crate::dial::Dial::process()
        .connect(authority)
        .await
        .map_err(|source| CallError::Connect { url: base.to_owned(), source })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| CallError::Http { url: base.to_owned(), source })?;
    tokio::spawn(connection);
    let url = || format!("{base}{path}");
    // A JSON value always serializes.
    let body = serde_json::to_vec(body).unwrap_or_default();
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|source| CallError::Request { url: url(), source })?;
    let response = sender.send_request(request).await.map_err(|source| CallError::Http { url: url(), source })?;
    let status = response.status();
    let bytes = match http_body_util::Limited::new(response.into_body(), ANSWER_LIMIT).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Err(match e.downcast::<hyper::Error>() {
                Ok(source) => CallError::Http { url: url(), source: *source },
                Err(_) => CallError::TooLarge { url: url() },
            });
        }
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status.is_success() { Ok(text) } else { Err(CallError::Status { url: url(), status, text }) }
}
