//! Signing in to a console: the member's API token, kept in a cookie the page's scripts cannot
//! read (`HttpOnly`) and the browser sends to no other site's request (`SameSite=Strict`),
//! only under `/console/`. Every state-changing form also carries a CSRF token derived from
//! the session's token, and its `Origin` (when sent) must be the console's own: a page of
//! another origin can neither read the token nor send the cookie.

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

/// One console's session cookie. Each console has its own name: cookies ignore the port, so
/// two consoles on one host would otherwise read each other's sessions.
#[derive(Debug, Clone, Copy)]
pub struct Cookie {
    /// The cookie's name.
    pub name: &'static str,
}

/// The publication console's (`svc serve`).
pub const PUBLICATION: Cookie = Cookie { name: "svc_console" };

/// The ingress console's (`svc relay serve`).
pub const INGRESS: Cookie = Cookie { name: "svc_ingress_console" };

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

/// Whether the browser reached the console over TLS, or could only have: a TLS front says so,
/// or the host is not loopback (the services refuse to listen off loopback without TLS). A
/// cookie sent over plain HTTP to a loopback address stays on the machine.
fn secure(headers: &HeaderMap) -> bool {
    if headers.get("x-forwarded-proto").is_some_and(|v| v == "https") {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    !(name == "localhost" || name.ends_with(".localhost") || name == "::1" || name.starts_with("127."))
}

impl Cookie {
    /// The session's token, from the request's cookies: none unless exactly one cookie has
    /// the name (a second one, planted for another path or domain, is not guessed between).
    pub fn token(self, headers: &HeaderMap) -> Option<String> {
        let mut found = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == self.name)
            .map(|(_, value)| value.to_owned());
        let first = found.next()?;
        (found.next().is_none() && token_shape(&first)).then_some(first)
    }

    /// The `Set-Cookie` that signs in with `token`.
    pub fn sign_in_cookie(self, token: &str, secure: bool) -> Option<HeaderValue> {
        if !token_shape(token) {
            return None;
        }
        let secure = if secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={MAX_AGE_SECS}{secure}",
            self.name
        ))
        .ok()
    }

    /// The `Set-Cookie` that signs out.
    pub fn sign_out_cookie(self) -> HeaderValue {
        HeaderValue::from_str(&format!("{}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0", self.name))
            .unwrap_or_else(|_| HeaderValue::from_static("svc_console=; Max-Age=0"))
    }

    /// The answer to a sign-in form whose token names a member: to `home`, with the session
    /// cookie (`Secure` unless the console is reached over loopback HTTP).
    pub fn signed_in(self, token: &str, home: &str, headers: &HeaderMap) -> axum::response::Response {
        let mut response = crate::page::see_other(home);
        if let Some(cookie) = self.sign_in_cookie(token, secure(headers)) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        response
    }

    /// Whether a sign-out form may end the session: it comes from the console's own origin
    /// with the session's CSRF token (`None`: the form had none). Without a session there is
    /// nothing to end, and it may.
    pub fn sign_out_allowed(self, headers: &HeaderMap, csrf: Option<&str>) -> bool {
        match (self.token(headers), csrf) {
            (None, _) => true,
            (Some(token), Some(csrf)) => from_own_page(headers, &token, csrf),
            (Some(_), None) => false,
        }
    }

    /// The answer to an allowed sign-out: to `sign_in`, with the cookie cleared.
    pub fn signed_out(self, sign_in: &str) -> axum::response::Response {
        let mut response = crate::page::see_other(sign_in);
        response.headers_mut().insert(header::SET_COOKIE, self.sign_out_cookie());
        response
    }
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

/// Whether a state-changing form comes from this session's own pages: its `Origin` is the
/// console's and it carries the session's CSRF token. Every console form is checked here.
pub fn from_own_page(headers: &HeaderMap, token: &str, csrf: &str) -> bool {
    same_origin(headers) && csrf_ok(token, csrf)
}

/// Whether a state-changing request comes from the console's own pages: its `Origin`, when
/// the browser sends one, names the host the request was sent to.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    authority == Some(host)
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
        let cookie = PUBLICATION.sign_in_cookie("svc_abc", false).expect("a cookie");
        let text = cookie.to_str().expect("text");
        assert!(text.starts_with("svc_console=svc_abc; Path=/console; HttpOnly; SameSite=Strict"), "{text}");
        assert!(!text.contains("Secure"));
        let secure = PUBLICATION.sign_in_cookie("svc_abc", true).expect("a cookie");
        assert!(secure.to_str().expect("text").ends_with("; Secure"));
        assert!(PUBLICATION.sign_in_cookie("a; Path=/", false).is_none(), "no attribute smuggled through a token");
        let h = with(header::COOKIE, "other=1; svc_console=svc_abc; more=2");
        assert_eq!(PUBLICATION.token(&h).as_deref(), Some("svc_abc"));
        assert_eq!(INGRESS.token(&h), None, "each console reads its own cookie");
        assert_eq!(PUBLICATION.token(&with(header::COOKIE, "svc_console=bad value")), None);
        // Review finding: a second cookie of the name (planted by a customer's app on a
        // parent domain, with a longer path) is not guessed between.
        let planted = with(header::COOKIE, "svc_console=svc_attacker; svc_console=svc_abc");
        assert_eq!(PUBLICATION.token(&planted), None);
    }

    #[test]
    fn the_cookie_is_secure_unless_the_console_is_on_loopback() {
        assert!(!secure(&with(header::HOST, "127.0.0.1:8080")));
        assert!(!secure(&with(header::HOST, "localhost:8080")));
        assert!(!secure(&with(header::HOST, "[::1]:8080")));
        assert!(secure(&with(header::HOST, "console.example.com")));
        assert!(secure(&with(header::HOST, "203.0.113.7:443")));
        let mut proxied = with(header::HOST, "127.0.0.1:8080");
        proxied.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(secure(&proxied));
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
