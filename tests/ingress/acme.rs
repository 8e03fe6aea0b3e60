//! ACME against a real Pebble (Debian's `pebble`, with `pebble-challtestsrv` as its DNS):
//! `svc agent run` with an `acme` certificate source gets a Pebble certificate by
//! TLS-ALPN-01, which Pebble validates through the standalone gateway's public port (SNI
//! routing to the agent), and serves it for the job's own key.
//!
//! `.ci/run` installs Pebble. Without it the test fails, unless `SVC_SKIP_PEBBLE=1`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rcgen::PublicKeyData;
use svc_e2e::service::{TempDir, svc_binary};

use super::client::{Https, serial_and_spki, wait_status};
use super::process::{Proc, free_port, node_demo};
use super::{StandaloneRoute, start_gateway};

/// Any name the mock DNS answers (it answers 127.0.0.1 to every A query).
const HOST: &str = "acme-demo.test";

/// The Pebble programs, or why the test cannot run.
fn pebble_programs() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    };
    match (find("pebble"), find("pebble-challtestsrv")) {
        (Some(pebble), Some(dns)) => Some((pebble, dns)),
        _ if std::env::var("SVC_SKIP_PEBBLE").is_ok_and(|v| v == "1") => None,
        _ => panic!(
            "`pebble` and `pebble-challtestsrv` are not on PATH: install Debian's `pebble` package \
             (`apt-get install pebble`, as .ci/run does), or set SVC_SKIP_PEBBLE=1 to skip this test"
        ),
    }
}

/// A certificate and key for Pebble's own HTTPS listeners (`localhost`, `127.0.0.1`).
fn pebble_https_identity(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    let (cert_path, key_path) = (dir.join("pebble-cert.pem"), dir.join("pebble-key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("write");
    std::fs::write(&key_path, key.serialize_pem()).expect("write");
    (cert_path, key_path)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_gets_a_pebble_certificate_by_tls_alpn_through_the_gateway() {
    let Some((pebble_bin, dns_bin)) = pebble_programs() else {
        eprintln!("SVC_SKIP_PEBBLE=1: skipping the ACME test");
        return;
    };
    let dir = TempDir::new("acme");

    // The gateway: its tunnel certificate from a development CA, its public port what
    // Pebble dials for TLS-ALPN-01.
    let setup = StandaloneRoute::new(dir.path(), "acme", HOST, false);
    let (gateway_config, public, tunnel) = setup.write_gateway_config(dir.path());
    let StandaloneRoute { ca_pem: gateway_ca, credential, .. } = setup;
    let (gateway, _) = start_gateway(&gateway_config).await;

    // The mock DNS (A queries answer 127.0.0.1; no AAAA, so Pebble dials IPv4 loopback).
    let dns: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let dns_management: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let mut dns_command = Command::new(dns_bin);
    dns_command.args(["-dns01", &dns.to_string(), "-management", &dns_management.to_string()]).args([
        "-http01",
        "",
        "-https01",
        "",
        "-tlsalpn01",
        "",
        "-defaultIPv6",
        "",
    ]);
    let mut dns_proc = Proc::spawn("pebble-challtestsrv", dns_command);
    dns_proc
        .expect_line(Duration::from_secs(20), "that it serves DNS", |l| l.contains("DNS-01 challenge server"))
        .await;

    // Pebble, with its own HTTPS identity, dialing the gateway's public port for TLS-ALPN-01.
    let (pebble_cert, pebble_key) = pebble_https_identity(dir.path());
    let acme_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let management: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let pebble_config = dir.path().join("pebble.json");
    let config = serde_json::json!({"pebble": {
        "listenAddress": acme_addr, "managementListenAddress": management,
        "certificate": pebble_cert, "privateKey": pebble_key,
        "httpPort": free_port(), "tlsPort": public.port(),
        "ocspResponderURL": "", "externalAccountBindingRequired": false,
    }});
    std::fs::write(&pebble_config, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
    let mut pebble_command = Command::new(pebble_bin);
    pebble_command
        .arg("-config")
        .arg(&pebble_config)
        .args(["-dnsserver", &dns.to_string()])
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0");
    let mut pebble = Proc::spawn("pebble", pebble_command);
    pebble.expect_line(Duration::from_secs(20), "its directory", |l| l.contains("ACME directory available")).await;
    pebble.expect_line(Duration::from_secs(20), "its root", |l| l.contains("Root CA certificate available")).await;

    // The Node demo and its agent, with the ACME source.
    // Kept until the test ends: dropping it stops the app.
    let (_app, app_port) = node_demo().await;
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let agent_config = agent::AgentConfig {
        route_id: "acme".to_owned(),
        hostname: HOST.to_owned(),
        credential,
        route_secret: "a route secret".to_owned(),
        gateway: tunnel,
        gateway_name: "gateway.localhost".to_owned(),
        gateway_ca,
        app_port,
        app_health_path: "/health".to_owned(),
        proxy_protocol: false,
        certificate: agent::CertificateSource::Acme {
            directory_url: format!("https://{acme_addr}/dir"),
            contact: vec!["mailto:ops@acme-demo.test".to_owned()],
            directory_ca: Some(pebble_cert.clone()),
        },
        direct_listen: None,
        coordinator: None,
        refresh_secs: agent::config::DEFAULT_REFRESH_SECS,
    };
    let agent_path = job.join("agent.json");
    std::fs::write(&agent_path, serde_json::to_vec_pretty(&agent_config).expect("json")).expect("write");
    let mut agent_command = Command::new(svc_binary());
    agent_command.args(["agent", "run", "--config"]).arg(&agent_path);
    let mut agent = Proc::spawn("svc agent run", agent_command);
    let logs = |agent: &Proc, pebble: &Proc, gateway: &Proc| {
        format!("{}\n{}\n{}", agent.output(), pebble.output(), gateway.output())
    };
    if agent.wait_line(0, Duration::from_secs(60), |l| l.contains("certificate for")).await.is_none() {
        panic!("the agent got no certificate from Pebble\n{}", logs(&agent, &pebble, &gateway));
    }

    // Pebble's root, from its management interface (over its own HTTPS identity).
    let root_pem = match Https::connect(management, "localhost", &pebble_cert, None).await {
        Ok(mut conn) => conn.get("/roots/0").await.expect("GET /roots/0"),
        Err(e) => panic!("Pebble's management interface: {e}"),
    };
    assert_eq!(root_pem.status, 200, "{}", root_pem.text());
    let root = dir.path().join("pebble-root.pem");
    std::fs::write(&root, &root_pem.body).expect("write");

    // GET / through the gateway, trusting only Pebble's root.
    if let Err(e) = wait_status(public, HOST, &root, "/", 200, Duration::from_secs(20)).await {
        panic!("GET / with Pebble's certificate: {e}\n{}", logs(&agent, &pebble, &gateway));
    }
    let mut conn = Https::connect(public, HOST, &root, None).await.expect("TLS chaining to Pebble's root");
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
    let mut acme_only = (*super::client::tls_config(&root)).clone();
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
    drop(dns_proc);
}
