//! The egress broker: an ingress job's agent lives in its job's network namespace, where
//! nothing of the host is reachable, yet it must reach the gateway's tunnel, the coordinator's
//! agent API and the ACME server. So the runner listens for it on a unix socket shown inside
//! the agent's sandbox ([`EGRESS_INSIDE`]) and connects for it, only to the destinations the
//! job's [`EgressPolicy`] allows, relaying the bytes both ways. The app cannot use it: the
//! socket is in the agent's sandbox only. Unix sockets are reached through the file system,
//! not the network, so the namespace does not stand in the way.
//!
//! The protocol, one request per connection: the agent sends `CONNECT host:port\n`; the broker
//! answers `OK\n` and from then on relays, or `ERR reason\n` and closes.
//!
//! Each of an agent's client connections is one relayed connection here, mostly idle: a relay
//! holds a buffer only while bytes are in flight ([`RELAY_CHUNK`]), not two for its life.
//!
//! Each broker connects to loopback destinations (the coordinator's own gateway tunnel and
//! agent API) from a loopback address of its own ([`LoopbackSource`]), not 127.0.0.1: what
//! counts connections per source there (the gateway's pending caps, which close a source's
//! oldest for its newcomer) then tells one job from another, so a job flooding its broker
//! churns only its own connections, never another tenant's agent's.

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio::net::{TcpSocket, TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Where the broker's socket appears inside the agent's sandbox.
pub const EGRESS_INSIDE: &str = "/run/svc/egress.sock";

/// The environment variable that tells the agent where the broker's socket is.
pub const EGRESS_ENV: &str = "SVC_AGENT_EGRESS";

/// The longest request line.
const REQUEST_LIMIT: u64 = 512;

/// How long the agent has to say where to, and the broker to connect there.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections relayed for one job at once: one per client connection the agent serves, plus
/// its tunnels and API calls; beyond it new ones wait.
pub const CONNECTIONS_PER_JOB: usize = 4096;

/// The buffer one direction of a relay reads into while bytes come (tokio's `copy` size);
/// freed as soon as a read finds nothing more.
const RELAY_CHUNK: usize = 8 * 1024;

/// Where a job's agent may connect.
pub trait EgressPolicy: Send + Sync + std::fmt::Debug {
    /// Whether `destination` (`host:port`, as the agent names it) is allowed now.
    fn allows(&self, destination: &str) -> bool;
}

/// A job's policy, as a job spec holds it: equal when it is the same policy.
#[derive(Debug, Clone)]
pub struct Egress(pub Arc<dyn EgressPolicy>);

impl PartialEq for Egress {
    fn eq(&self, other: &Egress) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Egress {}

/// A fixed set of destinations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations(pub Vec<String>);

impl EgressPolicy for Destinations {
    fn allows(&self, destination: &str) -> bool {
        self.0.iter().any(|d| d == destination)
    }
}

/// The loopback address a broker connects to loopback destinations from: 127.77.X.Y, one per
/// broker of the process (65,534 before one is used again; jobs that long gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopbackSource(Ipv4Addr);

impl LoopbackSource {
    /// The next broker's address.
    fn next() -> LoopbackSource {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // 1..=65534: neither 127.77.0.0 nor 127.77.255.255.
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 65_534 + 1;
        LoopbackSource(Ipv4Addr::new(127, 77, (n >> 8) as u8, n as u8))
    }

    /// The address.
    pub fn ip(self) -> Ipv4Addr {
        self.0
    }

    /// Connects to `to`, from this address when `to` is an IPv4 loopback address (where every
    /// broker would otherwise be 127.0.0.1), as usual otherwise. A host whose loopback
    /// interface holds only 127.0.0.1 refuses the bind: then as usual too.
    async fn connect(self, to: SocketAddr) -> io::Result<TcpStream> {
        if let SocketAddr::V4(v4) = to
            && v4.ip().is_loopback()
            && let Ok(socket) = self.bound()
        {
            return socket.connect(to).await;
        }
        TcpStream::connect(to).await
    }

    fn bound(self) -> io::Result<TcpSocket> {
        let socket = TcpSocket::new_v4()?;
        // A port of this address in TIME_WAIT may be bound again: the address is the job's
        // alone, and a busy route's agent opens a connection per client connection.
        socket.set_reuseaddr(true)?;
        socket.bind(SocketAddr::V4(SocketAddrV4::new(self.0, 0)))?;
        Ok(socket)
    }
}

/// Connects to `destination` (`host:port`) from `source`: each address it names in turn,
/// the first that answers (as `TcpStream::connect` does).
async fn connect(destination: &str, source: LoopbackSource) -> io::Result<TcpStream> {
    let mut last = None;
    for address in tokio::net::lookup_host(destination).await? {
        match source.connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the name has no address")))
}

/// A broker listening for one job. Stops (and removes its socket) when dropped.
#[derive(Debug)]
pub struct Broker {
    socket: PathBuf,
    source: LoopbackSource,
    task: JoinHandle<()>,
    buffers: Arc<AtomicUsize>,
}

impl Broker {
    /// Listens on `socket` (a new path; its directory must exist), for connections checked
    /// against `policy`. Must be called within a tokio runtime.
    pub fn listen(socket: &Path, policy: Arc<dyn EgressPolicy>) -> io::Result<Broker> {
        let listener = UnixListener::bind(socket)?;
        let buffers = Arc::new(AtomicUsize::new(0));
        let source = LoopbackSource::next();
        let task = tokio::spawn(serve(listener, policy, source, buffers.clone()));
        Ok(Broker { socket: socket.to_owned(), source, task, buffers })
    }

    /// The address it connects to loopback destinations from.
    pub fn loopback_source(&self) -> LoopbackSource {
        self.source
    }

    /// The relay buffers held now: one per direction that has bytes in flight, none for an
    /// idle connection.
    pub fn buffers_held(&self) -> usize {
        self.buffers.load(Ordering::Relaxed)
    }

    /// The socket's path on the host.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Relays under way end with the task's connections: the job is gone.
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn serve(
    listener: UnixListener,
    policy: Arc<dyn EgressPolicy>,
    source: LoopbackSource,
    buffers: Arc<AtomicUsize>,
) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_PER_JOB));
    let mut relays = tokio::task::JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (policy, buffers) = (policy.clone(), buffers.clone());
                    relays.spawn(async move {
                        relay(stream, policy.as_ref(), source, &buffers).await;
                        drop(permit);
                    });
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            },
            // Reap finished relays so the set stays small.
            Some(_) = relays.join_next(), if !relays.is_empty() => {}
        }
    }
}

