//! The route feed (issue 20) in process: an admitted gateway host asks a coordinator's API for
//! its routes, and a gateway follows the feed over real HTTP on loopback.

#[path = "support/world.rs"]
mod world;

use std::time::Duration;

use relay_api::coordinator::state::DeploymentState;
use relay_api::coordinator::store::now_ms;
use relay_api::gateway::file::FeedSource;
use relay_api::gateway::{Gateway, GatewayConfig};
use relay_gateway_host::follow::{Feed, follow};
use relay_gateway_host::key::OperatorKey;
use tokio::net::TcpListener;
use world::*;

/// An operator's gateway host: its key, admitted under `name` on `w`'s coordinator.
struct GatewayHost {
    id: String,
    key: OperatorKey,
}

fn admitted(w: &World, name: &str) -> GatewayHost {
    admitted_as(w, name, &format!("{name}.gateways.test"))
}

/// An operator's gateway host admitted under `name`, registered as `hostname`.
fn admitted_as(w: &World, name: &str, hostname: &str) -> GatewayHost {
    let issued =
        relay_api::coordinator::issue_admission_token(&w.engine.config().data_dir, name, Duration::from_secs(60))
            .expect("an admission token");
    let key = OperatorKey::generate().expect("a key");
    let hostname = hostname.to_owned();
    let message = relay_wire::admission::registration_message(&issued.plaintext, &hostname, &key.public_key());
    let request = relay_wire::admission::RegisterRequest {
        admission_token: issued.plaintext,
        operator: None,
        public_key: key.public_key(),
        signature: key.sign(&message),
        hostname,
    };
    let operator = w.store.admit(&request, now_ms()).expect("admitted");
    GatewayHost { id: operator.id, key }
}

impl GatewayHost {
    /// The signature header of a feed request for `path` signed by `self` at `at_ms` as
    /// operator `as_id`.
    fn header(&self, as_id: &str, at_ms: i64, path: &str) -> String {
        let message = relay_wire::feed::feed_message(as_id, at_ms, path);
        relay_wire::feed::FeedSignature { operator_id: as_id.to_owned(), at_ms, signature: self.key.sign(&message) }
            .header_value()
    }
}

/// `GET path` with the feed's signature header, if any: (status, JSON body).
async fn feed(router: &axum::Router, path: &str, signature: Option<String>) -> (u16, serde_json::Value) {
    let mut request = axum::http::Request::builder().method("GET").uri(path);
    if let Some(signature) = signature {
        request = request.header(relay_wire::feed::SIGNATURE_HEADER, signature);
    }
    send(router, request.body(axum::body::Body::empty()).expect("a request")).await
}

