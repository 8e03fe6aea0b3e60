//! Issue 14's attacks on a route, against the gateway and the real agent behind it (the
//! `agent` crate's serving code, as `svc agent run` runs it, with a certificate from the
//! development CA): anonymous ClientHellos from one address, half-closing clients, idle TLS
//! connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent::idle::Timeouts;
use agent::serve::Limits;
use relay_api::validation::https;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

use super::{CREDENTIAL, HOST, ROUTE, World, client_hello, drained, eventually, route, route_key, start};

/// The agent's limits here: a 1 s handshake, 2 s idle, 1 s linger.
const AGENT: Limits = Limits {
    handshake: Duration::from_secs(1),
    timeouts: Timeouts { idle: Duration::from_secs(2), linger: Duration::from_secs(1) },
};

/// The gateway's timeouts here: longer than the agent's, so the agent's are the ones seen.
const GATEWAY: Timeouts = Timeouts { idle: Duration::from_secs(60), linger: Duration::from_secs(1) };

/// Starts the real agent for route [`ROUTE`] with a certificate for [`HOST`] and [`AGENT`]
/// limits, and waits until the gateway counts it. Its app port is closed: the requests here
/// are answered by the agent itself.
async fn real_agent(w: &World) {
    real_agent_with(w, AGENT).await;
}

/// The real agent's serving context and configuration for route [`ROUTE`] on `w`'s gateway
/// (its certificate installed), with `limits`.
pub(super) fn agent_context(w: &World, limits: Limits) -> (Arc<agent::serve::Context>, agent::AgentConfig) {
    agent_context_with(w, limits, |_| {})
}

/// [`agent_context`] with its configuration as `tune` leaves it.
pub(super) fn agent_context_with(
    w: &World,
    limits: Limits,
    tune: impl FnOnce(&mut agent::AgentConfig),
) -> (Arc<agent::serve::Context>, agent::AgentConfig) {
    let (chain, key) = w.ca.issue(&[HOST.to_owned()], Duration::from_secs(3600)).expect("a certificate");
    let key = rcgen::KeyPair::from_pem(&key).expect("its key");
    let current = Arc::new(agent::cert::CurrentCert::default());
    current.install(&chain, &key).expect("installed");
    let mut config = agent::AgentConfig {
        route_id: ROUTE.to_owned(),
        hostname: HOST.to_owned(),
        credential: CREDENTIAL.to_owned(),
        replica: None,
        route_key: route_key().clone(),
        gateway: w.bound.tunnel,
        gateway_name: "gateway.localhost".to_owned(),
        gateway_ca: w.ca.cert_path.clone(),
        pinned_gateways: Vec::new(),
        catalog_key: None,
        app_port: 1,
        app_health_path: "/health".to_owned(),
        proxy_protocol: false,
        certificate: agent::CertificateSource::DevCa { url: "http://127.0.0.1:1".to_owned(), validity_secs: 3600 },
        direct_listen: None,
        coordinator: None,
        refresh_secs: 30,
    };
    tune(&mut config);
    let hostnames = Arc::new(agent::hostnames::Hostnames::new(HOST));
    let ctx = agent::serve::Context::with_limits(config.clone(), current, hostnames, limits);
    (ctx, config)
}

/// [`real_agent`] with other limits.
pub(super) async fn real_agent_with(w: &World, limits: Limits) {
    let (ctx, config) = agent_context(w, limits);
    let link = agent::tunnel::Link::trusting(&config, &w.ca_pem).expect("the tunnel's client configuration");
    tokio::spawn(agent::tunnel::run(ctx, config, link));
    let gateway = w.gateway.clone();
    let up = eventually(Duration::from_secs(10), || gateway.route_rows().iter().any(|r| r.agents == 1)).await;
    assert!(up, "the agent's tunnel comes up");
}

/// A TCP connection to `to` from the loopback address `from`.
pub(super) async fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind((from, 0).into()).expect("bind a loopback address");
    socket.connect(to).await.expect("connect")
}

