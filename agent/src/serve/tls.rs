//! A server TLS stream over rustls's unbuffered API, whose buffers the agent owns: each is
//! held only while bytes are in it, so an idle connection keeps its TLS session (keys and
//! state) and no buffer. The buffered `rustls::ServerConnection` keeps a 4 KiB receive buffer
//! for the connection's life (rustls 0.23 gives no way to shrink it), which was the largest
//! part of an idle connection's memory.
//!
//! What the stream does is what `tokio_rustls::server::TlsStream` did: the handshake, then
//! application data both ways, the peer's `close_notify` read as the end, a shutdown sending
//! ours; an end of the socket without `close_notify` is an `UnexpectedEof` error, as rustls
//! reports it.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert, UnbufferedServerConnection};
use rustls::sign::CertifiedKey;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError, UnbufferedStatus};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much is read from the socket at once.
const READ_SIZE: usize = 16 * 1024;

/// The most received bytes held before they make a message: a handshake message may span
/// records up to 64 KiB (rustls's own limit), plus one record.
const INCOMING_LIMIT: usize = 0xffff + 18 * 1024;

/// The most plaintext taken by one write: four full records.
const WRITE_CHUNK: usize = 4 * 16 * 1024;

thread_local! {
    /// The server name the last ClientHello resolved on this thread asked for.
    static ASKED: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// The certificate resolver of a [`Tls`] connection's configuration: `inner`, and the server
/// name asked for noted for the connection. rustls's unbuffered connection does not tell its
/// server name; the resolver sees it, inside the call into rustls that [`Tls`] makes on this
/// thread.
#[derive(Debug)]
pub(crate) struct NamedResolver(pub(crate) Arc<dyn ResolvesServerCert>);

impl ResolvesServerCert for NamedResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let asked = hello.server_name().map(Arc::from);
        ASKED.with(|a| *a.borrow_mut() = asked);
        self.0.resolve(hello)
    }
}

/// A server TLS connection over `S`.
pub(crate) struct Tls<S> {
    io: S,
    conn: UnbufferedServerConnection,
    /// The server name the client asked for (through [`NamedResolver`]).
    server_name: Option<Arc<str>>,
    /// Received bytes not yet processed (empty, without capacity, when there are none).
    incoming: Vec<u8>,
    /// Encoded bytes to send, from `sent` on.
    outgoing: Vec<u8>,
    sent: usize,
    /// Decrypted bytes not yet read, from `taken` on (without capacity once all are read).
    plain: Vec<u8>,
    taken: usize,
    /// The peer sent `close_notify`: no more data comes.
    peer_closed: bool,
    /// The socket ended.
    eof: bool,
    /// Our `close_notify` is queued.
    closing: bool,
}

/// What the state machine waits for, once what was received is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// More bytes from the peer (the handshake is not done).
    Read,
    /// Nothing: application data may go either way.
    Traffic,
    /// Both sides sent `close_notify`.
    Closed,
}

