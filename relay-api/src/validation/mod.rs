//! Route validation: the coordinator's proof that a route works through the PUBLIC path, as a
//! client reaches it. For one hostname of a route, in order, each failure a [`Hint`]:
//!
//! 1. resolve the hostname (`address_unresolvable`);
//! 2. refuse it if any address it resolves to is not public: loopback, private, link-local,
//!    CGNAT, multicast, documentation and the other special ranges of [`address`]
//!    (`address_not_public`), unless the configuration allows private addresses (tests).
//!    A name under `.localhost` (RFC 6761: loopback by definition) is not resolved: it is
//!    dialled at the gateway's own loopback listener when the gateway listens on loopback
//!    (one machine, the default), and refused otherwise;
//! 3. connect to one of those checked addresses, by address, on the public port
//!    (`route_unreachable`): a DNS answer changing between check and dial cannot move it;
//! 4. the TLS handshake with SNI = hostname, verifying the chain against the configured roots
//!    and the name (`certificate_invalid`, with rustls's reason; ALPN `http/1.1`, and for a
//!    redeploy's standby route also `svc-route/<route ID>`, which the gateway routes by);
//! 5. `GET /health` must answer 200 (`health_failing`);
//! 6. `GET /.well-known/svc/challenge?nonce=` with a fresh nonce must answer this nonce, this
//!    route's ID and this hostname, with a proof that verifies with the route's public key
//!    (`challenge_failed`, naming the field that was wrong).
//!
//! One deadline bounds the whole procedure; the step running when it passes is the one
//! reported. Every [`Validation`] records [`VALIDATOR_VERSION`].

pub mod address;
pub mod https;
pub mod procedure;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use crate::hint::{Hint, Stage};

/// The version of this procedure, recorded with every validation: a result is comparable
/// only with results of the same version.
pub const VALIDATOR_VERSION: &str = "route-validation/2";

/// The challenge route on the job.
pub const CHALLENGE_PATH: &str = "/.well-known/svc/challenge";

/// Why a name did not resolve: the resolver's own error, kept as the cause.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ResolveError(#[from] pub Box<dyn std::error::Error + Send + Sync>);

impl ResolveError {
    /// An error of any type.
    pub fn new(cause: impl std::error::Error + Send + Sync + 'static) -> ResolveError {
        ResolveError(Box::new(cause))
    }
}

/// The addresses of a name, or why there are none.
pub type Resolved<'a> = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, ResolveError>> + Send + 'a>>;

/// Resolves a hostname to addresses (the coordinator passes its DNS checker; tests pass a
/// fixed map).
pub trait Resolve: Send + Sync {
    /// The addresses of `host`, or why there are none.
    fn resolve<'a>(&'a self, host: &'a str) -> Resolved<'a>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolve;

impl Resolve for SystemResolve {
    fn resolve<'a>(&'a self, host: &'a str) -> Resolved<'a> {
        Box::pin(async move {
            let found = tokio::net::lookup_host((host, 0)).await.map_err(ResolveError::new)?;
            Ok(found.map(|a| a.ip()).collect())
        })
    }
}

/// How the validator runs.
#[derive(Debug, Clone)]
pub struct ValidatorConfig {
    /// The gateways' public TLS port (443 in production).
    pub public_port: u16,
    /// The CA certificates trusted for route certificates (PEM).
    pub roots_pem: String,
    /// Dial loopback, private and other non-public addresses too. For a relay inside a
    /// private network only: on a public one it would let a customer's hostname point the
    /// coordinator at its own network.
    pub allow_private_addresses: bool,
    /// The gateway's own loopback address, when its public listener is on loopback (or on
    /// every address): routes under `.localhost` are validated there, and only there.
    pub local_gateway: Option<IpAddr>,
    /// The relay domain: a name under it is a canonical name, whose DNS is the operator's,
    /// so its hints never ask the customer to point it anywhere.
    pub relay_domain: String,
    /// The limit for the whole validation.
    pub timeout: Duration,
}

/// Why a validator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ValidationSetupError {
    /// The trusted roots are not usable.
    #[error("the validator's trusted roots (rootsPem): {0}")]
    Roots(#[source] https::RootsError),
    /// A zero timeout would fail every validation.
    #[error("the validation timeout must be longer than zero")]
    ZeroTimeout,
}

/// Validates routes through the public path.
pub struct RouteValidator {
    config: ValidatorConfig,
    tls: Arc<rustls::ClientConfig>,
    resolver: Arc<dyn Resolve>,
}

impl std::fmt::Debug for RouteValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteValidator")
            .field("public_port", &self.config.public_port)
            .field("allow_private_addresses", &self.config.allow_private_addresses)
            .field("timeout", &self.config.timeout)
            .finish_non_exhaustive()
    }
}