/// A full HTTPS request through the gateway from `from`: the agent's challenge answer for
/// [`HOST`], checked.
pub(super) async fn served(w: &World, from: [u8; 4]) {
    let tcp = connect_from(from, w.bound.public).await;
    let tls = https::client_config(&w.ca_pem).expect("roots");
    let mut connection = https::handshake(tcp, tls, HOST).await.expect("a TLS connection through the gateway");
    let (status, body) = connection.get("/.well-known/svc/challenge?nonce=n1").await.expect("an answer");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let proof = answer["proof"].as_str().expect("a proof");
    assert!(agent::challenge::verify(&route_key().public_key(), ROUTE, HOST, "n1", proof));
}

/// Issue 14: "1,024 anonymous ClientHellos lock a route out". 1,100 connections from
/// 127.0.0.1 each send a ClientHello for the route and then nothing. The gateway gives that
/// address at most its share of the route's 1,024 slots (a quarter), so a client from
/// 127.0.0.2 is served; and the agent lets the stalled handshakes go after its handshake
/// timeout, after which the gateway gives their slots back although the attacker never
/// closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_hundred_anonymous_client_hellos_from_one_address_leave_a_second_client_served() {
    const ATTACKERS: u64 = 1_100;
    // Each attacker holds up to four descriptors here: its socket, the gateway's, and a data
    // connection's two ends.
    super::raise_open_files_limit();
    let w = start("hellos", route(1024), |c| c.timeouts = GATEWAY).await;
    real_agent(&w).await;
    let share = 1024 / 4;
    let hello = Arc::new(client_hello(&w.ca_pem, HOST));
    let mut connecting = JoinSet::new();
    for _ in 0..ATTACKERS {
        let (hello, public) = (hello.clone(), w.bound.public);
        connecting.spawn(async move {
            let mut stream = connect_from([127, 0, 0, 1], public).await;
            stream.write_all(&hello).await.expect("the ClientHello");
            stream
        });
    }
    let attackers: Vec<TcpStream> = connecting.join_all().await;
    let gateway = w.gateway.clone();
    let decided = |g: &relay_api::gateway::Gateway| {
        ["routed", "client_limit", "client_hello_limit"].iter().map(|o| g.metrics.outcome_count(o)).sum::<u64>()
    };
    assert!(
        eventually(Duration::from_secs(20), || decided(&gateway) == ATTACKERS).await,
        "every attacker is routed or refused: {:?}",
        gateway.metrics.outcome_counts()
    );
    let held = w.gateway.active_connections(ROUTE);
    assert!(held <= share, "one address holds {held} slots, more than its share of {share}");
    assert!(w.gateway.metrics.outcome_count("client_limit") > 0, "{:?}", w.gateway.metrics.outcome_counts());

    // The second client, from another address, while the attackers hold their sockets.
    let start = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), served(&w, [127, 0, 0, 2])).await.expect("served within 5 s");
    eprintln!("second client served in {:?} beside {held} stalled handshakes", start.elapsed());

    // The agent's handshake timeout lets the stalled handshakes go; the gateway then gives
    // their slots back within its linger, though the attackers keep their sockets open.
    let limit = AGENT.handshake + GATEWAY.linger + Duration::from_secs(8);
    assert!(
        eventually(limit, || gateway.active_connections(ROUTE) == 0).await,
        "{} slots still held",
        gateway.active_connections(ROUTE)
    );
    // Each routed attacker got the agent's handshake messages, then its connection's end.
    let mut ended = 0;
    for mut attacker in attackers {
        let (_, waited) = drained(&mut attacker).await;
        if waited < Duration::from_secs(5) {
            ended += 1;
        }
    }
    assert_eq!(ended, ATTACKERS, "every attacker's connection was closed by the gateway");
}

