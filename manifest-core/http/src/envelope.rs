//! The one error envelope ([`ErrorBody`], declared in `svc-envelope` so that tools without an
//! HTTP framework print it too) as an HTTP response.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use svc_envelope::{ErrorBody, ErrorDetail, UNAUTHENTICATED};

/// When a client may send again a request answered 503 (the store out of reach, the service
/// busy): a store is asked again at the next request, so a second is enough to wait. A refusal
/// with a reason to wait longer overwrites it ([`crate::Busy::headers`]).
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

/// `body` as an HTTP response with `status` (and `WWW-Authenticate: Bearer` on a 401,
/// `Retry-After` on a 503, so a client's retry waits rather than failing or hammering).
pub fn envelope_response(body: &ErrorBody, status: StatusCode) -> Response {
    let bytes = serde_json::to_vec_pretty(body).unwrap_or_default();
    let mut response =
        (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_AFTER_SECS));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_503_says_when_to_try_again_and_a_409_does_not() {
        let body = ErrorBody::new("store_unavailable", "the database cannot be reached just now");
        let unavailable = envelope_response(&body, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(unavailable.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("1"));
        let conflict = envelope_response(&ErrorBody::new("taken", "no"), StatusCode::CONFLICT);
        assert!(conflict.headers().get(header::RETRY_AFTER).is_none());
    }
}
