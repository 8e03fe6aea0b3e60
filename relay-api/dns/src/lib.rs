//! The coordinator's DNS checks of a customer hostname (`shop.example.com`) before the relay
//! serves it: a CNAME to the deployment's canonical hostname, the verification token in a TXT
//! record at `_svc-challenge.<hostname>`, and CAA records (RFC 8659) that let one of our CAs
//! issue. Every failure is a [`Hint`] naming the exact record to add.
//!
//! Queries go through hickory-resolver over plain UDP/TCP, to the configured nameservers or
//! the system's (`/etc/resolv.conf`). The resolver keeps no cache (size 0, every TTL clamped
//! to 0): the coordinator re-checks after the customer fixes a record, and a cached answer
//! would hide the fix. Names are queried fully qualified, so no search domain is appended,
//! and `/etc/hosts` is not read.
//!
//! [`hint`] is what every check of the relay (these, route validation, the engine's) says
//! when something is wrong: a problem, its stage, and the exact fix.

pub mod caa;
pub mod hint;
mod name;
mod records;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{ConnectionConfig, NameServerConfig};
use hickory_resolver::config::{ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError as ResponseError, NetError};
use hickory_resolver::proto::rr::rdata::CAA;
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use hickory_resolver::{Resolver, TokioResolver};

use crate::hint::{Hint, Stage};
use caa::CaaVerdict;

/// The label under which the verification token is published.
pub const CHALLENGE_LABEL: &str = "_svc-challenge";

/// Tries per query before it counts as failed (each waits up to [`DnsConfig::timeout`]).
const ATTEMPTS: usize = 2;

/// Where and how long to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// Recursive resolvers to ask, over UDP and TCP; empty means the system's
    /// (`/etc/resolv.conf`).
    pub nameservers: Vec<SocketAddr>,
    /// How long to wait for one answer (each query is tried twice).
    pub timeout: Duration,
}

impl Default for DnsConfig {
    /// The system's resolvers, 5 s per try.
    fn default() -> DnsConfig {
        DnsConfig { nameservers: Vec::new(), timeout: Duration::from_secs(5) }
    }
}

/// Why a DNS check could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// A hostname (or CA identity) that is not a lowercase LDH DNS name.
    #[error("invalid {role} `{input}`: {reason}")]
    InvalidName {
        /// Which input: `hostname`, `canonical hostname`, `CA identity`.
        role: &'static str,
        /// The input as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A verification token that cannot be published as one quoted TXT string.
    #[error("invalid verification token: {reason}")]
    InvalidToken {
        /// What is wrong with it.
        reason: String,
    },
    /// CAA cannot be checked without knowing which CAs are ours.
    #[error("no CA identity is configured: list at least one issuer domain (like `letsencrypt.org`)")]
    NoCaIdentities,
    /// The DNS configuration cannot be used.
    #[error("invalid DNS configuration: {0}")]
    Config(String),
    /// The system's resolver configuration cannot be read.
    #[error("cannot read the system DNS configuration (/etc/resolv.conf): {0}; configure nameservers explicitly")]
    SystemConfig(String),
    /// A query timed out or the server answered with an error (SERVFAIL, REFUSED).
    #[error("DNS query for {query} failed: {reason}; try again later")]
    Lookup {
        /// The query: type and name (`A shop.example.com`).
        query: String,
        /// Why it failed (`request timed out`, `the server answered SERVFAIL`).
        reason: String,
    },
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The record is as required.
    Passed,
    /// It is not (or could not be looked up); the hint says what to do.
    Failed(Hint),
}

impl Check {
    /// The hint, if the check failed.
    pub fn hint(&self) -> Option<&Hint> {
        match self {
            Check::Passed => None,
            Check::Failed(hint) => Some(hint),
        }
    }

    /// Whether the check passed.
    pub fn is_passed(&self) -> bool {
        matches!(self, Check::Passed)
    }
}

/// The three checks of one customer hostname.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostnameVerdict {
    /// The hostname is a CNAME to the canonical hostname.
    pub cname: Check,
    /// `_svc-challenge.<hostname>` holds the token.
    pub txt: Check,
    /// CAA lets one of our CAs issue for the hostname.
    pub caa: Check,
}