/// A client that sends its ClientHello and half-closes frees its slot at once: the agent's
/// handshake reads the end and gives up, and the gateway closes both sides.
#[tokio::test]
async fn a_client_that_half_closes_after_its_client_hello_frees_its_slot_at_once() {
    let w = start("agent-halfclose", route(8), |c| c.timeouts = GATEWAY).await;
    real_agent(&w).await;
    let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
    client.write_all(&client_hello(&w.ca_pem, HOST)).await.expect("hello");
    client.shutdown().await.expect("half-close");
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(2), || gateway.metrics.outcome_count("routed") == 1).await);
    // Sooner than the agent's handshake timeout or any linger.
    assert!(eventually(Duration::from_millis(800), || gateway.active_connections(ROUTE) == 0).await);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(2), client.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the client's connection ended");
}

/// A TLS connection that completes its handshake and then sends nothing is closed by the
/// agent after its idle timeout, and the gateway gives the slot back.
#[tokio::test]
async fn an_idle_tls_connection_is_closed_by_the_agent_after_its_idle_timeout() {
    let w = start("agent-idle", route(8), |c| c.timeouts = GATEWAY).await;
    real_agent(&w).await;
    let tcp = TcpStream::connect(w.bound.public).await.expect("connect");
    let tls = https::client_config(&w.ca_pem).expect("roots");
    let _connection = https::handshake(tcp, tls, HOST).await.expect("a TLS connection");
    let gateway = w.gateway.clone();
    assert_eq!(gateway.active_connections(ROUTE), 1);
    let start = std::time::Instant::now();
    let limit = AGENT.timeouts.idle + GATEWAY.linger + Duration::from_secs(3);
    assert!(eventually(limit, || gateway.active_connections(ROUTE) == 0).await, "released");
    assert!(start.elapsed() >= AGENT.timeouts.idle - Duration::from_millis(300), "{:?}", start.elapsed());
}

/// Issue 20: an agent recognises a gateway host by its tunnel certificate's SHA-256 (the
/// certificate is the host's own, not a CA's). Pinning another certificate, it never tunnels
/// to this gateway, whatever the certificate says; pinning this one, it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_tunnels_only_to_the_gateway_whose_certificate_it_pins() {
    let w = super::start("pinned", super::route(8), |_| {}).await;
    let pin = relay_gateway_host::follow::tunnel_sha256(&w.tunnel_chain).expect("a certificate");
    let agents = |w: &World| w.gateway.route_rows().iter().map(|r| r.agents).sum::<u64>();

    let other = agent::PinnedGateway { address: w.bound.tunnel.to_string(), tunnel_sha256: "ab".repeat(32) };
    let (ctx, config) = agent_context(&w, AGENT);
    let impostor = tokio::spawn(agent::tunnel::run(ctx, config, agent::tunnel::Link::pinned(&other).expect("a link")));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(agents(&w), 0, "a certificate other than the pinned one is refused");
    impostor.abort();

    let this = agent::PinnedGateway { address: format!("localhost:{}", w.bound.tunnel.port()), tunnel_sha256: pin };
    let (ctx, config) = agent_context(&w, AGENT);
    tokio::spawn(agent::tunnel::run(ctx, config, agent::tunnel::Link::pinned(&this).expect("a link")));
    let gateway = w.gateway.clone();
    let up = eventually(Duration::from_secs(10), || gateway.route_rows().iter().any(|r| r.agents == 1)).await;
    assert!(up, "the pinned gateway, reached by name, counts the agent");
}

