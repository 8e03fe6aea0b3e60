//! A router's body limit, applied to what a request declares: a `Content-Length` over the
//! limit is answered 413 at once, before any of the body is read (otherwise the server would
//! wait for a body it will refuse). Routes still bound what actually arrives (chunked bodies
//! have no declared length) with their own extractors.

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::request::error_response;

/// `router` with every request declaring a body over `max_bytes` answered 413
/// `body_too_large` (and the connection closed) before the handler runs.
pub fn limit_body<S: Clone + Send + Sync + 'static>(router: Router<S>, max_bytes: usize) -> Router<S> {
    router.layer(axum::middleware::from_fn(move |request: Request, next: Next| async move {
        match declared_length(&request) {
            Some(declared) if declared > max_bytes as u64 => too_large(declared, max_bytes),
            _ => next.run(request).await,
        }
    }))
}

fn declared_length(request: &Request) -> Option<u64> {
    request.headers().get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

fn too_large(declared: u64, max_bytes: usize) -> Response {
    let mut response = error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        &format!("the request body is declared as {declared} bytes; the limit is {max_bytes} bytes"),
    );
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
