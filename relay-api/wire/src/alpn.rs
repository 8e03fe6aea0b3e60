//! ALPN protocol names the relay routes by (a ClientHello's ALPN list is sent in the clear,
//! so the gateway reads it without terminating TLS).

/// An ACME server's tls-alpn-01 validation offers this protocol alone (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The ALPN protocol a client offers to reach one route by its ID, `svc-route/<route ID>`:
/// the coordinator validates a redeploy's successor this way before any client is sent to it.
pub const ROUTE_ALPN_PREFIX: &[u8] = b"svc-route/";

/// The ALPN protocol the coordinator's validation offers, beside a probe token, to reach one
/// replica of a route by its name, `svc-replica/<name>`: each job of a route is validated on
/// its own. The gateway honours it only with a current probe token of the route (the token
/// does not name the replica: whoever holds one may choose among the route's replicas, and
/// nothing more), and sends the connection to that replica or to none.
pub const REPLICA_ALPN_PREFIX: &[u8] = b"svc-replica/";

/// The ALPN protocol the coordinator's validation offers so that a route's client guards
/// (allow-list, rate limit) let it through: `svc-probe/<unix seconds>.<signature>`, the
/// signature an Ed25519 signature (lowercase hex) by the coordinator's probe key over
/// [`PROBE_CONTEXT`], [`PROBE_AUDIENCE`], the route ID, the server name and the time
/// ([`ProbeFor`]). Gateways hold the public halves only ([`ProbeKey`], from the route feed),
/// so no gateway host can make one (issue 40: it was an HMAC keyed by the route's credential
/// digest, which every host was given). A token is good for [`PROBE_TOKEN_LIFETIME_SECS`]
/// either side of its time, for that route and name only: ALPN is sent in the clear, so an
/// on-path observer could replay one that long, to that route. The coordinator's and the
/// gateways' clocks must agree within that.
pub const PROBE_ALPN_PREFIX: &[u8] = b"svc-probe/";

/// How far a probe token's time may be from the gateway's clock, in seconds (`gateway-prep
/// check` holds a host's clock within 30 s).
pub const PROBE_TOKEN_LIFETIME_SECS: u64 = 60;

/// What a probe signature covers first: the format's version.
pub const PROBE_CONTEXT: &str = "svc route probe v3";

/// Who a probe token is for: a gateway's public port, to pass a route's client guards. A
/// signature by the same key for anything else names another audience, so it is no token.
pub const PROBE_AUDIENCE: &str = "gateway-guards";

/// The most probe keys a gateway holds (the coordinators sharing a database, each with its
/// own key): more are ignored, so a token costs at most this many verifications.
pub const MAX_PROBE_KEYS: usize = 16;

/// What a probe token is for.
#[derive(Debug, Clone, Copy)]
pub struct ProbeFor<'a> {
    /// The route.
    pub route_id: &'a str,
    /// The server name the ClientHello names (case-insensitive).
    pub server_name: &'a str,
}

impl ProbeFor<'_> {
    fn message(&self, unix_secs: u64) -> String {
        format!(
            "{PROBE_CONTEXT}|{PROBE_AUDIENCE}|{}|{}|{unix_secs}",
            self.route_id,
            self.server_name.to_ascii_lowercase()
        )
    }
}

/// The public half of a coordinator's probe key: 32 bytes, written as 64 lowercase hex
/// digits (in the route feed's `probeKeys`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeKey([u8; 32]);

impl ProbeKey {
    /// Reads 64 hex digits.
    pub fn parse(text: &str) -> Option<ProbeKey> {
        crate::wire::unhex::<32>(text).map(ProbeKey)
    }

    /// The 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Display for ProbeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::wire::hex(&self.0))
    }
}

impl std::fmt::Debug for ProbeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProbeKey({self})")
    }
}

/// Why a probe key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeKeyError {
    /// The system's random number generator failed.
    #[error("no randomness for a new probe key")]
    Random,
    /// The bytes are not an Ed25519 PKCS#8 key.
    #[error("not an Ed25519 PKCS#8 key: {0}")]
    NotAKey(String),
}

/// The coordinator's probe key (Ed25519): it signs probe tokens, and nothing else.
pub struct ProbeSigner {
    pair: ring::signature::Ed25519KeyPair,
}

impl std::fmt::Debug for ProbeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeSigner").field("public", &self.public_key()).finish_non_exhaustive()
    }
}

impl ProbeSigner {
    /// A new key, and its PKCS#8 bytes (to keep in a 0600 file).
    pub fn generate() -> Result<(ProbeSigner, Vec<u8>), ProbeKeyError> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| ProbeKeyError::Random)?;
        let pkcs8 = pkcs8.as_ref().to_vec();
        Ok((ProbeSigner::from_pkcs8(&pkcs8)?, pkcs8))
    }

    /// The key in PKCS#8 `bytes`.
    pub fn from_pkcs8(bytes: &[u8]) -> Result<ProbeSigner, ProbeKeyError> {
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(bytes)
            .map_err(|e| ProbeKeyError::NotAKey(e.to_string()))?;
        Ok(ProbeSigner { pair })
    }

    /// Its public half.
    pub fn public_key(&self) -> ProbeKey {
        use ring::signature::KeyPair as _;
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(self.pair.public_key().as_ref());
        ProbeKey(bytes)
    }

    /// The probe ALPN protocol for `probe` at `unix_secs`.
    pub fn probe_alpn(&self, probe: ProbeFor<'_>, unix_secs: u64) -> Vec<u8> {
        let signature = self.pair.sign(probe.message(unix_secs).as_bytes());
        let mut alpn = PROBE_ALPN_PREFIX.to_vec();
        alpn.extend_from_slice(format!("{unix_secs}.{}", crate::wire::hex(signature.as_ref())).as_bytes());
        alpn
    }
}

