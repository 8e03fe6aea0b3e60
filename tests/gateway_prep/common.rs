//! Shared test helpers: a fake root directory (gateway-prep's own [`ScratchRoot`], which its
//! unit tests use too), a real coordinator in process on loopback, and a real DNS server on
//! loopback (`pebble-challtestsrv`).

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

pub use gateway_prep::scratch::ScratchRoot;
use relay_api::coordinator::{self, CoordinatorConfig, RelayStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// The DNS server's starter is relay-api's, shared rather than copied.
#[path = "../../relay-api/tests/support/mock_dns.rs"]
mod mock_dns;
#[allow(unused_imports)] // init.rs needs no DNS
pub use mock_dns::MockDns;

/// A relay coordinator running in this process on loopback, stopped on drop.
pub struct TestCoordinator {
    pub url: String,
    pub api: SocketAddr,
    pub data: ScratchRoot,
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
        let data = ScratchRoot::new("coordinator");
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let mut config = CoordinatorConfig::new(data.dir().to_owned(), loopback, loopback, vec!["false".into()]);
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
        coordinator::issue_admission_token(self.data.dir(), operator, ttl).expect("token").plaintext
    }

    pub fn store(&self) -> RelayStore {
        RelayStore::open(self.data.dir()).expect("store")
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
