//! Issue 14: "Every route dies after about 1,000 ordinary connections" on `svc relay serve`,
//! whose engine refreshes the gateway's routes four times a second. 200,000 connections go
//! through one route while the routes are refreshed every 20 ms, with the same list and with
//! changed ones: every connection is routed, none refused, and every count returns to 0.
//!
//! Bounded: 64 connections at a time, each a real ClientHello answered by the in-test agent
//! (over a real data connection with its ticket) and closed by a reset, so no socket waits
//! in TIME-WAIT and the ephemeral ports last (400,000 connections in all).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use relay_api::gateway::RouteConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::{Answer, HOST, ROUTE, active_gauge, client_hello, eventually, refusals, route, start, test_agent};

/// Connections through the route (`SVC_SOAK_CONNECTIONS` may lower it for a quick look).
const CONNECTIONS: u64 = 200_000;
/// Connections open at once.
const CONCURRENCY: usize = 64;
/// Time between route refreshes.
const REFRESH: Duration = Duration::from_millis(20);

/// One client: a ClientHello, the agent's `ok`, then a reset. Whether it was answered.
async fn one_client(public: std::net::SocketAddr, hello: &[u8]) -> bool {
    let Ok(mut stream) = TcpStream::connect(public).await else { return false };
    let mut ok = [0u8; 2];
    let answered = stream.write_all(hello).await.is_ok() && stream.read_exact(&mut ok).await.is_ok() && &ok == b"ok";
    let _ = stream.set_zero_linger();
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_still_serves_after_200000_connections_across_route_refreshes() {
    let connections = std::env::var("SVC_SOAK_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(CONNECTIONS);
    let w = start("soak", route(1024), |_| {}).await;
    let hello = Arc::new(client_hello(&w.ca_pem, HOST));
    test_agent(&w, Answer::Reply { hello_len: hello.len() }).await;

    // The refresher: the same routes, another route beside, an extra hostname, a larger limit.
    let stop = Arc::new(AtomicBool::new(false));
    let refresher = {
        let (gateway, stop) = (w.gateway.clone(), stop.clone());
        tokio::spawn(async move {
            let other = RouteConfig { route_id: "r2".into(), hostnames: vec!["b.localhost".into()], ..route(8) };
            let lists = [
                vec![route(1024)],
                vec![route(1024), other],
                vec![RouteConfig { hostnames: vec![HOST.into(), "c.localhost".into()], ..route(1024) }],
                vec![route(2048)],
            ];
            let mut refreshes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                gateway.set_routes(lists[(refreshes % 4) as usize].clone());
                refreshes += 1;
                tokio::time::sleep(REFRESH).await;
            }
            gateway.set_routes(vec![route(1024)]);
            refreshes
        })
    };

    let started = Instant::now();
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let unanswered = Arc::new(AtomicU64::new(0));
    for _ in 0..connections {
        let permit = permits.clone().acquire_owned().await.expect("the semaphore stays open");
        let (hello, unanswered, public) = (hello.clone(), unanswered.clone(), w.bound.public);
        tokio::spawn(async move {
            if !one_client(public, &hello).await {
                unanswered.fetch_add(1, Ordering::Relaxed);
            }
            drop(permit);
        });
    }
    // Every client has finished once every permit is back.
    let _all = permits.acquire_many(CONCURRENCY as u32).await.expect("the semaphore stays open");
    stop.store(true, Ordering::Relaxed);
    let refreshes = refresher.await.expect("the refresher");
    let elapsed = started.elapsed();
    eprintln!("soak: {connections} connections, {refreshes} route refreshes in {elapsed:?}");

    assert!(refreshes >= 50, "only {refreshes} refreshes happened during the soak");
    assert_eq!(unanswered.load(Ordering::Relaxed), 0, "clients not answered");
    assert_eq!(refusals(&w.gateway), Default::default(), "refused connections");
    assert_eq!(w.gateway.metrics.outcome_count("routed"), connections);
    let gateway = w.gateway.clone();
    // The last resets may still be on their way to the gateway.
    assert!(
        eventually(Duration::from_secs(5), || gateway.active_connections(ROUTE) == 0).await,
        "{} slots still held",
        gateway.active_connections(ROUTE)
    );
    assert_eq!(active_gauge(&w.gateway, ROUTE), Some(0));
    assert!(gateway.pending_is_idle(), "pending counts left: {:?}", gateway.pending_connections());
    let row = w.gateway.route_rows().into_iter().find(|r| r.route_id == ROUTE).expect("the route's row");
    assert_eq!((row.routed, row.active), (connections, 0));
    // The other route was removed at the end, and it never had a connection: its row is gone.
    assert!(w.gateway.route_rows().iter().all(|r| r.route_id == ROUTE), "{:?}", w.gateway.route_rows());
}
