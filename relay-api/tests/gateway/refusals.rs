//! The gateway's refusals and the end of routed connections: an oversized or slow
//! ClientHello, a ClientHello without a server name, a route at its connection limit (each
//! closed without a single byte and counted); slots given back across route refreshes, on a
//! half-close and after the idle timeout.

use std::time::Duration;

use agent::idle::Timeouts;
use relay_api::gateway::RouteConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{Answer, HOST, ROUTE, active_gauge, client_hello, drained, eventually, refusals, route, start, test_agent};

#[tokio::test]
async fn an_oversized_client_hello_is_closed_without_a_byte_and_counted() {
    let w = start("large", route(1), |_| {}).await;
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
    let w = start("slow", route(1), |_| {}).await;
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
    let w = start("nosni", route(1), |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
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
    let w = start("limit", route(1), |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let mut first = TcpStream::connect(w.bound.public).await.expect("connect");
    first.write_all(&hello).await.expect("hello");
    // Wait until the first is routed (the agent holds it open).
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(2), || gateway.metrics.outcome_count("routed") == 1).await);
    let mut second = TcpStream::connect(w.bound.public).await.expect("connect");
    second.write_all(&hello).await.expect("hello");
    let (got, _) = drained(&mut second).await;
    assert!(got.is_empty());
    assert_eq!(w.gateway.metrics.outcome_count("route_limit"), 1);
    // The limit counts open connections: once the first closes, a new one is routed.
    drop(first);
    assert!(eventually(Duration::from_secs(2), || gateway.active_connections(ROUTE) == 0).await);
    let mut third = TcpStream::connect(w.bound.public).await.expect("connect");
    third.write_all(&hello).await.expect("hello");
    assert!(eventually(Duration::from_secs(2), || gateway.metrics.outcome_count("routed") == 2).await);
}

/// Issue 14: "Every route dies after about 1,000 ordinary connections": a connection opened
/// before a route refresh gave its slot back to the old route object, so the route's count
/// never went down. Here the route has 2 slots and 20 connections come and go, with a refresh
/// (the same routes, or changed ones) while each is open.
#[tokio::test]
async fn a_route_refresh_while_connections_are_open_never_loses_their_slots() {
    let w = start("refresh", route(2), |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let gateway = w.gateway.clone();
    let other = RouteConfig { route_id: "r2".into(), hostnames: vec!["b.localhost".into()], ..route(8) };
    for i in 0..20u64 {
        let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
        client.write_all(&hello).await.expect("hello");
        assert!(eventually(Duration::from_secs(2), || gateway.metrics.outcome_count("routed") == i + 1).await, "{i}");
        let routes = match i % 3 {
            0 => vec![route(2)],
            1 => vec![route(2), other.clone()],
            _ => vec![RouteConfig { hostnames: vec![HOST.into(), "c.localhost".into()], ..route(2) }],
        };
        w.gateway.set_routes(routes);
        assert_eq!(w.gateway.active_connections(ROUTE), 1, "a refresh changes no count ({i})");
        drop(client);
        assert!(eventually(Duration::from_secs(2), || gateway.active_connections(ROUTE) == 0).await, "{i}");
    }
    assert_eq!(refusals(&w.gateway), Default::default());
    assert_eq!(active_gauge(&w.gateway, ROUTE), Some(0));
}

/// Issue 14: "half-closed connections keep their slot (FIN-WAIT-2 / CLOSE-WAIT)". The
/// client sends its ClientHello and half-closes; the agent reads the end and never closes its
/// side. Once the linger has passed without a byte, the gateway closes both and the slot is
/// free.
#[tokio::test]
async fn half_closed_connections_give_their_slots_back_after_the_linger() {
    let timeouts = Timeouts { idle: Duration::from_secs(60), linger: Duration::from_millis(300) };
    // Every client is 127.0.0.1: let it hold all the route's slots.
    let w = start("halfclose", route(4), |c| {
        c.timeouts = timeouts;
        c.client_share_percent = 100;
    })
    .await;
    test_agent(&w, Answer::NeverClose).await;
    let hello = client_hello(&w.ca_pem, HOST);
    let gateway = w.gateway.clone();
    let mut clients = Vec::new();
    for _ in 0..4 {
        let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
        client.write_all(&hello).await.expect("hello");
        client.shutdown().await.expect("half-close");
        clients.push(client);
    }
    assert!(eventually(Duration::from_secs(2), || gateway.metrics.outcome_count("routed") == 4).await);
    let start = std::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(5), || gateway.active_connections(ROUTE) == 0).await,
        "the slots come back ({} still held)",
        gateway.active_connections(ROUTE)
    );
    assert!(start.elapsed() < timeouts.idle, "by the linger, not the idle timeout");
    // The gateway closed its side: each client reads its end instead of waiting in
    // FIN-WAIT-2.
    for client in &mut clients {
        let (got, waited) = drained(client).await;
        assert!(got.is_empty() && waited < Duration::from_secs(5));
    }
    assert_eq!(active_gauge(&w.gateway, ROUTE), Some(0));
}

#[tokio::test]
async fn an_idle_routed_connection_is_released_after_the_idle_timeout() {
    let timeouts = Timeouts { idle: Duration::from_millis(800), linger: Duration::from_millis(100) };
    let w = start("idle", route(4), |c| c.timeouts = timeouts).await;
    test_agent(&w, Answer::NeverClose).await;
    let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
    client.write_all(&client_hello(&w.ca_pem, HOST)).await.expect("hello");
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(2), || gateway.active_connections(ROUTE) == 1).await);
    let start = std::time::Instant::now();
    // Neither side sends or closes.
    let (got, waited) = drained(&mut client).await;
    assert!(got.is_empty());
    assert!(waited >= timeouts.idle - Duration::from_millis(200), "not before the idle timeout: {waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    assert!(eventually(Duration::from_secs(1), || gateway.active_connections(ROUTE) == 0).await);
    assert!(start.elapsed() >= timeouts.idle - Duration::from_millis(200));
}

/// The tunnel port reads a connection's first four bytes instead of peeking at them every
/// 5 ms; a data connection whose tag arrives a byte at a time is still told apart.
#[tokio::test]
async fn a_data_connection_whose_tag_comes_a_byte_at_a_time_is_still_routed() {
    let w = start("slowtag", route(4), |_| {}).await;
    test_agent(&w, Answer::SlowTag).await;
    let mut client = TcpStream::connect(w.bound.public).await.expect("connect");
    client.write_all(&client_hello(&w.ca_pem, HOST)).await.expect("hello");
    let gateway = w.gateway.clone();
    assert!(eventually(Duration::from_secs(3), || gateway.metrics.outcome_count("routed") == 1).await);
    drop(client);
    assert!(eventually(Duration::from_secs(2), || gateway.active_connections(ROUTE) == 0).await);
}