/// Issue 20: the gateway hosts an agent tunnels to follow the coordinator's list: a host
/// added gets a tunnel, a host dropped loses it (and the same list again changes nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_gateway_hosts_follow_the_coordinators_list() {
    let w = super::start("hosts", super::route(8), |_| {}).await;
    let pin = relay_gateway_host::follow::tunnel_sha256(&w.tunnel_chain).expect("a certificate");
    let host = agent::PinnedGateway { address: w.bound.tunnel.to_string(), tunnel_sha256: pin };
    let (ctx, config) = agent_context(&w, AGENT);
    let tunnels = agent::tunnel::Tunnels::new(ctx, config);

    assert_eq!(tunnels.reconcile(std::slice::from_ref(&host)), 1);
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(10), || agents_of(&gateway) == 1).await, "the added host counts the agent");
    assert_eq!(tunnels.reconcile(std::slice::from_ref(&host)), 0, "the same list changes nothing");
    assert_eq!(tunnels.hosts(), [host]);

    assert_eq!(tunnels.reconcile(&[]), 1);
    assert!(eventually(Duration::from_secs(10), || agents_of(&gateway) == 0).await, "the dropped host's tunnel closes");
}

fn agents_of(gateway: &relay_api::gateway::Gateway) -> u64 {
    gateway.route_rows().iter().map(|r| r.agents).sum()
}

/// Issue 20, point 2 ("from the signed catalog"): the agent API's route answer names gateway
/// hosts, but only a host the relay's signed catalog lists, at that tunnel address with that
/// certificate, is taken. Here the answer names a listed host and one slipped in beside it
/// (what an agent API in the wrong hands would do): the agent, launched with the catalog
/// key, takes the first and refuses the second; a catalog signed by another key takes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_takes_only_the_gateway_hosts_the_relays_signed_catalog_lists() {
    use relay_api::catalog::{CatalogContent, CatalogGateway, GatewayEndpoints, Prices, Publisher};
    let w = start("catalog", route(8), |_| {}).await;
    let listed = agent::PinnedGateway { address: "127.0.0.1:7001".to_owned(), tunnel_sha256: "a".repeat(64) };
    let slipped_in = agent::PinnedGateway { address: "127.0.0.1:7002".to_owned(), tunnel_sha256: "b".repeat(64) };
    let content = CatalogContent {
        relay: "relay.test".to_owned(),
        gateways: vec![CatalogGateway {
            operator: "local".to_owned(),
            hostname: "gw0.gateways.test".to_owned(),
            public_key: "AAAA".to_owned(),
            endpoints: Some(GatewayEndpoints {
                public: "127.0.0.1:7443".to_owned(),
                tunnel: listed.address.clone(),
                tunnel_sha256: listed.tunnel_sha256.clone(),
            }),
        }],
        prices: Prices { price_micros: 1, period_secs: 3600, currency: relay_api::catalog::CURRENCY.to_owned() },
        validators: Vec::new(),
        certificate_authorities: Vec::new(),
    };
    let scratch = tempfile::tempdir().expect("scratch");
    let publisher = Publisher::open(scratch.path(), Duration::from_secs(3600)).expect("a publisher");
    let signed = publisher.current(content.clone(), agent::gateways::now_ms()).expect("signed");

    let coordinator =
        relay_api::local::LocalCoordinator::new(relay_api::ca::DevCa::open(&scratch.path().join("ca")).expect("a CA"));
    coordinator.set_routes(vec![relay_api::local::AgentRoute::new(route(8), CREDENTIAL)]);
    let by_route: std::collections::HashMap<_, _> =
        [(ROUTE.to_owned(), vec![listed.clone(), slipped_in.clone()])].into();
    let hosts = |catalog| relay_api::local::GatewayHosts {
        by_route: by_route.clone(),
        catalog: Some(Arc::new(catalog)),
        catalog_at: None,
    };
    coordinator.set_gateway_hosts(hosts(signed));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let api = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(coordinator.clone().serve(listener));
    let (_, config) = agent_context_with(&w, AGENT, |c| {
        c.coordinator = Some(api.clone());
        c.catalog_key = Some(publisher.public_key().expect("the catalog key"));
    });

    let info = agent::hostnames::fetch(&config).await.expect("a coordinator").expect("the route's answer");
    let named = info.gateways.clone().expect("gateway hosts");
    assert_eq!(named.len(), 2);
    let mut check = agent::gateways::GatewayCheck::new(config.catalog_key);
    let vouched = check.vouch(named.clone(), info.catalog.as_ref(), agent::gateways::now_ms()).expect("checked");
    assert_eq!(vouched.taken, [listed]);
    assert_eq!(vouched.refused, [slipped_in]);

    // The same answer under another relay's key: nothing taken.
    let other = tempfile::tempdir().expect("scratch");
    let forged = Publisher::open(other.path(), Duration::from_secs(3600))
        .and_then(|p| p.current(content, agent::gateways::now_ms()))
        .expect("signed by another key");
    coordinator.set_gateway_hosts(hosts(forged));
    let info = agent::hostnames::fetch(&config).await.expect("a coordinator").expect("the route's answer");
    let mut check = agent::gateways::GatewayCheck::new(config.catalog_key);
    let refused = check.vouch(named, info.catalog.as_ref(), agent::gateways::now_ms());
    assert!(matches!(refused, Err(agent::gateways::GatewaysError::Catalog(_))), "{refused:?}");
}

