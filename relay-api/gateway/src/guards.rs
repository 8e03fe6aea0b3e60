//! A route's client guards, from its project's `access`: the client networks allowed
//! (`allowClients`; none listed: every client) and a new-connection rate limit
//! (`rateLimit`: a token bucket of `burst` tokens refilled at `perSecond`). Each gateway
//! enforces them on its own, so a route served by two gateways takes up to twice the rate.
//!
//! Checked once the ClientHello names the route, before the route's slots are counted: a
//! client not allowed takes no token, and a refused connection takes no slot. Two kinds of
//! connection pass the allow-list, since refusing them would break the route itself: the
//! coordinator's validation, which shows a probe token of the route and server name
//! (`relay_wire::alpn::ProbeSigner::probe_alpn`, signed by the coordinator; the gateway holds
//! the public halves only) and passes the rate limit too, and an ACME server's
//! tls-alpn-01 validation (only `acme-tls/1` offered), which still takes a token, and whose
//! agent is told to do the handshake and nothing more (`Connect.acme_only`), so that a second
//! ClientHello after a HelloRetryRequest cannot ask for HTTP.
//!
//! The bucket is the route's, not a client's: one allowed client can use up the rate for
//! every other (per-client shares of open connections are the accounting's).
//!
//! Refusals are counted per route and reason while the route is configured with guards.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Who may open connections to a route, and how fast. Open by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Guards {
    /// The client networks allowed; empty: every client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_clients: Vec<ClientNetwork>,
    /// The most new connections, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

impl Guards {
    /// Whether nothing is guarded.
    pub fn is_open(&self) -> bool {
        self.allow_clients.is_empty() && self.rate_limit.is_none()
    }

    /// Whether `client` is in an allowed network (every client, with none listed).
    pub fn allows(&self, client: IpAddr) -> bool {
        self.allow_clients.is_empty() || self.allow_clients.iter().any(|n| n.contains(client))
    }
}

/// A new-connection rate limit: `burst` at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// New connections per second, sustained (at least 1).
    pub per_second: u32,
    /// New connections at once after a quiet spell (at least 1).
    pub burst: u32,
}

/// A client network: an address and a prefix length, written `203.0.113.0/24`,
/// `2001:db8::/32`, or one address (`198.51.100.7`, a /32 or /128). No host bit may be set
/// (`203.0.113.5/24` is refused: it reads as a mistake).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientNetwork {
    address: IpAddr,
    prefix: u8,
}

/// Why a client network does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// Not an IPv4 or IPv6 address.
    #[error("{0:?} is not an IPv4 or IPv6 address")]
    Address(String),
    /// The prefix length is not a number up to 32 (IPv4) or 128 (IPv6).
    #[error("the prefix length {0:?} is not 0-32 for IPv4 or 0-128 for IPv6")]
    Prefix(String),
    /// An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`): clients are matched as IPv4.
    #[error("{0} is an IPv4-mapped IPv6 network: write it as IPv4 ({1})")]
    Mapped(String, String),
    /// Bits past the prefix are set.
    #[error("{given} has bits set past its prefix: did you mean {network}?")]
    HostBits {
        /// As written.
        given: String,
        /// The network it is in.
        network: String,
    },
}

impl ClientNetwork {
    /// The network of one address (a /32 or /128).
    pub const fn host(address: IpAddr) -> ClientNetwork {
        ClientNetwork { address, prefix: if address.is_ipv4() { 32 } else { 128 } }
    }

    /// Whether `client` is in the network (an IPv4-mapped IPv6 client counts as IPv4).
    pub fn contains(&self, client: IpAddr) -> bool {
        let client = canonical(client);
        match (self.address, client) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(ip)), self.prefix, 32) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => masked(u128::from(ip), self.prefix, 128) == u128::from(net),
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `bits` (of a `width`-bit address) with everything past `prefix` cleared.
fn masked(bits: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let keep = u128::MAX << (u32::from(width - prefix.min(width)));
    let keep = if width == 32 { keep & u128::from(u32::MAX) } else { keep };
    bits & keep
}

