//! The public gateway: it accepts TCP on its TLS port, reads the server name from the
//! ClientHello without terminating TLS, and pipes the raw connection to the job's agent
//! through the agent's outbound tunnel. It never holds a job's key and never sees plaintext.
//!
//! Refused without a single application byte, and counted: a client with too many
//! connections still sending their ClientHello (`client_hellos_per_client`), a missing or
//! unknown server name, a ClientHello over `client_hello_max` or not complete within
//! `client_hello_timeout`, a route at its connection limit whose largest holder is the
//! client itself, a client holding its share of the route already (`client_share_percent` of
//! `max_connections`), a route with no agent connected. There is no default route.
//!
//! A routed connection holds its route's slot (counted by route ID: [`accounting`]) until it
//! is closed: when both sides have ended, on an error, after `timeouts.idle` without a byte
//! either way, or `timeouts.linger` after one side ended its sending without a byte since
//! (`relay_wire::idle`), or to make room on its full route for a client holding fewer. Connections
//! not yet routed or authenticated, on both ports, are bounded per source and together
//! ([`pending`]: the oldest goes first; a tunnel source at its cap replaces its own oldest, so
//! no process sharing the agents' address can lock them out). Accept errors back off
//! (`relay_wire::accept`); the admin port serves `GET /metrics` ([`admin`]).

mod accounting;
mod admin;
mod client;
pub mod feed;
pub mod file;
pub mod guards;
mod listen;
pub mod metrics;
mod pending;
mod pool;
mod public;
mod relay;
mod replay;
mod replicas;
pub mod sni;
mod tunnel;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use accounting::Accounting;
pub use accounting::RouteRow;
use client::Client;
pub use guards::{ClientNetwork, Guards, RateLimit};
pub use metrics::{Metrics, PendingRow};
use pending::{Pending, PendingSlot, Stage};
use public::shows_probe_token;
use relay_wire::accept::Backoff;
pub use relay_wire::alpn::{ProbeFor, ProbeKey, ProbeSigner};
pub use relay_wire::idle::Timeouts;
use relay_wire::wire::TICKET_LEN;
pub use replicas::ReplicaRow;

/// One route: a hostname served by one job's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteConfig {
    /// The route's ID (the agent names it in its `Hello`).
    pub route_id: String,
    /// Host names routed to it (canonical and customer), matched case-insensitively.
    pub hostnames: Vec<String>,
    /// The public half of the route key its agents hold (Ed25519, base64url): an agent's
    /// `Hello` is signed by the route key over its TLS session, and checked with this. A
    /// gateway host holds nothing it could present for a route (issue 40).
    pub route_public_key: String,
    /// Send a PROXY v2 header before the client's bytes, so the app sees the client address.
    #[serde(default)]
    pub proxy_protocol: bool,
    /// Open public connections allowed at once; more are closed and counted.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// A standby route (a redeploy's successor being validated): its hostnames are not
    /// routed to it. Only a client naming it by ALPN (`svc-route/<route ID>`, with one of its
    /// hostnames as SNI) reaches it, and an ACME server's tls-alpn-01 validation (offering
    /// `acme-tls/1` alone), so that its agent can be issued its certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standby: bool,
    /// Who may connect, and how fast (the project's `access`): open when absent.
    #[serde(default, skip_serializing_if = "Guards::is_open")]
    pub guards: Guards,
}

fn default_max_connections() -> usize {
    1024
}

