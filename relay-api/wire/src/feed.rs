//! The route feed (issue 20): an admitted gateway host asks the coordinator for the routes
//! assigned to it, `GET /api/gateway/routes`, each request signed with its operator key (the
//! Ed25519 key `gateway-prep init` registered). No token travels: the coordinator checks the
//! signature against the registered public key.
//!
//! The signature covers a context, the operator's ID, the request's time and its path with
//! query, one per line ([`feed_message`]), and travels in one header ([`SIGNATURE_HEADER`]):
//! `op=<operator id>;at=<Unix ms>;sig=<base64>`. A request is accepted within
//! [`FEED_SKEW_MS`] of the coordinator's clock; the feed only reads, so a request replayed
//! within that window learns nothing its host was not given.

/// The feed's path.
pub const FEED_PATH: &str = "/api/gateway/routes";

/// What a feed signature covers, before the operator, the time and the path.
pub const FEED_CONTEXT: &str = "svc-gateway-routes/1";

/// The header a feed request's signature travels in.
pub const SIGNATURE_HEADER: &str = "x-svc-gateway-signature";

/// How far a signed request's time may be from the coordinator's clock, ms (`gateway-prep
/// check` holds the host's clock within 30 s).
pub const FEED_SKEW_MS: i64 = 60_000;

/// The query parameter naming the table version a gateway serves: the coordinator answers
/// when its table differs, or after [`FEED_WAIT_SECS`] with the same one (a long poll).
pub const AFTER_PARAM: &str = "after";

/// How long the coordinator holds a feed request whose table has not changed, seconds.
pub const FEED_WAIT_SECS: u64 = 20;

/// The path and query of a feed request: `after` is the version the gateway serves, if any.
/// Versions are hex, so nothing needs escaping.
pub fn feed_path(after: Option<&str>) -> String {
    match after {
        Some(version) => format!("{FEED_PATH}?{AFTER_PARAM}={version}"),
        None => FEED_PATH.to_owned(),
    }
}

/// The bytes a gateway host signs for one feed request.
pub fn feed_message(operator_id: &str, at_ms: i64, path_and_query: &str) -> Vec<u8> {
    format!("{FEED_CONTEXT}\n{operator_id}\n{at_ms}\n{path_and_query}").into_bytes()
}

/// A feed request's signature, as its header carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedSignature {
    /// The operator (`op_...`).
    pub operator_id: String,
    /// When the request was signed, Unix ms.
    pub at_ms: i64,
    /// The Ed25519 signature of [`feed_message`], base64 (standard alphabet, padded).
    pub signature: String,
}

impl FeedSignature {
    /// The header's value.
    pub fn header_value(&self) -> String {
        format!("op={};at={};sig={}", self.operator_id, self.at_ms, self.signature)
    }

    /// Reads a header's value: `None` unless it has exactly `op`, `at` and `sig`, in order.
    pub fn parse(value: &str) -> Option<FeedSignature> {
        let mut parts = value.split(';');
        let operator_id = parts.next()?.strip_prefix("op=")?;
        let at_ms = parts.next()?.strip_prefix("at=")?.parse().ok()?;
        let signature = parts.next()?.strip_prefix("sig=")?;
        if parts.next().is_some() || operator_id.is_empty() || signature.is_empty() {
            return None;
        }
        Some(FeedSignature { operator_id: operator_id.to_owned(), at_ms, signature: signature.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_header_reads_back_and_nothing_else_reads() {
        let sig = FeedSignature {
            operator_id: "op_0123456789abcdef".into(),
            at_ms: 1_700_000_000_000,
            signature: "c2ln".into(),
        };
        assert_eq!(FeedSignature::parse(&sig.header_value()), Some(sig));
        for bad in [
            "",
            "op=;at=1;sig=x",
            "op=a;at=x;sig=y",
            "op=a;at=1",
            "op=a;at=1;sig=",
            "op=a;at=1;sig=y;more=z",
            "at=1;op=a;sig=y",
        ] {
            assert_eq!(FeedSignature::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_signed_bytes_bind_operator_time_and_path() {
        let base = feed_message("op_a", 1, "/api/gateway/routes");
        assert_ne!(base, feed_message("op_b", 1, "/api/gateway/routes"));
        assert_ne!(base, feed_message("op_a", 2, "/api/gateway/routes"));
        assert_ne!(base, feed_message("op_a", 1, "/api/gateway/routes?after=1"));
        assert!(base.starts_with(FEED_CONTEXT.as_bytes()));
    }

    #[test]
    fn a_feed_path_names_the_version_served() {
        assert_eq!(feed_path(None), "/api/gateway/routes");
        assert_eq!(feed_path(Some("0a1b")), "/api/gateway/routes?after=0a1b");
    }
}
