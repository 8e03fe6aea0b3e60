//! Route validation through the public path, and the hostnames of a live route, in process on
//! loopback with real sockets and real TLS: a gateway, the development CA behind the local
//! coordinator, the agent (the `agent` library, as `svc agent run` runs it) and a tiny app.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent::wire;
use relay_api::ca::DevCa;
use relay_api::gateway::{Bound, Gateway, GatewayConfig, RouteConfig};
use relay_api::hint::Stage;
use relay_api::local::{AgentRoute, LocalCoordinator, ephemeral};
use relay_api::validation::{
    Resolve, ResolveError, RouteTarget, RouteValidator, VALIDATOR_VERSION, Validation, ValidatorConfig, https,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CANONICAL: &str = "app.localhost";
const CUSTOMER: &str = "shop.localhost";
const ROUTE: &str = "r1";
/// The route's key: the agent signs with it, the validator checks with its public half.
fn route_key() -> &'static agent::challenge::RouteKey {
    static KEY: std::sync::OnceLock<agent::challenge::RouteKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| agent::challenge::RouteKey::generate().expect("a route key"))
}

/// The agent asks the coordinator for its hostnames this often.
const REFRESH: Duration = Duration::from_secs(1);

/// A scratch directory named for its test, removed on drop.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("svc-validation-{name}-")).tempdir().expect("a scratch directory")
}

/// Every name in the map resolves to its addresses; any other does not resolve.
struct FixedResolve(HashMap<String, Vec<IpAddr>>);

impl FixedResolve {
    fn loopback(names: &[&str]) -> Arc<FixedResolve> {
        let map = names.iter().map(|n| ((*n).to_owned(), vec![IpAddr::from([127, 0, 0, 1])])).collect();
        Arc::new(FixedResolve(map))
    }
}

impl Resolve for FixedResolve {
    fn resolve<'a>(&'a self, host: &'a str) -> relay_api::validation::Resolved<'a> {
        Box::pin(async move {
            self.0
                .get(host)
                .cloned()
                .ok_or_else(|| ResolveError::new(std::io::Error::other(format!("NXDOMAIN for {host}"))))
        })
    }
}

