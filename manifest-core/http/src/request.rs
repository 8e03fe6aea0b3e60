//! Request ids, the error envelope, and internal errors.
//!
//! Every response carries `Svc-Request-Id: req_<16 hex>`. A 500 says only
//! `{"error": {"code": "internal_error", "message": "internal error (request req_...)",
//! "requestId": "req_..."}}`; what went wrong (a path, an SQLite message) is written to the
//! server's standard error under the same id. Handlers give the detail to
//! [`internal_error`]; a 500 made any other way has its body moved to the log the same way,
//! so no 500 can carry internal detail to a client.

use std::fmt;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

/// The response header holding the request id.
pub const REQUEST_ID_HEADER: &str = "svc-request-id";

/// How much of an unexpected 500's body goes to the log.
const LOGGED_BODY_BYTES: usize = 64 * 1024;

/// A request's id: `req_` and 16 hex digits. Handlers find it in the request's extensions
/// (`axum::Extension<RequestId>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    /// A fresh random id.
    pub(crate) fn new() -> RequestId {
        let mut bytes = [0u8; 8];
        // Ids only need to be unique enough to find a log line; a failed read of the system's
        // randomness (never seen in practice) still gives a usable id from the clock.
        if getrandom::fill(&mut bytes).is_err() {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            bytes = (nanos.as_nanos() as u64).to_be_bytes();
        }
        RequestId(format!("req_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The error envelope both APIs use: `{"error": {"code", "message"}}` with JSON content.
pub fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    crate::envelope_response(&crate::ErrorBody::new(code, message), status)
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec_pretty(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

/// Something went wrong inside the service. As a response it is a 500 whose body the server
/// completes with the request id ([`crate::Server`] logs the detail under that id); the
/// detail never reaches the client.
#[derive(Debug, Clone)]
pub struct InternalError {
    detail: String,
}

impl InternalError {
    /// An internal error; `detail` is for the server log only.
    pub fn new(detail: impl fmt::Display) -> InternalError {
        InternalError { detail: detail.to_string() }
    }

    /// What went wrong (for the log).
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for InternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "internal error: {}", self.detail)
    }
}

impl std::error::Error for InternalError {}

impl IntoResponse for InternalError {
    fn into_response(self) -> Response {
        // Without a server to complete it, the body still says nothing of the detail.
        let mut response =
            error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "internal error; try again later");
        response.extensions_mut().insert(self);
        response
    }
}

/// A 500 for a failure inside the service: the client sees `internal_error` and the request
/// id; `detail` goes only to the server log, under that id.
pub fn internal_error(detail: impl fmt::Display) -> Response {
    InternalError::new(detail).into_response()
}

/// What the server does to every response before it is written: the request id header; a
/// 408 in place of the handler's answer when the body timed out; every 500 reduced to
/// `internal_error` and the id, its detail logged by `log`.
pub(crate) async fn finish(mut response: Response, id: &RequestId, body_timed_out: bool, name: &str) -> Response {
    if body_timed_out {
        response = replace_body(
            response,
            StatusCode::REQUEST_TIMEOUT,
            &crate::ErrorBody::new("request_timeout", "the request body did not arrive within the body timeout")
                .to_value(),
        );
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    } else if response.status() == StatusCode::INTERNAL_SERVER_ERROR {
        let detail = match response.extensions_mut().remove::<InternalError>() {
            Some(e) => e.detail,
            None => unexpected_detail(&mut response).await,
        };
        tracing::error!(server = name, request_id = id.as_str(), "{name}: request {id}: internal error: {detail}");
        let body = crate::ErrorBody::new("internal_error", format!("internal error (request {id})"))
            .with("requestId", id.as_str())
            .to_value();
        response = replace_body(response, StatusCode::INTERNAL_SERVER_ERROR, &body);
    }
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// The body of a 500 made without [`internal_error`], read for the log (bounded in size and
/// time).
async fn unexpected_detail(response: &mut Response) -> String {
    let body = std::mem::replace(response.body_mut(), Body::empty());
    let limited = http_body_util::Limited::new(body, LOGGED_BODY_BYTES);
    let read = tokio::time::timeout(std::time::Duration::from_secs(1), limited.collect()).await;
    match read {
        Ok(Ok(collected)) => String::from_utf8_lossy(&collected.to_bytes()).trim().to_owned(),
        _ => "(a 500 whose body could not be read)".to_owned(),
    }
}

/// The response's headers (the API's own, such as a read contract) with a new status and
/// JSON body.
fn replace_body(response: Response, status: StatusCode, body: &serde_json::Value) -> Response {
    let (mut parts, _) = response.into_parts();
    let fresh = json_response(status, body);
    let (fresh_parts, fresh_body) = fresh.into_parts();
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    for (name, value) in &fresh_parts.headers {
        parts.headers.insert(name, value.clone());
    }
    Response::from_parts(parts, fresh_body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn body_json(response: Response) -> serde_json::Value {
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        serde_json::from_slice(&bytes).expect("json")
    }

    #[test]
    fn ids_are_req_and_16_hex_digits_and_differ() {
        let (a, b) = (RequestId::new(), RequestId::new());
        assert_ne!(a, b);
        let hex = a.as_str().strip_prefix("req_").expect("req_");
        assert_eq!(hex.len(), 16);
        assert!(hex.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[tokio::test]
    async fn a_500_says_internal_error_with_the_id_and_keeps_the_detail_out() {
        let id = RequestId::new();
        let mut with_header = internal_error("/srv/svc/data/svc.sqlite3: disk I/O error");
        with_header.headers_mut().insert("svc-read-contract", HeaderValue::from_static("3"));
        let response = finish(with_header, &id, false, "test").await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(response.headers()[REQUEST_ID_HEADER], id.as_str());
        assert_eq!(response.headers()["svc-read-contract"], "3", "the API's headers stay");
        let body = body_json(response).await;
        assert_eq!(
            body,
            json!({"error": {"code": "internal_error", "message": format!("internal error (request {id})"), "requestId": id.as_str()}})
        );

        // A 500 made without the helper is reduced the same way.
        let raw =
            (StatusCode::INTERNAL_SERVER_ERROR, "store_failed: /srv/relay/relay.sqlite3 is locked").into_response();
        let body = body_json(finish(raw, &id, false, "test").await).await;
        assert_eq!(body["error"]["code"], "internal_error");
        assert!(!body.to_string().contains("/srv"), "{body}");
    }

    #[tokio::test]
    async fn a_timed_out_body_is_answered_408_and_the_connection_closed() {
        let id = RequestId::new();
        let handler_said = error_response(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "over");
        let response = finish(handler_said, &id, true, "test").await;
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(response.headers()[header::CONNECTION], "close");
        assert_eq!(body_json(response).await["error"]["code"], "request_timeout");
    }
}
