//! The route challenge: `proof = base64url(HMAC-SHA256(route secret, routeId "|" hostname "|"
//! nonce))`. Only a job holding the route secret can answer a fresh nonce, so the coordinator
//! knows the public path really reaches this job.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The proof for a nonce.
pub fn proof(route_secret: &[u8], route_id: &str, hostname: &str, nonce: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, route_secret);
    let message = format!("{route_id}|{hostname}|{nonce}");
    URL_SAFE_NO_PAD.encode(ring::hmac::sign(&key, message.as_bytes()).as_ref())
}

/// A fresh nonce for one challenge: 32 random bytes, base64url without padding (URL-safe,
/// so it goes into the query string as it is).
pub fn new_nonce() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether `proof` answers the nonce (constant time).
pub fn verify(route_secret: &[u8], route_id: &str, hostname: &str, nonce: &str, proof: &str) -> bool {
    let Ok(tag) = URL_SAFE_NO_PAD.decode(proof) else { return false };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, route_secret);
    ring::hmac::verify(&key, format!("{route_id}|{hostname}|{nonce}").as_bytes(), &tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_match_rfc_4231_hmac_and_verify() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let p = proof(b"Jefe", "what do ya want ", "for nothing", "?");
        // The message is "what do ya want |for nothing|?", not the RFC's; check the shape and
        // the round trip, and the RFC vector through ring directly.
        assert_eq!(p.len(), 43);
        assert!(verify(b"Jefe", "what do ya want ", "for nothing", "?", &p));
        assert!(!verify(b"Jefe", "r", "h", "other", &p));
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"Jefe");
        let tag = ring::hmac::sign(&key, b"what do ya want for nothing?");
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn nonces_are_fresh_url_safe_32_bytes() {
        let (a, b) = (new_nonce().expect("random"), new_nonce().expect("random"));
        assert_ne!(a, b);
        assert_eq!(URL_SAFE_NO_PAD.decode(&a).expect("base64url").len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{a}");
    }
}
