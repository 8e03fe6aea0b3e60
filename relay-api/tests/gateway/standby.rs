//! Standby routes (a redeploy's successor, validated before any client reaches it): the
//! gateway routes no plain ClientHello to one, only a ClientHello that names it by ALPN
//! (`svc-route/<route ID>`, with one of its hostnames) and an ACME server's tls-alpn-01 check.

use std::sync::Arc;
use std::time::Duration;

use relay_api::gateway::RouteConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{Answer, HOST, ROUTE, World, eventually, route, start, test_agent};

/// The bytes of a real ClientHello for `name` offering `alpn`.
fn hello_offering(w: &World, name: &str, alpn: &[&[u8]]) -> Vec<u8> {
    let mut config = (*agent::tunnel::client_config(&w.ca_pem).expect("client config")).clone();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).expect("name");
    let mut conn = rustls::ClientConnection::new(Arc::new(config), server).expect("client");
    let mut bytes = Vec::new();
    conn.write_tls(&mut bytes).expect("hello");
    bytes
}

/// Sends `hello` and waits for the gateway to count the connection's outcome; returns it.
async fn outcome_of(w: &World, hello: &[u8]) -> &'static str {
    let before: Vec<u64> = OUTCOMES.iter().map(|o| w.gateway.metrics.outcome_count(o)).collect();
    let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
    client.write_all(hello).await.expect("hello");
    let gateway = w.gateway.clone();
    let changed =
        || OUTCOMES.iter().zip(&before).find(|(o, b)| gateway.metrics.outcome_count(o) > **b).map(|(o, _)| *o);
    assert!(eventually(Duration::from_secs(5), || changed().is_some()).await, "the gateway decided");
    changed().unwrap_or("none")
}

const OUTCOMES: [&str; 2] = ["routed", "unknown_sni"];

#[tokio::test]
async fn a_standby_route_is_reached_only_by_its_alpn_name_and_acme() {
    let standby = RouteConfig { standby: true, ..route(8) };
    let w = start("standby", standby, |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
    let by_id = format!("svc-route/{ROUTE}");

    let plain = hello_offering(&w, HOST, &[b"http/1.1"]);
    assert_eq!(outcome_of(&w, &plain).await, "unknown_sni", "no client reaches a standby route by its name");
    let named = hello_offering(&w, HOST, &[b"http/1.1", by_id.as_bytes()]);
    assert_eq!(outcome_of(&w, &named).await, "routed", "the validation names it");
    let acme = hello_offering(&w, HOST, &[b"acme-tls/1"]);
    assert_eq!(outcome_of(&w, &acme).await, "routed", "an ACME server's tls-alpn-01 check reaches it");
    let elsewhere = hello_offering(&w, "b.localhost", &[b"http/1.1", by_id.as_bytes()]);
    assert_eq!(outcome_of(&w, &elsewhere).await, "unknown_sni", "only for one of its own hostnames");
    let other_id = hello_offering(&w, HOST, &[b"http/1.1", b"svc-route/r9"]);
    assert_eq!(outcome_of(&w, &other_id).await, "unknown_sni", "a route that is not there");

    // Serving again (not standby): reached by name, as any route.
    w.gateway.set_routes(vec![route(8)]);
    assert_eq!(outcome_of(&w, &plain).await, "routed");
}