impl FromStr for ClientNetwork {
    type Err = NetworkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let address: IpAddr = address.parse().map_err(|_| NetworkError::Address(address.to_owned()))?;
        let width: u8 = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= width && p.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| NetworkError::Prefix(p.to_owned()))?,
        };
        if let IpAddr::V6(v6) = address
            && let Some(v4) = v6.to_ipv4_mapped()
        {
            let as_v4 = format!("{v4}/{}", prefix.saturating_sub(96));
            return Err(NetworkError::Mapped(s.to_owned(), as_v4));
        }
        let network = ClientNetwork { address, prefix };
        let bits = match address {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        };
        let kept = masked(bits, prefix, width);
        if kept != bits {
            let base: IpAddr = match address {
                IpAddr::V4(_) => IpAddr::V4(u32::try_from(kept).unwrap_or(0).into()),
                IpAddr::V6(_) => IpAddr::V6(kept.into()),
            };
            return Err(NetworkError::HostBits { given: s.to_owned(), network: format!("{base}/{prefix}") });
        }
        Ok(network)
    }
}

impl std::fmt::Display for ClientNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

impl Serialize for ClientNetwork {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClientNetwork {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a guard refused a connection (the metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Refused {
    /// The client is in no allowed network.
    ClientNotAllowed,
    /// The route's new-connection rate is used up.
    RateLimited,
}

impl Refused {
    pub(super) fn label(self) -> &'static str {
        match self {
            Refused::ClientNotAllowed => "client_not_allowed",
            Refused::RateLimited => "rate_limited",
        }
    }
}

#[derive(Debug)]
struct RouteState {
    /// Tokens left, and when they were counted.
    tokens: f64,
    counted: Instant,
    refused: BTreeMap<Refused, u64>,
}

/// Every guarded route's bucket and refusal counts, by route ID.
#[derive(Debug, Default)]
pub(super) struct GuardState {
    routes: Mutex<HashMap<String, RouteState>>,
}

impl GuardState {
    fn routes(&self) -> MutexGuard<'_, HashMap<String, RouteState>> {
        // Plain map updates: consistent after any panic.
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a new connection of route `route_id` from `client`, or says which guard
    /// refused it (and counts it). An ACME validation (`acme`) passes the allow-list, not the
    /// rate limit.
    pub(super) fn admit(&self, route_id: &str, guards: &Guards, client: IpAddr, acme: bool) -> Result<(), Refused> {
        if guards.is_open() {
            return Ok(());
        }
        let now = Instant::now();
        let mut routes = self.routes();
        let state = routes.entry(route_id.to_owned()).or_insert_with(|| RouteState {
            tokens: guards.rate_limit.map_or(0.0, |r| f64::from(r.burst)),
            counted: now,
            refused: BTreeMap::new(),
        });
        let refused = if !acme && !guards.allows(client) {
            Some(Refused::ClientNotAllowed)
        } else if let Some(rate) = guards.rate_limit {
            let burst = f64::from(rate.burst.max(1));
            let elapsed = now.saturating_duration_since(state.counted).as_secs_f64();
            state.tokens = (state.tokens + elapsed * f64::from(rate.per_second.max(1))).min(burst);
            state.counted = now;
            if state.tokens >= 1.0 {
                state.tokens -= 1.0;
                None
            } else {
                Some(Refused::RateLimited)
            }
        } else {
            None
        };
        match refused {
            None => Ok(()),
            Some(why) => {
                *state.refused.entry(why).or_default() += 1;
                Err(why)
            }
        }
    }

    /// Forgets the routes not in `guarded` (removed, or no longer guarded).
    pub(super) fn keep<'a>(&self, guarded: impl IntoIterator<Item = &'a str>) {
        let guarded: std::collections::HashSet<&str> = guarded.into_iter().collect();
        self.routes().retain(|route, _| guarded.contains(route.as_str()));
    }

