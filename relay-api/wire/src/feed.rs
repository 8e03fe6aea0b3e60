//! The route feed (issue 20): an admitted gateway host asks the coordinator for the routes
//! assigned to it, `GET /api/gateway/routes`, each request signed with its operator key (the
//! Ed25519 key `gateway-prep init` registered). No token travels: the coordinator checks the
//! signature against the registered public key.
//!
//! The signature covers a context, the operator's ID, the request's time and its path with
//! query, one per line ([`feed_message`]), and travels in one header ([`SIGNATURE_HEADER`]):
//! `op=<operator id>;at=<Unix ms>;sig=<base64>`. The time is also the request's counter
//! (issue 40): a request is accepted only if signed later than every request accepted before
//! from its operator (recorded in the store, so a request replayed to another coordinator on
//! the database is refused too: [`REPLAYED_CODE`]), at most [`FEED_AHEAD_MS`] ahead of the
//! coordinator's clock and at most [`FEED_SKEW_MS`] behind it. A host signs each request at
//! its clock's time or one ms after its last, whichever is later, and after a refusal as a
//! replay, one ms after the time the refusal names ([`LAST_ACCEPTED_FIELD`]): two requests in
//! one ms, a restart and a clock stepped back a little are never refused.

/// The feed's path.
pub const FEED_PATH: &str = "/api/gateway/routes";

/// What a feed signature covers, before the operator, the time and the path.
pub const FEED_CONTEXT: &str = "svc-gateway-routes/1";

/// The header a feed request's signature travels in.
pub const SIGNATURE_HEADER: &str = "x-svc-gateway-signature";

/// How far a signed request's time may be behind the coordinator's clock, ms (`gateway-prep
/// check` holds the host's clock within 30 s).
pub const FEED_SKEW_MS: i64 = 60_000;

/// How far a signed request's time may be ahead of the coordinator's clock, ms: one signed
/// further ahead could be held back and used once the host's real requests stop.
pub const FEED_AHEAD_MS: i64 = 5_000;

/// The error code of a request signed no later than one accepted before from its operator
/// (a replay, or a host whose clock stepped back).
pub const REPLAYED_CODE: &str = "gateway_request_replayed";

/// The field of a [`REPLAYED_CODE`] refusal naming the last time accepted from the operator
/// (Unix ms): the host signs its next request after it.
pub const LAST_ACCEPTED_FIELD: &str = "lastAcceptedAt";

/// The query parameter naming the table version a gateway serves: the coordinator answers
/// when its table differs, or after [`FEED_WAIT_SECS`] with the same one (a long poll).
pub const AFTER_PARAM: &str = "after";

/// How long the coordinator holds a feed request whose table has not changed, seconds.
pub const FEED_WAIT_SECS: u64 = 20;

/// Where a gateway is, as it announces itself in each feed request (signed with the rest of
/// the query): the addresses it listens on and its tunnel certificate, which agents pin. An
/// unspecified address (`0.0.0.0:443`) stands for the gateway's registered hostname with that
/// port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    /// The public TLS address (clients).
    pub public: std::net::SocketAddr,
    /// The tunnel address (agents).
    pub tunnel: std::net::SocketAddr,
    /// SHA-256 of the tunnel certificate (DER), lowercase hex.
    pub tunnel_sha256: String,
}

impl Presence {
    /// The addresses clients and agents reach, `HOST:PORT`: an unspecified IP (the gateway
    /// listens on every address) stands for `hostname`, the gateway's registered one.
    pub fn reachable(&self, hostname: &str) -> (String, String) {
        let reach = |a: &std::net::SocketAddr| {
            if a.ip().is_unspecified() { format!("{hostname}:{}", a.port()) } else { a.to_string() }
        };
        (reach(&self.public), reach(&self.tunnel))
    }

    /// Whether the certificate digest is 64 lowercase hex digits.
    pub fn is_valid(&self) -> bool {
        self.tunnel_sha256.len() == 64 && self.tunnel_sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

/// The most routes a [`Report`] names: a host with agents on more reports the first ones (by
/// route ID), and a redeploy of a route left out waits for it no longer than its bound.
pub const MAX_REPORTED_ROUTES: usize = 512;

/// What a gateway host reports with each feed request (issue 41): the table it serves, by
/// the feed sequence it was read at ([`Report::applied`]), and the routes with agents in
/// rotation on it, how many each. The coordinator's engine switches a route to a redeploy's
/// successor only once every host serving it has reported the successor's agents, and
/// stops the predecessor only once each has applied the switched table.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The feed sequence of the table the gateway serves (the answer's `seq`; 0: none yet).
    pub applied: u64,
    /// Routes with agents in rotation on the gateway, by route ID, with how many, in route
    /// ID order, at most [`MAX_REPORTED_ROUTES`].
    pub agents: Vec<(String, u32)>,
}

impl Report {
    /// How many agents of route `route_id` the gateway reported in rotation.
    pub fn agents_of(&self, route_id: &str) -> u32 {
        self.agents.iter().find(|(r, _)| r == route_id).map_or(0, |(_, n)| *n)
    }

