//! The route challenge: `proof = base64url(Ed25519 signature by the route key over
//! "svc route challenge v2|" routeId "|" hostname "|" nonce)`. Only the job holds the route
//! key (its private half lives in the job's `agent.json`); the coordinator keeps only the
//! public half, so a copy of the coordinator's store cannot answer a challenge, and a fresh
//! nonce shows the public path really reaches this job.
//!
//! The same key opens an agent's tunnel: its `Hello` carries `base64url(Ed25519 signature
//! over "svc tunnel hello v1|" routeId "|" replica "|" hex(binding))`, where the binding is
//! the TLS session's exporter value ([`crate::wire::session_binding`]). A gateway checks it
//! with the public half the route feed carries, and learns nothing it could present: a
//! proof seen on one session fails on any other (issue 40: the tunnel credential was a bearer
//! secret every gateway host an agent dialed was handed).

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

/// What the signature covers before the route, the hostname and the nonce: names the
/// purpose, so a route key's signature is never valid for anything else.
const CONTEXT: &str = "svc route challenge v2";

/// What a tunnel `Hello`'s signature covers first (another purpose, so neither proof is ever
/// valid as the other).
const HELLO_CONTEXT: &str = "svc tunnel hello v1";

/// A route's signing key (Ed25519). Its `Debug` never shows the key; it is written to files
/// as base64url of its PKCS#8 document.
#[derive(Clone)]
pub struct RouteKey {
    pkcs8: Arc<[u8]>,
    pair: Arc<Ed25519KeyPair>,
}

/// Why a route key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum RouteKeyError {
    /// No randomness.
    #[error("cannot generate a route key: no randomness")]
    Random,
    /// Not base64url.
    #[error("the route key is not base64url: {0}")]
    Encoding(#[from] base64::DecodeError),
    /// Not an Ed25519 PKCS#8 document.
    #[error("the route key is not an Ed25519 PKCS#8 key: {0}")]
    Key(String),
}

impl RouteKey {
    /// A new random key.
    pub fn generate() -> Result<RouteKey, RouteKeyError> {
        let document =
            Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).map_err(|_| RouteKeyError::Random)?;
        RouteKey::from_pkcs8(document.as_ref())
    }

    fn from_pkcs8(pkcs8: &[u8]) -> Result<RouteKey, RouteKeyError> {
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8).map_err(|e| RouteKeyError::Key(e.to_string()))?;
        Ok(RouteKey { pkcs8: pkcs8.into(), pair: Arc::new(pair) })
    }

    /// Reads the file form (base64url of the PKCS#8 document).
    pub fn from_text(text: &str) -> Result<RouteKey, RouteKeyError> {
        RouteKey::from_pkcs8(&URL_SAFE_NO_PAD.decode(text.trim())?)
    }

    /// The file form.
    pub fn to_text(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.pkcs8)
    }

    /// The public half, base64url: what the coordinator keeps.
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.pair.public_key().as_ref())
    }

    /// A tunnel `Hello`'s proof for `route_id` and `replica` on the TLS session whose
    /// [`crate::wire::session_binding`] is `binding`.
    pub fn hello_proof(&self, route_id: &str, replica: &str, binding: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.pair.sign(hello_message(route_id, replica, binding).as_bytes()).as_ref())
    }

    /// The proof for a nonce.
    pub fn proof(&self, route_id: &str, hostname: &str, nonce: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.pair.sign(message(route_id, hostname, nonce).as_bytes()).as_ref())
    }
}

impl std::fmt::Debug for RouteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RouteKey(public {})", self.public_key())
    }
}

impl PartialEq for RouteKey {
    fn eq(&self, other: &RouteKey) -> bool {
        self.pkcs8 == other.pkcs8
    }
}

impl Eq for RouteKey {}

impl serde::Serialize for RouteKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_text())
    }
}

impl<'de> serde::Deserialize<'de> for RouteKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RouteKey, D::Error> {
        let text = String::deserialize(deserializer)?;
        RouteKey::from_text(&text).map_err(serde::de::Error::custom)
    }
}

fn message(route_id: &str, hostname: &str, nonce: &str) -> String {
    format!("{CONTEXT}|{route_id}|{hostname}|{nonce}")
}

fn hello_message(route_id: &str, replica: &str, binding: &[u8]) -> String {
    format!("{HELLO_CONTEXT}|{route_id}|{replica}|{}", crate::hex::hex(binding))
}

/// Whether `proof` is the `Hello` proof of the route whose public key is `public_key`
/// (base64url) for `replica` on the session whose binding is `binding`.
pub fn verify_hello(public_key: &str, route_id: &str, replica: &str, binding: &[u8], proof: &str) -> bool {
    let (Ok(key), Ok(signature)) = (URL_SAFE_NO_PAD.decode(public_key), URL_SAFE_NO_PAD.decode(proof)) else {
        return false;
    };
    UnparsedPublicKey::new(&ED25519, key)
        .verify(hello_message(route_id, replica, binding).as_bytes(), &signature)
        .is_ok()
}