/// Whether `host` is `localhost` or under it (RFC 6761, section 6.3).
pub fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host.len() > ".localhost".len()
            && host.is_char_boundary(host.len() - ".localhost".len())
            && host[host.len() - ".localhost".len()..].eq_ignore_ascii_case(".localhost")
}

/// Where `.localhost` routes are validated for a gateway listening on `public`: its own
/// loopback address, or none for a gateway on a public address.
pub fn local_gateway(public: IpAddr) -> Option<IpAddr> {
    match public {
        ip if ip.is_loopback() => Some(ip),
        IpAddr::V4(ip) if ip.is_unspecified() => Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
        IpAddr::V6(ip) if ip.is_unspecified() => Some(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)),
        _ => None,
    }
}

/// What to validate: one hostname of a route.
#[derive(Clone)]
pub struct RouteTarget {
    /// The route's ID.
    pub route_id: String,
    /// The hostname to validate (canonical or customer).
    pub hostname: String,
    /// The public half of the route key (base64url), which the proof must verify with.
    pub route_public_key: String,
    /// A standby route (a redeploy's successor): the ClientHello also offers ALPN
    /// `svc-route/<route ID>`, which sends it to this route rather than the one serving the
    /// hostname. Every step is the same.
    pub standby: bool,
    /// The coordinator's probe key: the ClientHello then also offers a probe token it signs
    /// (`relay_wire::alpn::ProbeSigner::probe_alpn`), so that the route's client guards
    /// (`access` in its project) let the validation through.
    pub probe_signer: Option<Arc<relay_wire::alpn::ProbeSigner>>,
    /// One replica of the route to validate, by its name: the ClientHello also offers ALPN
    /// `svc-replica/<name>`, which the gateway honours beside the probe token (so only with
    /// `probe_signer`), sending the connection to that replica alone.
    pub replica: Option<String>,
}

impl std::fmt::Debug for RouteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteTarget").field("route_id", &self.route_id).field("hostname", &self.hostname).finish()
    }
}

/// One validation's record.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The hostname validated (lower case, without a trailing dot).
    pub hostname: String,
    /// The address connected to (the gateway's public port), once a connection was made.
    pub address: Option<SocketAddr>,
    /// When the validation started.
    pub checked_at: SystemTime,
    /// [`VALIDATOR_VERSION`].
    pub validator_version: &'static str,
    /// What it found: the facts of a route that works, or the first problem.
    pub outcome: Result<Passed, Hint>,
}

/// The facts of a route that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    /// The serial number of the certificate served for the hostname (lower-case hex).
    pub certificate_serial: String,
    /// The end of that certificate's validity.
    pub not_after: SystemTime,
    /// The status of `GET /health` (200).
    pub health_status: u16,
    /// What a new client waits for: from dialing to the `/health` answer (TCP connect, TLS
    /// through the gateway and the tunnel, one request).
    pub latency: Duration,
}

/// The challenge answer (serde's error names a missing field).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChallengeAnswer {
    nonce: String,
    route_id: String,
    hostname: String,
    proof: String,
    /// The replica that answered (agents of a route of several jobs say it).
    #[serde(default)]
    replica: Option<String>,
}