/// Issue 20, first step: an admitted gateway host asks for its routes with a request its
/// operator key signed now, and gets the routes assigned to its operator, no other's; a
/// request unsigned, signed by another key, for another path, as another operator or too far
/// from the coordinator's clock gets a 401 that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_feed_answers_an_admitted_gateway_its_routes_and_no_one_else() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    // The tests' deployments are assigned to operator `local`.
    let (local, other) = (admitted(&w, "local"), admitted(&w, "north"));
    let api = relay_api::coordinator::api_router(w.engine.clone());
    let path = relay_wire::feed::FEED_PATH;
    let now = now_ms();
    // Each request is signed after the one before (a request is accepted once).
    let tick = std::sync::atomic::AtomicI64::new(now);
    let at = || tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

    let (status, body) = feed(&api, path, Some(local.header(&local.id, at(), path))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["operator"], local.id.as_str());
    let routes = body["routes"].as_array().expect("routes");
    assert_eq!(routes.len(), 1, "{body}");
    assert_eq!(routes[0]["routeId"], d.route_id.as_str());
    assert_eq!(routes[0]["hostnames"][0], d.canonical_hostname.as_str());
    let table = w.engine.route_table(None).expect("the coordinator's own table");
    assert_eq!(
        serde_json::to_value(&table).expect("JSON"),
        body["routes"],
        "the table the coordinator's gateway serves"
    );

    // Asked for what comes after the version it serves, the request is held while the table
    // stays the same; after another version, it is answered at once.
    let version = body["version"].as_str().expect("a version").to_owned();
    let after = relay_wire::feed::feed_path(Some(&version), None);
    let held = feed(&api, &after, Some(local.header(&local.id, at(), &after)));
    assert!(tokio::time::timeout(Duration::from_millis(1500), held).await.is_err(), "held while unchanged");
    let stale = relay_wire::feed::feed_path(Some("00"), None);
    let (status, again) = feed(&api, &stale, Some(local.header(&local.id, at(), &stale))).await;
    assert_eq!((status, again["version"].as_str()), (200, Some(version.as_str())), "{again}");

    let (status, body) = feed(&api, path, Some(other.header(&other.id, now, path))).await;
    assert_eq!((status, body["routes"].as_array().map(Vec::len)), (200, Some(0)), "another operator's: none");
    assert_ne!(body["version"].as_str(), Some(version.as_str()), "another table, another version");

    let refused = [
        (None, "gateway_signature_missing"),
        (Some("op=x;at=1".to_owned()), "gateway_signature_missing"),
        (Some(other.header(&local.id, now, path)), "gateway_signature_invalid"),
        (Some(local.header(&local.id, now, &format!("{path}?after=1"))), "gateway_signature_invalid"),
        (Some(local.header("op_0000000000000000", now, path)), "gateway_operator_unknown"),
        (Some(local.header(&local.id, now - 120_000, path)), "gateway_clock_skewed"),
        (Some(local.header(&local.id, now + 120_000, path)), "gateway_request_ahead"),
    ];
    for (signature, code) in refused {
        let (status, body) = feed(&api, path, signature.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some(code)), "{signature:?}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    }
    // An announcement of where the gateway is that does not read: refused, nothing recorded.
    let half = format!("{path}?tunnel=127.0.0.1:7443");
    let (status, body) = feed(&api, &half, Some(local.header(&local.id, at(), &half))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("gateway_presence_invalid")), "{body}");
    // Authenticated first: a request another key signed learns nothing of its announcement.
    let (status, body) = feed(&api, &half, Some(other.header(&local.id, now, &half))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("gateway_signature_invalid")), "{body}");
    assert!(w.store.gateway_presence().expect("read").is_empty());
}