/// Whether `token` (what followed [`PROBE_ALPN_PREFIX`]) is a probe token for `probe`
/// signed by one of `keys` (the first [`MAX_PROBE_KEYS`]) within
/// [`PROBE_TOKEN_LIFETIME_SECS`] of `now_secs`.
pub fn probe_valid(token: &[u8], probe: ProbeFor<'_>, keys: &[ProbeKey], now_secs: u64) -> bool {
    let Some((secs, signature)) = std::str::from_utf8(token).ok().and_then(|t| t.split_once('.')) else {
        return false;
    };
    if secs.is_empty() || secs.len() > 20 || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(secs) = secs.parse::<u64>() else { return false };
    if secs.abs_diff(now_secs) > PROBE_TOKEN_LIFETIME_SECS {
        return false;
    }
    let Some(signature) = crate::wire::unhex::<64>(signature) else { return false };
    let message = probe.message(secs);
    keys.iter().take(MAX_PROBE_KEYS).any(|key| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key.as_bytes())
            .verify(message.as_bytes(), &signature)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_token_is_good_for_its_route_name_key_and_time_only() {
        let (signer, pkcs8) = ProbeSigner::generate().expect("a key");
        let keys = [signer.public_key()];
        assert_eq!(ProbeSigner::from_pkcs8(&pkcs8).expect("reads back").public_key(), keys[0]);
        assert_eq!(ProbeKey::parse(&keys[0].to_string()), Some(keys[0]));
        let probe = ProbeFor { route_id: "r1", server_name: "shop.example.com" };
        let alpn = signer.probe_alpn(probe, 1_000_000);
        let token = alpn.strip_prefix(PROBE_ALPN_PREFIX).expect("the prefix");
        assert!(alpn.len() <= 255, "an ALPN protocol is at most 255 bytes");
        assert!(probe_valid(token, probe, &keys, 1_000_000));
        let same = ProbeFor { server_name: "Shop.Example.com", ..probe };
        assert!(probe_valid(token, same, &keys, 1_000_000 + PROBE_TOKEN_LIFETIME_SECS), "case does not matter");
        assert!(!probe_valid(token, probe, &keys, 1_000_000 + PROBE_TOKEN_LIFETIME_SECS + 1), "too old");
        assert!(!probe_valid(token, probe, &keys, 1_000_000 - PROBE_TOKEN_LIFETIME_SECS - 1), "from the future");
        assert!(!probe_valid(token, ProbeFor { route_id: "r2", ..probe }, &keys, 1_000_000), "another route");
        assert!(!probe_valid(token, ProbeFor { server_name: "www.example.com", ..probe }, &keys, 1_000_000));
        let (other, _) = ProbeSigner::generate().expect("another key");
        assert!(!probe_valid(token, probe, &[other.public_key()], 1_000_000), "another key");
        assert!(probe_valid(token, probe, &[other.public_key(), keys[0]], 1_000_000), "one of several keys");
        assert!(!probe_valid(token, probe, &[], 1_000_000), "no key: no token");
        let tail = std::str::from_utf8(&token[8..]).expect("text");
        assert!(!probe_valid(format!("1000001.{tail}").as_bytes(), probe, &keys, 1_000_000), "another time");
        assert!(!probe_valid(format!("+1000000.{tail}").as_bytes(), probe, &keys, 1_000_000), "one spelling");
        for junk in [&b""[..], b"1.2", b"x.00", b"\xff", b"1000000"] {
            assert!(!probe_valid(junk, probe, &keys, 1_000_000), "{junk:?}");
        }
        // The same key's signature over another audience's message is no token.
        let elsewhere = format!("{PROBE_CONTEXT}|elsewhere|r1|shop.example.com|1000000");
        let signature = crate::wire::hex(signer.pair.sign(elsewhere.as_bytes()).as_ref());
        assert!(!probe_valid(format!("1000000.{signature}").as_bytes(), probe, &keys, 1_000_000));
    }

    #[test]
    fn what_a_gateway_is_given_makes_no_token() {
        // The credential digest keyed the old HMAC token: a host holding it (and the probe
        // keys) makes nothing that verifies.
        let (signer, _) = ProbeSigner::generate().expect("a key");
        let probe = ProbeFor { route_id: "r1", server_name: "shop.example.com" };
        let credential_sha256 = "ab".repeat(32);
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, credential_sha256.as_bytes());
        let message = probe.message(1_000_000);
        let tag = ring::hmac::sign(&key, message.as_bytes());
        let minted = format!("1000000.{}", crate::wire::hex(tag.as_ref()));
        assert!(!probe_valid(minted.as_bytes(), probe, &[signer.public_key()], 1_000_000));
        let public = signer.public_key().to_string();
        let keyed_by_public =
            ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public.as_bytes()), message.as_bytes());
        let doubled = format!("1000000.{0}{0}", crate::wire::hex(keyed_by_public.as_ref()));
        assert!(!probe_valid(doubled.as_bytes(), probe, &[signer.public_key()], 1_000_000));
    }
}
