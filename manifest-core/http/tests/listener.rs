//! The serving library over real TCP on loopback: half-sent requests, declared and stalled
//! bodies, the header and idle timeouts, request ids and internal errors, TLS, and the drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use svc_http::{Server, Settings, Tls, internal_error, limit_body};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn router() -> Router {
    let routes = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/echo", post(|body: Bytes| async move { body.len().to_string() }))
        .route("/boom", get(|| async { internal_error("cannot open /srv/secret/svc.sqlite3: disk I/O error") }))
        .route("/panic", get(panics));
    limit_body(routes, 1024)
}

async fn panics() -> &'static str {
    panic!("a handler bug")
}

/// A server on loopback with `settings`; stops when the returned sender is dropped or sent.
async fn start(
    settings: Settings,
    tls: Option<Tls>,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let server = Server::bind("test", "127.0.0.1:0".parse().expect("addr"), tls, settings).await.expect("bind");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(router(), async move {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Reads one response (`Content-Length` bodies only).
async fn read_answer<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<Answer> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let split = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    let mut body = raw[split + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some(Answer { status, head, body: String::from_utf8_lossy(&body).into_owned() })
}

async fn get_ok(addr: SocketAddr) -> Answer {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    read_answer(&mut stream).await.expect("an answer")
}

/// Whether the server has closed `stream` (EOF or reset), waiting at most `within`.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, within: Duration) -> bool {
    let mut buf = [0u8; 512];
    matches!(tokio::time::timeout(within, stream.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

fn settings() -> Settings {
    Settings { max_connections: 16, ..Settings::DEFAULT }
}

#[tokio::test]
async fn thousand_half_sent_requests_do_not_starve_a_real_client_at_the_cap() {
    let (addr, _stop, _task) = start(settings(), None).await;
    // More half-sent requests than the cap: heads without their end, and heads with half a body.
    let mut held = Vec::new();
    for i in 0..40 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let partial: &[u8] = if i % 2 == 0 {
            b"GET /ok HTTP/1.1\r\nHost: t\r\n"
        } else {
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nhalf"
        };
        s.write_all(partial).await.expect("write");
        held.push(s);
    }
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(1), get_ok(addr)).await.expect("served within 1 s");
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
    assert!(started.elapsed() < Duration::from_secs(1));
    // The oldest half-sent heads made room.
    assert!(closed_within(&mut held[0], Duration::from_secs(1)).await, "the oldest half-sent head was closed");
}

#[tokio::test]
async fn content_length_10_to_the_12_is_answered_413_at_once() {
    let (addr, _stop, _task) = start(settings(), None).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n\r\n").await.expect("write");
    let started = Instant::now();
    let answer =
        tokio::time::timeout(Duration::from_secs(2), read_answer(&mut s)).await.expect("at once").expect("answer");
    assert!(started.elapsed() < Duration::from_secs(2), "well under the 30 s body timeout");
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json()["error"]["code"], "body_too_large");
    assert!(answer.header("svc-request-id").is_some_and(|id| id.starts_with("req_")));
}

#[tokio::test]
async fn a_stalled_body_is_released_after_the_body_timeout_with_408() {
    let body_timeout = Duration::from_millis(400);
    let (addr, _stop, _task) = start(Settings { body_timeout, ..settings() }, None).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly ten b").await.expect("write");
    let started = Instant::now();
    let answer =
        tokio::time::timeout(Duration::from_secs(5), read_answer(&mut s)).await.expect("released").expect("answer");
    assert!(started.elapsed() >= body_timeout, "not before the timeout: {:?}", started.elapsed());
    assert_eq!(answer.status, 408);
    assert_eq!(answer.json()["error"]["code"], "request_timeout");
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(closed_within(&mut s, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn a_half_sent_head_is_closed_after_the_header_timeout() {
    let header_timeout = Duration::from_millis(400);
    let (addr, _stop, _task) = start(Settings { header_timeout, ..settings() }, None).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n").await.expect("write");
    let started = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    assert!(started.elapsed() >= header_timeout - Duration::from_millis(50), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_kept_alive_connection_waits_the_idle_timeout_then_closes() {
    let header_timeout = Duration::from_millis(300);
    let idle_timeout = Duration::from_millis(1200);
    let (addr, _stop, _task) = start(Settings { header_timeout, idle_timeout, ..settings() }, None).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    assert_eq!(read_answer(&mut s).await.expect("answer").status, 200);
    // Idle longer than the header timeout: still open.
    tokio::time::sleep(Duration::from_millis(700)).await;
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    assert_eq!(read_answer(&mut s).await.expect("still open after the header timeout").status, 200);
    let idle_since = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await, "closed after the idle timeout");
    assert!(idle_since.elapsed() >= idle_timeout - Duration::from_millis(50), "{:?}", idle_since.elapsed());
}

#[tokio::test]
async fn a_500_carries_only_internal_error_and_the_request_id() {
    let (addr, _stop, _task) = start(settings(), None).await;
    for path in ["/boom", "/panic"] {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).await.expect("write");
        let answer = read_answer(&mut s).await.expect("answer");
        assert_eq!(answer.status, 500, "{path}");
        let id = answer.header("svc-request-id").expect("an id").to_owned();
        let body = answer.json();
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "internal_error", "message": format!("internal error (request {id})"), "requestId": id}}),
        );
        assert!(!answer.body.contains("/srv") && !answer.body.contains("bug"), "{}", answer.body);
    }
    // The server still serves.
    assert_eq!(get_ok(addr).await.status, 200);
}

#[tokio::test]
async fn plain_http_off_loopback_is_refused_at_start() {
    let refused = Server::bind("test", "0.0.0.0:0".parse().expect("addr"), None, Settings::DEFAULT).await;
    let message = refused.expect_err("refused").to_string();
    assert!(message.contains("--tls-cert") && message.contains("--dev-tls"), "{message}");
    let bad = Server::bind(
        "test",
        "127.0.0.1:0".parse().expect("addr"),
        None,
        Settings { max_connections: 0, ..Settings::DEFAULT },
    );
    assert!(bad.await.is_err());
}

fn certificate() -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    (params.self_signed(&key).expect("cert").pem(), key.serialize_pem())
}

