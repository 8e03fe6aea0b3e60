//! The agent's calls to its coordinator: a JSON `POST` over plain HTTP/1.1 (the coordinator
//! of the embedded default listens on loopback), bounded in time.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// How long one call may take, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs `body` as JSON to `base` + `path` (`base` is `http://HOST:PORT`); the response body
/// on a 2xx status, else an error naming the status and the coordinator's message.
pub(crate) async fn post_json(base: &str, path: &str, body: &serde_json::Value) -> Result<String, String> {
    tokio::time::timeout(CALL_TIMEOUT, post(base, path, body))
        .await
        .map_err(|_| format!("{base}{path}: no answer within {} s", CALL_TIMEOUT.as_secs()))?
}

async fn post(base: &str, path: &str, body: &serde_json::Value) -> Result<String, String> {
    let authority = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("{base}: only http:// coordinator URLs are supported"))?
        .trim_end_matches('/');
    let stream = tokio::net::TcpStream::connect(authority).await.map_err(|e| format!("{base}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("{base}: {e}"))?;
    tokio::spawn(connection);
    let body = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| format!("{base}{path}: {e}"))?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| format!("{base}{path}: {e}"))?.to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status.is_success() { Ok(text) } else { Err(format!("{base}{path}: {status}: {text}")) }
}