/// Issue 20, point 2 (configurable): an operator runs three gateway hosts and each route gets
/// `--gateway-hosts-per-route` of them (all by default). Each route is in the feed of exactly
/// that many hosts, and its agents (the pinned gateways) and its URLs name exactly those:
/// what a host serves and what tunnels to it agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_is_served_by_as_many_of_its_operators_hosts_as_configured_and_its_agents_name_those() {
    for configured in [None, Some(2usize), Some(3)] {
        let w = world_with(FakeProbe::default(), |c| c.gateway_hosts_per_route = configured);
        // Unset: every host serves every route.
        let per_route = configured.unwrap_or(3);
        let deployments: Vec<_> = (0..6).map(|i| w.funded(&format!("shop{i}"))).collect();
        let live = |w: &World| deployments.iter().all(|d| w.deployment(&d.id).state == DeploymentState::Live);
        assert!(w.tick_until(20, live).await);
        let api = relay_api::coordinator::api_router(w.engine.clone());
        let hosts: Vec<GatewayHost> =
            (0..3).map(|i| admitted_as(&w, "local", &format!("gw{i}.gateways.test"))).collect();
        // Each host announces where it is (as `svc gateway run` does) in its first request.
        for (i, host) in hosts.iter().enumerate() {
            let presence = relay_wire::feed::Presence {
                public: format!("127.0.0.1:{}", 9440 + i).parse().expect("an address"),
                tunnel: format!("127.0.0.1:{}", 9450 + i).parse().expect("an address"),
                tunnel_sha256: format!("{i:0>64}"),
            };
            let path = relay_wire::feed::feed_path(None, Some(&presence));
            let (status, body) = feed(&api, &path, Some(host.header(&host.id, now_ms(), &path))).await;
            assert_eq!(status, 200, "{body}");
            if i == 0 {
                // Alone, the first host serves every route: no route waits for a second host.
                assert_eq!(body["routes"].as_array().map(Vec::len), Some(deployments.len()), "{body}");
            }
        }
        // With every host present, each host's table.
        let mut served_by: Vec<Vec<String>> = Vec::new();
        for host in &hosts {
            let path = relay_wire::feed::FEED_PATH;
            let (status, body) = feed(&api, path, Some(host.header(&host.id, now_ms(), path))).await;
            assert_eq!(status, 200, "{body}");
            let routes = body["routes"].as_array().expect("routes");
            served_by.push(routes.iter().filter_map(|r| r["routeId"].as_str().map(str::to_owned)).collect());
        }
        // How evenly routes spread is the hashing's unit test (`gateway_hosts.rs`, fixed keys):
        // here the IDs are random, and six routes all took the same two of three hosts in
        // one CI run (1 chance in 243).
        for d in &deployments {
            let serving: Vec<usize> = (0..3).filter(|&i| served_by[i].contains(&d.route_id)).collect();
            assert_eq!(serving.len(), per_route, "{}: served by hosts {serving:?}", d.id);
            let named = w.store.gateway_hosts(&d.id, now_ms(), configured).expect("read");
            let mut named: Vec<usize> =
                named.iter().map(|(o, _)| hosts.iter().position(|h| h.id == o.id).expect("a host")).collect();
            named.sort_unstable();
            assert_eq!(named, serving, "{}: the hosts its agents tunnel to", d.id);
            let urls = w.engine.with_url(w.deployment(&d.id)).urls;
            assert_eq!(urls.len(), 1 + per_route, "the coordinator's URL and each serving host's: {urls:?}");
            for i in serving {
                assert!(urls.iter().any(|u| u.ends_with(&format!(":{}/", 9440 + i))), "host {i} in {urls:?}");
            }
        }
    }
}

/// What stands between a gateway and the coordinator's API in the next test: a TCP relay on
/// one loopback port, which the test takes down with every connection through it (the
/// coordinator "away") and brings back on the same port.
struct Link {
    addr: std::net::SocketAddr,
    to: std::net::SocketAddr,
    tasks: Option<tokio::task::JoinHandle<()>>,
}

impl Link {
    async fn up(addr: std::net::SocketAddr, to: std::net::SocketAddr) -> Link {
        let listener = TcpListener::bind(addr).await.expect("the link's port");
        let addr = listener.local_addr().expect("bound");
        let tasks = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                conns.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Link { addr, to, tasks: Some(tasks) }
    }

    /// Closes the port and every connection through it (the JoinSet goes with its task).
    fn down(&mut self) {
        if let Some(tasks) = self.tasks.take() {
            tasks.abort();
        }
    }
}

