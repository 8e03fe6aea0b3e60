//! Issue 20, point 5, as a customer uses it: `access` in `ingress.json` (an allow-list of
//! client networks and a rate limit) deployed with `svc ingress deploy`; the route goes live
//! and stays live through the coordinator's revalidations (which the guards let through by
//! their probe token), an allowed client is served and any other client is refused.

use std::net::IpAddr;
use std::time::Duration;

use relay_api::gateway::{ProbeFor, ProbeSigner};
use serde_json::Value;
use svc_e2e::service::TempDir;

use super::client::Https;
use super::deploy::{Relay, node_demo_project, state};

#[tokio::test(flavor = "multi_thread")]
async fn a_project_with_an_allow_list_goes_live_and_serves_only_the_clients_it_allows() {
    let dir = TempDir::new("relay-access");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let project = node_demo_project(dir.path());
    // The customer edits the project file: only 127.0.0.2 may connect, 50 a second.
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&project).expect("read")).expect("json");
    file["access"] = serde_json::json!({"allowClients": ["127.0.0.2"], "rateLimit": {"perSecond": 50}});
    std::fs::write(&project, serde_json::to_string_pretty(&file).expect("json")).expect("write");
    let config = project.to_string_lossy().into_owned();

    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let host = "node-demo-acme.localhost";
    let ca = relay.data.join("ca.pem");
    let from = |ip: [u8; 4]| Some(IpAddr::from(ip));

    let mut allowed = Https::connect(relay.public, host, &ca, from([127, 0, 0, 2])).await.expect("an allowed client");
    let page = allowed.get("/").await.expect("GET / from 127.0.0.2");
    assert_eq!(page.status, 200);
    let refused = match Https::connect(relay.public, host, &ca, from([127, 0, 0, 1])).await {
        Ok(mut https) => https.get("/").await.map(|r| r.status).err(),
        Err(e) => Some(e),
    };
    assert!(refused.is_some(), "127.0.0.1 is not in the allow-list, yet it was served");
    // Refused by the allow-list, and counted so on the route.
    let metrics = relay_metrics(&relay).await;
    assert!(
        metrics.lines().any(|l| l.starts_with("svc_gateway_route_refused_total{") && l.contains("reason=\"client_not_allowed\"} ")),
        "{metrics}"
    );

    // Revalidated every 2 s from the coordinator's own address (127.0.0.1): still live. A
    // validation that repeats the last result is not written again (docs/decisions.md), so
    // the revalidations are counted where they arrive: the route's connections at the gateway,
    // none of them refused (this test makes no connection meanwhile).
    let first = relay.json(&["status", "--config", &config]).await;
    let route = first["deployment"]["routeId"].as_str().expect("a route").to_owned();
    let counter = |metrics: &str, prefix: &str| -> u64 {
        metrics.lines().filter_map(|l| l.strip_prefix(prefix)).filter_map(|n| n.trim().parse::<u64>().ok()).sum()
    };
    let routed = format!("svc_gateway_route_connections_total{{route=\"{route}\"}} ");
    let refused = format!("svc_gateway_route_refused_total{{route=\"{route}\",reason=\"client_not_allowed\"}} ");
    let before = relay_metrics(&relay).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now = relay_metrics(&relay).await;
        if counter(&now, &routed) >= counter(&before, &routed) + 2 {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "two more validations did not reach the gateway within 30 s:\n{now}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(counter(&after, &refused), counter(&before, &refused), "a revalidation was refused:\n{after}");
    let status = relay.json(&["status", "--config", &config]).await;
    assert_eq!(state(&status), "live", "{status:#}");
    assert_eq!(status["validations"][0]["passed"], true, "the validation passed the guards: {status:#}");

    // Issue 40: the guards let through a probe token the coordinator's probe key signed (the
    // gateway holds its public half), for this route and name only; one signed by any other
    // key (a gateway operator's) is refused from the same address.
    let route = status["deployment"]["routeId"].as_str().expect("a route").to_owned();
    let pkcs8 = std::fs::read(relay.data.join("probe-signing-key.pk8")).expect("the coordinator's probe key");
    let coordinator = ProbeSigner::from_pkcs8(&pkcs8).expect("an Ed25519 key");
    let (operator, _) = ProbeSigner::generate().expect("another key");
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs();
    let ours = ProbeFor { route_id: &route, server_name: host };
    assert!(served_offering(&relay, host, &ca, coordinator.probe_alpn(ours, secs)).await, "the coordinator's token");
    assert!(!served_offering(&relay, host, &ca, operator.probe_alpn(ours, secs)).await, "another key's token");
    let elsewhere = ProbeFor { route_id: "rt_other", ..ours };
    assert!(!served_offering(&relay, host, &ca, coordinator.probe_alpn(elsewhere, secs)).await, "another route's");
}

/// Whether a client at 127.0.0.1 (outside the allow-list) offering `probe` beside `http/1.1`
/// has `GET /` answered 200.
async fn served_offering(relay: &Relay, host: &str, ca: &std::path::Path, probe: Vec<u8>) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = (*super::client::tls_config(ca)).clone();
    config.alpn_protocols.push(probe);
    let Ok(tcp) = tokio::net::TcpStream::connect(relay.public).await else { return false };
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).expect("a server name");
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let exchange = async {
        let mut tls = connector.connect(name, tcp).await.ok()?;
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer).await;
        Some(answer.starts_with(b"HTTP/1.1 200"))
    };
    tokio::time::timeout(Duration::from_secs(10), exchange).await.ok().flatten().unwrap_or(false)
}

/// The coordinator's gateway metrics, from the URL `svc relay serve` printed.
async fn relay_metrics(relay: &Relay) -> String {
    let output = relay.proc.output();
    let url = output
        .split_whitespace()
        .find(|w| w.starts_with("http://") && w.ends_with("/metrics"))
        .unwrap_or_else(|| panic!("a metrics URL in the relay's output:\n{output}"));
    super::client::metrics_text(url)
}
