//! Signing in to a console: the member's API token is exchanged, once, for a random session
//! id. The cookie holds that id alone (`HttpOnly`: the page's scripts cannot read it;
//! `SameSite=Strict`: no other site's request carries it; `Secure`, named `__Host-…` and
//! `Path=/` unless the console is reached over loopback HTTP, where it is under `/console`
//! only); the service's store keeps only its
//! SHA-256, with the token it was made from, when it was made and when it was last used, and
//! a CSRF token of its own. A session ends when it has been idle [`IDLE_MS`], at the latest
//! [`ABSOLUTE_MS`] after signing in, when its member signs out (its row is deleted), or when
//! its token is revoked (each request reads the session through its token's row). Every
//! state-changing form carries the session's CSRF token, and its `Origin` (when sent) must be
//! the console's own.
//!
//! The rows are each store's (both consoles keep theirs in their service's database, so a
//! session made by one instance is read by another); what is here is what they share: the
//! ids, the cookie, the expiry rule and the checks.

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

/// A session unused this long is over (30 minutes).
pub const IDLE_MS: i64 = 30 * 60 * 1000;

/// A session is over this long after signing in, however used (12 hours).
pub const ABSOLUTE_MS: i64 = 12 * 3600 * 1000;

/// How often a session's last use is written: a request within this of the last write
/// writes nothing (a page refreshing every two seconds does not write every two seconds). A
/// session may so end up to this much before [`IDLE_MS`] after its very last request.
pub const TOUCH_MS: i64 = 60 * 1000;

/// Expired sessions a sign-in deletes at most (bounded work; each sign-in makes one row and
/// collects up to this many, so the table holds about the sessions of the last 12 hours).
pub const COLLECT_PER_SIGN_IN: u32 = 100;

/// The longest token accepted (the services issue 68 characters).
pub const TOKEN_MAX: usize = 200;

/// Random bytes in a session id (256 bits).
const ID_BYTES: usize = 32;

/// Random bytes in a CSRF token (128 bits).
const CSRF_BYTES: usize = 16;