/// How a gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Public TLS port (clients).
    pub public: SocketAddr,
    /// Tunnel port (agents): TLS control connections and plain data connections.
    pub tunnel: SocketAddr,
    /// Admin port for `/metrics` (keep it on loopback).
    pub admin: SocketAddr,
    /// The gateway's own certificate chain and key for the tunnel port (PEM).
    pub tunnel_cert_pem: String,
    /// Its private key (PEM).
    pub tunnel_key_pem: String,
    /// Largest ClientHello read (default 16 KiB).
    pub client_hello_max: usize,
    /// Time allowed for the ClientHello (default 10 s).
    pub client_hello_timeout: Duration,
    /// Time allowed for an agent's data connection (default 10 s).
    pub data_connect_timeout: Duration,
    /// How often agents must send a heartbeat (default 1 s). An agent silent for 2.5 of these
    /// is out of rotation; its control connection is closed after three, and never under
    /// 5 s (`relay_wire::wire::dead_after`).
    pub heartbeat: Duration,
    /// How long a replica has to answer a `Connect` with its data connection before the
    /// connection is offered to another replica of the route, when it has one (default 2 s).
    /// The unanswering replica is out of rotation for 5 s. A route's last replica gets all of
    /// `data_connect_timeout`.
    pub replica_answer_timeout: Duration,
    /// When a routed connection that neither side closed is over: 5 minutes without a byte
    /// either way, or 10 s without one after a side ended its sending (default).
    pub timeouts: Timeouts,
    /// The share of a route's `max_connections` one client (an IPv4 address, an IPv6 /64) may
    /// hold, in percent (default 25; at least one connection).
    pub client_share_percent: u32,
    /// Connections one client may have still sending their ClientHello, across the gateway
    /// (default 64).
    pub client_hellos_per_client: usize,
    /// Connections one source (counted as a client is) may have on the tunnel port before
    /// their first bytes (a data connection's tag and ticket), and as many again in their TLS
    /// handshake and before an accepted `Hello` (default 256: a host running many agents
    /// opens a data connection per new public connection, each pending for a round trip).
    /// Beyond it the source's oldest connection in that stage is closed, never the newcomer:
    /// the agents' own connections come from the address of everything else on their host.
    pub tunnel_pending_per_source: usize,
    /// Time allowed for each step before a tunnel connection is established: its first bytes,
    /// the TLS handshake, the `Hello` (default 10 s). A data connection's ticket must follow
    /// its tag within 1 s, or this if less.
    pub tunnel_step_timeout: Duration,
    /// Connections not yet routed or authenticated, both ports together, at most; beyond it
    /// the oldest is closed (default [`pending_cap_for_open_files`]).
    pub max_pending: usize,
    /// Pre-dialed data connections held per agent session, at most (the least of this and
    /// the agent's offer; default 2; 0: none, every data connection is asked for when a
    /// client comes). See `pool`.
    pub pool_per_replica: usize,
    /// Pre-dialed data connections held, plus tickets handed out for them, across the
    /// gateway, at most (default a quarter of `max_pending`, and at least 16).
    pub max_pooled: usize,
}

/// The most pending connections by default, however many descriptors the process may open.
pub const MAX_PENDING: usize = 16_384;

/// The fewest pending connections allowed by default, however few descriptors.
const MIN_PENDING: usize = 16;

/// The default [`GatewayConfig::max_pending`]: [`MAX_PENDING`], or half of the connections
/// `relay_wire::limits::connection_cap` allows under this process's open-file limit if that is less
/// (384 under `ulimit -n 1024`: a quarter of the limit is kept for the rest of the process,
/// half of the remainder for routed connections and agents), and at least 16.
pub fn pending_cap_for_open_files() -> usize {
    match relay_wire::limits::connection_cap(2 * MAX_PENDING) {
        Ok(room) => (room / 2).clamp(MIN_PENDING, MAX_PENDING),
        Err(_) => MIN_PENDING,
    }
}

impl GatewayConfig {
    /// Defaults for everything but the addresses and the tunnel certificate.
    pub fn new(public: SocketAddr, tunnel: SocketAddr, admin: SocketAddr, cert_pem: String, key_pem: String) -> Self {
        GatewayConfig {
            public,
            tunnel,
            admin,
            tunnel_cert_pem: cert_pem,
            tunnel_key_pem: key_pem,
            client_hello_max: 16 * 1024,
            client_hello_timeout: Duration::from_secs(10),
            data_connect_timeout: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            replica_answer_timeout: Duration::from_secs(2),
            timeouts: Timeouts::DEFAULT,
            client_share_percent: 25,
            client_hellos_per_client: 64,
            tunnel_pending_per_source: 256,
            tunnel_step_timeout: Duration::from_secs(10),
            max_pending: pending_cap_for_open_files(),
            pool_per_replica: 2,
            max_pooled: (pending_cap_for_open_files() / 4).max(MIN_PENDING),
        }
    }

    /// The heartbeat agents are told to keep (`heartbeat` in whole seconds, at least one: the
    /// `Welcome` carries seconds), which every silence is measured against.
    pub fn announced_heartbeat(&self) -> Duration {
        Duration::from_secs(self.heartbeat.as_secs().max(1))
    }

