//! The gateway's refusals, in process on loopback: an oversized or slow ClientHello, a
//! ClientHello without a server name, a route at its connection limit. Each is closed
//! without a single byte and counted. A small in-test agent holds the route's tunnel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent::wire::{self, Control, DATA_MAGIC, TICKET_LEN};
use relay_api::ca::DevCa;
use relay_api::gateway::{Bound, Gateway, GatewayConfig, RouteConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOST: &str = "a.localhost";

struct World {
    gateway: Arc<Gateway>,
    bound: Bound,
    ca_pem: String,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn start(name: &str) -> World {
    let dir = std::env::temp_dir().join(format!("svc-gateway-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ca = DevCa::open(&dir).expect("CA");
    let (chain, key) = ca.issue(&["gateway.localhost".to_owned()], Duration::from_secs(3600)).expect("cert");
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut config = GatewayConfig::new(any, any, any, chain, key);
    config.client_hello_timeout = Duration::from_secs(1);
    config.heartbeat = Duration::from_secs(1);
    let gateway = Gateway::new(config);
    gateway.set_routes(vec![RouteConfig {
        route_id: "r1".into(),
        hostnames: vec![HOST.into()],
        credential_sha256: wire::sha256_hex(b"credential"),
        proxy_protocol: false,
        max_connections: 1,
    }]);
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(gateway.clone().run(move |b| {
        let _ = tx.send(b);
    }));
    let bound = rx.await.expect("the gateway binds");
    World { gateway, bound, ca_pem: ca.cert_pem().to_owned(), _dir: TempDir(dir) }
}

/// Connects an agent for route `r1` that accepts every data connection and holds it open.
async fn agent(world: &World) {
    let tls = agent::tunnel::client_config(&world.ca_pem).expect("client config");
    let tcp = TcpStream::connect(world.bound.tunnel).await.expect("tunnel");
    let name = rustls::pki_types::ServerName::try_from("gateway.localhost").expect("name");
    let mut stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.expect("TLS");
    wire::write_frame(&mut stream, &Control::Hello { route_id: "r1".into(), credential: "credential".into() })
        .await
        .expect("hello");
    assert!(matches!(wire::read_frame(&mut stream).await.expect("welcome"), Control::Welcome { .. }));
    let tunnel = world.bound.tunnel;
    tokio::spawn(async move {
        let (mut reader, mut writer) = tokio::io::split(stream);
        tokio::spawn(async move {
            let mut seq = 0;
            loop {
                seq += 1;
                if wire::write_frame(&mut writer, &Control::Ping { seq }).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        while let Ok(frame) = wire::read_frame(&mut reader).await {
            if let Control::Connect { ticket } = frame {
                let ticket = wire::unhex::<TICKET_LEN>(&ticket).expect("ticket");
                tokio::spawn(async move {
                    let mut data = TcpStream::connect(tunnel).await.expect("data");
                    data.write_all(DATA_MAGIC).await.expect("magic");
                    data.write_all(&ticket).await.expect("ticket");
                    let mut sink = vec![0u8; 4096];
                    while matches!(data.read(&mut sink).await, Ok(n) if n > 0) {}
                });
            }
        }
    });
}

/// The bytes of a real ClientHello for `name`.
fn client_hello(ca_pem: &str, name: &str) -> Vec<u8> {
    let config = agent::tunnel::client_config(ca_pem).expect("client config");
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).expect("name");
    let mut conn = rustls::ClientConnection::new(config, server).expect("client");
    let mut bytes = Vec::new();
    conn.write_tls(&mut bytes).expect("hello");
    bytes
}

/// Reads until the gateway closes; every byte it sent (none expected), and how long it took.
async fn drained(stream: &mut TcpStream) -> (Vec<u8>, Duration) {
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got)).await;
    (got, start.elapsed())
}

#[tokio::test]
async fn an_oversized_client_hello_is_closed_without_a_byte_and_counted() {
    let w = start("large").await;
    let mut s = TcpStream::connect(w.bound.public).await.expect("connect");
    // A handshake record announcing a 20 KiB ClientHello, then its first 17 KiB.
    let mut record = vec![0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x4e, 0x20];
    record.resize(17 * 1024, 0);
    let _ = s.write_all(&record).await;
    let (got, _) = drained(&mut s).await;
    assert!(got.is_empty());
    assert_eq!(w.gateway.metrics.outcome_count("client_hello_too_large"), 1);
}

#[tokio::test]
async fn a_slow_client_hello_is_closed_at_the_limit_and_counted() {
    let w = start("slow").await;
    let mut s = TcpStream::connect(w.bound.public).await.expect("connect");
    let hello = client_hello(&w.ca_pem, HOST);
    s.write_all(&hello[..10]).await.expect("part");
    let (got, waited) = drained(&mut s).await;
    assert!(got.is_empty());
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(3), "{waited:?}");
    assert_eq!(w.gateway.metrics.outcome_count("client_hello_timeout"), 1);
}

#[tokio::test]
async fn a_client_hello_without_a_name_is_never_routed() {
    let w = start("nosni").await;
    agent(&w).await;
    let mut s = TcpStream::connect(w.bound.public).await.expect("connect");
    // An IP address as the server name: rustls sends no SNI.
    s.write_all(&client_hello(&w.ca_pem, "127.0.0.1")).await.expect("hello");
    let (got, _) = drained(&mut s).await;
    assert!(got.is_empty());
    assert_eq!(w.gateway.metrics.outcome_count("no_sni"), 1);
    assert_eq!(w.gateway.metrics.outcome_count("routed"), 0);
}

#[tokio::test]
async fn a_route_at_its_connection_limit_refuses_the_next_connection() {
    let w = start("limit").await;
    agent(&w).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let mut first = TcpStream::connect(w.bound.public).await.expect("connect");
    first.write_all(&hello).await.expect("hello");
    // Wait until the first is routed (the agent holds it open).
    for _ in 0..100 {
        if w.gateway.metrics.outcome_count("routed") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(w.gateway.metrics.outcome_count("routed"), 1);
    let mut second = TcpStream::connect(w.bound.public).await.expect("connect");
    second.write_all(&hello).await.expect("hello");
    let (got, _) = drained(&mut second).await;
    assert!(got.is_empty());
    assert_eq!(w.gateway.metrics.outcome_count("route_limit"), 1);
    // The limit counts open connections: once the first closes, a new one is routed.
    drop(first);
    for _ in 0..100 {
        let mut third = TcpStream::connect(w.bound.public).await.expect("connect");
        third.write_all(&hello).await.expect("hello");
        tokio::time::sleep(Duration::from_millis(50)).await;
        if w.gateway.metrics.outcome_count("routed") == 2 {
            return;
        }
    }
    panic!("the slot was never released");
}