/// Waits (up to 10 s) until `done`; whether it did.
async fn eventually(done: impl Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !done() && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

/// Issue 20, point 1: a gateway following its coordinator's feed over HTTP (as `svc gateway
/// run` does) gets its operator's table, learns of a new route within about a second (the
/// feed holds its request until the table changes), keeps serving its table while the
/// coordinator cannot be reached and says so in its metrics, and follows again once the
/// coordinator is back, without applying the same table twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_follows_the_feed_and_keeps_its_table_while_the_coordinator_is_away() {
    let w = world(FakeProbe::default());
    let host = admitted(&w, "local");
    let api = TcpListener::bind("127.0.0.1:0").await.expect("the API's port");
    let api_addr = api.local_addr().expect("bound");
    let router = relay_api::coordinator::api_router(w.engine.clone());
    tokio::spawn(async move { axum::serve(api, router).await });
    let mut link = Link::up("127.0.0.1:0".parse().expect("an address"), api_addr).await;

    let scratch = tempfile::tempdir().expect("a scratch directory");
    let key_file = scratch.path().join("operator.key");
    std::fs::write(&key_file, host.key.pem()).expect("the key");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("0600");
    let source = FeedSource {
        url: format!("http://{}", link.addr),
        operator_id: host.id.clone(),
        operator_key: key_file,
        ca: None,
    };
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let gateway = Gateway::new(GatewayConfig::new(any, any, any, String::new(), String::new()));
    // Where the gateway says it is: its addresses and its tunnel certificate's digest.
    let cert = relay_gateway_host::key::tunnel_cert("local.gateways.test").expect("a tunnel certificate");
    let bound = relay_api::gateway::Bound {
        public: "0.0.0.0:8443".parse().expect("an address"),
        tunnel: "127.0.0.1:7443".parse().expect("an address"),
        admin: any,
    };
    let feed = Feed::open(&source).expect("the feed").announcing(&bound, &cert.cert_pem).expect("a certificate");
    let following = tokio::spawn(follow(gateway.clone(), feed));
    let feed = || gateway.feed().counts().unwrap_or_default();

    assert!(eventually(|| feed().connected).await, "{:?}", feed());
    assert_eq!((gateway.route_count(), feed().updates), (0, 1), "the empty table, applied");
    let present = w.store.gateway_presence().expect("read");
    assert_eq!(present.len(), 1, "{present:?}");
    let (operator, presence, _) = &present[0];
    assert_eq!(operator, &host.id);
    assert_eq!(presence.tunnel_sha256, relay_gateway_host::follow::tunnel_sha256(&cert.cert_pem).expect("a digest"));
    assert_eq!(
        presence.reachable("local.gateways.test"),
        ("local.gateways.test:8443".to_owned(), "127.0.0.1:7443".to_owned()),
        "every address stands for the registered hostname"
    );

    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    let live = std::time::Instant::now();
    assert!(eventually(|| gateway.route_count() == 1).await, "{:?}", feed());
    let learned = live.elapsed();
    assert!(learned < Duration::from_secs(5), "the held request answered at the change: {learned:?}");
    assert_eq!(gateway.route_rows()[0].route_id, d.route_id);
    assert_eq!(feed().updates, 2);

    link.down();
    assert!(eventually(|| !feed().connected).await, "{:?}", feed());
    assert_eq!(gateway.route_count(), 1, "the last table is served");
    let metrics = gateway.render_metrics();
    assert!(metrics.contains("svc_gateway_feed_connected 0\n"), "{metrics}");
    assert!(metrics.contains("svc_gateway_routes 1\n"), "{metrics}");
    assert!(!metrics.contains("svc_gateway_feed_failures_total 0\n"), "{metrics}");

    let link = Link::up(link.addr, link.to).await;
    assert!(eventually(|| feed().connected).await, "{:?}", feed());
    assert_eq!((gateway.route_count(), feed().updates), (1, 2), "the same table, not applied again");
    following.abort();
    drop(link);
}

/// Issue 40, point 2: a signed feed request is accepted once. Replayed, to the same
/// coordinator or to another on the same database, it is refused (`gateway_request_replayed`,
/// naming the last time accepted), and so is one signed before it; one dated 59 s ahead (it
/// was accepted within the old +-60 s) is refused as `gateway_request_ahead`; one a few
/// seconds ahead, or signed one ms after the last, is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_or_future_dated_feed_request_is_refused_on_every_coordinator_of_the_database() {
    let w = world(FakeProbe::default());
    let host = admitted(&w, "local");
    let api = relay_api::coordinator::api_router(w.engine.clone());
    // A second coordinator on the same database.
    let second = world_in(FakeProbe::default(), |_| {}, Some(w.store.clone()));
    let other_api = relay_api::coordinator::api_router(second.engine.clone());
    let path = relay_wire::feed::FEED_PATH;
    let code = |body: &serde_json::Value| body["error"]["code"].as_str().map(str::to_owned);

    let now = now_ms();
    let signed = host.header(&host.id, now, path);
    let (status, body) = feed(&api, path, Some(signed.clone())).await;
    assert_eq!(status, 200, "{body}");
    for (router, which) in [(&api, "the same coordinator"), (&other_api, "another coordinator on the database")] {
        let (status, body) = feed(router, path, Some(signed.clone())).await;
        assert_eq!((status, code(&body).as_deref()), (401, Some("gateway_request_replayed")), "{which}: {body}");
        assert_eq!(body["error"]["lastAcceptedAt"], now, "{body}");
    }
    let earlier = host.header(&host.id, now - 1, path);
    let (status, body) = feed(&other_api, path, Some(earlier)).await;
    assert_eq!((status, code(&body).as_deref()), (401, Some("gateway_request_replayed")), "{body}");
    // The next millisecond, on the other coordinator: accepted; then not on the first.
    let next = host.header(&host.id, now + 1, path);
    assert_eq!(feed(&other_api, path, Some(next.clone())).await.0, 200);
    assert_eq!(code(&feed(&api, path, Some(next)).await.1).as_deref(), Some("gateway_request_replayed"));

    let (status, body) = feed(&api, path, Some(host.header(&host.id, now_ms() + 59_000, path))).await;
    assert_eq!((status, code(&body).as_deref()), (401, Some("gateway_request_ahead")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("ahead")), "{body}");
    // A few seconds ahead: accepted (so the refused one was not recorded as the latest).
    let (status, body) = feed(&api, path, Some(host.header(&host.id, now_ms() + 3_000, path))).await;
    assert_eq!(status, 200, "a few seconds ahead: {body}");
}

