//! A small HTTPS/1.1 client of our own: it trusts only the CA file it is given, can bind its
//! socket to a chosen loopback source address, keeps its connection open for more requests,
//! and shows the certificate the server presented.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout};
use tokio_rustls::client::TlsStream;

/// Time allowed for each step (connect, handshake, one response).
pub(crate) const STEP: Duration = Duration::from_secs(10);

/// A client configuration trusting only the CA certificate in `ca_pem_file`.
pub(crate) fn tls_config(ca_pem_file: &Path) -> Arc<rustls::ClientConfig> {
    let pem = std::fs::read(ca_pem_file).unwrap_or_else(|e| panic!("{}: {e}", ca_pem_file.display()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("a PEM certificate")).expect("a usable CA certificate");
    }
    assert_eq!(roots.len(), 1, "exactly one trusted certificate");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// Status code.
    pub(crate) status: u16,
    /// Headers, names lower case.
    pub(crate) headers: Vec<(String, String)>,
    /// The body (chunked bodies decoded).
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The body as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One open HTTPS connection.
pub(crate) struct Https {
    stream: TlsStream<TcpStream>,
    host: String,
    /// Bytes read but not consumed yet.
    buf: Vec<u8>,
}

impl Https {
    /// Connects to `addr` with SNI `host`, from `source` if given, trusting only `ca_pem_file`.
    pub(crate) async fn connect(
        addr: SocketAddr,
        host: &str,
        ca_pem_file: &Path,
        source: Option<IpAddr>,
    ) -> Result<Https, String> {
        let tcp = timeout(STEP, async {
            match source {
                Some(ip) => {
                    let socket = TcpSocket::new_v4()?;
                    socket.bind(SocketAddr::new(ip, 0))?;
                    socket.connect(addr).await
                }
                None => TcpStream::connect(addr).await,
            }
        })
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
        let stream = timeout(STEP, tokio_rustls::TlsConnector::from(tls_config(ca_pem_file)).connect(name, tcp))
            .await
            .map_err(|_| "TLS handshake timed out".to_owned())?
            .map_err(|e| format!("TLS: {e}"))?;
        Ok(Https { stream, host: host.to_owned(), buf: Vec::new() })
    }

    /// The leaf certificate the server presented (DER).
    pub(crate) fn leaf(&self) -> Vec<u8> {
        let (_, conn) = self.stream.get_ref();
        conn.peer_certificates().and_then(|c| c.first()).expect("the server presented a certificate").to_vec()
    }

    /// Sends `GET path` on this connection (kept alive) and reads the whole response.
    pub(crate) async fn get(&mut self, path: &str) -> Result<Response, String> {
        self.send(path).await?;
        timeout(STEP, self.response()).await.map_err(|_| format!("GET {path}: no response within {STEP:?}"))?
    }

    async fn send(&mut self, path: &str) -> Result<(), String> {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\n\r\n", self.host);
        self.stream.write_all(head.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        self.stream.flush().await.map_err(|e| format!("write: {e}"))
    }

    /// Reads more bytes into the buffer; false at the end of the stream.
    async fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Takes everything up to and including `delimiter` from the buffer, reading as needed.
    async fn take_through(&mut self, delimiter: &[u8]) -> Result<Vec<u8>, String> {
        loop {
            if let Some(at) = self.buf.windows(delimiter.len()).position(|w| w == delimiter) {
                return Ok(self.buf.drain(..at + delimiter.len()).collect());
            }
            if !self.fill().await? {
                return Err(format!("the connection closed; got {:?}", String::from_utf8_lossy(&self.buf)));
            }
        }
    }

    async fn take(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            if !self.fill().await? {
                return Err("the connection closed in a body".to_owned());
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn head(&mut self) -> Result<(u16, Vec<(String, String)>), String> {
        let head = self.take_through(b"\r\n\r\n").await?;
        let head = String::from_utf8_lossy(&head);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status line in {head:?}"))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Ok((status, headers))
    }

    /// Upgrades this connection to a WebSocket at `path`, sends `message` as one masked text
    /// frame, and returns the first text frame that comes back.
    pub(crate) async fn websocket_echo(&mut self, path: &str, message: &str) -> Result<String, String> {
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            self.host
        );
        self.stream.write_all(head.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let (status, headers) = timeout(STEP, self.head()).await.map_err(|_| "no upgrade answer".to_owned())??;
        if status != 101 {
            return Err(format!("upgrade answered {status}"));
        }
        // RFC 6455's own example key and its accept value.
        let accept = headers.iter().find(|(n, _)| n == "sec-websocket-accept").map(|(_, v)| v.as_str());
        if accept != Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") {
            return Err(format!("wrong Sec-WebSocket-Accept {accept:?}"));
        }
        self.websocket_echo_again(message).await
    }

    /// On an upgraded connection: sends `message` as one masked text frame and returns the
    /// first text frame that comes back.
    pub(crate) async fn websocket_echo_again(&mut self, message: &str) -> Result<String, String> {
        let payload = message.as_bytes();
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        let mut frame = vec![0x81];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&u16::try_from(n).map_err(|_| "message too long")?.to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.map_err(|e| format!("write: {e}"))?;
        let header = timeout(STEP, self.take(2)).await.map_err(|_| "no echo".to_owned())??;
        let n = match header[1] & 0x7f {
            126 => {
                let ext = self.take(2).await?;
                usize::from(u16::from_be_bytes([ext[0], ext[1]]))
            }
            n => usize::from(n),
        };
        let body = self.take(n).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    async fn response(&mut self) -> Result<Response, String> {
        let (status, headers) = self.head().await?;
        let mut response = Response { status, headers, body: Vec::new() };
        if let Some(length) = response.header("content-length") {
            let n = length.parse().map_err(|_| format!("content-length {length:?}"))?;
            response.body = self.take(n).await?;
        } else if response.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                let line = self.take_through(b"\r\n").await?;
                let size = String::from_utf8_lossy(&line);
                let size = size.trim().split(';').next().unwrap_or_default();
                let n = usize::from_str_radix(size, 16).map_err(|_| format!("chunk size {size:?}"))?;
                let chunk = self.take(n + 2).await?;
                response.body.extend_from_slice(&chunk[..n]);
                if n == 0 {
                    break;
                }
            }
        } else if !(status == 204 || status == 304 || (100..200).contains(&status)) {
            while self.fill().await? {}
            response.body = std::mem::take(&mut self.buf);
        }
        Ok(response)
    }

    /// Sends `GET path` and reads the streamed body until it contains `needle` (at most
    /// `limit`); returns the head's status and what was read of the body.
    pub(crate) async fn stream_until(
        &mut self,
        path: &str,
        needle: &str,
        limit: Duration,
    ) -> Result<(u16, String), String> {
        self.send(path).await?;
        let deadline = Instant::now() + limit;
        let (status, _) = timeout(STEP, self.head()).await.map_err(|_| "no response head".to_owned())??;
        while !String::from_utf8_lossy(&self.buf).contains(needle) {
            match tokio::time::timeout_at(deadline, self.fill()).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return Err("the stream ended".to_owned()),
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(format!(
                        "{needle:?} not seen within {limit:?}: {}",
                        String::from_utf8_lossy(&self.buf)
                    ));
                }
            }
        }
        Ok((status, String::from_utf8_lossy(&self.buf).into_owned()))
    }
}

