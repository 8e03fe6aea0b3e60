//! One log line per request (`tracing`, target `svc_http::access`): the server, method, path,
//! status, latency and request id. Never a secret: no header is logged, the query string is
//! dropped (it may carry anything), a path segment holding the request's own bearer token or
//! shaped like a token is replaced by `[redacted]`, and the path is cut to a bounded length
//! (a hostile client does not choose the size of our log lines).

use axum::http::{HeaderMap, Method, header};

/// A response extension: the request was routine (an agent's periodic refresh, a poll that
/// may change nothing), so its access line is written at `debug`, not `info`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Routine;

/// Whether a request's access line goes at `debug`: a read (`GET`, `HEAD`, `OPTIONS`)
/// answered below 400, or one its handler marked [`Routine`] and answered below 400. Writes,
/// and every refusal or failure, stay at `info`.
pub fn routine(method: &Method, status: u16, marked: bool) -> bool {
    let read = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    status < 400 && (read || marked)
}

/// The longest path written to a log line, in bytes (longer ones are cut and marked `...`).
pub const MAX_LOGGED_PATH: usize = 256;

/// Prefixes of the credentials the services issue (`svc_...` service tokens, `rly_...`
/// relay tokens, `adm_...` admission tokens): a path segment starting with one is redacted.
const SECRET_PREFIXES: &[&str] = &["svc_", "rly_", "adm_"];

/// A path segment this long of token characters is treated as a secret too (credentials are
/// 32+ random characters; ids and names are shorter or carry a kind prefix).
const LONG_OPAQUE: usize = 40;

/// The path as it may be logged: no query, secrets redacted, bounded.
pub fn loggable_path(path_and_query: &str, headers: &HeaderMap) -> String {
    let path = path_and_query.split(['?', '#']).next().unwrap_or("");
    let token = bearer(headers);
    let mut out = String::with_capacity(path.len().min(MAX_LOGGED_PATH));
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if looks_secret(segment, token) {
            out.push_str("[redacted]");
        } else {
            out.push_str(segment);
        }
        if out.len() > MAX_LOGGED_PATH {
            break;
        }
    }
    if out.len() > MAX_LOGGED_PATH {
        let mut cut = MAX_LOGGED_PATH;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| t.len() >= 8)
}

fn looks_secret(segment: &str, token: Option<&str>) -> bool {
    if segment.is_empty() {
        return false;
    }
    if token.is_some_and(|t| segment.contains(t)) {
        return true;
    }
    let lower = segment.to_ascii_lowercase();
    if SECRET_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    segment.len() >= LONG_OPAQUE && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_token(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {token}").parse().expect("header"));
        h
    }

    #[test]
    fn a_token_in_the_path_or_query_never_reaches_the_log() {
        let none = HeaderMap::new();
        assert_eq!(loggable_path("/api/applications/web?token=svc_abc", &none), "/api/applications/web");
        assert_eq!(loggable_path("/api/x/svc_abcdef0123", &none), "/api/x/[redacted]");
        let own = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            loggable_path(&format!("/api/ingress/deployments/{own}"), &with_token(own)),
            "/api/ingress/deployments/[redacted]"
        );
        let opaque = "A".repeat(64);
        assert_eq!(loggable_path(&format!("/p/{opaque}/logs"), &none), "/p/[redacted]/logs");
        // Names and ids stay readable.
        assert_eq!(
            loggable_path("/api/ingress/deployments/node-demo/logs", &none),
            "/api/ingress/deployments/node-demo/logs"
        );
    }

    #[test]
    fn a_huge_path_is_cut() {
        let path = format!("/{}", "a/".repeat(10_000));
        let logged = loggable_path(&path, &HeaderMap::new());
        assert!(logged.len() <= MAX_LOGGED_PATH + 3, "{}", logged.len());
        assert!(logged.ends_with("..."));
    }
}
