//! ACME against a real Pebble (Debian's `pebble`, with `pebble-challtestsrv` as its DNS):
//! `svc agent run` with an `acme` certificate source gets a Pebble certificate by
//! TLS-ALPN-01, which Pebble validates through the standalone gateway's public port (SNI
//! routing to the agent), and serves it for the job's own key.
//!
//! `.ci/run` installs Pebble. Without it the test skips, saying so (a failure under
//! `SVC_REQUIRE_ALL`).

use std::time::Duration;

use rcgen::PublicKeyData;
use svc_e2e::service::TempDir;

use super::client::{Https, serial_and_spki, wait_status};
use super::pebble::PebbleStack;
use super::process::{Proc, node_demo};
use super::{StandaloneRoute, start_gateway};

/// Any name the mock DNS answers (it answers 127.0.0.1 to every A query).
const HOST: &str = "acme-demo.test";

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_gets_a_pebble_certificate_by_tls_alpn_through_the_gateway() {
    let Some((pebble_bin, dns_bin)) = super::pebble::programs() else { return };
    let dir = TempDir::new("acme");

    // The gateway: its tunnel certificate from a development CA, its public port what
    // Pebble dials for TLS-ALPN-01.
    let setup = StandaloneRoute::new(dir.path(), "acme", HOST, false);
    let (gateway_config, public, tunnel) = setup.write_gateway_config(dir.path());
    let StandaloneRoute { ca_pem: gateway_ca, credential, route_key, .. } = setup;
    let (gateway, _) = start_gateway(&gateway_config).await;

    // Pebble and its mock DNS, dialing the gateway's public port for TLS-ALPN-01.
    let stack = PebbleStack::start(dir.path(), &pebble_bin, &dns_bin, public.port()).await;
    let PebbleStack { ref pebble, ref https_cert, ref root, .. } = stack;

    // The Node demo and its agent, with the ACME source.
    // Kept until the test ends: dropping it stops the app.
    let (_app, app_port) = node_demo().await;
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let agent_config = agent::AgentConfig {
        route_id: "acme".to_owned(),
        hostname: HOST.to_owned(),
        credential,
        replica: None,
        route_key,
        gateway: tunnel,
        gateway_name: "gateway.localhost".to_owned(),
        gateway_ca,
        pinned_gateways: Vec::new(),
        catalog_key: None,
        app_port,
        app_health_path: "/health".to_owned(),
        proxy_protocol: false,
        certificate: agent::CertificateSource::Acme {
            directory_url: stack.directory.clone(),
            contact: vec!["mailto:ops@acme-demo.test".to_owned()],
            directory_ca: Some(https_cert.clone()),
        },
        direct_listen: None,
        coordinator: None,
        refresh_secs: agent::config::DEFAULT_REFRESH_SECS,
    };
    let mut agent = super::start_agent(&job, &agent_config);
    let logs = |agent: &Proc, pebble: &Proc, gateway: &Proc| {
        format!("{}\n{}\n{}", agent.output(), pebble.output(), gateway.output())
    };
    if agent.wait_line(0, Duration::from_secs(60), |l| l.contains("certificate for")).await.is_none() {
        panic!("the agent got no certificate from Pebble\n{}", logs(&agent, pebble, &gateway));
    }

    // GET / through the gateway, trusting only Pebble's root.
    if let Err(e) = wait_status(public, HOST, root, "/", 200, Duration::from_secs(20)).await {
        panic!("GET / with Pebble's certificate: {e}\n{}", logs(&agent, pebble, &gateway));
    }
    let mut conn = Https::connect(public, HOST, root, None).await.expect("TLS chaining to Pebble's root");
    let page = conn.get("/").await.expect("GET /");
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("svc Node.js demo"), "the Node app's page: {}", page.text());
    let leaf = conn.leaf();
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).expect("X.509");
    assert!(parsed.issuer().to_string().contains("Pebble"), "issued by Pebble: {}", parsed.issuer());

    // The served certificate is for the job's key, which stayed in the job.
    let key_pem = std::fs::read_to_string(job.join("key.pem")).expect("key.pem");
    let key = rcgen::KeyPair::from_pem(&key_pem).expect("a private key");
    let (_, spki) = serial_and_spki(&leaf);
    assert_eq!(spki, key.subject_public_key_info(), "the leaf's public key is the job's");

    // With no challenge pending, a handshake offering only `acme-tls/1` gets no certificate.
    let mut acme_only = (*super::client::tls_config(root)).clone();
    acme_only.alpn_protocols = vec![b"acme-tls/1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(public).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from(HOST).expect("a server name");
    let handshake = tokio_rustls::TlsConnector::from(std::sync::Arc::new(acme_only)).connect(name, tcp).await;
    assert!(handshake.is_err(), "an acme-tls/1 handshake outside validation must fail");

    // The ACME account key is kept, private, in the state directory.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let account = job.join(agent::acme::ACCOUNT_FILE);
        let mode = std::fs::metadata(&account).expect("the ACME account file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{} mode {:o}", account.display(), mode & 0o777);
    }
    drop(stack);
}