/// Serves one agent connection: reads where to, checks, connects, relays. `buffers` counts
/// the relay buffers held.
async fn relay(stream: UnixStream, policy: &dyn EgressPolicy, source: LoopbackSource, buffers: &AtomicUsize) {
    // The request and its answer are boxed: the relay's task keeps only what relaying needs.
    let Some((mut agent, mut upstream)) = Box::pin(open(stream, policy, source)).await else { return };
    let (agent_read, agent_write) = agent.split();
    let (upstream_read, upstream_write) = upstream.split();
    // Like `copy_bidirectional`: each side's end is passed on as a shutdown of the other's
    // sending, and the relay is over once both directions are, or at the first error.
    let _ = tokio::try_join!(pump(agent_read, upstream_write, buffers), pump(upstream_read, agent_write, buffers));
}

/// Reads the agent's request, connects where it asks if allowed, and answers it: the two
/// streams to relay between, with what the agent sent after its request line already passed
/// on; `None` when answered `ERR` or gone.
async fn open(
    stream: UnixStream,
    policy: &dyn EgressPolicy,
    source: LoopbackSource,
) -> Option<(UnixStream, TcpStream)> {
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    let read = tokio::time::timeout(REQUEST_TIMEOUT, (&mut stream).take(REQUEST_LIMIT).read_line(&mut line)).await;
    let answer = match read {
        Ok(Ok(_)) if line.ends_with('\n') => match line.trim_end().strip_prefix("CONNECT ") {
            Some(destination) if policy.allows(destination) => {
                match tokio::time::timeout(REQUEST_TIMEOUT, connect(destination, source)).await {
                    Ok(Ok(upstream)) => Ok((upstream, destination.to_owned())),
                    Ok(Err(e)) => Err(format!("cannot connect to {destination}: {e}")),
                    Err(_) => Err(format!("connecting to {destination} timed out")),
                }
            }
            Some(destination) => Err(format!("{destination} is not a destination this job may reach")),
            None => Err("expected CONNECT host:port".to_owned()),
        },
        _ => Err("expected one line: CONNECT host:port".to_owned()),
    };
    match answer {
        Ok((mut upstream, _)) => {
            let _ = upstream.set_nodelay(true);
            stream.get_mut().write_all(b"OK\n").await.ok()?;
            // Bytes the agent sent after its request line are in the reader's buffer.
            let buffered = stream.buffer().to_vec();
            if !buffered.is_empty() {
                upstream.write_all(&buffered).await.ok()?;
            }
            Some((stream.into_inner(), upstream))
        }
        Err(reason) => {
            let reason = reason.replace('\n', " ");
            let _ = stream.get_mut().write_all(format!("ERR {reason}\n").as_bytes()).await;
            None
        }
    }
}