    /// The connections of a route with `max_connections` one client may hold.
    pub fn client_share(&self, max_connections: usize) -> usize {
        let percent = usize::try_from(self.client_share_percent.min(100)).unwrap_or(100);
        (max_connections.saturating_mul(percent) / 100).max(1)
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The tunnel certificate or key is not usable.
    #[error("the tunnel certificate or key is not usable: {0}")]
    Tls(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The gateway's task ended before its ports were bound.
    #[error("the gateway stopped before it was ready")]
    Stopped,
}

/// A running gateway's shared state.
#[derive(Debug)]
pub struct Gateway {
    config: GatewayConfig,
    routes: RwLock<HashMap<String, Arc<RouteConfig>>>,
    by_host: RwLock<HashMap<String, Arc<RouteConfig>>>,
    /// Standby routes by hostname (for ACME validations only).
    standby_by_host: RwLock<HashMap<String, Arc<RouteConfig>>>,
    accounting: Arc<Accounting>,
    /// Connections not yet routed or authenticated, both ports.
    pending: Arc<Pending>,
    /// Every route's agents, and which one a new connection goes to.
    replicas: replicas::Replicas,
    /// Guarded routes' rate buckets and refusal counts.
    guards: guards::GuardState,
    /// Public connections waiting for their data connection, by ticket.
    tickets: Mutex<HashMap<[u8; TICKET_LEN], oneshot::Sender<TcpStream>>>,
    /// Pre-dialed data connections, and the tickets handed out for them.
    pools: pool::Pools,
    /// What every public connection gets from its listener: `TCP_NODELAY`.
    public_sockets: listen::Options,
    /// What every tunnel connection gets from its listener: `TCP_NODELAY` and keepalive.
    tunnel_sockets: listen::Options,
    /// Counters.
    pub metrics: Metrics,
    /// The route feed's state, when a coordinator feeds the routes.
    feed: feed::FeedState,
    /// The public halves of the coordinators' probe keys: a probe token signed by one of them
    /// passes a route's guards ([`shows_probe_token`]). The gateway holds no key that signs.
    probe_keys: RwLock<Arc<[ProbeKey]>>,
}

/// The bound addresses of a started gateway.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// Public TLS port.
    pub public: SocketAddr,
    /// Tunnel port.
    pub tunnel: SocketAddr,
    /// Admin port.
    pub admin: SocketAddr,
}

impl Gateway {
    /// A gateway with no routes.
    pub fn new(config: GatewayConfig) -> Arc<Gateway> {
        Arc::new(Gateway {
            pending: Arc::new(Pending::new(config.max_pending)),
            pools: pool::Pools::new(config.max_pooled),
            public_sockets: listen::Options::new(None),
            tunnel_sockets: listen::Options::new(Some(pool::KEEPALIVE)),
            replicas: replicas::Replicas::new(config.announced_heartbeat()),
            guards: guards::GuardState::default(),
            config,
            routes: RwLock::default(),
            by_host: RwLock::default(),
            standby_by_host: RwLock::default(),
            accounting: Arc::default(),
            tickets: Mutex::default(),
            metrics: Metrics::default(),
            feed: feed::FeedState::default(),
            probe_keys: RwLock::new(Arc::from(Vec::new())),
        })
    }

    /// Replaces the coordinators' probe keys (public halves) that probe tokens are checked
    /// against; the first [`relay_wire::alpn::MAX_PROBE_KEYS`] different ones are kept.
    pub fn set_probe_keys(&self, keys: Vec<ProbeKey>) {
        let mut kept: Vec<ProbeKey> = Vec::new();
        for key in keys {
            if kept.len() < relay_wire::alpn::MAX_PROBE_KEYS && !kept.contains(&key) {
                kept.push(key);
            }
        }
        let keys = kept;
        if let Ok(mut held) = self.probe_keys.write() {
            *held = Arc::from(keys);
        }
    }

    /// The probe keys held now.
    pub fn probe_keys(&self) -> Arc<[ProbeKey]> {
        self.probe_keys.read().map_or_else(|_| Arc::from(Vec::new()), |k| k.clone())
    }

    /// Whether a ClientHello naming `server_name` and offering probe `token` (what follows
    /// `svc-probe/`) now would pass the guards of the route serving that name (or of route
    /// `route_id`, if given, as `svc-route/` names it): what the public port decides.
    pub fn probe_passes(&self, server_name: &str, route_id: Option<&str>, token: &[u8]) -> bool {
        let hello = sni::Hello {
            server_name: server_name.to_ascii_lowercase(),
            route_id: route_id.map(str::to_owned),
            acme_tls: false,
            probe: Some(token.to_vec()),
            replica: None,
            bytes: Vec::new(),
        };
        self.route_for_hello(&hello).is_some_and(|route| shows_probe_token(&hello, &route, &self.probe_keys()))
    }

