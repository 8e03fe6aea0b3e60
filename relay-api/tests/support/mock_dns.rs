//! A real DNS server on loopback for tests: Debian's `pebble-challtestsrv` (from the `pebble`
//! package, which `.ci/run` installs), with its records set through its management API.
//! Shared by relay-api's DNS tests and gateway-prep's (`#[path]`-included there), so there is
//! one way to start it. Without the binary the tests skip, saying so (they fail under
//! `SVC_REQUIRE_ALL`: [`svc_test_require::skip`]).

#![allow(dead_code, unreachable_pub)]

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use relay_api::dns::{DnsChecker, DnsConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running `pebble-challtestsrv`, killed on drop. Every name has A 127.0.0.1 and AAAA ::1
/// unless set otherwise through its management API.
pub struct MockDns {
    child: Child,
    /// The DNS port (UDP and TCP).
    pub dns: SocketAddr,
    /// The management API.
    pub management: SocketAddr,
}

impl Drop for MockDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary, or None (the test skipped, saying so) when it is absent.
fn challtestsrv() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("pebble-challtestsrv"))
        .find(|p| p.is_file());
    if found.is_none() {
        svc_test_require::skip(
            "pebble-challtestsrv is not on PATH: install Debian's `pebble` package (`apt-get install -y pebble`, as .ci/run does)",
        );
    }
    found
}

/// A loopback port free for both TCP and UDP.
fn free_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let port = tcp.local_addr().expect("addr").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl MockDns {
    /// Starts the server on fresh loopback ports and waits until both ports answer.
    pub async fn start() -> Option<MockDns> {
        let program = challtestsrv()?;
        for _ in 0..3 {
            let dns: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let management: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let child = Command::new(&program)
                .args(["-dns01", &dns.to_string(), "-http01", "", "-https01", "", "-tlsalpn01", ""])
                .args(["-management", &management.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn pebble-challtestsrv");
            let mut server = MockDns { child, dns, management };
            if server.ready().await {
                return Some(server);
            }
        }
        panic!("pebble-challtestsrv did not start on loopback (three tries)");
    }

    async fn ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let checker = DnsChecker::new(&self.config()).expect("checker");
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            let management_up = tokio::net::TcpStream::connect(self.management).await.is_ok();
            if management_up && checker.lookup_ips("ready.test").await.is_ok_and(|ips| !ips.is_empty()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// A resolver configuration asking only this server.
    pub fn config(&self) -> DnsConfig {
        DnsConfig { nameservers: vec![self.dns], timeout: Duration::from_secs(2) }
    }

    /// POSTs `body` to a management endpoint (`/add-a`, `/set-default-ipv4`, ...).
    pub async fn post(&self, path: &str, body: serde_json::Value) {
        let body = body.to_string();
        let mut stream = tokio::net::TcpStream::connect(self.management).await.expect("management");
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            self.management,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        assert!(response.starts_with("HTTP/1.1 200"), "{path} {body}: {response}");
    }
}
