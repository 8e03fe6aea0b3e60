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
/// (allow-list, rate limit) let it through: `svc-probe/<unix seconds>.<tag>`, the tag an
/// HMAC-SHA256 over the route ID, the server name and the time, keyed by the route's
/// credential digest, which the coordinator and the gateways hold (and the route's own agent
/// could compute: the customer can pass their own guards). A token is good for
/// [`PROBE_TOKEN_LIFETIME_SECS`] either side of its time, for that route and name only: ALPN
/// is sent in the clear, so an on-path observer could replay one that long. The coordinator's
/// and the gateways' clocks must agree within that.
pub const PROBE_ALPN_PREFIX: &[u8] = b"svc-probe/";

/// How far a probe token's time may be from the gateway's clock, in seconds.
pub const PROBE_TOKEN_LIFETIME_SECS: u64 = 120;

/// What a probe token is made from.
#[derive(Debug, Clone, Copy)]
pub struct ProbeFor<'a> {
    /// SHA-256 (hex) of the route's tunnel credential: the key.
    pub credential_sha256: &'a str,
    /// The route.
    pub route_id: &'a str,
    /// The server name the ClientHello names (case-insensitive).
    pub server_name: &'a str,
}

impl ProbeFor<'_> {
    fn key(&self) -> ring::hmac::Key {
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.credential_sha256.to_ascii_lowercase().as_bytes())
    }

    fn message(&self, unix_secs: u64) -> String {
        format!("svc route probe v2|{}|{}|{unix_secs}", self.route_id, self.server_name.to_ascii_lowercase())
    }
}

/// The probe ALPN protocol for `probe` at `unix_secs`.
pub fn probe_alpn(probe: ProbeFor<'_>, unix_secs: u64) -> Vec<u8> {
    let tag = ring::hmac::sign(&probe.key(), probe.message(unix_secs).as_bytes());
    let mut alpn = PROBE_ALPN_PREFIX.to_vec();
    alpn.extend_from_slice(format!("{unix_secs}.{}", crate::wire::hex(tag.as_ref())).as_bytes());
    alpn
}

/// Whether `token` (what followed [`PROBE_ALPN_PREFIX`]) is a probe token for `probe` made
/// within [`PROBE_TOKEN_LIFETIME_SECS`] of `now_secs` (compared in constant time).
pub fn probe_valid(token: &[u8], probe: ProbeFor<'_>, now_secs: u64) -> bool {
    let Some((secs, tag)) = std::str::from_utf8(token).ok().and_then(|t| t.split_once('.')) else { return false };
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(secs) = secs.parse::<u64>() else { return false };
    if secs.abs_diff(now_secs) > PROBE_TOKEN_LIFETIME_SECS {
        return false;
    }
    crate::wire::unhex::<32>(tag)
        .is_some_and(|tag| ring::hmac::verify(&probe.key(), probe.message(secs).as_bytes(), &tag).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_token_is_good_for_its_route_name_key_and_time_only() {
        let key = "ab".repeat(32);
        let probe = ProbeFor { credential_sha256: &key, route_id: "r1", server_name: "shop.example.com" };
        let alpn = probe_alpn(probe, 1_000_000);
        let token = alpn.strip_prefix(PROBE_ALPN_PREFIX).expect("the prefix");
        assert!(alpn.len() <= 255, "an ALPN protocol is at most 255 bytes");
        assert!(probe_valid(token, probe, 1_000_000));
        let upper = key.to_uppercase();
        let same = ProbeFor { credential_sha256: &upper, server_name: "Shop.Example.com", ..probe };
        assert!(probe_valid(token, same, 1_000_000 + PROBE_TOKEN_LIFETIME_SECS), "case does not matter");
        assert!(!probe_valid(token, probe, 1_000_000 + PROBE_TOKEN_LIFETIME_SECS + 1), "too old");
        assert!(!probe_valid(token, probe, 1_000_000 - PROBE_TOKEN_LIFETIME_SECS - 1), "from the future");
        assert!(!probe_valid(token, ProbeFor { route_id: "r2", ..probe }, 1_000_000), "another route");
        assert!(!probe_valid(token, ProbeFor { server_name: "www.example.com", ..probe }, 1_000_000), "another name");
        let other = "cd".repeat(32);
        assert!(!probe_valid(token, ProbeFor { credential_sha256: &other, ..probe }, 1_000_000), "another key");
        let forged = format!("1000001.{}", std::str::from_utf8(&token[8..]).expect("text"));
        assert!(!probe_valid(forged.as_bytes(), probe, 1_000_000), "another time");
        let signed = format!("+1000000.{}", std::str::from_utf8(&token[8..]).expect("text"));
        assert!(!probe_valid(signed.as_bytes(), probe, 1_000_000), "one spelling of the time");
        for junk in [&b""[..], b"1.2", b"x.00", b"\xff", b"1000000"] {
            assert!(!probe_valid(junk, probe, 1_000_000), "{junk:?}");
        }
    }
}