/// Whether `text` has the shape of a token: 1-200 of `A-Z a-z 0-9 _ -`.
pub fn token_shape(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= TOKEN_MAX
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `text` has the shape of a session id: 64 lowercase hex digits.
pub fn id_shape(text: &str) -> bool {
    text.len() == ID_BYTES * 2 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What a store keeps of a session id: its SHA-256, hex (the id itself is in the browser's
/// cookie only, so a reader of the database cannot sign in with what it reads).
pub fn id_hash(id: &str) -> String {
    hex(&Sha256::digest(format!("svc-console-session\0{id}").as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_hex(n: usize) -> Result<String, getrandom::Error> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

/// A session being made: the id for the cookie, its hash for the store, and its CSRF token.
#[derive(Clone)]
pub struct NewSession {
    /// The cookie's value (256 random bits).
    pub id: String,
    /// What the store keeps ([`id_hash`]).
    pub id_hash: String,
    /// The session's CSRF token (128 random bits), kept in its row.
    pub csrf: String,
}

impl std::fmt::Debug for NewSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSession").field("id_hash", &self.id_hash).finish_non_exhaustive()
    }
}

impl NewSession {
    /// A new session's id and CSRF token, from the operating system's random numbers.
    pub fn generate() -> Result<NewSession, getrandom::Error> {
        let id = random_hex(ID_BYTES)?;
        Ok(NewSession { id_hash: id_hash(&id), csrf: random_hex(CSRF_BYTES)?, id })
    }
}

/// The times a session row is live at `now` (Unix ms): it was made after the first and last
/// used after the second. A store reads a session with `created_at > .0 AND last_seen_at >
/// .1`, and collects the rows that fail either.
pub fn live_after(now: i64) -> (i64, i64) {
    (now.saturating_sub(ABSOLUTE_MS), now.saturating_sub(IDLE_MS))
}

/// Whether a session last written as used at `last_seen` should be written again at `now`.
pub fn needs_touch(last_seen: i64, now: i64) -> bool {
    now.saturating_sub(last_seen) >= TOUCH_MS
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

/// The prefix browsers keep for cookies set by the host itself: `Secure`, `Path=/` and no
/// `Domain`, so a page on a sibling host under the same parent domain (a customer's route
/// under the relay's domain) cannot set or shadow one (the review of issue 40).
const HOST_PREFIX: &str = "__Host-";

impl Cookie {
    /// The cookie's name over TLS (`secure`): `__Host-` and its name; over loopback HTTP,
    /// where browsers refuse that prefix, its name.
    fn name_for(self, secure: bool) -> String {
        if secure { format!("{HOST_PREFIX}{}", self.name) } else { self.name.to_owned() }
    }

    /// The attributes after the value: `Path=/` with the `__Host-` name, `/console` without.
    fn attributes(secure: bool) -> &'static str {
        if secure { "Path=/; HttpOnly; SameSite=Strict; Secure" } else { "Path=/console; HttpOnly; SameSite=Strict" }
    }

    /// The session id in the request's cookies: none unless exactly one cookie has the name
    /// the request's scheme gives ([`Cookie::name_for`]: over TLS only the `__Host-` cookie
    /// is read, which no other host can set; a second one, planted for another path or
    /// domain, is not guessed between) and it has the shape of a session id.
    pub fn session_id(self, headers: &HeaderMap) -> Option<String> {
        let name = self.name_for(secure(headers));
        let mut found = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(found, _)| *found == name)
            .map(|(_, value)| value.to_owned());
        let first = found.next()?;
        (found.next().is_none() && id_shape(&first)).then_some(first)
    }

    /// The `Set-Cookie` that holds session `id`.
    pub fn sign_in_cookie(self, id: &str, secure: bool) -> Option<HeaderValue> {
        if !id_shape(id) {
            return None;
        }
        let max_age = ABSOLUTE_MS / 1000;
        let (name, attributes) = (self.name_for(secure), Cookie::attributes(secure));
        HeaderValue::from_str(&format!("{name}={id}; {attributes}; Max-Age={max_age}")).ok()
    }

    /// The `Set-Cookie` that signs out (with the name and attributes it was set with).
    pub fn sign_out_cookie(self, secure: bool) -> HeaderValue {
        let (name, attributes) = (self.name_for(secure), Cookie::attributes(secure));
        HeaderValue::from_str(&format!("{name}=; {attributes}; Max-Age=0"))
            .unwrap_or_else(|_| HeaderValue::from_static("svc_console=; Max-Age=0"))
    }

    /// The answer to a sign-in whose session was stored: to `home`, with the session's
    /// cookie (`Secure` unless the console is reached over loopback HTTP).
    pub fn signed_in(self, session: &NewSession, home: &str, headers: &HeaderMap) -> axum::response::Response {
        let mut response = crate::page::see_other(home);
        if let Some(cookie) = self.sign_in_cookie(&session.id, secure(headers)) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        response
    }

    /// The answer to a sign-out: to `sign_in`, with the cookie cleared.
    pub fn signed_out(self, sign_in: &str, headers: &HeaderMap) -> axum::response::Response {
        let mut response = crate::page::see_other(sign_in);
        response.headers_mut().insert(header::SET_COOKIE, self.sign_out_cookie(secure(headers)));
        response
    }
}

/// Whether a form's CSRF token is the session's `expected` one (compared in constant time).
pub fn csrf_ok(expected: &str, presented: &str) -> bool {
    !expected.is_empty()
        && expected.len() == presented.len()
        && expected.bytes().zip(presented.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether a state-changing form comes from this session's own pages: its `Origin` is the
/// console's and it carries the session's CSRF token (`expected`). Every console form is
/// checked here.
pub fn from_own_page(headers: &HeaderMap, expected: &str, presented: &str) -> bool {
    same_origin(headers) && csrf_ok(expected, presented)
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
    fn a_session_id_is_random_hex_and_the_store_keeps_its_hash() {
        let a = NewSession::generate().expect("random numbers");
        let b = NewSession::generate().expect("random numbers");
        assert!(id_shape(&a.id) && a.id.len() == 64, "{}", a.id);
        assert_ne!(a.id, b.id);
        assert_ne!(a.csrf, b.csrf);
        assert_eq!(a.csrf.len(), 32);
        assert_eq!(a.id_hash, id_hash(&a.id));
        assert!(!a.id_hash.contains(&a.id));
        assert!(!format!("{a:?}").contains(&a.id), "the id stays out of logs");
        assert!(!id_shape("svc_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
        assert!(!id_shape(&a.id.to_uppercase()));
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_under_the_console() {
        let id = "ab".repeat(32);
        let cookie = PUBLICATION.sign_in_cookie(&id, false).expect("a cookie");
        let text = cookie.to_str().expect("text");
        assert!(text.starts_with(&format!("svc_console={id}; Path=/console; HttpOnly; SameSite=Strict")), "{text}");
        assert!(text.contains("Max-Age=43200") && !text.contains("Secure"), "{text}");
        let secure = PUBLICATION.sign_in_cookie(&id, true).expect("a cookie");
        let text = secure.to_str().expect("text");
        assert_eq!(text, format!("__Host-svc_console={id}; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=43200"));
        let out = PUBLICATION.sign_out_cookie(true);
        assert_eq!(out, "__Host-svc_console=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0");
        assert_eq!(
            PUBLICATION.sign_out_cookie(false),
            "svc_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"
        );
        assert!(PUBLICATION.sign_in_cookie("a; Path=/", false).is_none(), "no attribute smuggled through");
        assert!(PUBLICATION.sign_in_cookie("svc_token", false).is_none(), "a token is no session id");
        // Over loopback HTTP: the plain name.
        let loopback = |cookies: &str| {
            let mut h = with(header::HOST, "127.0.0.1:8080");
            h.insert(header::COOKIE, HeaderValue::from_str(cookies).expect("a header value"));
            h
        };
        let h = loopback(&format!("other=1; svc_console={id}; more=2"));
        assert_eq!(PUBLICATION.session_id(&h), Some(id.clone()));
        assert_eq!(INGRESS.session_id(&h), None, "each console reads its own cookie");
        assert_eq!(PUBLICATION.session_id(&loopback("svc_console=svc_abc")), None);
        // Review finding: a second cookie of the name (planted by a customer's app on a
        // parent domain, with a longer path) is not guessed between.
        let planted = loopback(&format!("svc_console={}; svc_console={id}", "cd".repeat(32)));
        assert_eq!(PUBLICATION.session_id(&planted), None);
    }

    /// The review of issue 40: over TLS a cookie tossed from a sibling host (no `__Host-`
    /// prefix: browsers refuse that prefix with a `Domain`) is never read, neither alone (a
    /// member signed in as the planter) nor beside the member's own (signed out).
    #[test]
    fn over_tls_only_the_host_only_cookie_is_read_and_a_tossed_one_is_not() {
        let (id, planted) = ("ab".repeat(32), "cd".repeat(32));
        let request = |cookies: &str| {
            let mut h = with(header::HOST, "console.example.com");
            h.insert(header::COOKIE, HeaderValue::from_str(cookies).expect("a header value"));
            h
        };
        assert_eq!(PUBLICATION.session_id(&request(&format!("__Host-svc_console={id}"))), Some(id.clone()));
        assert_eq!(PUBLICATION.session_id(&request(&format!("svc_console={planted}"))), None, "tossed alone");
        let both = request(&format!("svc_console={planted}; __Host-svc_console={id}"));
        assert_eq!(PUBLICATION.session_id(&both), Some(id.clone()), "the member's own, beside a tossed one");
        assert_eq!(INGRESS.session_id(&request(&format!("__Host-svc_ingress_console={id}"))), Some(id));
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
        let mine = NewSession::generate().expect("random numbers").csrf;
        let theirs = NewSession::generate().expect("random numbers").csrf;
        assert!(csrf_ok(&mine, &mine));
        assert!(!csrf_ok(&mine, &theirs));
        assert!(!csrf_ok(&mine, ""));
        assert!(!csrf_ok("", ""), "no session, no token");
    }

    #[test]
    fn a_session_is_live_within_its_idle_and_absolute_bounds() {
        let signed_in = 1_000_000_000_000;
        let live = |created: i64, seen: i64, now: i64| {
            let (made_after, seen_after) = live_after(now);
            created > made_after && seen > seen_after
        };
        assert!(live(signed_in, signed_in, signed_in + IDLE_MS - 1));
        assert!(!live(signed_in, signed_in, signed_in + IDLE_MS), "idle");
        let busy = signed_in + ABSOLUTE_MS - 1;
        assert!(live(signed_in, busy, busy));
        assert!(!live(signed_in, busy + 1, busy + 1), "over, however used");
        assert!(!needs_touch(signed_in, signed_in + TOUCH_MS - 1));
        assert!(needs_touch(signed_in, signed_in + TOUCH_MS));
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