impl RouteValidator {
    /// A validator trusting `config.roots_pem`, resolving with `resolver`.
    pub fn new(config: ValidatorConfig, resolver: Arc<dyn Resolve>) -> Result<RouteValidator, ValidationSetupError> {
        if config.timeout.is_zero() {
            return Err(ValidationSetupError::ZeroTimeout);
        }
        let tls = https::client_config(&config.roots_pem).map_err(ValidationSetupError::Roots)?;
        Ok(RouteValidator { config, tls, resolver })
    }

    /// Validates one hostname of a route through the public path.
    pub async fn validate(&self, target: &RouteTarget) -> Validation {
        let checked_at = SystemTime::now();
        let hostname = target.hostname.trim_end_matches('.').to_ascii_lowercase();
        let mut address = None;
        let deadline = Instant::now() + self.config.timeout;
        let outcome = self.run(target, &hostname, deadline, &mut address).await.map_err(|h| h.for_host(&hostname));
        Validation { hostname, address, checked_at, validator_version: VALIDATOR_VERSION, outcome }
    }

    async fn run(
        &self,
        target: &RouteTarget,
        host: &str,
        deadline: Instant,
        address: &mut Option<SocketAddr>,
    ) -> Result<Passed, Hint> {
        let secs = self.config.timeout.as_secs_f64();
        let ips = self.addresses(host, deadline).await?;
        let started = Instant::now();
        let (tcp, addr) = self.connect(host, &ips, deadline).await?;
        *address = Some(addr);
        let tls = if target.standby || target.probe_signer.is_some() {
            let mut config = (*self.tls).clone();
            if target.standby {
                let mut route_alpn = relay_wire::alpn::ROUTE_ALPN_PREFIX.to_vec();
                route_alpn.extend_from_slice(target.route_id.as_bytes());
                config.alpn_protocols.push(route_alpn);
            }
            if let (Some(name), Some(_)) = (&target.replica, &target.probe_signer) {
                let mut replica_alpn = relay_wire::alpn::REPLICA_ALPN_PREFIX.to_vec();
                replica_alpn.extend_from_slice(name.as_bytes());
                config.alpn_protocols.push(replica_alpn);
            }
            if let Some(signer) = &target.probe_signer {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let probe = relay_wire::alpn::ProbeFor { route_id: &target.route_id, server_name: host };
                config.alpn_protocols.push(signer.probe_alpn(probe, now));
            }
            Arc::new(config)
        } else {
            self.tls.clone()
        };
        let mut connection = match timeout_at(deadline, https::handshake(tcp, tls, host)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(handshake_hint(host, addr, e)),
            Err(_) => {
                return Err(unreachable(
                    format!("the TLS handshake for {host} at {addr} did not complete within {secs} s"),
                    "Check that the route's job and its agent are running and its tunnel to the gateway is up.",
                ));
            }
        };
        let leaf = connection.leaf().ok_or_else(|| {
            certificate_invalid(format!("the server for {host} presented no certificate"), CERT_FIX.to_owned())
        })?;
        let (serial_hex, not_after) = https::serial_and_expiry(leaf).map_err(|e| {
            certificate_invalid(format!("the certificate served for {host} cannot be read: {e}"), CERT_FIX.to_owned())
        })?;

        let health = timeout_at(deadline, connection.get("/health")).await;
        let latency = started.elapsed();
        match health {
            Ok(Ok((200, _))) => {}
            Ok(Ok((status, body))) => {
                return Err(health_failing(format!(
                    "GET /health on {host} answered {status}{}",
                    reason(&body).map(|r| format!(": {r}")).unwrap_or_default()
                )));
            }
            Ok(Err(e)) => return Err(health_failing(format!("GET /health on {host} got no answer: {e}"))),
            Err(_) => return Err(health_failing(format!("GET /health on {host} did not answer within {secs} s"))),
        }

        self.challenge(target, host, &mut connection, deadline).await?;
        Ok(Passed { certificate_serial: serial_hex, not_after, health_status: 200, latency })
    }

