//! The route validation procedure as data: each version's canonical definition (the steps,
//! in order, and what passes) and its `sha256:` digest over RFC 8785 JSON. A validation
//! records the version that judged it; projects may pin the digests they accept, and the
//! signed service catalog lists them, so anyone can check which logic judged a route.

use std::sync::OnceLock;

use serde_json::{Value, json};

use super::{CHALLENGE_PATH, VALIDATOR_VERSION};

/// One version of the procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Procedure {
    /// `route-validation/N`.
    pub version: &'static str,
    /// The canonical definition.
    pub definition: Value,
    /// `sha256:` and 64 hex digits of the definition's RFC 8785 bytes.
    pub digest: String,
}

fn definition_v2() -> Value {
    json!({
        "version": VALIDATOR_VERSION,
        "steps": [
            {"step": "resolve", "passes": "the hostname has at least one A or AAAA address", "failure": "address_unresolvable"},
            {"step": "public-address", "passes": "every address is public unicast (no loopback, private, link-local, CGNAT, multicast, documentation or other special-purpose range, IPv4-embedded IPv6 judged by its IPv4 address)", "failure": "address_not_public"},
            {"step": "connect", "passes": "TCP to a checked address on the gateway's public port", "failure": "route_unreachable"},
            {"step": "tls", "passes": "TLS 1.2 or 1.3 with SNI = hostname, ALPN http/1.1, chain to the configured roots, name matches, no session resumption", "failure": "certificate_invalid"},
            {"step": "health", "passes": "GET /health answers 200", "failure": "health_failing"},
            {"step": "challenge", "passes": format!("GET {CHALLENGE_PATH}?nonce=<32 random bytes, base64url> answers JSON whose nonce, routeId and hostname match and whose proof = base64url(Ed25519 signature, verified with the route's public key, over \"svc route challenge v2|\" routeId \"|\" hostname \"|\" nonce)"), "failure": "challenge_failed"},
        ],
        "deadline": "one deadline bounds all steps; the running step is reported",
    })
}

/// Every version this build can run, oldest first; the last is the one in use. Version 1
/// (an HMAC keyed by a route secret the coordinator had to keep in clear) is gone: a route
/// key's private half now stays with the job.
pub fn all() -> &'static [Procedure] {
    static ALL: OnceLock<Vec<Procedure>> = OnceLock::new();
    ALL.get_or_init(|| {
        let definition = definition_v2();
        let digest = manifest_core::canonical_digest(&definition).unwrap_or_default();
        vec![Procedure { version: VALIDATOR_VERSION, definition, digest }]
    })
}

/// The version in use.
pub fn current() -> &'static Procedure {
    // `all()` is never empty: it is built from a fixed list above.
    &all()[all().len() - 1]
}

/// The procedure with this version, if this build knows it.
pub fn by_version(version: &str) -> Option<&'static Procedure> {
    all().iter().find(|p| p.version == version)
}

/// The procedure with this digest, if this build knows it.
pub fn by_digest(digest: &str) -> Option<&'static Procedure> {
    all().iter().find(|p| p.digest == digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_version_has_a_stable_sha256_digest() {
        let p = current();
        assert_eq!(p.version, VALIDATOR_VERSION);
        assert!(p.digest.starts_with("sha256:") && p.digest.len() == 7 + 64, "{}", p.digest);
        assert_eq!(by_digest(&p.digest), Some(p));
        assert_eq!(by_version(VALIDATOR_VERSION), Some(p));
        // The digest is over the canonical bytes: key order does not matter, content does.
        let again = manifest_core::canonical_digest(&definition_v2()).unwrap_or_default();
        assert_eq!(again, p.digest);
        let mut changed = definition_v2();
        changed["deadline"] = "changed".into();
        assert_ne!(manifest_core::canonical_digest(&changed).unwrap_or_default(), p.digest);
    }
}