/// What to do once the state machine allows application data.
enum Action<'a> {
    None,
    Encrypt(&'a [u8]),
    CloseNotify,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<S: AsyncRead + AsyncWrite + Unpin> Tls<S> {
    /// The TLS handshake on `io` as `config` says: done when application data may flow (the
    /// session tickets sent as well).
    pub(crate) async fn accept(io: S, config: Arc<ServerConfig>) -> io::Result<Tls<S>> {
        let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
        let mut tls = Tls {
            io,
            conn,
            server_name: None,
            incoming: Vec::new(),
            outgoing: Vec::new(),
            sent: 0,
            plain: Vec::new(),
            taken: 0,
            peer_closed: false,
            eof: false,
            closing: false,
        };
        std::future::poll_fn(|cx| tls.poll_handshake(cx)).await?;
        Ok(tls)
    }

    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ASKED.with(|a| a.borrow_mut().take());
            let processed = self.process(Action::None);
            if let Some(asked) = ASKED.with(|a| a.borrow_mut().take()) {
                self.server_name = Some(asked);
            }
            let step = match processed {
                Ok((step, _)) => step,
                Err(e) => {
                    // The alert describing the failure, if the socket takes it now.
                    let _ = self.poll_send(cx);
                    return Poll::Ready(Err(e));
                }
            };
            ready!(self.poll_send(cx))?;
            match step {
                // The server may send after its Finished; done once the client's is in.
                Step::Traffic if !self.conn.is_handshaking() => return Poll::Ready(Ok(())),
                Step::Closed => return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into())),
                Step::Read | Step::Traffic if self.eof => {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof")));
                }
                Step::Read | Step::Traffic => ready!(self.poll_receive(cx))?,
            }
        }
    }

    /// Runs rustls on what was received: handshake and alert records are encoded into
    /// `outgoing`, application data goes to `plain`; once application data may be sent,
    /// `action` is done there. Returns where it stopped and how many bytes `action` took. On
    /// an error, the alert rustls sends for it is in `outgoing`.
    fn process(&mut self, action: Action<'_>) -> io::Result<(Step, usize)> {
        let processed = self.process_records(action);
        if processed.is_err() {
            // rustls queues the alert before failing, and hands queued records out first.
            for _ in 0..4 {
                let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
                match state {
                    Ok(ConnectionState::EncodeTlsData(mut data)) => {
                        if grow_into(&mut self.outgoing, 64, |out| encoded(data.encode(out))).is_err() {
                            break;
                        }
                    }
                    Ok(ConnectionState::TransmitTlsData(data)) => data.done(),
                    _ => break,
                }
            }
        }
        processed
    }

    fn process_records(&mut self, mut action: Action<'_>) -> io::Result<(Step, usize)> {
        loop {
            let UnbufferedStatus { mut discard, state } = self.conn.process_tls_records(&mut self.incoming);
            let mut done = None;
            match state.map_err(tls_error)? {
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        if self.taken == self.plain.len() {
                            self.plain.clear();
                            self.taken = 0;
                        }
                        self.plain.extend_from_slice(record.payload);
                    }
                }
                ConnectionState::ReadEarlyData(mut records) => {
                    // Not offered (no early data in the configuration); taken as data if sent.
                    while let Some(record) = records.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        self.plain.extend_from_slice(record.payload);
                    }
                }
                ConnectionState::EncodeTlsData(mut data) => {
                    grow_into(&mut self.outgoing, 512, |out| encoded(data.encode(out)))?;
                }
                // The bytes are in `outgoing`, sent before anything waits.
                ConnectionState::TransmitTlsData(data) => data.done(),
                ConnectionState::BlockedHandshake => done = Some((Step::Read, 0)),
                ConnectionState::PeerClosed => self.peer_closed = true,
                ConnectionState::Closed => {
                    self.peer_closed = true;
                    done = Some((Step::Closed, 0));
                }
                ConnectionState::WriteTraffic(mut traffic) => {
                    let taken = match std::mem::replace(&mut action, Action::None) {
                        Action::None => 0,
                        Action::Encrypt(plain) => {
                            let plain = &plain[..plain.len().min(WRITE_CHUNK)];
                            let overhead = 32 * plain.len().div_ceil(16 * 1024).max(1);
                            grow_into(&mut self.outgoing, plain.len() + overhead, |out| {
                                encrypted(traffic.encrypt(plain, out))
                            })?;
                            plain.len()
                        }
                        Action::CloseNotify => {
                            grow_into(&mut self.outgoing, 64, |out| encrypted(traffic.queue_close_notify(out)))?;
                            0
                        }
                    };
                    done = Some((Step::Traffic, taken));
                }
                _ => return Err(io::Error::other("an unknown TLS connection state")),
            }
            if discard > 0 {
                self.incoming.drain(..discard);
            }
            if let Some(done) = done {
                return Ok(done);
            }
        }
    }

    /// Reads what the socket has into `incoming` (at least one byte, or the end).
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let used = self.incoming.len();
        if used >= INCOMING_LIMIT {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, "message buffer full")));
        }
        self.incoming.resize(used + READ_SIZE, 0);
        let mut buf = ReadBuf::new(&mut self.incoming[used..]);
        let polled = Pin::new(&mut self.io).poll_read(cx, &mut buf);
        let read = buf.filled().len();
        self.incoming.truncate(used + read);
        match polled {
            Poll::Ready(Ok(())) => {
                if read == 0 {
                    self.eof = true;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                // Waiting: nothing held for bytes that are not there.
                if self.incoming.is_empty() {
                    self.incoming = Vec::new();
                }
                Poll::Pending
            }
        }
    }

    /// Sends what `outgoing` holds; its room is given back once it is all sent.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.outgoing.len() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &self.outgoing[self.sent..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.outgoing = Vec::new();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// The stream this connection runs over.
    pub(crate) fn get_ref(&self) -> &S {
        &self.io
    }

    /// The ALPN protocol agreed on.
    pub(crate) fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// The server name the client asked for, when it named one.
    pub(crate) fn server_name(&self) -> Option<&Arc<str>> {
        self.server_name.as_ref()
    }
}