    /// The report's query parameters: `applied=<seq>&agents=<route>.<n>,...`.
    fn params(&self) -> [String; 2] {
        let agents: Vec<String> = self
            .agents
            .iter()
            .filter(|(route, _)| is_route_id(route))
            .take(MAX_REPORTED_ROUTES)
            .map(|(route, n)| format!("{route}.{n}"))
            .collect();
        [format!("applied={}", self.applied), format!("agents={}", agents.join(","))]
    }
}

/// Whether `s` may travel in a report unescaped: a route ID's letters, digits and `_`.
fn is_route_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The path and query of a feed request: `after` is the version the gateway serves, if any;
/// `presence`, where the gateway is. Versions and digests are hex and addresses are written
/// with `[`/`]` escaped, so the query needs no other escaping.
pub fn feed_path(after: Option<&str>, presence: Option<&Presence>) -> String {
    feed_path_reporting(after, presence, None)
}

/// [`feed_path`], with the gateway's [`Report`].
pub fn feed_path_reporting(after: Option<&str>, presence: Option<&Presence>, report: Option<&Report>) -> String {
    let mut params = Vec::new();
    if let Some(version) = after {
        params.push(format!("{AFTER_PARAM}={version}"));
    }
    if let Some(p) = presence {
        let addr = |a: &std::net::SocketAddr| a.to_string().replace('[', "%5B").replace(']', "%5D");
        params.push(format!("public={}", addr(&p.public)));
        params.push(format!("tunnel={}", addr(&p.tunnel)));
        params.push(format!("tunnelSha256={}", p.tunnel_sha256));
    }
    if let Some(report) = report {
        params.extend(report.params());
    }
    if params.is_empty() { FEED_PATH.to_owned() } else { format!("{FEED_PATH}?{}", params.join("&")) }
}

/// A feed request's query read back: the version served and the presence, if it has all of
/// it (`None` when a part of it does not read).
pub fn read_query(query: &str) -> (Option<String>, Option<Presence>) {
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.replace("%5B", "[").replace("%5D", "]"))
    };
    let after = param(AFTER_PARAM);
    let presence = (|| {
        Some(Presence {
            public: param("public")?.parse().ok()?,
            tunnel: param("tunnel")?.parse().ok()?,
            tunnel_sha256: param("tunnelSha256")?,
        })
    })();
    (after, presence)
}

/// A feed request's [`Report`], if its query has one that reads (`None` otherwise: an
/// unreadable part, more than [`MAX_REPORTED_ROUTES`] routes, or a route named twice).
pub fn read_report(query: &str) -> Option<Report> {
    let param = |name: &str| query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='));
    let applied = param("applied")?.parse().ok()?;
    let mut agents = Vec::new();
    for pair in param("agents")?.split(',').filter(|p| !p.is_empty()) {
        let (route, n) = pair.rsplit_once('.')?;
        if !is_route_id(route) || agents.len() >= MAX_REPORTED_ROUTES {
            return None;
        }
        agents.push((route.to_owned(), n.parse().ok()?));
    }
    agents.sort();
    if agents.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(Report { applied, agents })
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
    fn a_feed_path_names_the_version_served_and_where_the_gateway_is_and_reads_back() {
        assert_eq!(feed_path(None, None), "/api/gateway/routes");
        assert_eq!(feed_path(Some("0a1b"), None), "/api/gateway/routes?after=0a1b");
        let presence = Presence {
            public: "[::1]:8443".parse().expect("v6"),
            tunnel: "0.0.0.0:7443".parse().expect("v4"),
            tunnel_sha256: "ab".repeat(32),
        };
        assert!(presence.is_valid());
        let path = feed_path(Some("0a1b"), Some(&presence));
        assert!(!path.contains('['), "{path}");
        let query = path.split_once('?').map(|(_, q)| q).expect("a query");
        assert_eq!(read_query(query), (Some("0a1b".to_owned()), Some(presence.clone())));
        assert_eq!(read_query("after=1&public=nowhere&tunnel=1.2.3.4:5&tunnelSha256=00"), (Some("1".into()), None));
        assert_eq!(
            presence.reachable("gw1.example.test"),
            ("[::1]:8443".to_owned(), "gw1.example.test:7443".to_owned()),
            "an unspecified address is the registered hostname's"
        );
        assert!(!Presence { tunnel_sha256: "AB".repeat(32), ..presence }.is_valid());
    }

    #[test]
    fn a_report_reads_back_from_the_signed_query_and_a_bad_one_does_not() {
        let report = Report { applied: 42, agents: vec![("rt_0a".into(), 2), ("rt_1b".into(), 1)] };
        let path = feed_path_reporting(Some("0a1b"), None, Some(&report));
        let query = path.split_once('?').map(|(_, q)| q).expect("a query");
        assert_eq!(query, "after=0a1b&applied=42&agents=rt_0a.2,rt_1b.1");
        assert_eq!(read_report(query), Some(report.clone()));
        assert_eq!(read_query(query).0.as_deref(), Some("0a1b"));
        assert_eq!(report.agents_of("rt_0a"), 2);
        assert_eq!(report.agents_of("rt_2c"), 0);
        let none = Report { applied: 0, agents: Vec::new() };
        let path = feed_path_reporting(None, None, Some(&none));
        assert_eq!(read_report(path.split_once('?').map_or("", |(_, q)| q)), Some(none));
        for bad in ["", "applied=x&agents=", "applied=1", "applied=1&agents=rt_a", "applied=1&agents=rt_a.1,rt_a.2"] {
            assert_eq!(read_report(bad), None, "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_REPORTED_ROUTES).map(|i| format!("rt_{i}.1")).collect();
        assert_eq!(read_report(&format!("applied=1&agents={}", many.join(","))), None, "bounded");
    }
}
