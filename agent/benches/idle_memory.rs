//! What one idle served connection costs the agent, in bytes it holds from the allocator.
//!
//! The agent serves `IDLE_CONNS` (default 1,000) loopback TLS connections through
//! [`serve::direct`] (the path every tunneled data connection takes after its head); a child
//! process (this same binary, `IDLE_MEMORY_CLIENT=1`) holds the clients and the app, so only
//! the agent's allocations are counted here, by a counting global allocator. The live heap is
//! read at each stage:
//!
//! 1. after every TLS handshake;
//! 2. right after one `GET /small` on each connection (HTTP/1.1, as `bench/idle-conns.py`);
//! 3. after `IDLE_SECS` (default 5) with nothing moving;
//! 4. after one more request on each connection (all must answer), and idle again;
//! 5. after the clients close (nothing may stay).
//!
//! Beside each stage's counted bytes, the process's VmRSS growth per connection: what the
//! system allocator keeps resident for them (the agent `svc` runs on mimalloc).
//!
//! Run with `cargo bench -p agent --bench idle_memory` (the file-descriptor limit must allow
//! twice `IDLE_CONNS`). `bench/ingress.sh`'s idle step, which reads the real agent's RSS, stays
//! the verdict; this one says where the bytes go.

use std::alloc::System;
use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agent::cert::CurrentCert;
use agent::hostnames::Hostnames;
use agent::serve::{self, Context};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const HOST: &str = "app.localhost";
const REQUEST: &[u8] = b"GET /small HTTP/1.1\r\nHost: app.localhost\r\n\r\n";

/// Live bytes and blocks held from the allocator now.
fn live() -> (i64, i64) {
    let s = GLOBAL.stats();
    let bytes = s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64;
    (bytes, s.allocations as i64 - s.deallocations as i64)
}

/// This process's resident memory (VmRSS), in bytes; 0 where the kernel does not say.
fn rss() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0) * 1024
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = runtime.expect("a runtime");
    if std::env::var_os("IDLE_MEMORY_CLIENT").is_some() {
        runtime.block_on(client());
    } else {
        runtime.block_on(agent());
    }
}

/// Writes one line to the child and waits for its answer line.
fn ask(to: &mut std::process::ChildStdin, from: &mut impl BufRead, line: &str) -> String {
    writeln!(to, "{line}").expect("the client reads");
    to.flush().expect("the client reads");
    let mut answer = String::new();
    from.read_line(&mut answer).expect("the client answers");
    assert!(!answer.is_empty(), "the client ended before answering {line}");
    answer.trim().to_owned()
}