impl HostnameVerdict {
    /// Every failure, in check order (CNAME, TXT, CAA).
    pub fn hints(&self) -> Vec<Hint> {
        [&self.cname, &self.txt, &self.caa].into_iter().filter_map(Check::hint).cloned().collect()
    }

    /// Whether all three checks passed.
    pub fn is_verified(&self) -> bool {
        self.cname.is_passed() && self.txt.is_passed() && self.caa.is_passed()
    }
}

/// The records a customer hostname needs: its CNAME to the canonical hostname and the TXT
/// record carrying its verification token.
pub fn required_records(hostname: &str, canonical: &str, token: &str) -> [crate::hint::DnsRecord; 2] {
    [records::cname_record(hostname, canonical), records::txt_record(hostname, token)]
}

/// Checks that `input` is a DNS name of one label or more (lowercase LDH labels, not an IP
/// address; one trailing dot removed), naming it `role` in the error: a relay domain, say.
pub fn dns_name(input: &str, role: &'static str) -> Result<String, DnsError> {
    name::hostname(input, role, 1)
}

/// Checks a customer hostname as typed by a customer (lowercase LDH, two labels or more, not
/// an IP address, not under `.localhost`); returns it without a trailing dot.
pub fn customer_hostname(input: &str) -> Result<String, DnsError> {
    let name = name::hostname(input, "hostname", 2)?;
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(DnsError::InvalidName {
            role: "hostname",
            input: input.to_owned(),
            reason: "names under .localhost are this machine's; use a name in a domain you control".into(),
        });
    }
    Ok(name)
}

/// The name that carries the verification token: `_svc-challenge.<hostname>`.
pub fn challenge_name(hostname: &str) -> String {
    format!("{CHALLENGE_LABEL}.{}", hostname.trim_end_matches('.'))
}

/// A query that got no usable answer (timeout, SERVFAIL, REFUSED, ...). NXDOMAIN and an
/// empty NOERROR answer are not failures: they are an empty record set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LookupFailure {
    /// Type and name: `CAA example.com`.
    pub(crate) query: String,
    /// Why.
    pub(crate) reason: String,
}

/// Runs the checks; cheap to clone (the resolver is shared).
#[derive(Debug, Clone)]
pub struct DnsChecker {
    resolver: TokioResolver,
}

impl DnsChecker {
    /// A checker asking `config.nameservers` (or the system's), without a cache.
    pub fn new(config: &DnsConfig) -> Result<DnsChecker, DnsError> {
        if config.timeout.is_zero() {
            return Err(DnsError::Config("the timeout must be more than zero".into()));
        }
        let provider = TokioRuntimeProvider::default();
        let mut builder = if config.nameservers.is_empty() {
            Resolver::builder(provider).map_err(|e| DnsError::SystemConfig(e.to_string()))?
        } else {
            let servers = config.nameservers.iter().map(|addr| name_server(*addr)).collect();
            Resolver::builder_with_config(ResolverConfig::from_name_servers(servers), provider)
        };
        let options = builder.options_mut();
        apply_options(options, config.timeout);
        let resolver = builder.build().map_err(|e| DnsError::Config(e.to_string()))?;
        Ok(DnsChecker { resolver })
    }

    /// Runs the CNAME, TXT and CAA checks concurrently. `canonical` is the deployment's
    /// hostname, `token` the one issued for `hostname`, `ca_identities` the issuer domains of
    /// the CAs we use (`letsencrypt.org`). Invalid inputs are an error; DNS trouble is a
    /// failed check with a `dns_lookup_failed` hint.
    pub async fn verify_hostname(
        &self,
        hostname: &str,
        canonical: &str,
        token: &str,
        ca_identities: &[String],
    ) -> Result<HostnameVerdict, DnsError> {
        let hostname = name::hostname(hostname, "hostname", 2)?;
        let canonical = name::hostname(canonical, "canonical hostname", 2)?;
        name::token(token)?;
        let identities = name::ca_identities(ca_identities)?;
        let (cname, txt, caa) = tokio::join!(
            self.check_cname(&hostname, &canonical),
            self.check_txt(&hostname, token),
            self.check_caa(&hostname, &identities),
        );
        Ok(HostnameVerdict { cname, txt, caa })
    }

