//! The headers every console response carries. The Content-Security-Policy allows scripts,
//! styles, images and requests from the console's own origin only, no inline script or
//! style, no framing and no form posted elsewhere; pages are never cached (they show one
//! member's data).

use axum::http::{HeaderValue, header};
use axum::response::Response;

/// The console's Content-Security-Policy.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the console's headers to a response (an `axum::middleware::map_response` function).
pub async fn secure(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with the console's own forms,
    // which the CSRF check could not tell from another site's.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}