/// Issue 40, point 2, as `svc gateway run` signs: requests one after the other (several in
/// one millisecond), a restart (a new client, its memory gone) and a clock stepped back are
/// never refused: the client signs after its last request, and after a refusal as a replay,
/// after the time the coordinator names, once more at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_hosts_requests_are_never_refused_as_replays_across_a_restart() {
    let w = world(FakeProbe::default());
    let host = admitted(&w, "local");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("the API's port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let router = relay_api::coordinator::api_router(w.engine.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let client = relay_gateway_host::coordinator::CoordinatorClient::new(&url, None).expect("a client");
    let ask = |client: relay_gateway_host::coordinator::CoordinatorClient| {
        let (key, id) = (&host.key, host.id.clone());
        async move { client.routes(key, &id, None, None, None).await }
    };
    // One after the other as fast as they go (several in one millisecond; the host asks one
    // at a time), by clones of the client too.
    for n in 0..20 {
        ask(client.clone()).await.unwrap_or_else(|e| panic!("request {n}: {e}"));
    }
    // Another process signed far ahead of this clock (a host restarted with its clock 3 s
    // behind): the new client is told, and asks again after it.
    let ahead = now_ms() + 3_000;
    let path = relay_wire::feed::FEED_PATH;
    let api = relay_api::coordinator::api_router(w.engine.clone());
    assert_eq!(feed(&api, path, Some(host.header(&host.id, ahead, path))).await.0, 200);
    let restarted = relay_gateway_host::coordinator::CoordinatorClient::new(&url, None).expect("a client");
    ask(restarted.clone()).await.expect("accepted after the time the coordinator named");
    ask(restarted).await.expect("and the next");
}