    /// Refused connections by route, then reason.
    pub(super) fn refused(&self) -> BTreeMap<String, BTreeMap<&'static str, u64>> {
        self.routes()
            .iter()
            .filter(|(_, s)| !s.refused.is_empty())
            .map(|(route, s)| (route.clone(), s.refused.iter().map(|(why, n)| (why.label(), *n)).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn net(s: &str) -> ClientNetwork {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn networks_read_as_written_and_contain_their_addresses() {
        assert!(net("203.0.113.0/24").contains(ip("203.0.113.255")));
        assert!(!net("203.0.113.0/24").contains(ip("203.0.114.0")));
        assert!(net("203.0.113.7").contains(ip("203.0.113.7")));
        assert!(!net("203.0.113.7").contains(ip("203.0.113.8")));
        assert!(net("0.0.0.0/0").contains(ip("198.51.100.1")));
        assert!(!net("0.0.0.0/0").contains(ip("2001:db8::1")), "families apart");
        assert!(net("2001:db8::/32").contains(ip("2001:db8:ffff::1")));
        assert!(!net("2001:db8::/32").contains(ip("2001:db9::1")));
        assert!(net("::/0").contains(ip("::1")));
        assert!(net("127.0.0.0/8").contains(ip("::ffff:127.0.0.2")), "a mapped client is IPv4");
        assert_eq!(net("10.1.0.0/16").to_string(), "10.1.0.0/16");
        assert_eq!(net("::1").to_string(), "::1/128");
    }

    #[test]
    fn a_bad_network_says_what_is_wrong() {
        let err = |s: &str| s.parse::<ClientNetwork>().expect_err(s).to_string();
        assert_eq!(err("203.0.113.5/24"), "203.0.113.5/24 has bits set past its prefix: did you mean 203.0.113.0/24?");
        assert_eq!(err("2001:db8::1/32"), "2001:db8::1/32 has bits set past its prefix: did you mean 2001:db8::/32?");
        assert!(err("10.0.0.0/33").contains("0-32 for IPv4"));
        assert!(err("10.0.0.0/+8").contains("prefix length"));
        assert!(err("10.0.0.0/").contains("prefix length"));
        assert!(err("example.com/24").contains("not an IPv4 or IPv6 address"));
        assert!(err("").contains("not an IPv4"));
        assert_eq!(
            err("::ffff:10.0.0.0/104"),
            "::ffff:10.0.0.0/104 is an IPv4-mapped IPv6 network: write it as IPv4 (10.0.0.0/8)"
        );
    }

    impl GuardState {
        fn admit_plain(&self, route: &str, guards: &Guards, client: IpAddr) -> Result<(), Refused> {
            self.admit(route, guards, client, false)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_allow_list_and_the_rate_limit_refuse_and_count() {
        let state = GuardState::default();
        let guards =
            Guards { allow_clients: vec![net("10.0.0.0/8")], rate_limit: Some(RateLimit { per_second: 2, burst: 3 }) };
        assert_eq!(state.admit_plain("r", &guards, ip("192.0.2.1")), Err(Refused::ClientNotAllowed));
        for _ in 0..3 {
            assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Ok(()), "the burst");
        }
        assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Err(Refused::RateLimited));
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Ok(()), "one token in half a second");
        assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Err(Refused::RateLimited));
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..3 {
            assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Ok(()), "refilled to the burst, no more");
        }
        assert_eq!(state.admit_plain("r", &guards, ip("10.1.2.3")), Err(Refused::RateLimited));
        let refused = state.refused();
        assert_eq!(refused["r"]["client_not_allowed"], 1);
        assert_eq!(refused["r"]["rate_limited"], 3);
        // An ACME validation passes the allow-list, not the rate limit.
        assert_eq!(state.admit("r", &guards, ip("192.0.2.1"), true), Err(Refused::RateLimited));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(state.admit("r", &guards, ip("192.0.2.1"), true), Ok(()));
        state.keep([]);
        assert!(state.refused().is_empty(), "gone with the route");
        assert_eq!(state.admit_plain("open", &Guards::default(), ip("192.0.2.1")), Ok(()));
        assert!(state.routes().is_empty(), "an open route keeps no state");
    }

    #[test]
    fn guards_read_from_and_write_to_the_route_table() {
        let text = r#"{"allowClients":["203.0.113.0/24","2001:db8::/32"],"rateLimit":{"perSecond":50,"burst":100}}"#;
        let guards: Guards = serde_json::from_str(text).expect("guards");
        assert_eq!(serde_json::to_string(&guards).expect("json"), text);
        assert!(serde_json::from_str::<Guards>(r#"{"allowClients":["203.0.113.1/24"]}"#).is_err());
        assert_eq!(serde_json::to_string(&Guards::default()).expect("json"), "{}");
    }
}
