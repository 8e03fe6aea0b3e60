//! Shared test helpers: a fake root directory, a real coordinator in process on loopback,
//! and a real DNS server on loopback (`pebble-challtestsrv`).

#![allow(dead_code, unreachable_pub)]

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gateway_prep::Root;
use relay_api::coordinator::{self, CoordinatorConfig, RelayStore};
use relay_api::dns::{DnsChecker, DnsConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh empty directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gateway-prep-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn root(&self) -> Root {
        Root::new(&self.0)
    }

    /// Writes the host file `path` under this root.
    pub fn write(&self, path: &str, content: &str) -> PathBuf {
        let real = self.root().path(path);
        std::fs::create_dir_all(real.parent().expect("parent")).expect("dirs");
        std::fs::write(&real, content).expect("write");
        real
    }

    pub fn chmod(&self, path: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(self.root().path(path), std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// Every file under the root (relative paths), sorted.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push(path.strip_prefix(base).expect("under").display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &self.0, &mut out);
        out.sort();
        out
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A relay coordinator running in this process on loopback, stopped on drop.
pub struct TestCoordinator {
    pub url: String,
    pub api: SocketAddr,
    pub data: TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestCoordinator {
    pub async fn start() -> TestCoordinator {
        let data = TempDir::new("coordinator");
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let config = CoordinatorConfig::new(data.0.clone(), loopback, loopback, vec!["false".into()]);
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let result = coordinator::run(
                config,
                move |s| {
                    let _ = started_tx.send(s.api);
                },
                async move {
                    let _ = stopped.await;
                },
            )
            .await;
            if let Err(e) = result {
                eprintln!("the test coordinator stopped: {e}");
            }
        });
        let api = tokio::time::timeout(Duration::from_secs(30), started_rx)
            .await
            .expect("the coordinator starts within 30 s")
            .expect("the coordinator started");
        TestCoordinator { url: format!("http://{api}"), api, data, stop: Some(stop) }
    }

    /// A new admission token for `operator`, valid for `ttl`.
    pub fn token(&self, operator: &str, ttl: Duration) -> String {
        coordinator::issue_admission_token(&self.data.0, operator, ttl).expect("token").plaintext
    }

    pub fn store(&self) -> RelayStore {
        RelayStore::open(&self.data.0).expect("store")
    }
}

impl Drop for TestCoordinator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// An HTTP server on loopback answering every request with `status`, `body` and the
/// `Date` header given; it serves until dropped.
pub struct FakeServer {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    pub async fn start(status: &'static str, date: &'static str, body: &'static str) -> FakeServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 {status}\r\nDate: {date}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        FakeServer { url, task }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A running `pebble-challtestsrv`, killed on drop. Every name has A 127.0.0.1 and AAAA ::1
/// unless set otherwise through its management API.
pub struct MockDns {
    child: Child,
    pub dns: SocketAddr,
    management: SocketAddr,
}

impl Drop for MockDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary, or None (after saying why) when it is absent and not required.
fn challtestsrv() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("pebble-challtestsrv"))
        .find(|p| p.is_file());
    if found.is_none() {
        let how = "install Debian's `pebble` package (`apt-get install -y pebble`, as .ci/run does)";
        assert!(std::env::var_os("SVC_REQUIRE_PEBBLE").is_none(), "pebble-challtestsrv is not on PATH: {how}");
        eprintln!("SKIPPED: pebble-challtestsrv is not on PATH; {how} to run the DNS check's tests");
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