    /// Replaces the route table. Counts are kept by route ID, so this never changes one: a
    /// route that stays keeps its open connections' slots, and open connections of a removed
    /// route keep going (and counting) until they close; its agent is refused at its next
    /// connection.
    pub fn set_routes(&self, routes: Vec<RouteConfig>) {
        let mut by_id = HashMap::new();
        let mut by_host = HashMap::new();
        let mut standby_by_host = HashMap::new();
        for config in routes {
            let route = Arc::new(config);
            let hosts = if route.standby { &mut standby_by_host } else { &mut by_host };
            for host in &route.hostnames {
                hosts.insert(host.to_ascii_lowercase(), route.clone());
            }
            by_id.insert(route.route_id.clone(), route);
        }
        let ids: Vec<String> = by_id.keys().cloned().collect();
        self.replicas.keep_counts_of(ids.iter().map(String::as_str));
        self.guards.keep(by_id.values().filter(|r| !r.guards.is_open()).map(|r| r.route_id.as_str()));
        self.accounting.configure(ids.iter().map(String::as_str), || {
            if let (Ok(mut r), Ok(mut h), Ok(mut s)) =
                (self.routes.write(), self.by_host.write(), self.standby_by_host.write())
            {
                *r = by_id;
                *h = by_host;
                *s = standby_by_host;
            }
        });
    }

    fn route_for_host(&self, host: &str) -> Option<Arc<RouteConfig>> {
        self.by_host.read().ok()?.get(host).cloned()
    }

    /// The route a ClientHello goes to: the one its ALPN names, if that route serves its
    /// server name; for an ACME validation, of the name's standby route (a redeploy's
    /// successor) and its serving route, the one with an agent whose challenge is pending,
    /// else the standby route; else the name's route.
    fn route_for_hello(&self, hello: &sni::Hello) -> Option<Arc<RouteConfig>> {
        let name = &hello.server_name;
        if let Some(id) = &hello.route_id {
            return self.route(id).filter(|r| r.hostnames.iter().any(|h| h.eq_ignore_ascii_case(name)));
        }
        let serving = self.route_for_host(name);
        if !hello.acme_tls {
            return serving;
        }
        let standby = self.standby_by_host.read().ok().and_then(|s| s.get(name).cloned());
        let pending = [&standby, &serving]
            .into_iter()
            .flatten()
            .find(|r| self.replicas.with_acme_pending(&r.route_id).is_some())
            .cloned();
        pending.or(standby).or(serving)
    }

    fn route(&self, id: &str) -> Option<Arc<RouteConfig>> {
        self.routes.read().ok()?.get(id).cloned()
    }

    /// Connections of route `route_id` holding a slot now: routed, or waiting for their data
    /// connection (what the `svc_gateway_route_active_connections` gauge shows).
    pub fn active_connections(&self, route_id: &str) -> usize {
        self.accounting.active(route_id)
    }

    /// Agents of route `route_id` connected now (their tunnels are up).
    pub fn agents(&self, route_id: &str) -> u64 {
        self.accounting.agents(route_id)
    }

    /// Every route's counts (configured routes, and removed ones still in use).
    pub fn route_rows(&self) -> Vec<RouteRow> {
        self.accounting.rows()
    }

    /// Every route's replicas: how many are in rotation, and where connections went.
    pub fn replica_rows(&self) -> Vec<ReplicaRow> {
        self.replicas.rows()
    }

    /// Each agent session of route `route_id`: its pre-dialed data connections held, plus the
    /// tickets handed out for more, now.
    pub fn pooled(&self, route_id: &str) -> Vec<usize> {
        self.replicas.pooled(route_id)
    }

    /// Connections not yet routed or authenticated, and the most allowed at once.
    pub fn pending_connections(&self) -> PendingRow {
        PendingRow { open: self.pending.len(), cap: self.pending.cap() }
    }

    /// Whether every pending count is back to zero (no pending connection, no source counted).
    pub fn pending_is_idle(&self) -> bool {
        self.pending.is_idle()
    }

    /// The route feed's state (a gateway following a coordinator: `svc gateway run`).
    pub fn feed(&self) -> &feed::FeedState {
        &self.feed
    }

