//! Idle HTTP/1.1 keep-alive connections hibernate: after 2 s with no request in flight and no
//! byte moving, the agent holds no hyper connection for them (issue 44, point 2), and the
//! client's next request is answered as if nothing happened. HTTP/2 is served by ALPN.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent::serve::Context;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod support;
use support::{HOST, agent_on};

/// Longer than the agent's hibernation delay (2 s).
const PAST_HIBERNATION: Duration = Duration::from_millis(2600);

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// An app on loopback: `hello` to every request (keep-alive); a request with `Upgrade: echo`
/// gets `101` and then its bytes echoed.
async fn app() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let port = listener.local_addr().expect("an address").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                        buffer.drain(..end + 4);
                        if head.contains("upgrade: echo") {
                            let switch =
                                b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n";
                            if stream.write_all(switch).await.is_err() {
                                return;
                            }
                            let (mut r, mut w) = stream.split();
                            let _ = tokio::io::copy(&mut r, &mut w).await;
                            return;
                        }
                        if stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").await.is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    port
}

/// An agent serving HTTPS on loopback for an [`app`]: its address, its context and the
/// certificate to trust.
async fn agent() -> (SocketAddr, Arc<Context>, rustls::pki_types::CertificateDer<'static>) {
    let (addr, cert, ctx) = agent_on(app().await).await;
    (addr, ctx, cert)
}

/// A TLS connection to the agent offering `alpn`.
async fn dial(agent: SocketAddr, trusted: &rustls::pki_types::CertificateDer<'static>, alpn: &[u8]) -> Tls {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.clone()).expect("a root");
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(agent).await.expect("connects");
    let name = rustls::pki_types::ServerName::try_from(HOST).expect("a name");
    tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await.expect("a handshake")
}

fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n").into_bytes()
}

/// Reads `count` answers of `hello`; the statuses (an empty list if the connection ended or
/// nothing came within 10 s).
async fn answers(tls: &mut Tls, count: usize) -> Vec<String> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        while got.windows(5).filter(|w| *w == b"hello").count() < count {
            match tls.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    // Each answer's status line (answers follow each other without a line between).
    let text = String::from_utf8_lossy(&got);
    text.match_indices("HTTP/1.1 ")
        .map(|(at, _)| text[at..].split("\r\n").next().unwrap_or_default().to_owned())
        .collect()
}

/// Waits (at most 10 s) until the agent holds `count` hyper HTTP/1.1 connections.
async fn live_becomes(ctx: &Context, count: usize) -> usize {
    for _ in 0..100 {
        if ctx.http_connections_live() == count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ctx.http_connections_live()
}

#[tokio::test]
async fn a_keep_alive_connection_answers_after_hibernating_and_holds_no_http_state_meanwhile() {
    let (addr, ctx, cert) = agent().await;
    let mut tls = dial(addr, &cert, b"http/1.1").await;
    tls.write_all(&request("/")).await.expect("writes");
    assert_eq!(answers(&mut tls, 1).await, ["HTTP/1.1 200 OK"]);
    assert_eq!(ctx.http_connections_live(), 1, "a connection just used holds its hyper connection");
    assert_eq!(live_becomes(&ctx, 0).await, 0, "an idle connection hibernates");
    for round in 0..2 {
        tls.write_all(&request("/")).await.expect("writes");
        assert_eq!(answers(&mut tls, 1).await, ["HTTP/1.1 200 OK"], "round {round}");
        assert_eq!(live_becomes(&ctx, 0).await, 0, "round {round}: hibernates again");
    }
}

#[tokio::test]
async fn pipelined_requests_in_one_write_are_all_answered() {
    let (addr, ctx, cert) = agent().await;
    let mut tls = dial(addr, &cert, b"http/1.1").await;
    // Three requests and the start of a fourth in one write; the fourth's end comes after
    // the connection has been quiet past the hibernation delay.
    let mut bytes = [request("/1"), request("/2"), request("/3")].concat();
    let fourth = request("/4");
    let (start, end) = fourth.split_at(10);
    bytes.extend_from_slice(start);
    tls.write_all(&bytes).await.expect("writes");
    assert_eq!(answers(&mut tls, 3).await, ["HTTP/1.1 200 OK"; 3]);
    tokio::time::sleep(PAST_HIBERNATION).await;
    tls.write_all(end).await.expect("writes");
    assert_eq!(answers(&mut tls, 1).await, ["HTTP/1.1 200 OK"], "the request begun before the quiet time");
    // And after a hibernation, three in one write.
    assert_eq!(live_becomes(&ctx, 0).await, 0);
    tls.write_all(&[request("/5"), request("/6"), request("/7")].concat()).await.expect("writes");
    assert_eq!(answers(&mut tls, 3).await, ["HTTP/1.1 200 OK"; 3]);
}

#[tokio::test]
async fn a_request_arriving_as_hibernation_starts_is_answered() {
    let (addr, _ctx, cert) = agent().await;
    let mut tls = dial(addr, &cert, b"http/1.1").await;
    tls.write_all(&request("/")).await.expect("writes");
    assert_eq!(answers(&mut tls, 1).await, ["HTTP/1.1 200 OK"]);
    // Requests sent around the moment the agent decides to hibernate (2 s after the last
    // byte), a few milliseconds apart.
    for offset in [1990u64, 1998, 2000, 2001, 2002, 2003, 2005, 2010, 2020] {
        tokio::time::sleep(Duration::from_millis(offset)).await;
        tls.write_all(&request("/")).await.expect("writes");
        assert_eq!(answers(&mut tls, 1).await, ["HTTP/1.1 200 OK"], "sent {offset} ms after the last answer");
    }
}

#[tokio::test]
async fn an_upgraded_connection_never_hibernates() {
    let (addr, ctx, cert) = agent().await;
    let mut tls = dial(addr, &cert, b"http/1.1").await;
    let upgrade = format!("GET /ws HTTP/1.1\r\nHost: {HOST}\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n");
    tls.write_all(upgrade.as_bytes()).await.expect("writes");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(tls.read(&mut byte).await.expect("reads"), 1, "the switch: {head:?}");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
    tokio::time::sleep(PAST_HIBERNATION).await;
    tls.write_all(b"still here").await.expect("writes");
    let mut echo = [0u8; 10];
    tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut echo))
        .await
        .expect("the echo within 10 s")
        .expect("the echo");
    assert_eq!(&echo, b"still here");
    assert_eq!(ctx.http_connections_live(), 0, "an upgraded connection is not HTTP any more");
}

#[tokio::test]
async fn an_h2_connection_is_served_by_alpn() {
    let (addr, ctx, cert) = agent().await;
    let tls = dial(addr, &cert, b"h2").await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.expect("HTTP/2");
    tokio::spawn(connection);
    for _ in 0..2 {
        let request = hyper::Request::get(format!("https://{HOST}/")).body(Empty::<Bytes>::new()).expect("a request");
        let response = sender.send_request(request).await.expect("an answer");
        assert_eq!(response.status(), hyper::StatusCode::OK);
        assert_eq!(response.version(), hyper::Version::HTTP_2);
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        assert_eq!(&body[..], b"hello");
    }
    assert_eq!(ctx.http_connections_live(), 0, "HTTP/2 is not served by the HTTP/1.1 path");
}
