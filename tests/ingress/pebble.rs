//! A real ACME server for tests: Debian's `pebble`, with `pebble-challtestsrv` as its DNS
//! (and ours: the coordinator's hostname checks query the same mock DNS). `.ci/run` installs
//! them; without them the tests that need them skip, saying so, and fail under
//! `SVC_REQUIRE_ALL`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::client::Https;
use super::process::{Proc, free_port};

/// The Pebble programs, or `None` when they are missing (the test skipped, saying so).
pub(crate) fn programs() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    };
    match (find("pebble"), find("pebble-challtestsrv")) {
        (Some(pebble), Some(dns)) => Some((pebble, dns)),
        _ => {
            svc_test_require::skip(
                "`pebble` and `pebble-challtestsrv` are not on PATH: install Debian's `pebble` package \
                 (`apt-get install pebble`, as .ci/run does)",
            );
            None
        }
    }
}

/// A running Pebble and its mock DNS, both killed when dropped.
pub(crate) struct PebbleStack {
    /// The mock DNS (UDP and TCP).
    pub(crate) dns: SocketAddr,
    /// The mock DNS's management API.
    pub(crate) dns_management: SocketAddr,
    /// The ACME directory URL.
    pub(crate) directory: String,
    /// Pebble's own HTTPS certificate (trust it for the directory).
    pub(crate) https_cert: PathBuf,
    /// The root its certificates chain to.
    pub(crate) root: PathBuf,
    /// The mock DNS process (kept to be killed on drop).
    _dns_proc: Proc,
    /// Pebble.
    pub(crate) pebble: Proc,
}

/// A certificate and key for Pebble's own HTTPS listeners (`localhost`, `127.0.0.1`).
fn https_identity(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    let (cert_path, key_path) = (dir.join("pebble-cert.pem"), dir.join("pebble-key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("write");
    std::fs::write(&key_path, key.serialize_pem()).expect("write");
    (cert_path, key_path)
}

impl PebbleStack {
    /// Starts the mock DNS and Pebble, which dials `tls_port` on 127.0.0.1 for TLS-ALPN-01
    /// (the gateway's public port), and fetches Pebble's root into `dir`.
    pub(crate) async fn start(dir: &Path, pebble_bin: &Path, dns_bin: &Path, tls_port: u16) -> PebbleStack {
        // A queries answer 127.0.0.1 by default; no AAAA, so Pebble dials IPv4 loopback.
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

        let (https_cert, https_key) = https_identity(dir);
        let acme_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let management: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let pebble_config = dir.join("pebble.json");
        let config = serde_json::json!({"pebble": {
            "listenAddress": acme_addr, "managementListenAddress": management,
            "certificate": https_cert, "privateKey": https_key,
            "httpPort": free_port(), "tlsPort": tls_port,
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

        // Pebble's root, from its management interface (over its own HTTPS identity). It may
        // listen a moment after Pebble says its root is available (a refused connection there
        // failed a run): asked again for up to 10 s.
        let asked = std::time::Instant::now();
        let root_pem = loop {
            match Https::connect(management, "localhost", &https_cert, None).await {
                Ok(mut conn) => break conn.get("/roots/0").await.expect("GET /roots/0"),
                Err(e) if asked.elapsed() > Duration::from_secs(10) => panic!("Pebble's management interface: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert_eq!(root_pem.status, 200, "{}", root_pem.text());
        let root = dir.join("pebble-root.pem");
        std::fs::write(&root, &root_pem.body).expect("write");
        PebbleStack {
            dns,
            dns_management,
            directory: format!("https://{acme_addr}/dir"),
            https_cert,
            root,
            _dns_proc: dns_proc,
            pebble,
        }
    }

    /// Calls the mock DNS's management API (`/set-cname`, `/add-caa`, `/clear-caa`, ...).
    pub(crate) fn dns_set(&self, path: &str, body: serde_json::Value) {
        let (status, answer) = super::client::post_json(self.dns_management, path, &body);
        assert_eq!(status, 200, "{path} {body}: {answer}");
    }
}