    /// The A and AAAA addresses of `hostname` (empty when it has none). Names under
    /// `.localhost` answer 127.0.0.1 and ::1 without a query (RFC 6761 §6.3). A failed query
    /// for either type is an error, so a timeout never passes for "no IPv6 address".
    pub async fn lookup_ips(&self, hostname: &str) -> Result<Vec<IpAddr>, DnsError> {
        let hostname = name::hostname(hostname, "hostname", 1)?;
        if hostname == "localhost" || hostname.ends_with(".localhost") {
            return Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]);
        }
        let (v4, v6) = tokio::join!(self.query(&hostname, RecordType::A), self.query(&hostname, RecordType::AAAA));
        let mut ips = Vec::new();
        for answer in [v4, v6] {
            let records = answer.map_err(|f| DnsError::Lookup { query: f.query, reason: f.reason })?;
            ips.extend(records.iter().filter_map(|r| match &r.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                RData::AAAA(aaaa) => Some(IpAddr::V6(aaaa.0)),
                _ => None,
            }));
        }
        Ok(ips)
    }

    async fn check_cname(&self, hostname: &str, canonical: &str) -> Check {
        let targets = self.query(hostname, RecordType::CNAME).await.map(|records| {
            records
                .iter()
                .filter_map(|r| match &r.data {
                    RData::CNAME(target) => Some(plain(&target.0)),
                    _ => None,
                })
                .collect()
        });
        records::cname_check(hostname, canonical, targets)
    }

    async fn check_txt(&self, hostname: &str, token: &str) -> Check {
        // A CNAME at the challenge name is followed, so the token may live elsewhere.
        let values = self.query(&challenge_name(hostname), RecordType::TXT).await.map(|records| {
            records
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(txt) => Some(String::from_utf8_lossy(&txt.txt_data.concat()).into_owned()),
                    _ => None,
                })
                .collect()
        });
        records::txt_check(hostname, token, values)
    }

    /// Climbs from `hostname` to its top-level label and decides over the first non-empty CAA
    /// RRset (see [`caa::climb`] on aliases); none anywhere permits every CA. A failed query
    /// stops the climb: a CA treats an unanswered CAA query as forbidding too (RFC 8659 §3).
    async fn check_caa(&self, hostname: &str, identities: &[String]) -> Check {
        for queried in caa::climb(hostname) {
            let records = match self.query(&queried, RecordType::CAA).await {
                Ok(records) => records,
                Err(failure) => return Check::Failed(records::lookup_failed(Stage::Caa, hostname, &failure)),
            };
            let mut owner = None;
            let rrset: Vec<CAA> = records
                .iter()
                .filter_map(|r| match &r.data {
                    RData::CAA(caa) => {
                        owner.get_or_insert_with(|| plain(&r.name));
                        Some(caa.clone())
                    }
                    _ => None,
                })
                .collect();
            let Some(owner) = owner else { continue };
            return match caa::evaluate(&rrset, identities, false) {
                CaaVerdict::Permitted => Check::Passed,
                CaaVerdict::Forbidden(why) => {
                    Check::Failed(caa::forbids_hint(hostname, &queried, &owner, &why, identities, false))
                }
            };
        }
        Check::Passed
    }

    /// The answer records of one query for `name` (validated, no trailing dot). NXDOMAIN
    /// and NOERROR without records are both an empty answer.
    async fn query(&self, name: &str, kind: RecordType) -> Result<Vec<Record>, LookupFailure> {
        let query = format!("{kind} {name}");
        let fqdn = Name::from_ascii(format!("{name}."))
            .map_err(|e| LookupFailure { query: query.clone(), reason: e.to_string() })?;
        match self.resolver.lookup(fqdn, kind).await {
            Ok(lookup) => Ok(lookup.answers().to_vec()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(LookupFailure { query, reason: describe(&e) }),
        }
    }
}

