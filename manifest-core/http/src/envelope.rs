//! The one error envelope ([`ErrorBody`], declared in `svc-envelope` so that tools without an
//! HTTP framework print it too) as an HTTP response.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub use svc_envelope::{ErrorBody, ErrorDetail, UNAUTHENTICATED};

/// `body` as an HTTP response with `status` (and `WWW-Authenticate: Bearer` on a 401).
pub fn envelope_response(body: &ErrorBody, status: StatusCode) -> Response {
    let bytes = serde_json::to_vec_pretty(body).unwrap_or_default();
    let mut response =
        (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}
