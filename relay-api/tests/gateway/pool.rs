//! Issue 44, point 4: data connections dialed ahead. An agent that offers a pool in its
//! `Hello` is handed tickets in `Pool` frames, dials and holds a data connection for each; a
//! new client of its route takes one at once (no `Connect`, no dial while it waits), one
//! found dead is skipped, an agent from before pools is served on demand as it was, the pool
//! stays within its bounds under a flood, and an ACME validation let past the allow-list
//! reaches the agent through the pool still marked as a handshake only.
//!
//! The agents here speak the real tunnel protocol in the test, and answer each data
//! connection with a tag saying how it came (`pooled:NAME` or `connect:NAME`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::wire::{self, Control, DATA_MAGIC, TICKET_LEN};
use relay_api::gateway::{Guards, RouteConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::attacks::connect_from;
use super::{HOST, ROUTE, World, client_hello, eventually, hello_offering, route, route_key, start};

/// What an in-test agent saw.
#[derive(Debug, Default)]
struct Stats {
    /// `Connect` frames.
    connects: AtomicUsize,
    /// `Pool` frames, and the tickets in them.
    pool_frames: AtomicUsize,
    tickets: AtomicUsize,
    /// Data connections dialed ahead and held now.
    held_now: AtomicUsize,
    /// The first byte of each held connection the gateway used.
    kinds: Mutex<Vec<u8>>,
}

/// An in-test agent; its control connection closes when it is dropped.
struct TestAgent {
    stats: Arc<Stats>,
    /// Set: every held connection is closed by the agent (and new ones as soon as dialed).
    die: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects replica `name` of route [`ROUTE`] offering `offer` held connections, heartbeating
/// ready (and saying an ACME challenge is pending if `acme`); it answers every data connection
/// once it has read `hello_len` bytes of ClientHello.
async fn test_agent(w: &World, name: &str, offer: u8, acme: bool, hello_len: usize) -> TestAgent {
    let tunnel = w.bound.tunnel;
    let tls = agent::tunnel::client_config(&w.ca_pem).expect("client config");
    let tcp = TcpStream::connect(tunnel).await.expect("tunnel");
    let server = rustls::pki_types::ServerName::try_from("gateway.localhost").expect("name");
    let mut stream = tokio_rustls::TlsConnector::from(tls).connect(server, tcp).await.expect("TLS");
    let hello = Control::hello(route_key(), ROUTE, name, stream.get_ref().1).expect("TLS 1.3").with_pool(offer);
    wire::write_frame(&mut stream, &hello).await.expect("hello");
    assert!(matches!(wire::read_frame(&mut stream).await.expect("welcome"), Control::Welcome { .. }));
    let stats = Arc::new(Stats::default());
    let (die, dying) = watch::channel(false);
    let (name, s) = (name.to_owned(), stats.clone());
    let task = tokio::spawn(async move {
        let (reader, mut writer) = tokio::io::split(stream);
        let (reading, mut frames) = super::control_frames(reader);
        let mut ticker = tokio::time::interval(Duration::from_millis(300));
        let mut seq = 0;
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    seq += 1;
                    let ping = Control::Ping { seq, ready: Some(true), acme };
                    if wire::write_frame(&mut writer, &ping).await.is_err() {
                        break;
                    }
                }
                frame = frames.recv() => match frame {
                    Some(Control::Connect { ticket, .. }) => {
                        s.connects.fetch_add(1, Ordering::Relaxed);
                        let ticket = wire::unhex::<TICKET_LEN>(&ticket).expect("a ticket");
                        tokio::spawn(on_demand(tunnel, ticket, hello_len, format!("connect:{name}")));
                    }
                    Some(Control::Pool { tickets }) => {
                        s.pool_frames.fetch_add(1, Ordering::Relaxed);
                        for ticket in tickets {
                            s.tickets.fetch_add(1, Ordering::Relaxed);
                            let ticket = wire::unhex::<TICKET_LEN>(&ticket).expect("a ticket");
                            let tag = format!("pooled:{name}");
                            tokio::spawn(held(tunnel, ticket, hello_len, tag, s.clone(), dying.clone()));
                        }
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        reading.abort();
    });
    TestAgent { stats, die, task }
}

/// A data connection's head: the tag and its ticket.
async fn present(tunnel: SocketAddr, ticket: [u8; TICKET_LEN]) -> Option<TcpStream> {
    let mut data = TcpStream::connect(tunnel).await.ok()?;
    data.write_all(&[DATA_MAGIC.as_slice(), &ticket].concat()).await.ok()?;
    Some(data)
}

/// The ClientHello read, `tag` sent, closed.
async fn answer(mut data: TcpStream, hello_len: usize, tag: &str) {
    let mut hello = vec![0u8; hello_len];
    if data.read_exact(&mut hello).await.is_ok() {
        let _ = data.write_all(tag.as_bytes()).await;
        let _ = data.shutdown().await;
    }
}

async fn on_demand(tunnel: SocketAddr, ticket: [u8; TICKET_LEN], hello_len: usize, tag: String) {
    if let Some(data) = present(tunnel, ticket).await {
        answer(data, hello_len, &tag).await;
    }
}

/// A data connection dialed ahead: held until its first byte (recorded), then answered; closed
/// at once if the agent is told to die.
async fn held(
    tunnel: SocketAddr,
    ticket: [u8; TICKET_LEN],
    hello_len: usize,
    tag: String,
    s: Arc<Stats>,
    mut dying: watch::Receiver<bool>,
) {
    let Some(mut data) = present(tunnel, ticket).await else { return };
    s.held_now.fetch_add(1, Ordering::Relaxed);
    let mut kind = [0u8; 1];
    let got = tokio::select! {
        got = data.read_exact(&mut kind) => got.is_ok(),
        _ = dying.wait_for(|die| *die) => false,
    };
    s.held_now.fetch_sub(1, Ordering::Relaxed);
    if !got {
        return;
    }
    s.kinds.lock().expect("kinds").push(kind[0]);
    answer(data, hello_len, &tag).await;
}

/// One new public connection for [`HOST`] from `from`, sending `hello`: the tag of what
/// answered, or why nothing did (within 12 s).
async fn ask(w: &World, from: [u8; 4], hello: &[u8]) -> Result<String, String> {
    let mut tcp = connect_from(from, w.bound.public).await;
    tcp.write_all(hello).await.map_err(|e| format!("send: {e}"))?;
    let mut got = Vec::new();
    match tokio::time::timeout(Duration::from_secs(12), tcp.read_to_end(&mut got)).await {
        Ok(Ok(_)) if !got.is_empty() => Ok(String::from_utf8_lossy(&got).into_owned()),
        Ok(Ok(_)) => Err("closed without an answer".to_owned()),
        Ok(Err(e)) => Err(format!("read: {e}")),
        Err(_) => Err("no answer in 12 s".to_owned()),
    }
}

/// The gauge of pre-dialed connections held or asked for now.
fn pooled_gauge(w: &World) -> u64 {
    let metrics = w.gateway.render_metrics();
    metrics.lines().find_map(|l| l.strip_prefix("svc_gateway_pool_connections ")?.parse().ok()).expect("the gauge")
}

/// Waits until `agent` holds `n` connections dialed ahead.
async fn holding(agent: &TestAgent, n: usize) {
    let stats = agent.stats.clone();
    let full = eventually(Duration::from_secs(5), || stats.held_now.load(Ordering::Relaxed) == n).await;
    assert!(full, "the agent holds {n}: {:?}", agent.stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_serves_a_client_without_a_connect_frame() {
    let w = start("pool-served", route(64), |_| {}).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let agent = test_agent(&w, "a", 8, false, hello.len()).await;
    holding(&agent, 2).await;
    assert_eq!(agent.stats.tickets.load(Ordering::Relaxed), 2, "the gateway's target: 2, not the offer of 8");
    for round in 0..5 {
        assert_eq!(ask(&w, [127, 0, 0, 1], &hello).await.as_deref(), Ok("pooled:a"), "round {round}");
        // Refilled after each take.
        holding(&agent, 2).await;
    }
    assert_eq!(agent.stats.connects.load(Ordering::Relaxed), 0, "no Connect frame");
    assert_eq!(*agent.stats.kinds.lock().expect("kinds"), [wire::POOL_SERVE; 5]);
    let m = &w.gateway.metrics;
    assert_eq!((m.pool_count("hit"), m.pool_count("miss"), m.pool_count("dead")), (5, 0, 0));
    assert_eq!(agent.stats.tickets.load(Ordering::Relaxed), 7, "one ticket per connection taken");
    // The session ends: its held connections are closed and its places given back.
    drop(agent);
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(5), || gateway.route_rows()[0].agents == 0).await);
    assert!(eventually(Duration::from_secs(5), || pooled_gauge(&w) == 0).await, "{}", pooled_gauge(&w));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_pooled_connection_is_skipped() {
    let w = start("pool-dead", route(64), |_| {}).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let agent = test_agent(&w, "a", 2, false, hello.len()).await;
    holding(&agent, 2).await;
    // Its held connections die (the agent closes them; a gateway that did not look would send
    // the client into a closed socket).
    agent.die.send_replace(true);
    holding(&agent, 0).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(ask(&w, [127, 0, 0, 1], &hello).await.as_deref(), Ok("connect:a"), "asked on demand instead");
    let m = &w.gateway.metrics;
    assert_eq!((m.pool_count("hit"), m.pool_count("miss"), m.pool_count("dead")), (0, 1, 2));
    assert_eq!(agent.stats.connects.load(Ordering::Relaxed), 1);
    // Refills wait a second after a dead one: the agent is not asked to dial per client.
    let before = agent.stats.tickets.load(Ordering::Relaxed);
    for _ in 0..5 {
        assert_eq!(ask(&w, [127, 0, 0, 1], &hello).await.as_deref(), Ok("connect:a"));
    }
    assert!(agent.stats.tickets.load(Ordering::Relaxed) - before <= 2, "{:?}", agent.stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_agent_without_pool_is_served_on_demand() {
    let w = start("pool-old", route(64), |_| {}).await;
    let hello = client_hello(&w.ca_pem, HOST);
    // Offering none: the `Hello` an agent from before pools sends, byte for byte.
    let agent = test_agent(&w, "", 0, false, hello.len()).await;
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(5), || gateway.replica_rows()[0].in_rotation == 1).await);
    // Heartbeats pass (a pool would be filled at each one).
    tokio::time::sleep(Duration::from_millis(700)).await;
    for _ in 0..3 {
        assert_eq!(ask(&w, [127, 0, 0, 1], &hello).await.as_deref(), Ok("connect:"));
    }
    assert_eq!(agent.stats.connects.load(Ordering::Relaxed), 3);
    // An old agent would take a `Pool` frame for a malformed one and drop its session.
    assert_eq!(agent.stats.pool_frames.load(Ordering::Relaxed), 0, "no Pool frame to an agent that offered none");
    let m = &w.gateway.metrics;
    assert_eq!((m.pool_count("hit"), m.pool_count("miss"), m.pool_count("dead")), (0, 0, 0));
    assert_eq!(pooled_gauge(&w), 0);
}

/// Two replicas offering 8 each, the gateway holding at most 2 per replica and 3 in all:
/// 400 clients, 40 at a time. At no moment (sampled every millisecond) more than 3 are held or
/// asked for, no replica more than 2, and the pool made no more dials than it handed out for
/// connections taken, plus its bound. (The agents' own count of connections not yet bound
/// can pass 2 for a moment: one the gateway gave a client may not have been read yet.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_never_exceeds_its_bound_under_a_connection_flood() {
    const CLIENTS: usize = 400;
    const AT_ONCE: usize = 40;
    const TOTAL: usize = 3;
    let w = start("pool-flood", route(1024), |c| {
        c.pool_per_replica = 2;
        c.max_pooled = TOTAL;
    })
    .await;
    let w = Arc::new(w);
    let hello = Arc::new(client_hello(&w.ca_pem, HOST));
    let agents = [test_agent(&w, "a", 8, false, hello.len()).await, test_agent(&w, "b", 8, false, hello.len()).await];
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(5), || gateway.replica_rows()[0].in_rotation == 2).await);
    let held = || agents.iter().map(|a| a.stats.held_now.load(Ordering::Relaxed)).sum::<usize>();
    assert!(eventually(Duration::from_secs(5), || held() == TOTAL).await, "filled to the gateway's total");

    let (most, most_one) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (stop, stopped) = watch::channel(false);
    let watcher = {
        let (w, most, most_one, mut stopped) = (w.clone(), most.clone(), most_one.clone(), stopped.clone());
        tokio::spawn(async move {
            while !*stopped.borrow() {
                most.fetch_max(pooled_gauge(&w) as usize, Ordering::Relaxed);
                let one = w.gateway.pooled(ROUTE).into_iter().max().unwrap_or(0);
                most_one.fetch_max(one, Ordering::Relaxed);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(1)) => {}
                    _ = stopped.changed() => {}
                }
            }
        })
    };
    drop(stopped);
    let mut clients: JoinSet<Result<String, String>> = JoinSet::new();
    let mut failed = Vec::new();
    for _ in 0..CLIENTS {
        if clients.len() >= AT_ONCE
            && let Some(done) = clients.join_next().await
        {
            failed.extend(done.expect("a client").err());
        }
        let (w, hello) = (w.clone(), hello.clone());
        clients.spawn(async move { ask(&w, [127, 0, 0, 1], &hello).await });
    }
    while let Some(done) = clients.join_next().await {
        failed.extend(done.expect("a client").err());
    }
    stop.send_replace(true);
    watcher.await.expect("the watcher");
    assert!(failed.is_empty(), "{} failed: {:?}", failed.len(), &failed[..failed.len().min(5)]);
    let m = &w.gateway.metrics;
    let hits = m.pool_count("hit") as usize;
    assert!(
        hits > 0 && m.pool_count("dead") == 0,
        "hits {hits}, {:?}",
        agents.iter().map(|a| &a.stats).collect::<Vec<_>>()
    );
    assert!(most.load(Ordering::Relaxed) <= TOTAL, "at most {TOTAL} held or asked for: {most:?}");
    assert!(most_one.load(Ordering::Relaxed) <= 2, "a replica holds or asks for at most 2: {most_one:?}");
    let tickets: usize = agents.iter().map(|a| a.stats.tickets.load(Ordering::Relaxed)).sum();
    assert!(tickets <= hits + TOTAL, "{tickets} tickets for {hits} connections taken");
}