/// A fresh nonce for one challenge: 32 random bytes, base64url without padding (URL-safe,
/// so it goes into the query string as it is).
pub fn new_nonce() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether `proof` answers the nonce for the route whose public key is `public_key`
/// (base64url, as [`RouteKey::public_key`] gives it).
pub fn verify(public_key: &str, route_id: &str, hostname: &str, nonce: &str, proof: &str) -> bool {
    let (Ok(key), Ok(signature)) = (URL_SAFE_NO_PAD.decode(public_key), URL_SAFE_NO_PAD.decode(proof)) else {
        return false;
    };
    UnparsedPublicKey::new(&ED25519, key).verify(message(route_id, hostname, nonce).as_bytes(), &signature).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_with_the_public_key_only() {
        let key = RouteKey::generate().expect("a key");
        let public = key.public_key();
        let proof = key.proof("r1", "a.localhost", "n1");
        assert!(verify(&public, "r1", "a.localhost", "n1", &proof));
        assert!(!verify(&public, "r1", "a.localhost", "n2", &proof), "another nonce");
        assert!(!verify(&public, "r2", "a.localhost", "n1", &proof), "another route");
        assert!(!verify(&public, "r1", "b.localhost", "n1", &proof), "another hostname");
        let other = RouteKey::generate().expect("a key");
        assert!(!verify(&other.public_key(), "r1", "a.localhost", "n1", &proof), "another route's key");
        assert!(!verify("not base64!", "r1", "a.localhost", "n1", &proof));
    }

    #[test]
    fn the_proof_is_an_ed25519_signature_over_the_documented_message() {
        let key = RouteKey::generate().expect("a key");
        let proof = URL_SAFE_NO_PAD.decode(key.proof("r1", "a.localhost", "n1")).expect("base64url");
        assert_eq!(proof.len(), 64, "an Ed25519 signature");
        let public = URL_SAFE_NO_PAD.decode(key.public_key()).expect("base64url");
        assert_eq!(public.len(), 32, "an Ed25519 public key");
        UnparsedPublicKey::new(&ED25519, public)
            .verify(b"svc route challenge v2|r1|a.localhost|n1", &proof)
            .expect("signed over exactly the documented message");
    }

    #[test]
    fn a_hello_proof_holds_for_its_route_replica_and_session_alone() {
        let key = RouteKey::generate().expect("a key");
        let public = key.public_key();
        let (session, other_session) = ([1u8; 32], [2u8; 32]);
        let proof = key.hello_proof("r1", "job-0", &session);
        assert!(verify_hello(&public, "r1", "job-0", &session, &proof));
        assert!(!verify_hello(&public, "r1", "job-0", &other_session, &proof), "another TLS session");
        assert!(!verify_hello(&public, "r1", "job-1", &session, &proof), "another replica");
        assert!(!verify_hello(&public, "r2", "job-0", &session, &proof), "another route");
        let other = RouteKey::generate().expect("a key");
        assert!(!verify_hello(&other.public_key(), "r1", "job-0", &session, &proof), "another route's key");
        // Neither proof passes as the other.
        let challenge = key.proof("r1", "job-0", &crate::wire::hex(&session));
        assert!(!verify_hello(&public, "r1", "job-0", &session, &challenge));
        assert!(!verify(&public, "r1", "job-0", &crate::wire::hex(&session), &proof));
        let signed = URL_SAFE_NO_PAD.decode(&proof).expect("base64url");
        let message = format!("svc tunnel hello v1|r1|job-0|{}", "01".repeat(32));
        UnparsedPublicKey::new(&ED25519, URL_SAFE_NO_PAD.decode(&public).expect("base64url"))
            .verify(message.as_bytes(), &signed)
            .expect("signed over exactly the documented message");
    }

    #[test]
    fn the_public_half_is_the_last_32_bytes_of_the_file_form() {
        // What bench/ingress.sh and bench/failover.sh read a route's `routePublicKey` from.
        let key = RouteKey::generate().expect("a key");
        let document = URL_SAFE_NO_PAD.decode(key.to_text()).expect("base64url");
        assert_eq!(URL_SAFE_NO_PAD.encode(&document[document.len() - 32..]), key.public_key());
    }

    #[test]
    fn the_file_form_round_trips_and_debug_hides_the_key() {
        let key = RouteKey::generate().expect("a key");
        let again = RouteKey::from_text(&key.to_text()).expect("reads back");
        assert_eq!(again, key);
        assert_eq!(again.public_key(), key.public_key());
        let json = serde_json::to_string(&key).expect("json");
        let back: RouteKey = serde_json::from_str(&json).expect("from json");
        assert_eq!(back, key);
        assert!(!format!("{key:?}").contains(&key.to_text()), "Debug never shows the private key");
        assert!(RouteKey::from_text("AAAA").is_err());
        assert!(serde_json::from_str::<RouteKey>("\"a route secret\"").is_err());
    }

    #[test]
    fn nonces_are_fresh_url_safe_32_bytes() {
        let (a, b) = (new_nonce().expect("random"), new_nonce().expect("random"));
        assert_ne!(a, b);
        assert_eq!(URL_SAFE_NO_PAD.decode(&a).expect("base64url").len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{a}");
    }
}
