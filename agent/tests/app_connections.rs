//! The agent's pooled connections to the app, against an app that closes keep-alive
//! connections the way Node's server does (after `keepAliveTimeout`, 5 s by default).
//!
//! CI finding (issue 20): a request through a replica's agent got 502 "the app does not
//! answer" while nothing was down. The agent kept app connections for 90 s (hyper's default)
//! and Node closes them after 5 s, so a request could go out on a connection the app was
//! closing. Each test here is an app that does exactly that, on cue.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod support;
use support::{HOST, agent_on};

/// What the app does with the second request on a connection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reused {
    /// Answers it.
    Answered,
    /// Closes the connection without an answer: its keep-alive timeout firing just as the
    /// request arrived.
    Closed,
    /// Answers something that is not HTTP.
    Garbled,
}

/// An HTTP/1.1 app on loopback that records how many requests each of its connections got,
/// and treats a connection's second request as `reused` says.
struct App {
    port: u16,
    requests_per_connection: Arc<Mutex<Vec<usize>>>,
}

impl App {
    async fn start(reused: Reused) -> App {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("an address").port();
        let requests_per_connection = Arc::new(Mutex::new(Vec::new()));
        let log = requests_per_connection.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let index = {
                    let mut log = log.lock().expect("the log");
                    log.push(0);
                    log.len() - 1
                };
                tokio::spawn(App::connection(stream, index, log.clone(), reused));
            }
        });
        App { port, requests_per_connection }
    }

    async fn connection(mut stream: TcpStream, index: usize, log: Arc<Mutex<Vec<usize>>>, reused: Reused) {
        let mut buffer = Vec::new();
        loop {
            // One request: its head, then the body its Content-Length says.
            let head_end = loop {
                if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end + 4;
                }
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buffer.len() < head_end + length {
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            }
            buffer.drain(..head_end + length);
            let count = {
                let mut log = log.lock().expect("the log");
                log[index] += 1;
                log[index]
            };
            match reused {
                Reused::Closed if count > 1 => return,
                Reused::Garbled if count > 1 => {
                    let _ = stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").await;
                    return;
                }
                _ => {}
            }
            let body = format!("connection {index}");
            let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
            if stream.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn requests_per_connection(&self) -> Vec<usize> {
        self.requests_per_connection.lock().expect("the log").clone()
    }
}

/// An agent serving HTTPS directly on loopback for `app`, with a self-signed certificate for
/// [`HOST`]; returns its address and the certificate (DER) to trust.
async fn agent_for(app: &App) -> (SocketAddr, rustls::pki_types::CertificateDer<'static>) {
    let (addr, cert, _) = agent_on(app.port).await;
    (addr, cert)
}

/// One client connection to the agent (HTTP/1.1 over TLS), reused for every request sent.
async fn client(agent: SocketAddr, trusted: rustls::pki_types::CertificateDer<'static>) -> Client {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted).expect("a root");
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(agent).await.expect("connects");
    let name = rustls::pki_types::ServerName::try_from(HOST).expect("a name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await.expect("a handshake");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("HTTP/1.1");
    tokio::spawn(connection);
    Client { sender }
}

struct Client {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Client {
    /// Sends `method /` with `body`; the status and the answer's body.
    async fn send(&mut self, method: &str, body: &'static str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri("/")
            .header(hyper::header::HOST, HOST)
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("a request");
        let response = self.sender.send_request(request).await.expect("an answer from the agent");
        let status = response.status();
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

#[tokio::test]
async fn a_get_on_a_connection_the_app_closes_under_it_is_sent_once_more_and_answered() {
    let app = App::start(Reused::Closed).await;
    let (agent, trusted) = agent_for(&app).await;
    let mut client = client(agent, trusted).await;
    assert_eq!(client.send("GET", "").await, (StatusCode::OK, "connection 0".to_owned()));
    // Goes out on the agent's pooled connection 0, which the app closes under it.
    assert_eq!(client.send("GET", "").await, (StatusCode::OK, "connection 1".to_owned()));
    assert_eq!(app.requests_per_connection(), vec![2, 1], "the second GET was sent twice, once per connection");
}

#[tokio::test]
async fn a_post_on_a_connection_the_app_closes_under_it_is_not_sent_again() {
    let app = App::start(Reused::Closed).await;
    let (agent, trusted) = agent_for(&app).await;
    let mut client = client(agent, trusted).await;
    assert_eq!(client.send("GET", "").await.0, StatusCode::OK);
    // A POST may have had its effect before the app closed: sending it again is not the
    // agent's call (RFC 9110 section 9.2.2), so the client hears of the failure.
    let (status, body) = client.send("POST", "order=1").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.starts_with("the app does not answer"), "{body}");
    assert_eq!(app.requests_per_connection(), vec![2], "the POST reached the app once");
}

#[tokio::test]
async fn a_connection_to_the_app_idle_past_two_seconds_is_not_reused() {
    let app = App::start(Reused::Answered).await;
    let (agent, trusted) = agent_for(&app).await;
    let mut client = client(agent, trusted).await;
    for _ in 0..2 {
        assert_eq!(client.send("GET", "").await, (StatusCode::OK, "connection 0".to_owned()));
    }
    // Past the agent's 2 s, well short of Node's 5 s: the next request opens a connection
    // rather than risk one the app is about to close.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(client.send("GET", "").await, (StatusCode::OK, "connection 1".to_owned()));
    assert_eq!(app.requests_per_connection(), vec![2, 1]);
}

#[tokio::test]
async fn a_get_the_app_answers_with_something_not_http_is_not_sent_again() {
    let app = App::start(Reused::Garbled).await;
    let (agent, trusted) = agent_for(&app).await;
    let mut client = client(agent, trusted).await;
    assert_eq!(client.send("GET", "").await.0, StatusCode::OK);
    // The app did answer: only a connection closed under the request is worth a second try.
    let (status, body) = client.send("GET", "").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(app.requests_per_connection(), vec![2], "sent once");
}

/// An app that answers every request 200 and closes the connection (so the agent pools none),
/// until its task is aborted: then its port refuses connections, as a killed app's does.
async fn closing_app() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let port = listener.local_addr().expect("an address").port();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut chunk = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
        }
    });
    (port, task)
}

/// Chaos finding (issue 41, seed 1796572299660467835): after an app's `kill -9`, its agent
/// stayed in rotation until its next health check (up to a second), and about every other
/// new connection of the route was sent to it and answered 502: a client's three addresses
/// all answered 502 once. Now the first connection the app refuses makes the replica not
/// ready at once, which every gateway hears with no wait (the tunnels' heartbeats follow a
/// change of readiness); the health check says ready again once the app answers.
#[tokio::test]
async fn an_app_that_refuses_a_connection_makes_its_replica_not_ready_at_once() {
    let (port, app) = closing_app().await;
    let (agent, trusted, ctx) = agent_on(port).await;
    let _watching = agent::readiness::start(&ctx);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while ctx.app_ready() != Some(true) {
        assert!(tokio::time::Instant::now() < deadline, "ready once the app answers its health path");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut client = client(agent, trusted).await;
    assert_eq!(client.send("GET", "").await, (StatusCode::OK, "ok".to_owned()));
    app.abort();
    let _ = app.await;
    let (status, body) = client.send("GET", "").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(ctx.app_ready(), Some(false), "not ready as the 502 goes out, not at the next health check");
}