/// A gateway with route `r1` for `app.localhost`, the coordinator that signs its CSRs and
/// tells its hostnames, an agent for it (refreshing every second), and the app behind it.
struct World {
    gateway: Arc<Gateway>,
    bound: Bound,
    coordinator: Arc<LocalCoordinator>,
    coordinator_addr: SocketAddr,
    route: RouteConfig,
    credential: String,
    ca_pem: String,
    job_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl World {
    /// Starts everything; the app only if `app_up` (else the agent's app port is closed).
    async fn start(name: &str, app_up: bool) -> World {
        World::start_as(name, app_up, None).await
    }

    /// The same, the agent naming itself replica `replica`.
    async fn start_as(name: &str, app_up: bool, replica: Option<&str>) -> World {
        let dir = scratch(name);
        let ca = DevCa::open(&dir.path().join("ca")).expect("the development CA");
        let ca_pem = ca.cert_pem().to_owned();
        let ca_path = ca.cert_path.clone();
        let (chain, key) = ca.issue(&["gateway.localhost".to_owned()], Duration::from_secs(3600)).expect("tunnel cert");
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let mut config = GatewayConfig::new(any, any, any, chain, key);
        config.heartbeat = Duration::from_secs(1);
        let gateway = Gateway::new(config);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(gateway.clone().run(move |b| {
            let _ = tx.send(b);
        }));
        let bound = rx.await.expect("the gateway binds");

        let credential = wire::hex(&wire::new_ticket().expect("random"));
        let route = RouteConfig {
            route_id: ROUTE.to_owned(),
            hostnames: vec![CANONICAL.to_owned()],
            route_public_key: route_key().public_key(),
            proxy_protocol: true,
            max_connections: 64,
            standby: false,
            guards: relay_api::gateway::Guards::default(),
        };
        gateway.set_routes(vec![route.clone()]);
        let coordinator = LocalCoordinator::new(ca);
        coordinator.set_routes(vec![AgentRoute::new(route.clone(), &credential)]);
        let (listener, coordinator_addr) = ephemeral().await.expect("a coordinator port");
        tokio::spawn(coordinator.clone().serve(listener));

        let app_port = if app_up { app().await } else { closed_port() };
        let job_dir = dir.path().join("job");
        let agent_config = agent::AgentConfig {
            route_id: ROUTE.to_owned(),
            hostname: CANONICAL.to_owned(),
            credential: credential.clone(),
            replica: replica.map(str::to_owned),
            route_key: route_key().clone(),
            gateway: bound.tunnel,
            gateway_name: "gateway.localhost".to_owned(),
            gateway_ca: ca_path,
            pinned_gateways: Vec::new(),
            catalog_key: None,
            app_port,
            app_health_path: "/health".to_owned(),
            proxy_protocol: true,
            certificate: agent::CertificateSource::DevCa {
                url: format!("http://{coordinator_addr}"),
                validity_secs: 3600,
            },
            direct_listen: None,
            coordinator: Some(format!("http://{coordinator_addr}")),
            refresh_secs: REFRESH.as_secs(),
        };
        let state = job_dir.clone();
        tokio::spawn(async move { agent::run(agent_config, &state).await });
        World { gateway, bound, coordinator, coordinator_addr, route, credential, ca_pem, job_dir, _dir: dir }
    }

    fn validator(&self, roots_pem: &str) -> RouteValidator {
        let config = ValidatorConfig {
            public_port: self.bound.public.port(),
            roots_pem: roots_pem.to_owned(),
            allow_private_addresses: true,
            local_gateway: Some(IpAddr::from([127, 0, 0, 1])),
            relay_domain: "localhost".to_owned(),
            timeout: Duration::from_secs(5),
        };
        RouteValidator::new(config, FixedResolve::loopback(&[CANONICAL, CUSTOMER])).expect("a validator")
    }

    /// Gives the route `hostnames`, on the gateway and the coordinator alike.
    fn set_hostnames(&self, hostnames: &[&str]) {
        let route =
            RouteConfig { hostnames: hostnames.iter().map(|h| (*h).to_owned()).collect(), ..self.route.clone() };
        self.gateway.set_routes(vec![route.clone()]);
        self.coordinator.set_routes(vec![AgentRoute::new(route, &self.credential)]);
    }

    /// A TLS connection through the public port for `host`, trusting the development CA.
    async fn connect(&self, host: &str) -> https::Connection {
        let tls = https::client_config(&self.ca_pem).expect("roots");
        let tcp = TcpStream::connect(self.bound.public).await.expect("the public port");
        https::handshake(tcp, tls, host).await.expect("a TLS connection")
    }

    /// The leaf of the agent's `cert.pem`.
    fn saved_leaf(&self) -> agent::cert::LeafFacts {
        let pem = std::fs::read_to_string(self.job_dir.join("cert.pem")).expect("the agent's cert.pem");
        agent::cert::chain_leaf_facts(&pem).expect("a certificate")
    }
}

/// Validates `hostname` of route r1, checking proofs with `public_key`.
fn target(hostname: &str, public_key: &str) -> RouteTarget {
    RouteTarget {
        route_id: ROUTE.to_owned(),
        hostname: hostname.to_owned(),
        route_public_key: public_key.to_owned(),
        standby: false,
        probe_signer: None,
        replica: None,
    }
}

/// The public key the route's proofs verify with.
fn public() -> String {
    route_key().public_key()
}

/// Validates until `done` holds (the agent may still be starting), within `limit`.
async fn validate_until(
    validator: &RouteValidator,
    target: &RouteTarget,
    limit: Duration,
    done: impl Fn(&Validation) -> bool,
) -> Validation {
    let start = tokio::time::Instant::now();
    loop {
        let validation = validator.validate(target).await;
        if done(&validation) || start.elapsed() > limit {
            return validation;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn code(validation: &Validation) -> &str {
    validation.outcome.as_ref().err().map_or("passed", |h| h.code.as_str())
}

/// The app: `/health` and `/` answer 200.
async fn app() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("an app port");
    let port = listener.local_addr().expect("address").port();
    let router = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .route("/", axum::routing::get(|| async { "hello from the app" }));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    port
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("address").port()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_working_route_passes_with_its_certificate_serial_and_expiry() {
    let w = World::start("pass", true).await;
    let validator = w.validator(&w.ca_pem);
    let before = SystemTime::now();
    let v =
        validate_until(&validator, &target(CANONICAL, &public()), Duration::from_secs(20), |v| v.outcome.is_ok()).await;
    let passed = v.outcome.clone().unwrap_or_else(|h| panic!("the route passes: {h:?}"));
    assert_eq!(v.hostname, CANONICAL);
    assert_eq!(v.address, Some(w.bound.public), "the gateway's public port was dialed");
    assert_eq!(v.validator_version, VALIDATOR_VERSION);
    assert!(v.checked_at >= before && v.checked_at <= SystemTime::now());
    let saved = w.saved_leaf();
    assert_eq!(passed.certificate_serial, saved.serial_hex, "the certificate the agent installed is the one served");
    assert!(passed.certificate_serial.len() >= 2 && passed.certificate_serial.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(passed.not_after, saved.not_after);
    let valid_for = passed.not_after.duration_since(SystemTime::now()).expect("in the future");
    assert!(valid_for > Duration::from_secs(3500) && valid_for <= Duration::from_secs(3600), "{valid_for:?}");
    assert_eq!(passed.health_status, 200);
    assert!(passed.latency > Duration::ZERO && passed.latency < Duration::from_secs(5), "{:?}", passed.latency);
    // A name with a trailing dot and capitals is the same hostname.
    let again = validator.validate(&target("App.Localhost.", &public())).await;
    assert_eq!(code(&again), "passed", "{:?}", again.outcome);
    assert_eq!(again.hostname, CANONICAL);
}

#[tokio::test(flavor = "multi_thread")]
async fn other_trust_roots_make_the_certificate_invalid_and_an_unrouted_name_unreachable() {
    let w = World::start("roots", true).await;
    // Wait until the route works with the right roots, so the failure is the roots'.
    let good = w.validator(&w.ca_pem);
    let v = validate_until(&good, &target(CANONICAL, &public()), Duration::from_secs(20), |v| v.outcome.is_ok()).await;
    assert_eq!(code(&v), "passed", "{:?}", v.outcome);

    // A CA of another name: the chain leads to no trusted root.
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(rcgen::DnType::CommonName, "some other CA");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other_root = params.self_signed(&key).expect("a root").pem();
    // Another development CA: the same name as the issuer, another key.
    let other = scratch("roots-other");
    let other_dev_ca = DevCa::open(other.path()).expect("another CA").cert_pem().to_owned();
    for (roots, reason) in [(other_root, "UnknownIssuer"), (other_dev_ca, "BadSignature")] {
        let v = w.validator(&roots).validate(&target(CANONICAL, &public())).await;
        let hint = v.outcome.expect_err("an untrusted certificate fails");
        assert_eq!((hint.code.as_str(), hint.stage), ("certificate_invalid", Stage::Tls), "{hint:?}");
        assert_eq!(hint.hostname.as_deref(), Some(CANONICAL));
        assert!(hint.problem.contains(reason), "rustls's reason: {}", hint.problem);
        assert_eq!(v.address, Some(w.bound.public));
    }

    // A name the gateway does not route: it closes the connection during the handshake.
    let v = good.validate(&target(CUSTOMER, &public())).await;
    let hint = v.outcome.expect_err("an unrouted name fails");
    assert_eq!((hint.code.as_str(), hint.stage), ("route_unreachable", Stage::Reachability), "{hint:?}");
    assert!(hint.problem.contains("closed during the TLS handshake"), "{}", hint.problem);
    assert_eq!(w.gateway.metrics.outcome_count("unknown_sni"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_that_is_down_fails_health() {
    let w = World::start("health", false).await;
    let validator = w.validator(&w.ca_pem);
    let v = validate_until(&validator, &target(CANONICAL, &public()), Duration::from_secs(20), |v| {
        code(v) == "health_failing"
    })
    .await;
    let hint = v.outcome.expect_err("health fails");
    assert_eq!((hint.code.as_str(), hint.stage), ("health_failing", Stage::Health), "{hint:?}");
    assert!(hint.problem.contains("answered 503"), "the status: {}", hint.problem);
    assert!(hint.problem.contains("the app does not answer"), "the agent's reason: {}", hint.problem);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_route_key_fails_the_challenge() {
    let w = World::start("secret", true).await;
    let validator = w.validator(&w.ca_pem);
    let v =
        validate_until(&validator, &target(CANONICAL, &public()), Duration::from_secs(20), |v| v.outcome.is_ok()).await;
    assert_eq!(code(&v), "passed", "{:?}", v.outcome);
    let another = agent::challenge::RouteKey::generate().expect("another key").public_key();
    let v = validator.validate(&target(CANONICAL, &another)).await;
    let hint = v.outcome.expect_err("the proof does not verify");
    assert_eq!((hint.code.as_str(), hint.stage), ("challenge_failed", Stage::Challenge), "{hint:?}");
    assert!(hint.problem.contains("`proof`"), "names the field: {}", hint.problem);
    let mut wrong_route = target(CANONICAL, &public());
    wrong_route.route_id = "r2".to_owned();
    let hint = validator.validate(&wrong_route).await.outcome.expect_err("another route's answer");
    assert_eq!(hint.code, "challenge_failed");
    assert!(hint.problem.contains("`routeId`"), "names the field: {}", hint.problem);
}

#[tokio::test]
async fn non_public_addresses_are_refused_and_never_dialed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
    let port = listener.local_addr().expect("address").port();
    let map = HashMap::from([
        ("loop.example.com".to_owned(), vec![IpAddr::from([127, 0, 0, 1])]),
        ("mapped.example.com".to_owned(), vec!["::ffff:127.0.0.1".parse().expect("v6")]),
        ("metadata.example.com".to_owned(), vec![IpAddr::from([169, 254, 169, 254])]),
    ]);
    let config = ValidatorConfig {
        public_port: port,
        roots_pem: DevCa::open(scratch("ssrf").path()).expect("CA").cert_pem().to_owned(),
        allow_private_addresses: false,
        local_gateway: None,
        relay_domain: "relay.example".to_owned(),
        timeout: Duration::from_secs(2),
    };
    let validator = RouteValidator::new(config, Arc::new(FixedResolve(map))).expect("a validator");
    for (host, class) in
        [("loop.example.com", "loopback"), ("mapped.example.com", "loopback"), ("metadata.example.com", "link-local")]
    {
        let v = validator.validate(&target(host, &public())).await;
        assert_eq!(v.address, None, "{host}: nothing dialed");
        let hint = v.outcome.expect_err("refused");
        assert_eq!((hint.code.as_str(), hint.stage), ("address_not_public", Stage::Reachability), "{hint:?}");
        assert!(hint.problem.contains(class), "{host}: {}", hint.problem);
    }
    let arrived = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    assert!(arrived.is_err(), "no connection reached the listener");

    let v = validator.validate(&target("unknown.example.com", &public())).await;
    let hint = v.outcome.expect_err("unresolvable");
    assert_eq!((hint.code.as_str(), hint.stage), ("address_unresolvable", Stage::Dns), "{hint:?}");
    assert!(hint.problem.contains("NXDOMAIN"), "the resolver's reason: {}", hint.problem);
}

/// A `.localhost` route is dialled only at the gateway's own loopback listener, and only when
/// the gateway is on loopback; every other name that resolves to loopback stays refused.
#[tokio::test]
async fn localhost_routes_are_dialled_at_a_loopback_gateway_only() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
    let port = listener.local_addr().expect("address").port();
    // The resolver would say loopback for all three: the rule must not come from DNS.
    let map = HashMap::from([
        ("shop-acme.localhost".to_owned(), vec![IpAddr::from([127, 0, 0, 1])]),
        ("loop.example.com".to_owned(), vec![IpAddr::from([127, 0, 0, 1])]),
        ("web-acme.relay.example".to_owned(), vec![IpAddr::from([10, 0, 0, 7])]),
    ]);
    let config = |local_gateway, relay_domain: &str| ValidatorConfig {
        public_port: port,
        roots_pem: DevCa::open(scratch("localhost").path()).expect("CA").cert_pem().to_owned(),
        allow_private_addresses: false,
        local_gateway,
        relay_domain: relay_domain.to_owned(),
        timeout: Duration::from_secs(1),
    };
    let resolver = Arc::new(FixedResolve(map));
    let on_loopback = RouteValidator::new(config(Some(IpAddr::from([127, 0, 0, 1])), "localhost"), resolver.clone())
        .expect("a validator");
    let v = on_loopback.validate(&target("shop-acme.localhost", &public())).await;
    assert_eq!(v.address.map(|a| a.to_string()), Some(format!("127.0.0.1:{port}")), "dialled the gateway: {v:?}");
    let v = on_loopback.validate(&target("loop.example.com", &public())).await;
    assert_eq!(v.address, None, "a customer name on loopback is never dialled");
    assert_eq!(v.outcome.expect_err("refused").code, "address_not_public");

    let on_public = RouteValidator::new(config(None, "relay.example"), resolver).expect("a validator");
    let v = on_public.validate(&target("shop-acme.localhost", &public())).await;
    assert_eq!(v.address, None, "a public gateway never dials loopback for a .localhost name");
    let hint = v.outcome.expect_err("refused");
    assert_eq!(hint.code, "address_not_public");
    assert!(hint.fix.contains("--public 127.0.0.1:8443"), "{}", hint.fix);
    // The canonical name's hint is for the operator: it never asks for a CNAME to itself.
    let v = on_public.validate(&target("web-acme.relay.example", &public())).await;
    let hint = v.outcome.expect_err("refused");
    assert_eq!(hint.code, "address_not_public");
    assert!(!hint.fix.contains("CNAME"), "a canonical name is never told to point at itself: {}", hint.fix);
    assert!(hint.fix.contains("relay.example"), "{}", hint.fix);
}

#[tokio::test]
async fn a_validator_needs_usable_roots() {
    let config = ValidatorConfig {
        public_port: 443,
        roots_pem: String::new(),
        allow_private_addresses: false,
        local_gateway: None,
        relay_domain: "localhost".to_owned(),
        timeout: Duration::from_secs(1),
    };
    let err = RouteValidator::new(config, FixedResolve::loopback(&[])).expect_err("no roots");
    assert!(err.to_string().contains("no CA certificate"), "{err}");
}

/// POSTs `body` to the coordinator's `/api/agent/route`: (status, body).
async fn ask_route(coordinator: SocketAddr, body: &serde_json::Value) -> (u16, String) {
    let mut s = TcpStream::connect(coordinator).await.expect("the coordinator");
    let body = body.to_string();
    let head = format!(
        "POST /api/agent/route HTTP/1.1\r\nHost: {coordinator}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(format!("{head}{body}").as_bytes()).await.expect("write");
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.expect("read");
    let status = answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostname_added_to_a_live_route_is_certified_and_proved_without_dropping_connections() {
    let w = World::start("hostnames", true).await;
    let validator = w.validator(&w.ca_pem);
    let v =
        validate_until(&validator, &target(CANONICAL, &public()), Duration::from_secs(20), |v| v.outcome.is_ok()).await;
    let first = v.outcome.unwrap_or_else(|h| panic!("the canonical name passes: {h:?}")).certificate_serial;

    // The coordinator tells only the route's own agent its hostnames.
    let (status, body) =
        ask_route(w.coordinator_addr, &serde_json::json!({"routeId": ROUTE, "credential": w.credential})).await;
    assert_eq!((status, body.as_str()), (200, r#"{"hostnames":["app.localhost"],"gateways":[]}"#));
    let (status, _) = ask_route(w.coordinator_addr, &serde_json::json!({"routeId": ROUTE, "credential": "x"})).await;
    assert_eq!(status, 403);
    let (status, _) =
        ask_route(w.coordinator_addr, &serde_json::json!({"routeId": "r9", "credential": w.credential})).await;
    assert_eq!(status, 403);

    // A connection opened before the change.
    let mut open = w.connect(CANONICAL).await;
    assert_eq!(open.get("/").await.expect("GET /").0, 200);
    let open_serial = agent::cert::leaf_facts(open.leaf().expect("a leaf")).expect("facts").serial_hex;
    assert_eq!(open_serial, first);

    // Routed by the gateway but not yet the route's on the coordinator: the certificate does
    // not name it.
    w.gateway.set_routes(vec![RouteConfig {
        hostnames: vec![CANONICAL.to_owned(), CUSTOMER.to_owned()],
        ..w.route.clone()
    }]);
    let v = validator.validate(&target(CUSTOMER, &public())).await;
    let hint = v.outcome.expect_err("not yet certified");
    assert_eq!(hint.code, "certificate_invalid", "{hint:?}");
    assert!(hint.problem.contains("not valid for name"), "rustls's reason: {}", hint.problem);

    // Added: within a few refresh intervals the agent has a certificate for both names and
    // proves the new one (the validator's TLS sends SNI shop.localhost and checks the name).
    let added = tokio::time::Instant::now();
    w.set_hostnames(&[CANONICAL, CUSTOMER]);
    let v = validate_until(&validator, &target(CUSTOMER, &public()), REFRESH * 5, |v| v.outcome.is_ok()).await;
    let passed = v.outcome.unwrap_or_else(|h| panic!("the new name passes within 5 refreshes: {h:?}"));
    assert!(added.elapsed() <= REFRESH * 5, "{:?}", added.elapsed());
    assert_ne!(passed.certificate_serial, first, "a new certificate");
    let fresh = w.connect(CUSTOMER).await;
    let facts = agent::cert::leaf_facts(fresh.leaf().expect("a leaf")).expect("facts");
    assert_eq!(facts.dns_names, [CANONICAL, CUSTOMER], "one certificate, every name, canonical first");
    assert_eq!(facts.serial_hex, passed.certificate_serial);
    let canonical = validator.validate(&target(CANONICAL, &public())).await;
    assert_eq!(canonical.outcome.map(|p| p.certificate_serial).ok(), Some(facts.serial_hex.clone()));

    // The connection opened before the swap still answers, on its old handshake.
    assert_eq!(open.get("/").await.expect("the open connection still works").0, 200);
    let still = agent::cert::leaf_facts(open.leaf().expect("a leaf")).expect("facts").serial_hex;
    assert_eq!(still, first);

    // Removed from the route (the gateway still routes it): the agent's next certificate no
    // longer names it.
    w.coordinator.set_routes(vec![AgentRoute::new(w.route.clone(), &w.credential)]);
    let v = validate_until(&validator, &target(CUSTOMER, &public()), REFRESH * 5, |v| code(v) == "certificate_invalid")
        .await;
    assert_eq!(code(&v), "certificate_invalid", "{:?}", v.outcome);
    assert_eq!(w.saved_leaf().dns_names, [CANONICAL]);
}

/// Review finding: nothing confirmed that a validation of one replica reached that replica
/// (all of them hold the route's key; a gateway of an older release ignores the replica the
/// ClientHello names). The agent says which replica answered, and the validator checks it.
#[tokio::test(flavor = "multi_thread")]
async fn a_validation_of_one_replica_fails_when_another_answers() {
    let w = World::start_as("replica", true, Some("job-0")).await;
    let validator = w.validator(&w.ca_pem);
    let (signer, _) = relay_wire::alpn::ProbeSigner::generate().expect("the coordinator's probe key");
    w.gateway.set_probe_keys(vec![signer.public_key()]);
    let key = Arc::new(signer);
    let named = |replica: &str, probe_signer: Option<Arc<relay_wire::alpn::ProbeSigner>>| RouteTarget {
        replica: Some(replica.to_owned()),
        probe_signer,
        ..target(CANONICAL, &public())
    };
    let v =
        validate_until(&validator, &named("job-0", Some(key.clone())), Duration::from_secs(20), |v| v.outcome.is_ok())
            .await;
    assert_eq!(code(&v), "passed", "{:?}", v.outcome);
    // No probe token: the gateway does not honour the name (as an older gateway would not), and
    // job-0 answers a validation of job-1.
    let hint = validator.validate(&named("job-1", None)).await.outcome.expect_err("another replica answered");
    assert_eq!((hint.code.as_str(), hint.stage), ("challenge_failed", Stage::Challenge), "{hint:?}");
    assert!(hint.problem.contains("validation of replica job-1 was answered by replica job-0"), "{}", hint.problem);
    // With the key, the gateway sends it to job-1 alone, and there is none.
    let hint = validator.validate(&named("job-1", Some(key))).await.outcome.expect_err("no such replica");
    assert_eq!(hint.code, "route_unreachable", "{hint:?}");
}
