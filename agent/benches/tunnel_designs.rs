//! The two tunnel designs, measured on loopback in one run (issue: "measure both designs and
//! choose"):
//!
//! - `per-connection`: one TCP connection per client stream, opened by the agent with a
//!   36-byte ticket (our design, as rathole and bore do);
//! - `h2 mux`: one HTTP/2 connection carrying every stream (as frp's yamux and ngrok do),
//!   over TLS as our control connection would be, once with large flow-control windows
//!   (16 MiB per stream, 64 MiB per connection) and once with HTTP/2's default 64 KiB
//!   windows, the setting that cut frp's throughput for its users.
//!
//! For each: stream setup latency (p50/p99 over 500 setups, the work added to every new
//! client connection) and bulk throughput with 1 and with 16 concurrent streams.
//!
//! ```sh
//! cargo bench -p agent --bench tunnel_designs
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BULK: usize = 64 * 1024 * 1024;
const SETUPS: usize = 500;
const CHUNK: usize = 64 * 1024;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        println!("| Design | Setup p50 | Setup p99 | 1 stream | 16 streams |");
        println!("|---|---|---|---|---|");
        let (p50, p99) = per_connection_setup().await;
        let one = per_connection_bulk(1).await;
        let sixteen = per_connection_bulk(16).await;
        row("per-connection TCP (ours)", p50, p99, one, sixteen);
        for (name, window) in
            [("h2 mux over TLS, 16 MiB windows", 16 << 20), ("h2 mux over TLS, default 64 KiB windows", 65_535)]
        {
            let mux = Mux::start(window).await;
            let (p50, p99) = mux.setup().await;
            let one = mux.bulk(1).await;
            let sixteen = mux.bulk(16).await;
            row(name, p50, p99, one, sixteen);
        }
    });
}

fn row(name: &str, p50: Duration, p99: Duration, one: f64, sixteen: f64) {
    println!(
        "| {name} | {:.0} µs | {:.0} µs | {:.0} MiB/s | {:.0} MiB/s |",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        one,
        sixteen
    );
}

fn percentiles(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    (d[d.len() / 2], d[(d.len() * 99 / 100).min(d.len() - 1)])
}

/// Time to open a data connection and present a ticket, until the far side has it.
async fn per_connection_setup() -> (Duration, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 36];
                if s.read_exact(&mut head).await.is_ok() {
                    let _ = s.write_all(b"k").await;
                }
            });
        }
    });
    let mut times = Vec::with_capacity(SETUPS);
    for _ in 0..SETUPS {
        let start = Instant::now();
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.write_all(&[7u8; 36]).await.expect("ticket");
        let mut ok = [0u8; 1];
        s.read_exact(&mut ok).await.expect("ack");
        times.push(start.elapsed());
    }
    percentiles(times)
}

/// MiB/s moving `BULK` bytes over each of `streams` concurrent TCP connections.
async fn per_connection_bulk(streams: usize) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let sink = tokio::spawn(async move {
        let mut tasks = Vec::new();
        for _ in 0..streams {
            let (mut s, _) = listener.accept().await.expect("accept");
            tasks.push(tokio::spawn(async move {
                let mut buf = vec![0u8; CHUNK];
                let mut total = 0;
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    total += n;
                }
                total
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("sink");
        }
        total
    });
    let start = Instant::now();
    let mut senders = Vec::new();
    for _ in 0..streams {
        senders.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let chunk = vec![1u8; CHUNK];
            for _ in 0..BULK / CHUNK {
                s.write_all(&chunk).await.expect("write");
            }
            s.shutdown().await.expect("shutdown");
        }));
    }
    for s in senders {
        s.await.expect("sender");
    }
    let total = sink.await.expect("sink");
    assert_eq!(total, BULK * streams);
    total as f64 / (1024.0 * 1024.0) / start.elapsed().as_secs_f64()
}

/// An HTTP/2 connection over TLS; each tunneled stream is one request whose body flows to the
/// server.
struct Mux {
    send: h2::client::SendRequest<Bytes>,
}

impl Mux {
    async fn start(window: u32) -> Mux {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["gateway.localhost".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_tls = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).expect("root");
        let client_tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_tls));
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            tcp.set_nodelay(true).expect("nodelay");
            let tls = acceptor.accept(tcp).await.expect("tls");
            let mut conn = h2::server::Builder::new()
                .initial_window_size(window)
                .initial_connection_window_size(window.saturating_mul(4))
                .max_concurrent_streams(1024)
                .handshake::<_, Bytes>(tls)
                .await
                .expect("h2 server");
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                tokio::spawn(async move {
                    let mut body = req.into_body();
                    let mut total = 0usize;
                    let response = http::Response::new(());
                    let mut send = respond.send_response(response, false).expect("respond");
                    // Acknowledge the stream at once (setup latency), then count its bytes.
                    send.send_data(Bytes::from_static(b"k"), false).expect("ack");
                    while let Some(Ok(chunk)) = body.data().await {
                        total += chunk.len();
                        let _ = body.flow_control().release_capacity(chunk.len());
                    }
                    let _ = send.send_data(Bytes::from(total.to_string()), true);
                });
            }
        });
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let name = rustls::pki_types::ServerName::try_from("gateway.localhost").expect("name");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(client_tls)).connect(name, tcp).await.expect("tls");
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(window)
            .initial_connection_window_size(window.saturating_mul(4))
            .handshake::<_, Bytes>(tls)
            .await
            .expect("h2 client");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Mux { send }
    }

    async fn open(&self) -> (h2::SendStream<Bytes>, h2::RecvStream) {
        let mut send = self.send.clone().ready().await.expect("ready");
        let (response, stream) = send.send_request(http::Request::new(()), false).expect("request");
        let response = response.await.expect("response");
        let mut body = response.into_body();
        let ack = body.data().await.expect("ack").expect("ack");
        assert_eq!(&ack[..], b"k");
        (stream, body)
    }

    async fn setup(&self) -> (Duration, Duration) {
        let mut times = Vec::with_capacity(SETUPS);
        for _ in 0..SETUPS {
            let start = Instant::now();
            let (mut stream, _) = self.open().await;
            times.push(start.elapsed());
            let _ = stream.send_data(Bytes::new(), true);
        }
        percentiles(times)
    }

    async fn bulk(&self, streams: usize) -> f64 {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..streams {
            let (mut stream, mut body) = self.open().await;
            tasks.push(tokio::spawn(async move {
                let chunk = Bytes::from(vec![1u8; CHUNK]);
                for _ in 0..BULK / CHUNK {
                    // Send only what flow control allows, as a tunnel must (or it buffers
                    // without bound).
                    let mut rest = chunk.clone();
                    while !rest.is_empty() {
                        stream.reserve_capacity(rest.len());
                        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx))
                            .await
                            .expect("capacity")
                            .expect("capacity");
                        let n = granted.min(rest.len());
                        if n > 0 {
                            stream.send_data(rest.split_to(n), false).expect("send");
                        }
                    }
                }
                stream.send_data(Bytes::new(), true).expect("end");
                let total = body.data().await.expect("total").expect("total");
                String::from_utf8_lossy(&total).parse::<usize>().expect("number")
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("stream");
        }
        assert_eq!(total, BULK * streams);
        total as f64 / (1024.0 * 1024.0) / start.elapsed().as_secs_f64()
    }
}
