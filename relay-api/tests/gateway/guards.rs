//! Issue 20, point 5: a route's client guards (the project's `access`) at the gateway: an
//! allow-list of client networks and a new-connection rate limit, refused connections
//! counted per route; the coordinator's validation (a current probe token) and an ACME
//! server's tls-alpn-01 validation pass without either check.

use std::time::Duration;

use relay_api::gateway::{Guards, RateLimit, RouteConfig};
use relay_wire::alpn::{ProbeFor, ProbeSigner};
use tokio::io::AsyncWriteExt;

use super::attacks::connect_from;
use super::{Answer, HOST, ROUTE, World, drained, hello_offering, open_session, route, start, test_agent};
use agent::wire;

/// Sends `hello` from `from` and waits until the gateway is done with the connection:
/// whether it was routed.
async fn routed(w: &World, from: [u8; 4], hello: &[u8]) -> bool {
    let before = w.gateway.metrics.outcome_count("routed");
    let mut tcp = connect_from(from, w.bound.public).await;
    tcp.write_all(hello).await.expect("send");
    let _ = tcp.shutdown().await;
    drained(&mut tcp).await;
    w.gateway.metrics.outcome_count("routed") > before
}

fn refused(w: &World, reason: &str) -> u64 {
    let series = format!("svc_gateway_route_refused_total{{route=\"{ROUTE}\",reason=\"{reason}\"}} ");
    w.gateway.render_metrics().lines().find_map(|l| l.strip_prefix(series.as_str())?.parse().ok()).unwrap_or(0)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowed_client_networks_reach_a_guarded_route_and_the_refused_are_counted() {
    let guards = Guards { allow_clients: vec!["127.0.0.2/32".parse().expect("a network")], rate_limit: None };
    let w = start("guards-allow", RouteConfig { guards, ..route(64) }, |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
    let hello = hello_offering(&w.ca_pem, HOST, vec![b"http/1.1".to_vec()]);
    assert!(routed(&w, [127, 0, 0, 2], &hello).await, "an allowed client is served");
    assert!(!routed(&w, [127, 0, 0, 1], &hello).await, "another is not");
    assert!(!routed(&w, [127, 0, 0, 3], &hello).await);
    assert_eq!(refused(&w, "client_not_allowed"), 2);
    assert_eq!(w.gateway.metrics.outcome_count("client_not_allowed"), 2);

    // The coordinator's validation shows a current probe token of the route, signed by its
    // probe key, whose public half the gateway holds: it passes.
    let (coordinator, _) = ProbeSigner::generate().expect("the coordinator's probe key");
    w.gateway.set_probe_keys(vec![coordinator.public_key()]);
    let ours = ProbeFor { route_id: ROUTE, server_name: HOST };
    let probe = |secs: u64| coordinator.probe_alpn(ours, secs);
    let probing = hello_offering(&w.ca_pem, HOST, vec![b"http/1.1".to_vec(), probe(now_secs())]);
    assert!(routed(&w, [127, 0, 0, 1], &probing).await, "the coordinator's validation passes");
    // An old token, another route's, or one made with another key does not.
    let stale = hello_offering(&w.ca_pem, HOST, vec![probe(now_secs() - 3600)]);
    assert!(!routed(&w, [127, 0, 0, 1], &stale).await, "a replayed old token");
    let other_route = coordinator.probe_alpn(ProbeFor { route_id: "r2", ..ours }, now_secs());
    assert!(!routed(&w, [127, 0, 0, 1], &hello_offering(&w.ca_pem, HOST, vec![other_route])).await);
    let other_name = coordinator.probe_alpn(ProbeFor { server_name: "b.localhost", ..ours }, now_secs());
    assert!(!routed(&w, [127, 0, 0, 1], &hello_offering(&w.ca_pem, HOST, vec![other_name])).await);
    let (guess, _) = ProbeSigner::generate().expect("another key");
    let forged = guess.probe_alpn(ours, now_secs());
    assert!(!routed(&w, [127, 0, 0, 1], &hello_offering(&w.ca_pem, HOST, vec![forged])).await);
    // An ACME server's tls-alpn-01 validation passes (the agent answers it with a handshake).
    let acme = hello_offering(&w.ca_pem, HOST, vec![b"acme-tls/1".to_vec()]);
    assert!(routed(&w, [127, 0, 0, 1], &acme).await, "ACME validation passes");
    // `acme-tls/1` beside another protocol is no ACME validation.
    let posing = hello_offering(&w.ca_pem, HOST, vec![b"acme-tls/1".to_vec(), b"http/1.1".to_vec()]);
    assert!(!routed(&w, [127, 0, 0, 1], &posing).await);
    assert_eq!(refused(&w, "client_not_allowed"), 7);
    assert!(w.gateway.pending_is_idle());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_new_connection_rate_is_limited_to_its_burst_then_its_rate() {
    let guards = Guards { allow_clients: Vec::new(), rate_limit: Some(RateLimit { per_second: 1, burst: 3 }) };
    let w = start("guards-rate", RouteConfig { guards, ..route(64) }, |_| {}).await;
    test_agent(&w, Answer::ReadToEnd).await;
    let hello = hello_offering(&w.ca_pem, HOST, vec![b"http/1.1".to_vec()]);
    // Connections opened together: the burst passes, the rest is refused at once.
    let mut open = Vec::new();
    for _ in 0..6 {
        let mut tcp = connect_from([127, 0, 0, 1], w.bound.public).await;
        tcp.write_all(&hello).await.expect("send");
        open.push(tcp);
    }
    for mut tcp in open {
        let _ = tcp.shutdown().await;
        drained(&mut tcp).await;
    }
    assert_eq!(w.gateway.metrics.outcome_count("routed"), 3, "the burst");
    assert_eq!(refused(&w, "rate_limited"), 3);
    // Refilled at one a second: after 1.1 s one connection passes, and the next (made well
    // within the following second, or the check says nothing) does not.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let since = std::time::Instant::now();
    assert!(routed(&w, [127, 0, 0, 1], &hello).await, "one token a second");
    let second = routed(&w, [127, 0, 0, 1], &hello).await;
    if since.elapsed() < Duration::from_millis(800) {
        assert!(!second, "one token in 1.1 s, not two");
        assert_eq!(refused(&w, "rate_limited"), 4);
    }
    // An ACME validation takes a token too: it is refused while the bucket is empty.
    let acme = hello_offering(&w.ca_pem, HOST, vec![b"acme-tls/1".to_vec()]);
    let before = refused(&w, "rate_limited");
    let mut refused_acme = false;
    for _ in 0..4 {
        refused_acme |= !routed(&w, [127, 0, 0, 1], &acme).await;
    }
    assert!(refused_acme && refused(&w, "rate_limited") > before, "four ACME connections at once pass no limit");
    // The route unguarded: no bucket, its counts gone.
    w.gateway.set_routes(vec![route(64)]);
    assert_eq!(refused(&w, "rate_limited"), 0, "the counts go with the guards");
    for _ in 0..6 {
        assert!(routed(&w, [127, 0, 0, 1], &hello).await, "unguarded again");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acme_validation_past_the_allow_list_is_sent_to_the_agent_as_acme_only() {
    let guards = Guards { allow_clients: vec!["127.0.0.2/32".parse().expect("a network")], rate_limit: None };
    let w = start("guards-acme", RouteConfig { guards, ..route(64) }, |_| {}).await;
    // An agent that records the flag of each `Connect` it gets, and answers none.
    let mut stream = open_session(w.bound.tunnel, &w.ca_pem, "").await;
    assert!(matches!(wire::read_frame(&mut stream).await.expect("welcome"), wire::Control::Welcome { .. }));
    wire::write_frame(&mut stream, &wire::Control::Ping { seq: 1, ready: Some(true), acme: false })
        .await
        .expect("ping");
    let mut flags = Vec::new();
    for (from, alpn) in [([127, 0, 0, 1], b"acme-tls/1".to_vec()), ([127, 0, 0, 2], b"http/1.1".to_vec())] {
        let mut client = connect_from(from, w.bound.public).await;
        client.write_all(&hello_offering(&w.ca_pem, HOST, vec![alpn])).await.expect("send");
        loop {
            match tokio::time::timeout(Duration::from_secs(5), wire::read_frame(&mut stream)).await {
                Ok(Ok(wire::Control::Connect { acme_only, .. })) => {
                    flags.push(acme_only);
                    break;
                }
                Ok(Ok(_)) => {}
                other => panic!("a Connect, not {other:?}"),
            }
        }
    }
    assert_eq!(
        flags,
        [true, false],
        "the ACME validation from outside the allow-list is acme-only; the allowed client not"
    );
}
