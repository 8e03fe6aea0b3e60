//! ALPN protocol names the relay routes by (a ClientHello's ALPN list is sent in the clear,
//! so the gateway reads it without terminating TLS).

/// An ACME server's tls-alpn-01 validation offers this protocol alone (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The ALPN protocol a client offers to reach one route by its ID, `svc-route/<route ID>`:
/// the coordinator validates a redeploy's successor this way before any client is sent to it.
pub const ROUTE_ALPN_PREFIX: &[u8] = b"svc-route/";

/// The ALPN protocol the coordinator's validation offers so that a route's client guards
/// (allow-list, rate limit) let it through: `svc-probe/<unix seconds>.<tag>`, the tag an
/// HMAC-SHA256 over the route ID and the time, keyed by the route's credential digest, which
/// only the coordinator and the gateways hold. A token is good for [`PROBE_TOKEN_LIFETIME_SECS`]
/// either side of its time: ALPN is sent in the clear, so an on-path observer could replay
/// one that long, and no longer.
pub const PROBE_ALPN_PREFIX: &[u8] = b"svc-probe/";

/// How far a probe token's time may be from the gateway's clock, in seconds.
pub const PROBE_TOKEN_LIFETIME_SECS: u64 = 120;

fn probe_tag(credential_sha256: &str, route_id: &str, unix_secs: u64) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, credential_sha256.to_ascii_lowercase().as_bytes());
    let message = format!("svc route probe v1|{route_id}|{unix_secs}");
    crate::wire::hex(ring::hmac::sign(&key, message.as_bytes()).as_ref())
}

/// The probe ALPN protocol for route `route_id` (whose credential's SHA-256 is
/// `credential_sha256`) at `unix_secs`.
pub fn probe_alpn(credential_sha256: &str, route_id: &str, unix_secs: u64) -> Vec<u8> {
    let mut alpn = PROBE_ALPN_PREFIX.to_vec();
    alpn.extend_from_slice(format!("{unix_secs}.{}", probe_tag(credential_sha256, route_id, unix_secs)).as_bytes());
    alpn
}

/// Whether `token` (what followed [`PROBE_ALPN_PREFIX`]) is a probe token of route
/// `route_id` made within [`PROBE_TOKEN_LIFETIME_SECS`] of `now_secs`.
pub fn probe_valid(token: &[u8], credential_sha256: &str, route_id: &str, now_secs: u64) -> bool {
    let Some((secs, tag)) = std::str::from_utf8(token).ok().and_then(|t| t.split_once('.')) else { return false };
    let Ok(secs) = secs.parse::<u64>() else { return false };
    if secs.abs_diff(now_secs) > PROBE_TOKEN_LIFETIME_SECS {
        return false;
    }
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, credential_sha256.to_ascii_lowercase().as_bytes());
    let message = format!("svc route probe v1|{route_id}|{secs}");
    crate::wire::unhex::<32>(tag).is_some_and(|tag| ring::hmac::verify(&key, message.as_bytes(), &tag).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_token_is_good_for_its_route_key_and_time_only() {
        let key = "ab".repeat(32);
        let alpn = probe_alpn(&key, "r1", 1_000_000);
        let token = alpn.strip_prefix(PROBE_ALPN_PREFIX).expect("the prefix");
        assert!(alpn.len() <= 255, "an ALPN protocol is at most 255 bytes");
        assert!(probe_valid(token, &key, "r1", 1_000_000));
        assert!(probe_valid(token, &key.to_uppercase(), "r1", 1_000_000 + PROBE_TOKEN_LIFETIME_SECS));
        assert!(!probe_valid(token, &key, "r1", 1_000_000 + PROBE_TOKEN_LIFETIME_SECS + 1), "too old");
        assert!(!probe_valid(token, &key, "r1", 1_000_000 - PROBE_TOKEN_LIFETIME_SECS - 1), "from the future");
        assert!(!probe_valid(token, &key, "r2", 1_000_000), "another route");
        assert!(!probe_valid(token, &"cd".repeat(32), "r1", 1_000_000), "another key");
        let forged = format!("1000001.{}", std::str::from_utf8(&token[8..]).expect("text"));
        assert!(!probe_valid(forged.as_bytes(), &key, "r1", 1_000_000), "another time");
        for junk in [&b""[..], b"1.2", b"x.00", b"\xff", b"1000000"] {
            assert!(!probe_valid(junk, &key, "r1", 1_000_000), "{junk:?}");
        }
    }
}
