//! Issue 14, point 3, as a reviewer attacked the merged gateway: "Five client addresses lock a
//! route out". 256 completed TLS connections from each of 127.0.0.2 to 127.0.0.6, left idle,
//! held the route's 1,024 slots (a quarter per client allows four addresses to fill it), and
//! real clients were refused. Now a full route makes room for a newcomer whose client holds
//! fewer connections than the largest holder, by closing that holder's longest-idle one; only
//! a newcomer whose client already holds the most is refused.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent::serve::Limits;
use relay_api::gateway::Gateway;
use relay_api::validation::https;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::client::TlsStream;

use super::attacks::{connect_from, real_agent_with, served};
use super::{HOST, ROUTE, active_gauge, eventually, route, start};

/// The attackers' addresses (the last byte of 127.0.0.x).
const ATTACKERS: [u8; 5] = [2, 3, 4, 5, 6];
/// Connections each attacker opens: its whole share of the default route (a quarter of 1,024).
const PER_ATTACKER: usize = 256;
/// Handshakes under way at once per attacker: below the 64 ClientHellos one address may have
/// in progress.
const AT_ONCE: usize = 32;

/// An attacker's connection: a TLS handshake with the agent through the gateway, then nothing.
async fn hold(from: [u8; 4], public: SocketAddr, tls: Arc<ClientConfig>) -> Option<TlsStream<TcpStream>> {
    let tcp = connect_from(from, public).await;
    let name = ServerName::try_from(HOST).expect("a server name");
    tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.ok()
}

/// The connections still open, by attacker address, and the held connections back. A
/// connection the gateway closed ends its read at once; an open one stays silent.
async fn still_open(held: Vec<(u8, TlsStream<TcpStream>)>) -> (Vec<(u8, TlsStream<TcpStream>)>, BTreeMap<u8, usize>) {
    let mut checks = JoinSet::new();
    for (from, mut stream) in held {
        checks.spawn(async move {
            let mut byte = [0u8; 1];
            let ended = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte)).await.is_ok();
            (from, stream, ended)
        });
    }
    let (mut kept, mut open) = (Vec::new(), BTreeMap::new());
    for (from, stream, ended) in checks.join_all().await {
        if !ended {
            *open.entry(from).or_default() += 1;
        }
        kept.push((from, stream));
    }
    (kept, open)
}

/// The routed connections less those closed to make room: what the gauge must show while
/// no connection ends by itself.
fn routed_less_evicted(g: &Gateway) -> u64 {
    g.metrics.outcome_count("routed") - g.metrics.eviction_count("route_full")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_addresses_holding_every_slot_of_a_route_leave_a_new_client_served() {
    // Each held connection takes four descriptors here: the attacker's socket, the gateway's
    // two, and the agent's end of the data connection.
    super::raise_open_files_limit();
    // The defaults: 1,024 slots, a quarter per client, 5 minutes idle (the agent's too).
    let w = start("five", route(1024), |_| {}).await;
    real_agent_with(&w, Limits::DEFAULT).await;
    let tls = https::client_config(&w.ca_pem).expect("roots");
    let mut held = Vec::new();
    for last in ATTACKERS {
        for _ in 0..PER_ATTACKER / AT_ONCE {
            let mut batch = JoinSet::new();
            for _ in 0..AT_ONCE {
                batch.spawn(hold([127, 0, 0, last], w.bound.public, tls.clone()));
            }
            held.extend(batch.join_all().await.into_iter().flatten().map(|s| (last, s)));
        }
    }
    let g = w.gateway.clone();
    let attempts = (ATTACKERS.len() * PER_ATTACKER) as u64;
    let outcomes = g.metrics.outcome_counts();
    eprintln!("five attackers: {outcomes:?}, {} evicted", g.metrics.eviction_count("route_full"));
    // Every attempt was routed, or refused because its client held the most of the full route.
    assert_eq!(g.metrics.outcome_count("routed") + g.metrics.outcome_count("route_limit"), attempts, "{outcomes:?}");
    assert!(g.metrics.eviction_count("route_full") > 0, "the fifth address made room");
    // Exact: the gauge is the route's limit, and the routed connections less those closed.
    assert!(eventually(Duration::from_secs(5), || routed_less_evicted(&g) == 1024).await);
    assert_eq!((g.active_connections(ROUTE), active_gauge(&g, ROUTE)), (1024, Some(1024)));
    let (held, open) = still_open(held).await;
    eprintln!("open connections by attacker address: {open:?}");
    assert_eq!(open.values().sum::<usize>(), 1024, "the gateway closed exactly the evicted connections");
    // Fair: the five addresses share the route (1,024 / 5), none holds more than another + 1.
    assert_eq!(open.len(), 5);
    assert!(open.values().all(|&n| n == 204 || n == 205), "{open:?}");

    // A client from a sixth address is served while the attackers hold their connections.
    let start = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), served(&w, [127, 0, 0, 7])).await.expect("served within 5 s");
    eprintln!("a new client served in {:?} beside 1,024 idle connections", start.elapsed());
    assert_eq!(g.metrics.outcome_count("route_limit") + g.metrics.outcome_count("routed"), attempts + 1);
    // Its connection has closed: 1,023 attackers' connections hold a slot, exactly.
    assert!(eventually(Duration::from_secs(5), || g.active_connections(ROUTE) == 1023).await);
    assert_eq!(routed_less_evicted(&g), 1024, "the newcomer took an attacker's slot and gave it back");
    let (held, open) = still_open(held).await;
    assert_eq!(open.values().sum::<usize>(), 1023);

    // Every count back to 0 once the attackers go.
    drop(held);
    assert!(
        eventually(Duration::from_secs(10), || g.active_connections(ROUTE) == 0).await,
        "{} slots still held",
        g.active_connections(ROUTE)
    );
    assert_eq!(active_gauge(&g, ROUTE), Some(0));
    let row = g.route_rows().into_iter().find(|r| r.route_id == ROUTE).expect("the route's row");
    assert_eq!((row.active, row.agents), (0, 1));
    assert!(g.pending_is_idle(), "{:?}", g.pending_connections());
}
