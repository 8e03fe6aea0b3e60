//! Issue 39, point 3: "Agents are never starved". The finding: "Any process on the agents'
//! host takes every route offline, with no credential. 300 unauthenticated connections to the
//! tunnel port from 127.0.0.1 and a client from another address gets a handshake timeout on
//! every route, every tenant's." One source could have 256 tunnel connections pending, more
//! were refused at once, and the agents' own data connections counted against the same
//! limit: on the local pool every agent connects from 127.0.0.1.
//!
//! Here several routes are served by the real agent (`agent::tunnel`, as `svc agent run`
//! runs it), every one from 127.0.0.1, and an attacker from 127.0.0.1 with no credential and
//! no ticket opens 2,000 tunnel connections ([`flood`]: silent ones, ones trickling a byte
//! at a time, garbage, data connections with a made-up ticket, TLS handshakes stalled before
//! they finish and after, without a `Hello`). Clients of every route are served throughout,
//! an agent that connects in the middle of the flood is welcomed at its first try, and once
//! the attacker goes every count is back to zero.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent::serve::Limits;
use agent::wire::{self, Control, DATA_MAGIC};
use relay_api::gateway::{Gateway, GatewayConfig, Guards, RouteConfig};
use relay_api::validation::https;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use super::{World, eventually, start};

/// How one of a flood's connections misbehaves. None has a route's credential or a ticket the
/// gateway issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pattern {
    /// Connects and sends nothing.
    Silent,
    /// Sends a data connection's tag, then a made-up ticket, a byte every 100 ms.
    Trickle,
    /// Sends bytes that are neither a data connection's tag nor a TLS record (an HTTP request).
    Garbage,
    /// Sends a data connection's whole head with a made-up ticket.
    WrongTicket,
    /// Sends a TLS ClientHello and nothing more: the handshake never finishes.
    StalledHandshake,
    /// Finishes the TLS handshake and never sends its `Hello`.
    NoHello,
}

/// Every pattern, in the order a flood cycles through them.
pub(super) const PATTERNS: [Pattern; 6] = [
    Pattern::Silent,
    Pattern::Trickle,
    Pattern::Garbage,
    Pattern::WrongTicket,
    Pattern::StalledHandshake,
    Pattern::NoHello,
];

/// A flood of unauthenticated tunnel connections: each is held open (a trickling one keeps
/// trickling) until the gateway closes it (its socket is then closed too) or the flood is
/// dropped.
pub(super) struct Flood {
    connected: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    cut_short: Arc<AtomicUsize>,
    opener: JoinHandle<()>,
}

impl Flood {
    /// Connections the gateway's kernel accepted so far.
    pub(super) fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }

    /// Connections that could not be made.
    pub(super) fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections the gateway closed before their pattern's first steps were done (a
    /// trickling one within its first bytes, a TLS one within its handshake).
    pub(super) fn cut_short(&self) -> usize {
        self.cut_short.load(Ordering::Relaxed)
    }

    /// Whether every one of `count` connections was tried.
    pub(super) fn done(&self, count: usize) -> bool {
        self.connected() + self.refused() >= count
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        // The opener owns every connection's task: aborting it closes them all.
        self.opener.abort();
    }
}