/// An ACME validation from outside a guarded route's allow-list goes to the replica whose
/// challenge is pending, through its pool, and its held connection is told "handshake only";
/// an allowed client's is told "serve".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acme_only_connection_through_the_pool_gets_only_a_handshake() {
    let guards = Guards { allow_clients: vec!["127.0.0.2/32".parse().expect("a network")], rate_limit: None };
    let w = start("pool-acme", RouteConfig { guards, ..route(64) }, |_| {}).await;
    let acme = hello_offering(&w.ca_pem, HOST, vec![b"acme-tls/1".to_vec()]);
    let http = hello_offering(&w.ca_pem, HOST, vec![b"x-test/1.0".to_vec()]);
    let a = test_agent(&w, "a", 2, true, acme.len()).await;
    let b = test_agent(&w, "b", 2, false, acme.len()).await;
    holding(&a, 2).await;
    holding(&b, 2).await;
    for _ in 0..3 {
        assert_eq!(ask(&w, [127, 0, 0, 1], &acme).await.as_deref(), Ok("pooled:a"), "the replica whose order it is");
        holding(&a, 2).await;
    }
    assert_eq!(*a.stats.kinds.lock().expect("kinds"), [wire::POOL_ACME_ONLY; 3]);
    assert!(b.stats.kinds.lock().expect("kinds").is_empty());
    assert_eq!(http.len(), acme.len(), "the agents read a ClientHello of this length");
    let served = ask(&w, [127, 0, 0, 2], &http).await.expect("the allowed client is served");
    assert!(served.starts_with("pooled:"), "{served}");
    let kinds: Vec<u8> = [&a, &b].iter().flat_map(|x| x.stats.kinds.lock().expect("kinds").clone()).collect();
    assert_eq!(kinds.iter().filter(|&&k| k == wire::POOL_SERVE).count(), 1, "{kinds:?}");
    assert_eq!((a.stats.connects.load(Ordering::Relaxed), b.stats.connects.load(Ordering::Relaxed)), (0, 0));
}