async fn agent() {
    let count = env_or("IDLE_CONNS", 1000);
    let idle = Duration::from_secs(env_or("IDLE_SECS", 5));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = rcgen::CertificateParams::new(vec![HOST.to_owned()])
        .expect("parameters")
        .self_signed(&key)
        .expect("a certificate");
    let cert_path = dir.path().join("cert.der");
    std::fs::write(&cert_path, cert.der()).expect("writes the certificate");

    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env("IDLE_MEMORY_CLIENT", "1")
        .arg(&cert_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts the client");
    let mut to = child.stdin.take().expect("a pipe");
    let mut from = BufReader::new(child.stdout.take().expect("a pipe"));
    let mut first = String::new();
    from.read_line(&mut first).expect("the client's app port");
    let app_port: u16 = first.trim().parse().expect("a port");

    let current = Arc::new(CurrentCert::default());
    current.install(&cert.pem(), &key).expect("installs");
    let config: agent::AgentConfig = serde_json::from_value(serde_json::json!({
        "routeId": "r1", "hostname": HOST, "credential": "c",
        "routeKey": agent::challenge::RouteKey::generate().expect("a key"),
        "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": "/unused.pem",
        "appPort": app_port, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:1", "validity_secs": 60},
    }))
    .expect("a configuration");
    let before = live();
    let copy = config.clone();
    let (config_heap, config_blocks) = (live().0 - before.0, live().1 - before.1);
    drop(copy);
    let ctx = Context::new(config, current, Arc::new(Hostnames::new(HOST)));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let port = listener.local_addr().expect("an address").port();
    // The size of one connection's task before it runs (its cell holds this inline).
    let probe = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let probe_addr = probe.local_addr().expect("an address");
    let (dialed, accepted) = tokio::join!(TcpStream::connect(probe_addr), probe.accept());
    let task_size = std::mem::size_of_val(&serve::connection(ctx.clone(), dialed.expect("dials"), None));
    drop((accepted, probe));
    tokio::spawn(serve::direct(ctx.clone(), listener));

    // One connection first, so that what is made once (session cache, pools) is not counted.
    assert_eq!(ask(&mut to, &mut from, &format!("warm {port}")), "ok");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let base = live();
    let base_rss = rss();
    let mut rows = Vec::new();
    let mut stage = |name: &str, now: (i64, i64)| {
        let per = (now.0 - base.0) as f64 / count as f64;
        let blocks = (now.1 - base.1) as f64 / count as f64;
        // What the system allocator keeps resident for it, beside what was asked of it.
        let resident = (rss() - base_rss) as f64 / count as f64;
        println!("{name:<40} {per:>9.0} B/conn {blocks:>6.1} blocks/conn {resident:>9.0} B/conn resident");
        rows.push((name.to_owned(), per));
    };
    assert_eq!(ask(&mut to, &mut from, &format!("open {count}")), "ok");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stage("after the TLS handshake", live());
    assert_eq!(ask(&mut to, &mut from, "request"), "ok");
    tokio::time::sleep(Duration::from_millis(100)).await;
    stage("right after one request", live());
    tokio::time::sleep(idle).await;
    stage(&format!("idle {} s", idle.as_secs()), live());
    let alive = ask(&mut to, &mut from, "request");
    tokio::time::sleep(idle).await;
    stage(&format!("after a second request, idle {} s", idle.as_secs()), live());
    assert_eq!(ask(&mut to, &mut from, "close"), "ok");
    tokio::time::sleep(Duration::from_secs(1)).await;
    stage("after the clients closed", live());
    println!("connections {count}, answering the second request: {alive}");
    println!("a TLS connection's state: {} B", std::mem::size_of::<rustls::server::UnbufferedServerConnection>());
    println!(
        "one connection's task future: {task_size} B; an AgentConfig: {} B inline, its clone {config_heap} B in {config_blocks} blocks",
        std::mem::size_of::<agent::AgentConfig>()
    );
    if let Some((_, idle_bytes)) = rows.get(2) {
        println!("RESULT idle_kib_per_conn={:.2} alive={alive}", idle_bytes / 1024.0);
    }
    drop(to);
    let _ = child.wait();
}

/// The child: the app on loopback, and the clients, driven by lines on stdin.
async fn client() {
    let cert_path = std::env::args().nth(1).expect("the certificate's path");
    let app = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    println!("{}", app.local_addr().expect("an address").port());
    tokio::spawn(async move {
        while let Ok((stream, _)) = app.accept().await {
            tokio::spawn(answer_small(stream));
        }
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(std::fs::read(cert_path).expect("the certificate").into()).expect("a root");
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let mut port = 0;
    let mut conns = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        // Blocks this thread only: the app is served by the runtime's workers meanwhile.
        if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["warm", p] => {
                port = p.parse().expect("a port");
                let mut one = vec![dial(&connector, port).await];
                request_all(&mut one).await;
                "ok".to_owned()
            }
            ["open", n] => {
                for _ in 0..n.parse::<usize>().expect("a count") {
                    conns.push(dial(&connector, port).await);
                }
                "ok".to_owned()
            }
            ["request"] => {
                let answered = request_all(&mut conns).await;
                if answered == conns.len() { "ok".to_owned() } else { format!("{answered} of {}", conns.len()) }
            }
            ["close"] => {
                conns.clear();
                "ok".to_owned()
            }
            _ => "?".to_owned(),
        };
        println!("{answer}");
    }
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn dial(connector: &tokio_rustls::TlsConnector, port: u16) -> Tls {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connects");
    let name = rustls::pki_types::ServerName::try_from(HOST).expect("a name");
    connector.connect(name, tcp).await.expect("a handshake")
}

/// Sends one request on each connection; how many answered 200 with the whole body.
async fn request_all(conns: &mut [Tls]) -> usize {
    let mut answered = 0;
    for tls in conns.iter_mut() {
        if tls.write_all(REQUEST).await.is_err() {
            continue;
        }
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !(got.windows(4).any(|w| w == b"\r\n\r\n") && got.ends_with(b"small")) {
            match tls.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        if got.starts_with(b"HTTP/1.1 200") && got.ends_with(b"small") {
            answered += 1;
        }
    }
    answered
}

/// The app: `small` to every request head, keep-alive.
async fn answer_small(mut stream: TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            buffer.drain(..end + 4);
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nsmall";
            if stream.write_all(answer).await.is_err() {
                return;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}