/// `Ok(Ok(n))` for `n` bytes encoded, `Ok(Err(size))` for a buffer too small.
fn encoded(result: Result<usize, EncodeError>) -> io::Result<Result<usize, usize>> {
    match result {
        Ok(n) => Ok(Ok(n)),
        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => Ok(Err(required_size)),
        Err(e) => Err(io::Error::other(e)),
    }
}

/// `Ok(Ok(n))` for `n` bytes encrypted, `Ok(Err(size))` for a buffer too small.
fn encrypted(result: Result<usize, EncryptError>) -> io::Result<Result<usize, usize>> {
    match result {
        Ok(n) => Ok(Ok(n)),
        Err(EncryptError::InsufficientSize(InsufficientSizeError { required_size })) => Ok(Err(required_size)),
        Err(e) => Err(io::Error::other(e)),
    }
}

/// Appends to `out` what `write` puts in the room it is given, `guess` bytes at first, then
/// as much as it says it needs. Returns the bytes written.
fn grow_into(
    out: &mut Vec<u8>,
    guess: usize,
    mut write: impl FnMut(&mut [u8]) -> io::Result<Result<usize, usize>>,
) -> io::Result<usize> {
    let start = out.len();
    let mut room = guess;
    for _ in 0..3 {
        out.resize(start + room, 0);
        match write(&mut out[start..]) {
            Ok(Ok(n)) => {
                out.truncate(start + n);
                return Ok(n);
            }
            Ok(Err(needed)) => room = needed,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
    }
    out.truncate(start);
    Err(io::Error::other("TLS output does not fit the room it asked for"))
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Tls<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.taken < this.plain.len() {
                let n = buf.remaining().min(this.plain.len() - this.taken);
                buf.put_slice(&this.plain[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.plain.len() {
                    this.plain = Vec::new();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.peer_closed {
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed connection without sending TLS close_notify",
                )));
            }
            let (step, _) = this.process(Action::None)?;
            // What processing produced (an alert, a key update) goes out as it can; a write
            // that must wait does not hold up reading.
            if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                return Poll::Ready(Err(e));
            }
            if this.taken < this.plain.len() || this.peer_closed || step == Step::Closed {
                continue;
            }
            ready!(this.poll_receive(cx))?;
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Tls<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // At most one chunk waits to be sent.
        ready!(this.poll_send(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if this.closing {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let (step, taken) = this.process(Action::Encrypt(buf))?;
        if step != Step::Traffic {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS connection is closed")));
        }
        // Sent as far as the socket takes it now; the rest before the next write.
        if let Poll::Ready(Err(e)) = this.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    /// The slices are encrypted together, as rustls's buffered writer does (hyper's head and
    /// a small body go out in one record): one slice as it is, several gathered (up to
    /// [`WRITE_CHUNK`]) in a buffer that lives for the call.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if bufs.iter().filter(|b| !b.is_empty()).count() < 2 {
            let one = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
            return self.poll_write(cx, one);
        }
        let mut gathered = Vec::with_capacity(bufs.iter().map(|b| b.len()).sum::<usize>().min(WRITE_CHUNK));
        for buf in bufs {
            let room = WRITE_CHUNK - gathered.len();
            gathered.extend_from_slice(&buf[..buf.len().min(room)]);
        }
        self.poll_write(cx, &gathered)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.closing {
            this.closing = true;
            // Best effort, as rustls's buffered stream: a connection already failed just ends.
            let _ = this.process(Action::CloseNotify);
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
impl<S> Tls<S> {
    /// Bytes of room the connection's buffers hold now.
    fn buffers_held(&self) -> usize {
        self.incoming.capacity() + self.outgoing.capacity() + self.plain.capacity()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    type Client = tokio_rustls::client::TlsStream<DuplexStream>;

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A server configuration for `app.localhost` (ALPN `h2`, `http/1.1`) and a client that
    /// trusts it, offering `alpn`.
    fn configs(alpn: &[&[u8]]) -> (Arc<ServerConfig>, Arc<rustls::ClientConfig>) {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["app.localhost".to_owned()])
            .expect("parameters")
            .self_signed(&key)
            .expect("a certificate");
        let der = CertificateDer::from(cert.der().to_vec());
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = provider().key_provider.load_private_key(private).expect("a signing key");
        let certified = Arc::new(CertifiedKey::new(vec![der.clone()], signing));
        #[derive(Debug)]
        struct One(Arc<CertifiedKey>);
        impl ResolvesServerCert for One {
            fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
                Some(self.0.clone())
            }
        }
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(NamedResolver(Arc::new(One(certified)))));
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).expect("a root");
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        (Arc::new(server), Arc::new(client))
    }

    async fn pair(alpn: &[&[u8]]) -> (Tls<DuplexStream>, Client) {
        let (server, client) = configs(alpn);
        let (near, far) = tokio::io::duplex(64 * 1024);
        let connector = tokio_rustls::TlsConnector::from(client);
        let name = ServerName::try_from("app.localhost").expect("a name");
        let (served, connected) = tokio::join!(Tls::accept(near, server), connector.connect(name, far));
        (served.expect("the server's handshake"), connected.expect("the client's handshake"))
    }

    #[tokio::test]
    async fn data_goes_both_ways_and_an_idle_connection_holds_no_buffer() {
        let (mut server, mut client) = pair(&[b"http/1.1"]).await;
        assert_eq!(server.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(server.server_name().map(|n| &**n), Some("app.localhost"));
        // More than a record's worth each way, in both directions at once.
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let echo = async {
            let mut got = vec![0; sent.len()];
            server.read_exact(&mut got).await.expect("the server reads");
            server.write_all(&got).await.expect("the server writes");
            server.flush().await.expect("the server flushes");
        };
        let talk = async {
            let mut back = vec![0; sent.len()];
            let (wrote, read) = {
                let (mut r, mut w) = tokio::io::split(&mut client);
                tokio::join!(async { w.write_all(&sent).await.and(w.flush().await) }, r.read_exact(&mut back))
            };
            wrote.expect("the client writes");
            read.expect("the client reads");
            back
        };
        let ((), back) = tokio::join!(echo, talk);
        assert_eq!(back, sent);
        // Idle, waiting for the client's next bytes: no buffer held.
        let mut byte = [0u8; 1];
        let waited = tokio::time::timeout(Duration::from_millis(50), server.read(&mut byte)).await;
        assert!(waited.is_err(), "nothing to read");
        assert_eq!(server.buffers_held(), 0, "room held by an idle connection");

        // The client's close_notify is the end; ours goes back.
        client.write_all(b"last").await.expect("writes");
        client.shutdown().await.expect("closes");
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.expect("reads to the end");
        assert_eq!(rest, b"last");
        server.shutdown().await.expect("shuts down");
        let mut none = Vec::new();
        client.read_to_end(&mut none).await.expect("the client sees our close_notify");
        assert!(none.is_empty());
    }

    #[tokio::test]
    async fn slices_written_together_go_in_one_record() {
        let (mut server, client) = pair(&[b"http/1.1"]).await;
        let (mut raw, _) = client.into_inner();
        let slices = [io::IoSlice::new(b"HTTP/1.1 200 OK\r\n\r\n"), io::IoSlice::new(b"hello")];
        let written = server.write_vectored(&slices).await.expect("writes");
        assert_eq!(written, 24);
        server.flush().await.expect("flushes");
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(50), raw.read(&mut chunk)).await {
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..n]);
        }
        // The records after the handshake (session tickets, then ours): the last one holds
        // both slices (TLS 1.3: 24 bytes, the content type and a 16-byte tag).
        let (mut at, mut last) = (0, 0);
        while at + 5 <= bytes.len() {
            last = usize::from(u16::from_be_bytes([bytes[at + 3], bytes[at + 4]]));
            at += 5 + last;
        }
        assert_eq!(last, 24 + 17);
    }

    #[tokio::test]
    async fn a_socket_ended_without_close_notify_is_an_unexpected_end() {
        let (mut server, client) = pair(&[b"h2"]).await;
        assert_eq!(server.alpn_protocol(), Some(&b"h2"[..]));
        let (far, _) = client.into_inner();
        drop(far);
        let mut buf = [0u8; 16];
        let err = server.read(&mut buf).await.expect_err("no close_notify");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// An attacker's client asks for a key update with every byte it sends and reads nothing.
    /// Were each request answered at once, the answers would queue without end in
    /// `outgoing` (found harmless in an attack pass: rustls keeps one key update pending and
    /// sends it with our next data, so nothing queues; this keeps it so).
    #[tokio::test]
    async fn key_updates_from_a_client_that_reads_nothing_queue_a_bounded_backlog() {
        let (mut server, mut client) = pair(&[b"http/1.1"]).await;
        let flood = async {
            let mut sent = 0;
            for _ in 0..20_000 {
                client.get_mut().1.refresh_traffic_keys().expect("a key update");
                let wrote = async { client.write_all(b"x").await.and(client.flush().await) };
                match tokio::time::timeout(Duration::from_millis(200), wrote).await {
                    Ok(Ok(())) => sent += 1,
                    _ => break,
                }
            }
            sent
        };
        let mut taken = 0usize;
        let drain = async {
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = server.read(&mut buf).await {
                taken += n;
            }
        };
        let sent = tokio::select! { sent = flood => sent, () = drain => 0 };
        let backlog = server.outgoing.len() - server.sent;
        assert!(sent > 1_000, "the client's bytes were read for a while: {sent} sent, {taken} taken");
        assert!(backlog <= 1024, "{backlog} bytes wait to be sent after {sent} key updates");
    }

    #[tokio::test]
    async fn a_failed_handshake_sends_its_alert() {
        let (server, client) = configs(&[b"spdy/1"]);
        let (near, far) = tokio::io::duplex(64 * 1024);
        let connector = tokio_rustls::TlsConnector::from(client);
        let name = ServerName::try_from("app.localhost").expect("a name");
        let (served, connected) = tokio::join!(Tls::accept(near, server), connector.connect(name, far));
        assert!(served.is_err(), "no common protocol");
        let err = connected.expect_err("refused");
        let alert = err.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
        assert!(
            matches!(alert, Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol))),
            "{err:?}"
        );
    }
}
