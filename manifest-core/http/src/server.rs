//! The listener: the accept loop (the connection cap, eviction at the cap, backoff on
//! accept errors), one task per connection (TLS handshake, hyper's HTTP/1.1, the
//! connection's deadline), the per-request wrapper (request id, body deadline, internal
//! errors), and graceful shutdown.
//!
//! Why not hyper's own `header_read_timeout`: in hyper 1.x it also starts when a kept-alive
//! connection goes idle, so the idle wait could never differ from the header timeout; and
//! closing the oldest half-sent connection at the cap needs each connection's phase anyway
//! (`conn.rs`), which gives both deadlines.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower_service::Service;

use crate::backoff::{Backoff, is_connection_error};
use crate::body::{TimedBody, TrackedBody};
use crate::conn::{Conn, Registration, Table};
use crate::error::ServeError;
use crate::request::{InternalError, RequestId, finish};
use crate::settings::{Settings, connection_cap};
use crate::tls::Tls;

/// How often, at most, the server logs that it is at its connection cap.
const CAP_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A bound listener, ready to serve a router.
#[derive(Debug)]
pub struct Server {
    name: &'static str,
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<Tls>,
    settings: Settings,
    cap: usize,
}

impl Server {
    /// Binds `addr`. `name` starts the server's log lines (`svc serve`). Refuses plain HTTP
    /// (`tls` of `None`) on an address that is not loopback.
    pub async fn bind(
        name: &'static str,
        addr: SocketAddr,
        tls: Option<Tls>,
        settings: Settings,
    ) -> Result<Server, ServeError> {
        settings.validate()?;
        refuse_plain_off_loopback(addr, tls.as_ref())?;
        let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
        Server::from_listener(name, listener, tls, settings)
    }

    /// Serves an already bound listener (the same checks as [`Server::bind`]).
    pub fn from_listener(
        name: &'static str,
        listener: TcpListener,
        tls: Option<Tls>,
        settings: Settings,
    ) -> Result<Server, ServeError> {
        settings.validate()?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr: SocketAddr::from(([0, 0, 0, 0], 0)), source })?;
        refuse_plain_off_loopback(addr, tls.as_ref())?;
        let cap = connection_cap(settings.max_connections).map_err(|needed| ServeError::FileLimit { needed })?;
        Ok(Server { name, listener, addr, tls, settings, cap })
    }

    /// The bound address (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// How many connections it keeps open at most: the configured maximum, lowered to fit the
    /// open-file limit.
    pub fn connection_cap(&self) -> usize {
        self.cap
    }

    /// Serves `router` until `shutdown` completes, then stops accepting, closes connections
    /// without a request under way, lets requests in flight finish (at most the drain
    /// timeout), and returns. Dropping the future closes every connection at once.
    pub async fn serve(self, router: Router, shutdown: impl Future<Output = ()>) {
        let Server { name, listener, tls, settings, cap, .. } = self;
        let shared = Arc::new(Shared { name, settings, router, tls });
        serve_on(listener, shared, cap, shutdown).await;
    }
}

/// Where connections come from: a TCP listener, or a test's stand-in.
pub(crate) trait Accept {
    /// The next connection.
    fn accept(&self) -> impl Future<Output = std::io::Result<TcpStream>> + Send;
}

impl Accept for TcpListener {
    async fn accept(&self) -> std::io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(stream, _)| stream)
    }
}