    /// The hostname's addresses, every one of them public (unless allowed otherwise).
    async fn addresses(&self, host: &str, deadline: Instant) -> Result<Vec<IpAddr>, Hint> {
        if rustls::pki_types::DnsName::try_from(host).is_err() {
            return Err(Hint::new(
                "hostname_invalid",
                Stage::Project,
                format!("{host:?} is not a DNS hostname"),
                "Use a hostname made of letters, digits and hyphens, such as shop.example.com.",
            ));
        }
        if is_localhost_name(host) {
            return match self.config.local_gateway {
                Some(ip) => Ok(vec![ip]),
                None => Err(Hint::new(
                    "address_not_public",
                    Stage::Reachability,
                    format!(
                        "{host} is a .localhost name, which reaches only the machine it is typed on, and this gateway listens on a public address"
                    ),
                    "Run the gateway on loopback (`svc relay serve --public 127.0.0.1:8443`) for routes on this machine, \
                     or give the coordinator a public relay domain (`--relay-domain`) whose names resolve to the gateway.",
                )),
            };
        }
        let canonical = self.is_canonical(host);
        let fix = if canonical {
            format!(
                "{host} is this relay's own name: the operator's DNS for *.{} must resolve to the gateway's public \
                 addresses; nothing in the project can change it.",
                self.config.relay_domain
            )
        } else {
            format!(
                "Make {host} resolve to the gateway's public address (a CNAME to the route's canonical name, \
                 or its A/AAAA records), then validate again."
            )
        };
        let resolved = match timeout_at(deadline, self.resolver.resolve(host)).await {
            Ok(Ok(ips)) => ips,
            Ok(Err(e)) => {
                return Err(Hint::new(
                    "address_unresolvable",
                    Stage::Dns,
                    format!("{host} does not resolve: {e}"),
                    fix,
                ));
            }
            Err(_) => {
                let problem = format!("{host} did not resolve within {} s", self.config.timeout.as_secs_f64());
                return Err(Hint::new("address_unresolvable", Stage::Dns, problem, fix));
            }
        };
        let mut ips: Vec<IpAddr> = Vec::new();
        for ip in resolved {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        if ips.is_empty() {
            return Err(Hint::new("address_unresolvable", Stage::Dns, format!("{host} resolves to no address"), fix));
        }
        if !self.config.allow_private_addresses {
            // All or nothing: a name that points partly inside is not dialed at all.
            for ip in &ips {
                if let Some(class) = address::non_public(*ip) {
                    return Err(Hint::new(
                        "address_not_public",
                        Stage::Reachability,
                        format!("{host} resolves to {ip}, a {class} address, which validation never dials"),
                        if canonical {
                            fix.clone()
                        } else {
                            format!(
                                "Point {host} only at the gateway's public addresses (a CNAME to the route's \
                                 canonical name); loopback, private and other non-public addresses are refused."
                            )
                        },
                    ));
                }
            }
        }
        Ok(ips)
    }

    fn is_canonical(&self, host: &str) -> bool {
        let domain = self.config.relay_domain.trim_end_matches('.').to_ascii_lowercase();
        host.strip_suffix(domain.as_str()).is_some_and(|label| label.ends_with('.'))
    }

    /// Connects to the first address that accepts, each attempt given an equal share of the
    /// time left.
    async fn connect(&self, host: &str, ips: &[IpAddr], deadline: Instant) -> Result<(TcpStream, SocketAddr), Hint> {
        let port = self.config.public_port;
        let mut failures = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            let addr = SocketAddr::new(*ip, port);
            let left = ips.len() - i;
            let share = deadline.saturating_duration_since(Instant::now()) / u32::try_from(left).unwrap_or(u32::MAX);
            match tokio::time::timeout(share, TcpStream::connect(addr)).await {
                Ok(Ok(tcp)) => {
                    let _ = tcp.set_nodelay(true);
                    return Ok((tcp, addr));
                }
                Ok(Err(e)) => failures.push(format!("{addr}: {e}")),
                Err(_) => failures.push(format!("{addr}: no connection within {:.1} s", share.as_secs_f64())),
            }
        }
        Err(unreachable(
            format!("cannot connect to {host} on port {port}: {}", failures.join("; ")),
            &format!(
                "Check that the gateway is running and accepts connections on port {port} at the addresses \
                 {host} resolves to, and that no firewall blocks them."
            ),
        ))
    }