#[tokio::test]
async fn https_serves_and_a_silent_handshake_is_closed_after_the_header_timeout() {
    use rustls::pki_types::pem::PemObject;
    let (cert, key) = certificate();
    let tls = Tls::from_pem(cert.as_bytes(), key.as_bytes()).expect("tls");
    let header_timeout = Duration::from_millis(400);
    let (addr, _stop, _task) = start(Settings { header_timeout, ..settings() }, Some(tls)).await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).expect("der")).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = connector.connect(name, tcp).await.expect("handshake");
    tls.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    let answer = read_answer(&mut tls).await.expect("answer");
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));

    let mut silent = TcpStream::connect(addr).await.expect("connect");
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await, "a connection without a handshake is closed");
    assert!(Tls::from_pem(b"not a certificate", key.as_bytes()).is_err());
}

#[tokio::test]
async fn shutdown_drains_a_request_in_flight_and_closes_idle_connections() {
    let (addr, stop, task) = start(settings(), None).await;
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    let mut busy = TcpStream::connect(addr).await.expect("connect");
    busy.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nfive ").await.expect("write");
    // Let the server see both.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).expect("stop");
    assert!(closed_within(&mut idle, Duration::from_secs(2)).await, "an idle connection is closed at once");
    tokio::time::sleep(Duration::from_millis(200)).await;
    busy.write_all(b"more!").await.expect("the request in flight is still read");
    let answer = read_answer(&mut busy).await.expect("answer");
    assert_eq!((answer.status, answer.body.as_str()), (200, "10"));
    tokio::time::timeout(Duration::from_secs(2), task).await.expect("serve returns once drained").expect("task");
    assert!(TcpStream::connect(addr).await.is_err(), "no longer listening");
}