/// The accept loop, then the drain.
async fn serve_on(listener: impl Accept, shared: Arc<Shared>, cap: usize, shutdown: impl Future<Output = ()>) {
    let name = shared.name;
    let table = Arc::new(Table::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut backoff = Backoff::new();
    let mut last_cap_log: Option<Instant> = None;
    let mut shutdown = pin!(shutdown);
    loop {
        if table.len() >= cap && !table.any_evictable() {
            // Every connection is handling a request: wait for one to finish.
            tokio::select! {
                () = &mut shutdown => break,
                () = table.room() => {}
                Some(done) = tasks.join_next() => reap(name, done),
            }
            continue;
        }
        tokio::select! {
            () = &mut shutdown => break,
            Some(done) = tasks.join_next() => reap(name, done),
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    if backoff.in_streak() {
                        tracing::info!(server = name, "{name}: accepting connections again");
                    }
                    backoff.reset();
                    let registration = table.register();
                    if table.len() > cap {
                        // Room for the newcomer: the oldest connection without a complete
                        // request goes (if the last closable one started a request meanwhile,
                        // the reserve of descriptors absorbs one over the cap).
                        table.evict_oldest(&registration);
                        if last_cap_log.is_none_or(|at| at.elapsed() >= CAP_LOG_INTERVAL) {
                            tracing::warn!(
                                server = name,
                                "{name}: {cap} connections open (the cap); closing the oldest that has not sent \
                                 a complete request to make room"
                            );
                            last_cap_log = Some(Instant::now());
                        }
                    }
                    tasks.spawn(connection(stream, registration, shared.clone(), stop_rx.clone()));
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    let first = !backoff.in_streak();
                    let wait = backoff.failed();
                    if first {
                        tracing::warn!(
                            server = name,
                            "{name}: accept failed: {e}; retrying with backoff (10 ms doubling to 1 s)"
                        );
                    }
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(shared.settings.drain_timeout, async {
        while let Some(done) = tasks.join_next().await {
            reap(name, done);
        }
    })
    .await;
    if drained.is_err() {
        let busy = tasks.len();
        let connections = if busy == 1 { "connection" } else { "connections" };
        tracing::warn!(server = name, "{name}: {busy} {connections} still busy after the drain timeout; closing them");
    }
}

fn refuse_plain_off_loopback(addr: SocketAddr, tls: Option<&Tls>) -> Result<(), ServeError> {
    if tls.is_none() && !addr.ip().to_canonical().is_loopback() {
        return Err(ServeError::PlainOffLoopback { addr });
    }
    Ok(())
}

fn reap(name: &str, done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        tracing::error!(server = name, "{name}: a connection's task panicked");
    }
}

/// The address of the client a request came from: its TCP peer, never a header it could
/// write (`axum::Extension<ClientAddr>`; absent for a request not read from a connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// What every connection of a server shares.
struct Shared {
    name: &'static str,
    settings: Settings,
    router: Router,
    tls: Option<Tls>,
}

/// One connection: the TLS handshake (within the header timeout), then HTTP/1.1 until the
/// client closes, the connection's deadline passes, it is evicted, or shutdown.
async fn connection(stream: TcpStream, registration: Registration, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let conn = registration.conn().clone();
    let _ = stream.set_nodelay(true);
    let client = stream.peer_addr().ok().map(|a| ClientAddr(a.ip()));
    match shared.tls.clone() {
        None => drive(stream, conn, client, shared, stop).await,
        Some(tls) => {
            let Some(deadline) = conn.deadline(&shared.settings) else { return };
            let mut stop_handshake = stop.clone();
            let handshake = tokio::select! {
                done = tls.acceptor().accept(stream) => done,
                () = tokio::time::sleep_until(deadline) => return,
                () = until_evicted(&conn) => return,
                _ = stop_handshake.changed() => return,
            };
            // A failed handshake (a client that does not trust the certificate, a port scan)
            // needs no log line of ours: the client saw the alert.
            let Ok(tls_stream) = handshake else { return };
            drive(tls_stream, conn, client, shared, stop).await;
        }
    }
    drop(registration);
}

async fn until_evicted(conn: &Conn) {
    while !conn.is_evicted() {
        conn.changed().await;
    }
}

/// HTTP/1.1 over `io` under the connection's deadline.
async fn drive<I>(
    io: I,
    conn: Arc<Conn>,
    client: Option<ClientAddr>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = {
        let (conn, shared) = (conn.clone(), shared.clone());
        hyper::service::service_fn(move |request| handle(request, conn.clone(), client, shared.clone()))
    };
    let io = TokioIo::new(crate::conn::TrackedIo::new(io, conn.clone()));
    // No hyper timer: the deadlines are the connection's own (see the module's doc).
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(None);
    let mut serving = pin!(http.serve_connection(io, service));
    let mut draining = false;
    loop {
        if conn.is_evicted() {
            return;
        }
        let deadline = conn.deadline(&shared.settings);
        // Far enough never to fire: a request under way has no connection deadline.
        let wake_at = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        tokio::select! {
            _ = serving.as_mut() => return,
            () = conn.changed() => {}
            () = tokio::time::sleep_until(wake_at), if deadline.is_some() => {
                if conn.deadline(&shared.settings).is_some_and(|d| d <= Instant::now()) {
                    return;
                }
            }
            _ = stop.changed(), if !draining => {
                if !conn.in_request() {
                    return;
                }
                // Finish the request under way, then close.
                serving.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
}

/// One request: its id, its body's deadline, the router, then [`finish`].
async fn handle(
    request: hyper::Request<Incoming>,
    conn: Arc<Conn>,
    client: Option<ClientAddr>,
    shared: Arc<Shared>,
) -> Result<hyper::Response<TrackedBody>, Infallible> {
    let guard = conn.request_started(!request.body().is_end_stream());
    let id = RequestId::new();
    let started = Instant::now();
    let method = request.method().clone();
    let path =
        crate::access::loggable_path(request.uri().path_and_query().map_or("/", |p| p.as_str()), request.headers());
    let timed_out = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + shared.settings.body_timeout;
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(id.clone());
    if let Some(client) = client {
        parts.extensions.insert(client);
    }
    let body = axum::body::Body::new(TimedBody::new(body, deadline, timed_out.clone(), conn));
    let mut router = shared.router.clone();
    let called = CatchUnwind(router.call(Request::from_parts(parts, body))).await;
    let response = match called {
        Ok(Ok(response)) => response,
        Ok(Err(never)) => match never {},
        Err(()) => InternalError::new("the request's handler panicked").into_response(),
    };
    let response = finish(response, &id, timed_out.load(Ordering::Acquire), shared.name).await;
    // The access line: when the response head is ready (the body may still stream). At
    // `debug` for a request that changes nothing (a read answered, a handler's routine
    // refresh), so the default `info` shows what changed and what failed (issue 42).
    let status = response.status().as_u16();
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    macro_rules! access {
        ($level:expr) => {
            tracing::event!(
                target: "svc_http::access",
                $level,
                server = shared.name,
                method = %method,
                path = %path,
                status,
                latency_ms,
                request_id = id.as_str(),
                "request"
            )
        };
    }
    if crate::access::routine(&method, status, response.extensions().get::<crate::access::Routine>().is_some()) {
        access!(tracing::Level::DEBUG);
    } else {
        access!(tracing::Level::INFO);
    }
    Ok(response.map(|body| TrackedBody::new(body, guard)))
}

/// A future whose panic becomes `Err(())` (the panic message is printed by the panic hook),
/// so a panicking handler answers 500 `internal_error` instead of dropping the connection.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// An acceptor out of file descriptors: every accept fails with EMFILE.
    struct OutOfFiles(AtomicUsize);

    impl Accept for &OutOfFiles {
        async fn accept(&self) -> std::io::Result<TcpStream> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Err(std::io::Error::from_raw_os_error(24))
        }
    }

    #[tokio::test]
    async fn accept_loops_back_off_on_emfile_instead_of_retrying_at_once() {
        let failing = OutOfFiles(AtomicUsize::new(0));
        let shared = Arc::new(Shared { name: "test", settings: Settings::DEFAULT, router: Router::new(), tls: None });
        let ran = tokio::time::timeout(Duration::from_secs(2), serve_on(&failing, shared, 8, std::future::pending()));
        assert!(ran.await.is_err(), "the loop keeps serving");
        // 10 + 20 + ... + 640 ms, then 1 s: 8 attempts in 2 s (a loop retrying at once makes
        // millions).
        let attempts = failing.0.load(Ordering::Relaxed);
        assert!((5..=12).contains(&attempts), "{attempts} accept attempts in 2 s");
    }
}