    /// Asks for the challenge with a fresh nonce and checks every field of the answer.
    async fn challenge(
        &self,
        target: &RouteTarget,
        host: &str,
        connection: &mut https::Connection,
        deadline: Instant,
    ) -> Result<(), Hint> {
        let nonce = relay_wire::challenge::new_nonce().map_err(|e| {
            challenge_failed(format!("no randomness for a challenge nonce: {e}"), "Retry the validation.")
        })?;
        let path = format!("{CHALLENGE_PATH}?nonce={nonce}");
        let stale = format!(
            "Make sure the job answering for {host} is route {}'s current job, with its current route secret \
             and {host} among its hostnames.",
            target.route_id
        );
        let (status, body) = match timeout_at(deadline, connection.get(&path)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(challenge_failed(format!("GET {CHALLENGE_PATH} on {host}: {e}"), &stale)),
            Err(_) => {
                let secs = self.config.timeout.as_secs_f64();
                return Err(challenge_failed(
                    format!("{CHALLENGE_PATH} on {host} did not answer within {secs} s"),
                    &stale,
                ));
            }
        };
        match status {
            200 => {}
            404 => {
                return Err(challenge_failed(
                    format!("the job answering for {host} does not claim {host} as a hostname of its route (404)"),
                    &format!(
                        "Add {host} to route {} and wait for its agent's next hostname refresh (refreshSecs).",
                        target.route_id
                    ),
                ));
            }
            other => {
                let detail = reason(&body).map(|r| format!(": {r}")).unwrap_or_default();
                return Err(challenge_failed(format!("{CHALLENGE_PATH} on {host} answered {other}{detail}"), &stale));
            }
        }
        let answer: ChallengeAnswer = serde_json::from_slice(&body).map_err(|e| {
            challenge_failed(format!("the challenge answer from {host} is not the expected JSON: {e}"), &stale)
        })?;
        let ChallengeAnswer { nonce: got_nonce, route_id: got_route, hostname: got_host, proof, replica } = answer;
        if let Some(want) = &target.replica
            && replica.as_ref() != Some(want)
        {
            return Err(challenge_failed(
                format!(
                    "the validation of replica {want} was answered by {}: the gateway did not send it to that replica",
                    replica
                        .as_deref()
                        .map_or_else(|| "a job that names no replica".to_owned(), |r| format!("replica {r}"))
                ),
                "Make sure every gateway serving the route runs this release (older gateways ignore which replica a \
                 validation asks for).",
            ));
        }
        if got_nonce != nonce {
            return Err(challenge_failed(
                format!("the challenge answer's `nonce` is {got_nonce:?}, not the fresh nonce sent: a stored answer"),
                &stale,
            ));
        }
        if got_route != target.route_id {
            return Err(challenge_failed(
                format!(
                    "the challenge answer's `routeId` is {got_route:?}, not {:?}: another route's job answers for {host}",
                    target.route_id
                ),
                &stale,
            ));
        }
        if !got_host.eq_ignore_ascii_case(host) {
            return Err(challenge_failed(
                format!("the challenge answer's `hostname` is {got_host:?}, not {host:?}"),
                &stale,
            ));
        }
        if !relay_wire::challenge::verify(&target.route_public_key, &got_route, &got_host, &nonce, &proof) {
            return Err(challenge_failed(
                format!("the challenge answer's `proof` does not verify with route {}'s key", target.route_id),
                &format!(
                    "The job answering for {host} holds another route key: restart route {}'s job with its \
                     current agent configuration.",
                    target.route_id
                ),
            ));
        }
        Ok(())
    }
}

