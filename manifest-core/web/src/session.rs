//! Signing in to a console: the member's API token, kept in a cookie the page's scripts cannot
//! read (`HttpOnly`) and the browser sends to no other site's request (`SameSite=Strict`),
//! only under `/console/`. Every state-changing form also carries a CSRF token derived from
//! the session's token, and its `Origin` (when sent) must be the console's own: a page of
//! another origin can neither read the token nor send the cookie.

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

/// The session cookie's name.
pub const COOKIE: &str = "svc_console";

/// How long a session lasts without signing in again (12 hours).
pub const MAX_AGE_SECS: u64 = 12 * 3600;

/// The longest token accepted (the services issue 68 characters).
pub const TOKEN_MAX: usize = 200;

/// Whether `text` has the shape of a token: 1-200 of `A-Z a-z 0-9 _ -` (so it can be a
/// cookie's value as it is).
pub fn token_shape(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= TOKEN_MAX
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The session's token, from the request's cookies.
pub fn token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|value| token_shape(value))
}

/// The `Set-Cookie` that signs in with `token` (`secure`: the console is served over TLS).
pub fn sign_in_cookie(token: &str, secure: bool) -> Option<HeaderValue> {
    if !token_shape(token) {
        return None;
    }
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={MAX_AGE_SECS}{secure}"
    ))
    .ok()
}

/// The `Set-Cookie` that signs out.
pub fn sign_out_cookie() -> HeaderValue {
    HeaderValue::from_static("svc_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The CSRF token of a session: derived from its token, so nothing is stored, and useless to
/// anyone who could not read the session's pages.
pub fn csrf(token: &str) -> String {
    let digest = Sha256::digest(format!("svc-console-csrf\0{token}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Whether a form's CSRF token is the session's (compared in constant time).
pub fn csrf_ok(token: &str, presented: &str) -> bool {
    let expected = csrf(token);
    expected.len() == presented.len()
        && expected.bytes().zip(presented.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether a state-changing request comes from the console's own pages: its `Origin`, when
/// the browser sends one, names the host the request was sent to.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    authority == Some(host)
}

/// The answer to a sign-in form whose token names a member: to `home`, with the session
/// cookie (`Secure` when a TLS front says the browser used https).
pub fn signed_in(token: &str, home: &str, headers: &HeaderMap) -> axum::response::Response {
    let secure = headers.get("x-forwarded-proto").is_some_and(|v| v == "https");
    let mut response = crate::page::see_other(home);
    if let Some(cookie) = sign_in_cookie(token, secure) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Whether a sign-out form may end the session: it comes from the console's own origin with
/// the session's CSRF token (`None`: the form had none). Without a session there is nothing
/// to end, and it may.
pub fn sign_out_allowed(headers: &HeaderMap, csrf: Option<&str>) -> bool {
    match (token(headers), csrf) {
        (None, _) => true,
        (Some(token), Some(csrf)) => same_origin(headers) && csrf_ok(&token, csrf),
        (Some(_), None) => false,
    }
}

/// The answer to an allowed sign-out: to `sign_in`, with the cookie cleared.
pub fn signed_out(sign_in: &str) -> axum::response::Response {
    let mut response = crate::page::see_other(sign_in);
    response.headers_mut().insert(header::SET_COOKIE, sign_out_cookie());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("a header value"));
        h
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_under_the_console() {
        let cookie = sign_in_cookie("svc_abc", false).expect("a cookie");
        let text = cookie.to_str().expect("text");
        assert!(text.starts_with("svc_console=svc_abc; Path=/console; HttpOnly; SameSite=Strict"), "{text}");
        assert!(!text.contains("Secure"));
        assert!(sign_in_cookie("svc_abc", true).expect("a cookie").to_str().expect("text").ends_with("; Secure"));
        assert!(sign_in_cookie("a; Path=/", false).is_none(), "no attribute smuggled through a token");
        let h = with(header::COOKIE, "other=1; svc_console=svc_abc; more=2");
        assert_eq!(token(&h).as_deref(), Some("svc_abc"));
        assert_eq!(token(&with(header::COOKIE, "svc_console=bad value")), None);
    }

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let mine = csrf("svc_a");
        assert_eq!(mine.len(), 32);
        assert!(csrf_ok("svc_a", &mine));
        assert!(!csrf_ok("svc_b", &mine));
        assert!(!csrf_ok("svc_a", ""));
    }

    #[test]
    fn another_origin_is_refused() {
        let mut h = with(header::HOST, "127.0.0.1:8080");
        assert!(same_origin(&h), "no Origin: a same-origin form in some browsers");
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://evil.example"));
        assert!(!same_origin(&h));
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&h));
    }
}