/// One side of a relayed connection, read only once readable.
trait Source: AsyncRead + Unpin {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
}

impl Source for tokio::net::unix::ReadHalf<'_> {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::unix::ReadHalf::readable(self)
    }
}

impl Source for tokio::net::tcp::ReadHalf<'_> {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::tcp::ReadHalf::readable(self)
    }
}

/// Reads what is there now: `None` if nothing is, or if the task's budget is spent (the
/// runtime then asked to be polled again: see [`pump`]). Unlike `try_read`, a read that fills less
/// than `buf` tells the runtime the socket is drained (the runtime's own reads do), so an
/// idle relay's message costs one read, not a second one only to hear "nothing more".
fn read_now<'a>(from: &'a mut impl Source, buf: &'a mut [u8]) -> impl Future<Output = Option<io::Result<usize>>> + 'a {
    std::future::poll_fn(move |cx| {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut *from).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(buf.filled().len()))),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Ready(None),
        }
    })
}

/// A relay buffer, counted while it lives.
struct Chunk<'a> {
    bytes: Box<[u8]>,
    held: &'a AtomicUsize,
}

impl<'a> Chunk<'a> {
    fn new(held: &'a AtomicUsize) -> Chunk<'a> {
        held.fetch_add(1, Ordering::Relaxed);
        Chunk { bytes: vec![0; RELAY_CHUNK].into_boxed_slice(), held }
    }
}

impl Drop for Chunk<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until `from` ends, then shuts `to`'s sending. A buffer is taken when
/// `from` is readable and given back once a read finds nothing more (or fills less than the
/// buffer: drained), so that an idle direction holds none.
async fn pump(mut from: impl Source, mut to: impl AsyncWrite + Unpin, held: &AtomicUsize) -> io::Result<()> {
    loop {
        // `readable` costs the task no budget while the reads below do: once the budget is
        // spent, `read_now` finds "nothing" with the socket still readable, and without this
        // the loop would spin without ever yielding.
        tokio::task::coop::consume_budget().await;
        from.readable().await?;
        let mut chunk = Chunk::new(held);
        loop {
            match read_now(&mut from, &mut chunk.bytes).await {
                None => break,
                Some(Ok(0)) => return to.shutdown().await,
                Some(Ok(n)) => {
                    to.write_all(&chunk.bytes[..n]).await?;
                    if n < chunk.bytes.len() {
                        break;
                    }
                }
                Some(Err(e)) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn ask(socket: &Path, request: &str) -> (String, UnixStream) {
        let mut stream = UnixStream::connect(socket).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).await.expect("answer") == 1 {
            answer.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
        (String::from_utf8_lossy(&answer).into_owned(), stream)
    }

    #[tokio::test]
    async fn the_broker_relays_to_allowed_destinations_only() {
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let allowed = upstream.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                let mut buf = [0u8; 5];
                if s.read_exact(&mut buf).await.is_ok() {
                    let _ = s.write_all(&buf).await;
                }
            }
        });
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("egress.sock");
        let broker = Broker::listen(&socket, Arc::new(Destinations(vec![allowed.clone()]))).expect("listen");

        let (answer, mut stream) = ask(&socket, &format!("CONNECT {allowed}\nhello")).await;
        assert_eq!(answer, "OK\n");
        let mut echoed = [0u8; 5];
        stream.read_exact(&mut echoed).await.expect("echo");
        assert_eq!(&echoed, b"hello", "bytes sent with the request line are relayed too");

        let (refused, _) = ask(&socket, "CONNECT 127.0.0.1:1\n").await;
        assert!(refused.starts_with("ERR 127.0.0.1:1 is not a destination"), "{refused}");
        let (garbage, _) = ask(&socket, "GET / HTTP/1.1\n").await;
        assert!(garbage.starts_with("ERR expected CONNECT"), "{garbage}");
        let (long, _) = ask(&socket, &format!("CONNECT {}\n", "a".repeat(1000))).await;
        assert!(long.starts_with("ERR expected one line"), "{long}");

        drop(broker);
        assert!(!socket.exists(), "the socket is removed with the broker");
    }

    /// A relay moving more than the runtime's per-task budget in one go: the read that the
    /// budget holds back must yield, not be taken for "drained" with the socket still readable
    /// (it spun a worker for good, and a flooding job took the coordinator's every worker).
    /// The broker runs on a runtime of its own, so that a spinning relay cannot stop this
    /// test's hang guard.
    #[tokio::test]
    async fn a_bulk_relay_yields_to_the_runtime_instead_of_spinning() {
        const BULK: usize = 16 << 20;
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let allowed = upstream.local_addr().expect("addr").to_string();
        let received = tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.expect("accept");
            let mut sink = Vec::new();
            s.read_to_end(&mut sink).await.expect("read")
        });
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("egress.sock");
        let brokers_runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        let broker = {
            let _on = brokers_runtime.enter();
            Broker::listen(&socket, Arc::new(Destinations(vec![allowed.clone()]))).expect("listen")
        };
        let (answer, mut stream) = ask(&socket, &format!("CONNECT {allowed}\n")).await;
        assert_eq!(answer, "OK\n");
        let sent = tokio::spawn(async move {
            stream.write_all(&vec![7u8; BULK]).await.expect("write");
            stream.shutdown().await.expect("shutdown");
            stream
        });
        // A hang guard only: a spinning relay never passes the bytes on.
        let received = tokio::time::timeout(Duration::from_secs(60), received).await;
        sent.abort();
        drop(broker);
        brokers_runtime.shutdown_background();
        let received = received.expect("the relay passed every byte on").expect("the reader");
        assert_eq!(received, BULK);
    }

    /// Every job's broker would otherwise reach the coordinator's gateway from 127.0.0.1, where
    /// its per-source caps close a source's oldest connection for a newcomer: one job's flood
    /// would close another's agent's connections (tests/ingress/egress_flood.rs end to end).
    #[tokio::test]
    async fn each_broker_reaches_loopback_from_an_address_of_its_own() {
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let allowed = upstream.local_addr().expect("addr").to_string();
        let dir = tempfile::tempdir().expect("dir");
        let mut seen = Vec::new();
        let mut brokers = Vec::new();
        for name in ["a.sock", "b.sock"] {
            let socket = dir.path().join(name);
            let broker = Broker::listen(&socket, Arc::new(Destinations(vec![allowed.clone()]))).expect("listen");
            let (answer, _stream) = ask(&socket, &format!("CONNECT {allowed}\n")).await;
            assert_eq!(answer, "OK\n");
            let (_, peer) = upstream.accept().await.expect("accept");
            assert_eq!(peer.ip(), std::net::IpAddr::V4(broker.loopback_source().ip()), "the broker's own address");
            seen.push(peer.ip());
            brokers.push(broker);
        }
        assert_ne!(seen[0], seen[1], "two jobs' brokers, two sources");
        assert!(seen.iter().all(|ip| *ip != std::net::IpAddr::V4(Ipv4Addr::LOCALHOST)), "{seen:?}");
    }

    #[tokio::test]
    async fn an_idle_relayed_connection_holds_no_buffer_and_each_end_is_passed_on() {
        // An echo upstream that closes once the agent has ended its sending.
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let allowed = upstream.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("egress.sock");
        let broker = Broker::listen(&socket, Arc::new(Destinations(vec![allowed.clone()]))).expect("listen");

        let mut streams = Vec::new();
        for _ in 0..20 {
            let (answer, mut stream) = ask(&socket, &format!("CONNECT {allowed}\n")).await;
            assert_eq!(answer, "OK\n");
            // More than one buffer's worth each way.
            let sent: Vec<u8> = (0..3 * RELAY_CHUNK).map(|i| (i % 251) as u8).collect();
            let (mut r, mut w) = stream.split();
            let mut echoed = vec![0; sent.len()];
            let (wrote, read) = tokio::join!(w.write_all(&sent), r.read_exact(&mut echoed));
            wrote.expect("sends");
            read.expect("reads the echo");
            assert_eq!(echoed, sent);
            streams.push(stream);
        }
        // Every connection is open and idle now: no buffer is held for any of them.
        let mut held = broker.buffers_held();
        for _ in 0..100 {
            if held == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            held = broker.buffers_held();
        }
        assert_eq!(held, 0, "buffers held by 20 idle relayed connections");

        // Still relaying; the agent's end reaches the upstream, whose end comes back.
        let stream = &mut streams[0];
        stream.write_all(b"again").await.expect("sends");
        let mut echoed = [0u8; 5];
        stream.read_exact(&mut echoed).await.expect("reads");
        assert_eq!(&echoed, b"again");
        stream.shutdown().await.expect("ends its sending");
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
        assert_eq!(read.expect("the upstream's end comes back").expect("reads"), 0);
    }
}