/// Issue 40, point 2: a gateway operator holding everything its feed gives (every route's
/// `routePublicKey`, the coordinators' probe keys, its operator key; no route credential or
/// its digest any more) mints no probe token that passes a route's guards, on its own gateway
/// (following the feed) or on the coordinator's: not an HMAC keyed by what the feed gives
/// (the old token was keyed by the credential digest the feed carried), not one signed by any key
/// it has, not a coordinator's token for another route. The coordinator's own token passes
/// on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_operator_holding_the_feed_mints_no_probe_token_on_any_gateway() {
    use base64::Engine as _;
    use relay_wire::alpn::{PROBE_ALPN_PREFIX, ProbeFor, ProbeSigner};
    let w = world(FakeProbe::default());
    // The coordinator's probe key, recorded as `svc relay serve` records its own.
    let (coordinator, _) = ProbeSigner::generate().expect("the coordinator's probe key");
    assert!(w.store.register_probe_key(&coordinator.public_key().to_string(), now_ms()).expect("recorded"));
    let (a, b) = (w.funded("shop"), w.funded("cafe"));
    let live = |w: &World| [&a, &b].iter().all(|d| w.deployment(&d.id).state == DeploymentState::Live);
    assert!(w.tick_until(10, live).await);
    let host = admitted(&w, "local");

    // The operator's gateway, following the feed as `svc gateway run` does.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("the API's port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let api = relay_api::coordinator::api_router(w.engine.clone());
    let served = api.clone();
    tokio::spawn(async move { axum::serve(listener, served).await });
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let key_file = scratch.path().join("operator.key");
    std::fs::write(&key_file, host.key.pem()).expect("the key");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("0600");
    let source = FeedSource { url, operator_id: host.id.clone(), operator_key: key_file, ca: None };
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let gateway = Gateway::new(GatewayConfig::new(any, any, any, String::new(), String::new()));
    let following = tokio::spawn(follow(gateway.clone(), Feed::open(&source).expect("the feed")));
    assert!(eventually(|| gateway.route_count() == 2 && !gateway.probe_keys().is_empty()).await);

    // Everything the feed gives the operator.
    let path = relay_wire::feed::FEED_PATH;
    let (status, answer) = feed(&api, path, Some(host.header(&host.id, now_ms() + 1_000, path))).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["probeKeys"], serde_json::json!([coordinator.public_key().to_string()]), "{answer}");
    let public_key_of = |route_id: &str| {
        let routes = answer["routes"].as_array().expect("routes");
        let route = routes.iter().find(|r| r["routeId"] == route_id).expect("the route in the feed");
        let fields: Vec<&String> = route.as_object().expect("an object").keys().collect();
        assert!(!fields.iter().any(|f| f.contains("redential")), "the feed names no credential: {fields:?}");
        route["routePublicKey"].as_str().expect("a public key").to_owned()
    };
    let (route, name) = (b.route_id.as_str(), b.canonical_hostname.as_str());
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs();
    let message = |version: &str| match version {
        "v2" => format!("svc route probe v2|{route}|{name}|{secs}"),
        _ => format!("svc route probe v3|gateway-guards|{route}|{name}|{secs}"),
    };
    let token = |tag: &[u8]| format!("{secs}.{}", relay_wire::wire::hex(tag)).into_bytes();
    let public_key = public_key_of(route);
    let hmac = |version: &str| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public_key.as_bytes());
        token(ring::hmac::sign(&key, message(version).as_bytes()).as_ref())
    };
    let by_operator_key = {
        let signature = host.key.sign(message("v3").as_bytes());
        token(&base64::engine::general_purpose::STANDARD.decode(signature).expect("base64"))
    };
    let (own, _) = ProbeSigner::generate().expect("a key of its own");
    let alpn_token = |alpn: Vec<u8>| alpn.strip_prefix(PROBE_ALPN_PREFIX).expect("a probe protocol").to_vec();
    let by_own_key = alpn_token(own.probe_alpn(ProbeFor { route_id: route, server_name: name }, secs));
    // A coordinator's token, seen on the wire, for route A.
    let for_a = ProbeFor { route_id: &a.route_id, server_name: &a.canonical_hostname };
    let seen_for_a = alpn_token(coordinator.probe_alpn(for_a, secs));
    let minted = [
        ("the old HMAC keyed by what the feed gives", hmac("v2")),
        ("an HMAC of the new message keyed by what the feed gives", hmac("v3")),
        ("signed by the operator key", by_operator_key),
        ("signed by a key of its own", by_own_key),
        ("the coordinator's token for another route", seen_for_a.clone()),
    ];
    let genuine = alpn_token(coordinator.probe_alpn(ProbeFor { route_id: route, server_name: name }, secs));
    for (gw, which) in [(&w.gateway, "the coordinator's gateway"), (&gateway, "the operator's gateway")] {
        for (how, minted) in &minted {
            assert!(!gw.probe_passes(name, None, minted), "{which} let through a token {how}");
        }
        assert!(gw.probe_passes(name, None, &genuine), "{which} refused the coordinator's own token");
        assert!(gw.probe_passes(&a.canonical_hostname, None, &seen_for_a), "{which}: route A's, on route A");
    }
    following.abort();
}
