//! Shared test helpers: a fake root directory, a real coordinator in process on loopback,
//! and a real DNS server on loopback (`pebble-challtestsrv`).

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gateway_prep::Root;

use relay_api::coordinator::{self, CoordinatorConfig, RelayStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// The DNS server's starter is relay-api's, shared rather than copied.
#[path = "../../relay-api/tests/support/mock_dns.rs"]
mod mock_dns;
#[allow(unused_imports)] // init.rs needs no DNS
pub use mock_dns::MockDns;

/// A fresh empty directory (its path, and the guard that removes it on drop).
pub struct TempDir(pub PathBuf, tempfile::TempDir);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let guard = tempfile::Builder::new().prefix(&format!("gateway-prep-{name}-")).tempdir().expect("temp dir");
        TempDir(guard.path().to_path_buf(), guard)
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

/// A relay coordinator running in this process on loopback, stopped on drop.
pub struct TestCoordinator {
    pub url: String,
    pub api: SocketAddr,
    pub data: TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestCoordinator {
    /// A coordinator as `svc relay serve` starts by default: routing for operator `local`.
    pub async fn start() -> TestCoordinator {
        TestCoordinator::start_as(None).await
    }

    /// A coordinator routing its deployments through `gateway_operator`'s hosts (`svc relay
    /// serve --gateway-operator`), else the default's.
    pub async fn start_as(gateway_operator: Option<&str>) -> TestCoordinator {
        let data = TempDir::new("coordinator");
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let mut config = CoordinatorConfig::new(data.0.clone(), loopback, loopback, vec!["false".into()]);
        if let Some(name) = gateway_operator {
            config.gateway_operator = name.to_owned();
        }
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