    /// How many routes are configured now.
    pub fn route_count(&self) -> usize {
        self.routes.read().map_or(0, |r| r.len())
    }

    /// The Prometheus text exposition served on the admin port.
    pub fn render_metrics(&self) -> String {
        let mut out = self.metrics.render(&self.accounting.rows(), self.pending_connections());
        metrics::render_pool(&mut out, &self.metrics, self.pools.total());
        out += "# HELP svc_gateway_routes Routes configured now.\n";
        out += "# TYPE svc_gateway_routes gauge\n";
        out += &format!("svc_gateway_routes {}\n", self.route_count());
        metrics::render_replicas(&mut out, &self.replicas.rows());
        metrics::render_refused(&mut out, &self.guards.refused());
        self.feed.render(&mut out);
        out
    }

    /// Admits a new connection from `peer` in `stage` as pending: `None` if its source has
    /// `per_source` pending there already and the stage refuses newcomers (the caller counts
    /// the refusal and drops it). When another pending connection is closed to make room
    /// (the gateway's oldest at its cap, or the source's oldest in a tunnel stage), the accept
    /// loop lets it go before accepting more.
    async fn admit(&self, stage: Stage, peer: SocketAddr, per_source: usize) -> Option<PendingSlot> {
        match self.pending.admit(stage, Client::of(peer.ip()), per_source) {
            Ok((slot, pending::Admitted::Free)) => Some(slot),
            Ok((slot, pending::Admitted::Evicted(why))) => {
                if why == pending::Evicted::Cap {
                    self.metrics.evicted("pending_cap");
                }
                // The evicted connection's task closes its socket (or, a data connection
                // whose ticket has come, goes on): let it run, and every task whose bytes
                // have come, before the next accept takes another descriptor.
                tokio::task::yield_now().await;
                Some(slot)
            }
            Err(pending::SourceLimit) => None,
        }
    }

    /// Spawns [`Gateway::run`] and waits until its ports are bound: the running task and the
    /// bound addresses, or why it could not start.
    pub async fn start(
        self: Arc<Self>,
    ) -> Result<(tokio::task::JoinHandle<Result<(), GatewayError>>, Bound), GatewayError> {
        let (bound_tx, bound_rx) = oneshot::channel();
        let task = tokio::spawn(self.run(move |b| {
            let _ = bound_tx.send(b);
        }));
        match bound_rx.await {
            Ok(bound) => Ok((task, bound)),
            Err(_) => Err(match task.await {
                Ok(Err(e)) => e,
                _ => GatewayError::Stopped,
            }),
        }
    }

    /// Binds the three ports and serves until the task is dropped.
    pub async fn run(self: Arc<Self>, on_bound: impl FnOnce(Bound)) -> Result<(), GatewayError> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr).await.map_err(|source| GatewayError::Bind { addr, source })
        };
        let public = bind(self.config.public).await?;
        let tunnel_listener = bind(self.config.tunnel).await?;
        let admin = bind(self.config.admin).await?;
        self.public_sockets.listen(&public);
        self.tunnel_sockets.listen(&tunnel_listener);
        let tls = tunnel::server_config(&self.config.tunnel_cert_pem, &self.config.tunnel_key_pem)?;
        let addr = |l: &TcpListener, fallback| l.local_addr().unwrap_or(fallback);
        let bound = Bound {
            public: addr(&public, self.config.public),
            tunnel: addr(&tunnel_listener, self.config.tunnel),
            admin: addr(&admin, self.config.admin),
        };
        let local = listen::fixed_local_address(bound.public);
        on_bound(bound);
        let admin_task = tokio::spawn(admin::serve(self.clone(), admin));
        let tunnel_task = tokio::spawn(tunnel::accept_loop(self.clone(), tunnel_listener, tls));
        let mut backoff = Backoff::default();
        loop {
            match backoff.accept(&public).await {
                Ok((stream, peer)) => {
                    match self.admit(Stage::ClientHello, peer, self.config.client_hellos_per_client).await {
                        Some(pending) => {
                            let gw = self.clone();
                            tokio::spawn(async move { gw.public_connection(stream, peer, local, pending).await });
                        }
                        None => self.metrics.outcome("client_hello_limit"),
                    }
                }
                Err(_) => self.metrics.accept_error("public"),
            }
            if admin_task.is_finished() || tunnel_task.is_finished() {
                return Ok(());
            }
        }
    }
}