/// Issue 40, point 2: a gateway host an agent tunnels to learns nothing it could present for
/// the route elsewhere. The real agent tunnels to a host of the attacker's (pinned, as a
/// route's gateway hosts are); the `Hello` it sends carries neither the credential nor the
/// route key, and replayed to the route's other gateway on the attacker's own session it is
/// refused, so that gateway never counts the attacker as the route's agent. The real agent,
/// tunnelling to that gateway itself, is welcomed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_host_that_saw_an_agents_hello_cannot_pose_as_the_agent_at_another_gateway() {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let w = super::start("impostor", super::route(8), |_| {}).await;

    // The attacker's gateway host: its own certificate, pinned by the agent.
    let (chain, key) = w.ca.issue(&["evil.localhost".to_owned()], Duration::from_secs(3600)).expect("a certificate");
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(chain.as_bytes()).collect::<Result<_, _>>().expect("the chain");
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("the key"))
        .expect("a server config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let evil = agent::PinnedGateway {
        address: listener.local_addr().expect("bound").to_string(),
        tunnel_sha256: relay_gateway_host::follow::tunnel_sha256(&chain).expect("a certificate"),
    };
    let (ctx, config) = agent_context(&w, AGENT);
    let agent = tokio::spawn(agent::tunnel::run(ctx, config, agent::tunnel::Link::pinned(&evil).expect("a link")));
    let (tcp, _) =
        tokio::time::timeout(Duration::from_secs(10), listener.accept()).await.expect("dialed").expect("tcp");
    let mut seen = tokio_rustls::TlsAcceptor::from(Arc::new(server)).accept(tcp).await.expect("the agent's handshake");
    let hello = agent::wire::read_frame(&mut seen).await.expect("the agent's Hello");
    agent.abort();
    let text = serde_json::to_string(&hello).expect("json");
    assert!(matches!(hello, agent::wire::Control::Hello { .. }), "{text}");
    assert!(!text.contains(CREDENTIAL), "the Hello carries the route's credential: {text}");
    assert!(!text.contains(&route_key().to_text()), "the Hello carries the route key: {text}");

    // Presented at the route's other gateway, on the attacker's own session.
    let tls = agent::tunnel::client_config(&w.ca_pem).expect("client config");
    let tcp = TcpStream::connect(w.bound.tunnel).await.expect("tunnel");
    let name = rustls::pki_types::ServerName::try_from("gateway.localhost").expect("name");
    let mut replayed = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.expect("TLS");
    agent::wire::write_frame(&mut replayed, &hello).await.expect("sent");
    match agent::wire::read_frame(&mut replayed).await.expect("an answer") {
        agent::wire::Control::Refused { reason } => assert!(reason.contains("proof"), "{reason}"),
        other => panic!("the replayed Hello was answered {other:?}"),
    }
    assert_eq!(agents_of(&w.gateway), 0, "the attacker is not the route's agent there");

    // The agent itself, at that gateway: welcomed (so the refusal above is the session's).
    real_agent(&w).await;
}