/// One GET on a fresh connection.
pub(crate) async fn get(addr: SocketAddr, host: &str, ca_pem_file: &Path, path: &str) -> Result<Response, String> {
    Https::connect(addr, host, ca_pem_file, None).await?.get(path).await
}

/// GETs `path` until it answers `status`, at most `limit`; returns the last error or status.
pub(crate) async fn wait_status(
    addr: SocketAddr,
    host: &str,
    ca_pem_file: &Path,
    path: &str,
    status: u16,
    limit: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = String::from("not tried");
    while start.elapsed() < limit {
        match tokio::time::timeout_at(start + limit, get(addr, host, ca_pem_file, path)).await {
            Ok(Ok(r)) if r.status == status => return Ok(start.elapsed()),
            Ok(Ok(r)) => last = format!("status {}: {}", r.status, r.text()),
            Ok(Err(e)) => last = e,
            Err(_) => last = "timed out".to_owned(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// The certificate's serial number and SubjectPublicKeyInfo (DER).
pub(crate) fn serial_and_spki(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("an X.509 certificate");
    (cert.tbs_certificate.raw_serial().to_vec(), cert.public_key().raw.to_vec())
}

/// A gateway's `/metrics` text, from its admin address (`metrics`, or a URL
/// `http://ADDR/metrics` as the binaries print it).
pub(crate) fn metrics_text(metrics: impl std::fmt::Display) -> String {
    let text = metrics.to_string();
    let addr = text.trim_start_matches("http://").trim_end_matches("/metrics");
    let addr: SocketAddr = addr.parse().unwrap_or_else(|_| panic!("a metrics address, not {text:?}"));
    let r = svc_e2e::service::http(addr, "GET", "/metrics", &[], None);
    assert_eq!(r.status, 200);
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Reads the `svc_gateway_connections_total{outcome="..."}` counter from `/metrics`.
pub(crate) fn outcome_count(metrics: SocketAddr, outcome: &str) -> u64 {
    let text = metrics_text(metrics);
    let prefix = format!("svc_gateway_connections_total{{outcome=\"{outcome}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0, |n| n.trim().parse().expect("a counter"))
}

/// One plain-HTTP `POST path` of a JSON body to `addr` (blocking; management APIs and the
/// relay's unauthenticated routes): (status, body).
pub(crate) fn post_json(addr: SocketAddr, path: &str, body: &serde_json::Value) -> (u16, String) {
    use std::io::{Read, Write};
    let body = body.to_string();
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// The demo page's `<h1>`, or the whole page if it has none.
pub(crate) fn heading(page: &str) -> String {
    page.split_once("<h1>")
        .and_then(|(_, rest)| rest.split_once("</h1>"))
        .map_or_else(|| page.to_owned(), |(h, _)| h.to_owned())
}