const CERT_FIX: &str = "Check the route agent's log: it must hold a current certificate naming the hostname, \
                        from a CA the coordinator trusts (after a hostname is added, the agent gets one at its \
                        next hostname refresh).";

fn unreachable(problem: String, fix: &str) -> Hint {
    Hint::new("route_unreachable", Stage::Reachability, problem, fix)
}

fn certificate_invalid(problem: String, fix: String) -> Hint {
    Hint::new("certificate_invalid", Stage::Tls, problem, fix)
}

fn health_failing(problem: String) -> Hint {
    Hint::new(
        "health_failing",
        Stage::Health,
        problem,
        "Make the app answer 200 on its health path (the agent's appHealthPath, /health by default) on its port; \
         the agent answers 503 while it does not.",
    )
}

fn challenge_failed(problem: String, fix: &str) -> Hint {
    Hint::new("challenge_failed", Stage::Challenge, problem, fix)
}

/// The hint for a failed handshake: rustls's refusal is the certificate's (or TLS's)
/// problem; a connection closed mid-handshake is the gateway finding no agent for the name.
fn handshake_hint(host: &str, addr: SocketAddr, error: https::HandshakeError) -> Hint {
    match error {
        https::HandshakeError::Tls(rustls::Error::InvalidCertificate(e)) => {
            certificate_invalid(format!("the certificate served for {host} was refused: {e}"), CERT_FIX.to_owned())
        }
        https::HandshakeError::Tls(rustls::Error::AlertReceived(alert)) => certificate_invalid(
            format!("the TLS handshake for {host} failed: the server sent the alert {alert:?}"),
            "The route's agent refused the handshake, usually because it has no certificate yet: check its log \
             for its certificate request."
                .to_owned(),
        ),
        https::HandshakeError::Tls(e) => {
            certificate_invalid(format!("the TLS handshake for {host} failed: {e}"), CERT_FIX.to_owned())
        }
        https::HandshakeError::Name(name) => Hint::new(
            "hostname_invalid",
            Stage::Project,
            format!("{name:?} is not a TLS server name"),
            "Use a DNS hostname.",
        ),
        https::HandshakeError::Io(e) => unreachable(
            format!("the connection to {addr} closed during the TLS handshake for {host} ({e})"),
            &format!(
                "The gateway routes {host} to no connected agent: check that {host} is one of the route's \
                 hostnames on the gateway, and that the route's job and agent run with their tunnel up."
            ),
        ),
    }
}

/// A short reason from an error answer: the agent's `/health` `reason`, or the `message` of
/// its error envelope (`{"error": {"code", "message"}}`; a bare `error` string from an older
/// agent too), else the text.
fn reason(body: &[u8]) -> Option<String> {
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => {
            let message = json.get("error").and_then(|e| e.get("message"));
            [json.get("reason"), message, json.get("error")]
                .into_iter()
                .flatten()
                .find_map(|v| v.as_str().map(str::to_owned))?
        }
        Err(_) => String::from_utf8_lossy(body).trim().to_owned(),
    };
    let text: String = text.chars().take(200).collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod reason_tests {
    use super::reason;

    #[test]
    fn the_reason_is_the_envelope_message_the_health_reason_or_the_text() {
        let envelope = br#"{"error": {"code": "hostname_unknown", "message": "not a hostname of this route"}}"#;
        assert_eq!(reason(envelope).as_deref(), Some("not a hostname of this route"));
        assert_eq!(reason(br#"{"error": "old agent"}"#).as_deref(), Some("old agent"));
        assert_eq!(
            reason(br#"{"status": "unavailable", "reason": "the app answered 500"}"#).as_deref(),
            Some("the app answered 500")
        );
        assert_eq!(reason(b"plain text\n").as_deref(), Some("plain text"));
        assert_eq!(reason(b"{}"), None);
    }
}