/// Opens `count` tunnel connections to `tunnel` from `from`, cycling through [`PATTERNS`],
/// 64 being started at any time; `tls` is what the TLS patterns speak (any client
/// configuration: none of them sends a `Hello`). Returns at once: the connections are opened
/// in the background and held until the [`Flood`] is dropped.
pub(super) fn flood(tunnel: SocketAddr, from: IpAddr, tls: Arc<ClientConfig>, count: usize) -> Flood {
    let counter = || Arc::new(AtomicUsize::new(0));
    let (connected, refused, cut_short) = (counter(), counter(), counter());
    let counters = (connected.clone(), refused.clone(), cut_short.clone());
    let opener = tokio::spawn(async move {
        let at_once = Arc::new(Semaphore::new(64));
        let mut held = JoinSet::new();
        for i in 0..count {
            let Ok(permit) = at_once.clone().acquire_owned().await else { return };
            let ((connected, refused, cut_short), tls) = (counters.clone(), tls.clone());
            held.spawn(async move {
                let Some(stream) = connect_from(tunnel, from).await else {
                    refused.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                connected.fetch_add(1, Ordering::Relaxed);
                let started = start_pattern(stream, &tls, PATTERNS[i % PATTERNS.len()]).await;
                drop(permit);
                match started {
                    Some(mut held) => held.hold().await,
                    None => _ = cut_short.fetch_add(1, Ordering::Relaxed),
                }
            });
        }
        // Keeps the connections (their tasks) until the flood is dropped.
        while held.join_next().await.is_some() {}
        std::future::pending::<()>().await;
    });
    Flood { connected, refused, cut_short, opener }
}

/// A TCP connection to `to` from the address `from`.
async fn connect_from(to: SocketAddr, from: IpAddr) -> Option<TcpStream> {
    let socket = if from.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    socket.connect(to).await.ok()
}

/// A flood's connection once started on its pattern.
enum Held {
    Tcp(TcpStream),
    Trickling(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Held {
    /// Holds the connection until the gateway closes it (a trickling one sends a byte every
    /// 100 ms meanwhile).
    async fn hold(&mut self) {
        match self {
            Held::Trickling(stream) => {
                let mut byte = 0u8;
                while stream.write_all(&[byte]).await.is_ok() {
                    byte = byte.wrapping_add(1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Held::Tcp(stream) => {
                let mut sink = [0u8; 64];
                while matches!(tokio::io::AsyncReadExt::read(stream, &mut sink).await, Ok(n) if n > 0) {}
            }
            Held::Tls(stream) => {
                let mut sink = [0u8; 64];
                while matches!(tokio::io::AsyncReadExt::read(stream, &mut sink).await, Ok(n) if n > 0) {}
            }
        }
    }
}

/// Does the first steps of `pattern` on `stream`; `None` if the gateway closed the
/// connection before they were done.
async fn start_pattern(mut stream: TcpStream, tls: &Arc<ClientConfig>, pattern: Pattern) -> Option<Held> {
    let made_up = wire::new_ticket().ok()?;
    match pattern {
        Pattern::Silent => Some(Held::Tcp(stream)),
        Pattern::Trickle => {
            for byte in DATA_MAGIC.iter().chain(&made_up[..4]) {
                stream.write_all(&[*byte]).await.ok()?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(Held::Trickling(stream))
        }
        Pattern::Garbage => {
            stream.write_all(b"GET / HTTP/1.1\r\nHost: gateway.localhost\r\n\r\n").await.ok()?;
            Some(Held::Tcp(stream))
        }
        Pattern::WrongTicket => {
            stream.write_all(&[DATA_MAGIC.as_slice(), &made_up].concat()).await.ok()?;
            Some(Held::Tcp(stream))
        }
        Pattern::StalledHandshake => {
            let name = ServerName::try_from("gateway.localhost").ok()?;
            let mut client = rustls::ClientConnection::new(tls.clone(), name).ok()?;
            let mut hello = Vec::new();
            client.write_tls(&mut hello).ok()?;
            stream.write_all(&hello).await.ok()?;
            Some(Held::Tcp(stream))
        }
        Pattern::NoHello => {
            let name = ServerName::try_from("gateway.localhost").ok()?;
            let tls = tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream).await.ok()?;
            Some(Held::Tls(Box::new(tls)))
        }
    }
}

/// The attacker's connections.
const ATTACKERS: usize = 2_000;
/// Routes whose agents are up before the flood.
const BEFORE: usize = 4;
/// Every route: the last one's agent connects in the middle of the flood.
const ROUTES: usize = BEFORE + 1;
/// Each step of a client's request (connect, handshake, answer) is allowed this long: far
/// less than the gateway's 10 s for a data connection, so a refused one fails the test.
const CLIENT_STEP: Duration = Duration::from_secs(5);
/// Descriptors this test needs open at once: the attacker's 2,000 sockets (were they all
/// open at once), the gateway's ends of those it holds, the clients and agents, and room to
/// spare.
const NEEDED_FILES: u64 = 4_096;

/// One of the test's routes, and the key its agent proves it with.
struct Served {
    id: String,
    host: String,
    credential: String,
    key: agent::challenge::RouteKey,
}

impl Served {
    fn new(i: usize) -> Served {
        Served {
            id: format!("s{i}"),
            host: format!("s{i}.localhost"),
            credential: format!("credential-s{i}"),
            key: agent::challenge::RouteKey::generate().expect("a route key"),
        }
    }

    fn config(&self) -> RouteConfig {
        RouteConfig {
            route_id: self.id.clone(),
            hostnames: vec![self.host.clone()],
            route_public_key: self.key.public_key(),
            proxy_protocol: false,
            max_connections: 1024,
            standby: false,
            guards: Guards::default(),
        }
    }

    /// Starts the real agent for this route (from 127.0.0.1, like every agent of the local
    /// pool); it keeps its tunnel up until the runtime ends.
    fn agent(&self, w: &World) {
        let (chain, key) = w.ca.issue(std::slice::from_ref(&self.host), Duration::from_secs(3600)).expect("a cert");
        let key = rcgen::KeyPair::from_pem(&key).expect("its key");
        let current = Arc::new(agent::cert::CurrentCert::default());
        current.install(&chain, &key).expect("installed");
        let config = agent::AgentConfig {
            route_id: self.id.clone(),
            hostname: self.host.clone(),
            credential: self.credential.clone(),
            replica: None,
            route_key: self.key.clone(),
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
        let hostnames = Arc::new(agent::hostnames::Hostnames::new(&self.host));
        let ctx = agent::serve::Context::with_limits(config.clone(), current, hostnames, Limits::DEFAULT);
        let link = agent::tunnel::Link::trusting(&config, &w.ca_pem).expect("the tunnel's client configuration");
        tokio::spawn(agent::tunnel::run(ctx, config, link));
    }

    /// A complete HTTPS request from `from` through the gateway: the agent's challenge
    /// answer, its proof checked. `Err` says which step failed.
    async fn request(
        &self,
        public: SocketAddr,
        tls: Arc<ClientConfig>,
        from: IpAddr,
        nonce: &str,
    ) -> Result<(), String> {
        let socket = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
        socket.bind(SocketAddr::new(from, 0)).map_err(|e| format!("bind: {e}"))?;
        let tcp = tokio::time::timeout(CLIENT_STEP, socket.connect(public))
            .await
            .map_err(|_| "no connection".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        let mut connection = tokio::time::timeout(CLIENT_STEP, https::handshake(tcp, tls, &self.host))
            .await
            .map_err(|_| "TLS handshake timed out".to_owned())?
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let path = format!("/.well-known/svc/challenge?nonce={nonce}");
        let (status, body) = tokio::time::timeout(CLIENT_STEP, connection.get(&path))
            .await
            .map_err(|_| "no answer".to_owned())?
            .map_err(|e| format!("request: {e}"))?;
        if status != 200 {
            return Err(format!("status {status}: {}", String::from_utf8_lossy(&body)));
        }
        let answer: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
        let proof = answer["proof"].as_str().ok_or("no proof")?;
        if !agent::challenge::verify(&self.key.public_key(), &self.id, &self.host, nonce, proof) {
            return Err("the proof does not verify".to_owned());
        }
        Ok(())
    }
}

/// Requests to one route while the flood lasts: how many completed, the slowest, and the
/// failures.
#[derive(Debug, Default)]
struct Tally {
    served: usize,
    slowest: Duration,
    failures: Vec<String>,
}

/// Requests to `route` one after another from `from` until `stop` holds.
async fn keep_requesting(
    route: Arc<Served>,
    public: SocketAddr,
    tls: Arc<ClientConfig>,
    from: IpAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Tally {
    let mut tally = Tally::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let start = Instant::now();
        match route.request(public, tls.clone(), from, &format!("n{n}")).await {
            Ok(()) => tally.served += 1,
            Err(e) => tally.failures.push(format!("request {n} after {:?}: {e}", start.elapsed())),
        }
        tally.slowest = tally.slowest.max(start.elapsed());
    }
    tally
}

/// Raises this process's open-files soft limit to its hard limit, and fails unless that
/// allows `needed`.
fn raise_open_files(needed: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).expect("the open-files soft limit can be raised to the hard limit");
    let now = getrlimit(Resource::Nofile).current;
    assert!(
        now.is_none_or(|n| n >= needed),
        "this test needs {needed} open files and the hard limit allows {now:?}: raise it (ulimit -Hn)"
    );
}

/// A control connection for `route` from 127.0.0.1, tried once: whether the gateway
/// welcomes it within 5 s.
async fn welcomed_at_once(w: &World, route: &Served) -> Result<(), String> {
    let attempt = async {
        let tls = agent::tunnel::client_config(&w.ca_pem).map_err(|e| format!("client config: {e}"))?;
        let tcp = TcpStream::connect(w.bound.tunnel).await.map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::try_from("gateway.localhost").map_err(|e| format!("name: {e}"))?;
        let mut stream =
            tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
        let hello = Control::hello(&route.key, &route.id, "", stream.get_ref().1).ok_or("not TLS 1.3")?;
        wire::write_frame(&mut stream, &hello).await.map_err(|e| format!("hello: {e}"))?;
        match wire::read_frame(&mut stream).await.map_err(|e| format!("no answer: {e}"))? {
            Control::Welcome { .. } => Ok(()),
            other => Err(format!("answered {other:?}")),
        }
    };
    tokio::time::timeout(Duration::from_secs(5), attempt).await.map_err(|_| "no welcome within 5 s".to_owned())?
}

fn agents(gateway: &Gateway, route: &str) -> u64 {
    gateway.route_rows().iter().find(|r| r.route_id == route).map_or(0, |r| r.agents)
}

/// The flood against a gateway configured by `tune`: the routes' clients are served
/// throughout, an agent connecting in the middle of it is welcomed at its first try, and
/// every count is back to zero once the attacker goes.
async fn every_route_serves_through_a_flood_from_the_agents_address(name: &str, tune: impl FnOnce(&mut GatewayConfig)) {
    raise_open_files(NEEDED_FILES);
    let routes: Vec<Arc<Served>> = (0..ROUTES).map(|i| Arc::new(Served::new(i))).collect();
    let w = start(name, routes[0].config(), tune).await;
    w.gateway.set_routes(routes.iter().map(|r| r.config()).collect());
    let g = w.gateway.clone();
    for route in &routes[..BEFORE] {
        route.agent(&w);
    }
    let up = eventually(Duration::from_secs(10), || routes[..BEFORE].iter().all(|r| agents(&g, &r.id) == 1)).await;
    assert!(up, "every agent's tunnel comes up: {:?}", g.route_rows());
    let tls = https::client_config(&w.ca_pem).expect("roots");
    // Clients come from another address than the agents and the attacker.
    let clients: IpAddr = Ipv4Addr::new(127, 0, 0, 2).into();
    for route in &routes[..BEFORE] {
        route.request(w.bound.public, tls.clone(), clients, "before").await.expect("served before the flood");
    }

    // The flood, from the agents' own address, while each route's clients keep asking.
    let started = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut requesting: Vec<JoinHandle<Tally>> = routes[..BEFORE]
        .iter()
        .map(|r| tokio::spawn(keep_requesting(r.clone(), w.bound.public, tls.clone(), clients, stop.clone())))
        .collect();
    let attacker_tls = agent::tunnel::client_config(&w.ca_pem).expect("a TLS client configuration");
    let localhost: IpAddr = Ipv4Addr::LOCALHOST.into();
    let attack = flood(w.bound.tunnel, localhost, attacker_tls, ATTACKERS);

    // Halfway, a new control connection tries once, then the real agent of the last route
    // connects (checked below, after the clients).
    assert!(eventually(Duration::from_secs(30), || attack.done(ATTACKERS / 2)).await, "half the flood opened");
    let late = &routes[BEFORE];
    let welcomed = welcomed_at_once(&w, late).await;
    eprintln!("a control connection {welcomed:?} after {} attackers", attack.connected());
    // That session is gone once its connection is: the real agent takes its place.
    assert!(eventually(Duration::from_secs(5), || agents(&g, &late.id) == 0).await, "the one-off session ended");
    late.agent(&w);
    let late_up = eventually(Duration::from_secs(5), || agents(&g, &late.id) == 1).await;
    if late_up {
        let r = tokio::spawn(keep_requesting(late.clone(), w.bound.public, tls.clone(), clients, stop.clone()));
        requesting.push(r);
    }

    // The whole flood opened, then held for a second more.
    assert!(eventually(Duration::from_secs(60), || attack.done(ATTACKERS)).await, "the flood opened");
    let opened = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pending = g.pending_connections();
    stop.store(true, Ordering::Relaxed);
    let mut tallies = Vec::new();
    for task in requesting {
        tallies.push(task.await.expect("the requests' task"));
    }
    eprintln!(
        "{} attackers connected ({} refused, {} cut short by the gateway) in {opened:?}; {pending:?} at the end; \
         tunnel outcomes {:?}; evictions pending_cap={}; public outcomes {:?}",
        attack.connected(),
        attack.refused(),
        attack.cut_short(),
        g.metrics.tunnel_counts(),
        g.metrics.eviction_count("pending_cap"),
        g.metrics.outcome_counts(),
    );
    for (route, tally) in routes.iter().zip(&tallies) {
        eprintln!(
            "route {}: {} served, slowest {:?}, failures {:?}",
            route.id, tally.served, tally.slowest, tally.failures
        );
    }
    for (route, tally) in routes.iter().zip(&tallies) {
        assert!(
            tally.failures.is_empty(),
            "route {}'s clients failed during the flood: {:?}",
            route.id,
            tally.failures
        );
        assert!(tally.served >= 2, "route {} served {} requests during the flood", route.id, tally.served);
    }
    welcomed.expect("a control connection from the agents' address is welcomed during the flood at its first try");
    assert!(late_up, "an agent connecting during the flood comes up within 5 s");
    assert_eq!(tallies.len(), ROUTES, "every route's clients were served");
    // The flood was one: every attacker connected, made-up tickets were refused, and the
    // flood reached a cap, where pending connections were closed for newer ones.
    assert_eq!(attack.connected(), ATTACKERS, "every attacker connected");
    assert!(g.metrics.tunnel_count("unknown_ticket") > 0);
    let closed_for_room = g.metrics.tunnel_count("pending_limit") + g.metrics.eviction_count("pending_cap");
    assert!(closed_for_room > 0, "the flood reached no cap: {:?}", g.metrics.tunnel_counts());
    // No agent lost its tunnel, and no client waited for a data connection in vain.
    assert_eq!(g.metrics.tunnel_count("accepted"), ROUTES as u64 + 1, "{:?}", g.metrics.tunnel_counts());
    assert_eq!(g.metrics.outcome_count("no_tunnel"), 0, "{:?}", g.metrics.outcome_counts());
    assert!(routes.iter().all(|r| agents(&g, &r.id) == 1), "{:?}", g.route_rows());

    // The attacker goes: every count back to zero, and every route still serves.
    drop(attack);
    let idle = eventually(Duration::from_secs(15), || {
        g.pending_is_idle() && routes.iter().all(|r| g.active_connections(&r.id) == 0)
    })
    .await;
    assert!(idle, "every count back to zero: {:?}, {:?}", g.pending_connections(), g.route_rows());
    for route in &routes {
        route.request(w.bound.public, tls.clone(), clients, "after").await.expect("served after the flood");
    }
}

/// The default configuration: one source may have 256 tunnel connections waiting for their
/// first bytes, and the gateway's pending cap is far above the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_tunnel_connections_from_the_agents_address_never_starve_any_route() {
    every_route_serves_through_a_flood_from_the_agents_address("starve", |_| {}).await;
}

/// The gateway's pending cap below what the attacker opens (as a low open-file limit makes
/// it): the flood reaches the cap, where the oldest pending connection is closed for each
/// newcomer, and still no agent or client is starved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_gateways_pending_cap_from_the_agents_address_never_starves_any_route() {
    every_route_serves_through_a_flood_from_the_agents_address("starve-cap", |c| c.max_pending = 200).await;
}