/// One nameserver over UDP, falling back to TCP for truncated answers.
fn name_server(addr: SocketAddr) -> NameServerConfig {
    let mut server = NameServerConfig::udp_and_tcp(addr.ip());
    server.connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
        .into_iter()
        .map(|mut c| {
            c.port = addr.port();
            c
        })
        .collect();
    server
}

/// No cache (a fixed record must show at the next check), no hosts file, `timeout` per try.
fn apply_options(options: &mut ResolverOpts, timeout: Duration) {
    options.timeout = timeout;
    options.attempts = ATTEMPTS;
    options.cache_size = 0;
    options.positive_max_ttl = Some(Duration::ZERO);
    options.negative_max_ttl = Some(Duration::ZERO);
    options.use_hosts_file = ResolveHosts::Never;
    options.preserve_intermediates = true;
}

/// A name as hints print it: lowercase, no trailing dot.
fn plain(name: &Name) -> String {
    name.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

/// Why a query failed, in words.
fn describe(error: &NetError) -> String {
    match error {
        NetError::Timeout => "no answer in time (timed out)".into(),
        NetError::Dns(ResponseError::ResponseCode(code)) => format!("the server answered {code}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_names_and_verdicts() {
        assert_eq!(challenge_name("shop.example.test."), "_svc-challenge.shop.example.test");
        let hint = Hint::new("dns_txt_missing", crate::hint::Stage::Dns, "p", "f");
        let verdict = HostnameVerdict { cname: Check::Passed, txt: Check::Failed(hint.clone()), caa: Check::Passed };
        assert!(!verdict.is_verified());
        assert_eq!(verdict.hints(), [hint]);
        let ok = HostnameVerdict { cname: Check::Passed, txt: Check::Passed, caa: Check::Passed };
        assert!(ok.is_verified() && ok.hints().is_empty());
    }

    #[test]
    fn the_resolver_caches_nothing() {
        let mut options = ResolverOpts::default();
        apply_options(&mut options, Duration::from_secs(2));
        assert_eq!(options.cache_size, 0);
        assert_eq!(options.positive_max_ttl, Some(Duration::ZERO));
        assert_eq!(options.negative_max_ttl, Some(Duration::ZERO));
        let checker = DnsChecker::new(&DnsConfig {
            nameservers: vec![([127, 0, 0, 1], 53).into()],
            timeout: Duration::from_secs(2),
        })
        .expect("a checker builds outside a runtime");
        assert_eq!(checker.resolver.options().cache_size, 0);
        // The system's configuration, where there is one.
        if std::path::Path::new("/etc/resolv.conf").is_file() {
            let system = DnsChecker::new(&DnsConfig::default()).expect("reads /etc/resolv.conf");
            assert_eq!(system.resolver.options().cache_size, 0);
            assert_eq!(system.resolver.options().timeout, Duration::from_secs(5));
        }
        let zero = DnsConfig { nameservers: vec![], timeout: Duration::ZERO };
        assert!(matches!(DnsChecker::new(&zero), Err(DnsError::Config(_))));
    }

    #[tokio::test]
    async fn localhost_names_resolve_to_loopback_without_a_query() {
        // Nothing serves DNS on loopback port 9: any query fails, so an answer proves none was sent.
        let config = DnsConfig { nameservers: vec![([127, 0, 0, 1], 9).into()], timeout: Duration::from_millis(200) };
        let checker = DnsChecker::new(&config).expect("checker");
        let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)];
        assert_eq!(checker.lookup_ips("demo.localhost").await.expect("demo.localhost"), loopback);
        assert_eq!(checker.lookup_ips("localhost.").await.expect("localhost"), loopback);
        assert!(matches!(checker.lookup_ips("10.0.0.1").await, Err(DnsError::InvalidName { .. })));
        let err = checker.lookup_ips("example.test").await.expect_err("nothing answers on port 9");
        assert!(matches!(err, DnsError::Lookup { .. }), "{err:?}");
        assert!(err.to_string().contains("example.test"), "{err}");
    }
}
