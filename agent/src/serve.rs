//! What the agent serves on each tunneled connection: TLS with the job's certificate (ALPN
//! `h2` and `http/1.1`; `acme-tls/1` only for ACME validation handshakes, which are closed
//! right after the handshake), then HTTP: `GET /health`, `GET /.well-known/svc/challenge?nonce=`
//! (for the hostname the client asked for, when it is one of the route's), and everything
//! else proxied to the local app, streaming bodies and upgrades (WebSockets) included.
//!
//! Every connection is bounded in time ([`Limits`]): the TLS handshake must be done within
//! 10 s (a client that sends its ClientHello and stalls is let go), and the connection, an
//! upgraded one included, is closed after 5 minutes without a byte either way or 10 s after
//! one side has ended its sending without a byte since ([`crate::idle`], the gateway's rules).

mod hibernate;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;

use crate::app_socket::AppConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use relay_wire::envelope::ErrorBody;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

use crate::accept::Backoff;
use crate::cert::{ACME_TLS_ALPN, CurrentCert};
use crate::config::AgentConfig;
use crate::hostnames::Hostnames;
use crate::idle::{Activity, Timeouts, Watched};

type Body = BoxBody<Bytes, hyper::Error>;

/// How long `/health` waits for the app.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection to the app is kept for reuse. Node's HTTP server closes a keep-alive
/// connection after 5 s without a request (`server.keepAliveTimeout`), and a request sent on
/// a connection the app is closing at that moment fails; so the agent lets its connections go
/// well before the app would.
const APP_POOL_IDLE: Duration = Duration::from_secs(2);

/// The time limits of a served connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time allowed for the TLS handshake.
    pub handshake: Duration,
    /// Idle and half-close timeouts.
    pub timeouts: Timeouts,
}

impl Limits {
    /// A 10 s handshake, [`Timeouts::DEFAULT`].
    pub const DEFAULT: Limits = Limits { handshake: Duration::from_secs(10), timeouts: Timeouts::DEFAULT };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Shared by every connection.
pub struct Context {
    config: AgentConfig,
    hostnames: Arc<Hostnames>,
    app: Client<AppConnector, Body>,
    tls: Arc<ServerConfig>,
    /// The certificates handshakes get (and whether an ACME challenge is pending).
    pub(crate) cert: Arc<CurrentCert>,
    limits: Limits,
    /// Whether the app answers its health path, as last checked (`None`: not watched).
    pub(crate) ready: tokio::sync::watch::Sender<Option<bool>>,
    /// HTTP/1.1 connections that hold hyper's state now (not hibernating).
    http1_live: AtomicUsize,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("route", &self.config.route_id).finish_non_exhaustive()
    }
}

impl Context {
    /// The serving context over the current certificate, proving the route's `hostnames`,
    /// with the default [`Limits`].
    pub fn new(config: AgentConfig, cert: Arc<CurrentCert>, hostnames: Arc<Hostnames>) -> Arc<Context> {
        Context::with_limits(config, cert, hostnames, Limits::DEFAULT)
    }

    /// [`Context::new`] with other time limits.
    pub fn with_limits(
        config: AgentConfig,
        cert: Arc<CurrentCert>,
        hostnames: Arc<Hostnames>,
        limits: Limits,
    ) -> Arc<Context> {
        let mut tls = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_no_client_auth().with_cert_resolver(Arc::new(tls::NamedResolver(cert.clone()))))
            .unwrap_or_else(|_| unreachable!("ring supports the default protocol versions"));
        // `acme-tls/1` comes last: only a client offering nothing else (an ACME CA validating
        // TLS-ALPN-01) negotiates it, and the resolver gives such a client only a pending
        // challenge certificate.
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec(), ACME_TLS_ALPN.to_vec()];
        let app = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(APP_POOL_IDLE)
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(AppConnector::new());
        let ready = tokio::sync::watch::Sender::new(None);
        Arc::new(Context {
            config,
            hostnames,
            app,
            tls: Arc::new(tls),
            cert,
            limits,
            ready,
            http1_live: AtomicUsize::new(0),
        })
    }
}

impl Context {
    /// How many HTTP/1.1 connections hold hyper's state (buffers, request slot) now; a
    /// hibernating connection does not ([`hibernate`]).
    pub fn http_connections_live(&self) -> usize {
        self.http1_live.load(Ordering::Relaxed)
    }

    /// Whether the app is ready for new connections, as last known (`None`: not watched).
    pub fn app_ready(&self) -> Option<bool> {
        *self.ready.borrow()
    }

    /// The app refused a connection (it died, or closed its listener): the replica is not
    /// ready from now, told to every gateway at once, rather than at the next health check
    /// up to a second later, while about every other new connection of the route would be
    /// sent here and answered 502 (chaos seed 1796572299660467835: one client's three
    /// addresses all answered 502 after an app's `kill -9`). The readiness watcher says
    /// ready again once the app answers its health path. An agent whose readiness is not
    /// watched (`None`) is left as it is: nothing would mark it ready again.
    fn app_refused(&self) {
        let was_ready = self.ready.send_if_modified(|now| {
            let was = *now == Some(true);
            if was {
                *now = Some(false);
            }
            was
        });
        if was_ready {
            tracing::warn!("svc agent: not ready: the app refused a connection");
        }
    }
}

/// Serves HTTPS on `listener` for ever (the direct listener: benchmarks only). Accept errors
/// back off ([`crate::accept`]); the first of a streak is logged.
pub async fn direct(ctx: Arc<Context>, listener: TcpListener) {
    let mut backoff = Backoff::default();
    loop {
        match backoff.accept(&listener).await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(ctx.clone(), stream, Some(peer)));
            }
            Err(e) if backoff.errors() == 1 => tracing::warn!("svc agent: direct listener: {e}; retrying with backoff"),
            Err(_) => {}
        }
    }
}

/// A stream whose readability can be awaited without reading: a hibernating connection waits
/// for its client's next bytes holding no buffer.
pub trait Readable: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {
    /// Ready once bytes (or the end) can be read.
    fn poll_readable(&self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>>;
}

impl Readable for TcpStream {
    fn poll_readable(&self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_read_ready(cx)
    }
}

impl Readable for crate::dial::Conn {
    fn poll_readable(&self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        match self {
            crate::dial::Conn::Tcp(s) => s.poll_read_ready(cx),
            crate::dial::Conn::Relayed(s) => s.poll_read_ready(cx),
        }
    }
}

/// Serves one client connection: the TLS handshake, then HTTP until the client leaves, within
/// the context's [`Limits`].
pub async fn connection<S: Readable>(ctx: Arc<Context>, stream: S, client: Option<SocketAddr>) {
    let activity = Arc::new(Activity::new());
    let timeouts = ctx.limits.timeouts;
    let stream = Watched::new(stream, activity.clone());
    tokio::select! {
        () = serve(ctx, stream, client, activity.clone()) => {}
        () = activity.expired(timeouts) => {}
    }
}

/// Serves a connection that may only be an ACME tls-alpn-01 validation: the TLS handshake
/// (within the handshake limit), then closed, whatever protocol it negotiated. The gateway
/// sends such connections when it let one past a route's allow-list for offering only
/// `acme-tls/1`: a client that then asks for HTTP in a second ClientHello (after a
/// HelloRetryRequest) gets nothing.
pub async fn acme_validation<S>(ctx: Arc<Context>, stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let accept = tls::Tls::accept(stream, ctx.tls.clone());
    if let Ok(Ok(mut tls)) = tokio::time::timeout(ctx.limits.handshake, accept).await {
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
    }
}

/// A connection's server once its handshake is done, boxed apart from the connection's task.
type Serving = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The handshake, then the server the client's ALPN asked for. Each stage is its own box, so
/// that the connection's task holds two pointers and not the larger of the stages' states
/// (a future keeps room for every local that lives across an await, moved-from ones too).
async fn serve<S: Readable>(
    ctx: Arc<Context>,
    stream: Watched<S>,
    client: Option<SocketAddr>,
    activity: Arc<Activity>,
) {
    let serving = Box::pin(handshake(ctx, stream, client, activity)).await;
    if let Some(serving) = serving {
        serving.await;
    }
}

/// The TLS handshake (within the handshake limit), then the server the client's ALPN asked
/// for, not started: HTTP/1.1 (hibernating while idle), HTTP/2, or either by its first bytes
/// when it named none. `None`: nothing to serve. The TLS stream is boxed once, so that moving
/// it costs a pointer and it is held in one place.
async fn handshake<S: Readable>(
    ctx: Arc<Context>,
    stream: Watched<S>,
    client: Option<SocketAddr>,
    activity: Arc<Activity>,
) -> Option<Serving> {
    let accept = tls::Tls::accept(stream, ctx.tls.clone());
    let Ok(Ok(tls)) = tokio::time::timeout(ctx.limits.handshake, accept).await else { return None };
    let mut tls = Box::new(tls);
    if tls.alpn_protocol() == Some(ACME_TLS_ALPN) {
        // A TLS-ALPN-01 validation: the handshake was the answer (RFC 8737 section 3); no HTTP.
        return Some(Box::pin(async move {
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
        }));
    }
    let sni: Option<Arc<str>> = tls.server_name().cloned();
    let alpn = tls.alpn_protocol();
    let (http1, h2) = (alpn == Some(b"http/1.1"), alpn == Some(b"h2"));
    let requests = Arc::new(hibernate::Requests::default());
    let service = {
        let (ctx, activity, requests) = (ctx.clone(), activity.clone(), requests.clone());
        move |req| {
            let busy = requests.busy();
            let ctx = ctx.clone();
            let sni = sni.clone();
            let activity = activity.clone();
            async move {
                let response = handle(ctx, req, client, sni.as_deref(), activity).await;
                if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                    busy.upgraded();
                }
                Ok::<_, std::convert::Infallible>(hibernate::Answered::response(response, busy))
            }
        }
    };
    Some(if http1 {
        Box::pin(async move { hibernate::serve(tls, requests, &activity, &ctx.http1_live, service).await })
    } else if h2 {
        Box::pin(async move {
            let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(tls), hyper::service::service_fn(service)).await;
        })
    } else {
        Box::pin(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let service = hyper::service::service_fn(service);
            let _ = builder.serve_connection_with_upgrades(TokioIo::new(tls), service).await;
        })
    })
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).map_err(|never| match never {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    full(status, "application/json", serde_json::to_vec(value).unwrap_or_default())
}

/// The challenge's code when the name asked for is not one of the route's hostnames (404).
pub const HOSTNAME_UNKNOWN: &str = "hostname_unknown";
/// The challenge's code when the request has no `nonce` (400).
pub const NONCE_MISSING: &str = "nonce_missing";

/// An error answer in the one envelope, `{"error": {"code", "message"}}`.
fn error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    json(status, &ErrorBody::new(code, message).to_value())
}

async fn handle(
    ctx: Arc<Context>,
    req: Request<Incoming>,
    client: Option<SocketAddr>,
    sni: Option<&str>,
    activity: Arc<Activity>,
) -> Response<Body> {
    match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/health") => health(&ctx).await,
        (&hyper::Method::GET, "/.well-known/svc/challenge") => {
            let host = req.headers().get(hyper::header::HOST).and_then(|h| h.to_str().ok());
            let host = host.or_else(|| req.uri().authority().map(|a| a.as_str()));
            challenge_answer(&ctx, req.uri().query(), asked_name(sni, host))
        }
        _ => proxy(&ctx, req, client, activity).await,
    }
}

/// 200 while the app answers its health path, 503 otherwise (within `HEALTH_TIMEOUT`).
async fn health(ctx: &Context) -> Response<Body> {
    match app_check(ctx, HEALTH_TIMEOUT).await {
        Ok(()) => json(StatusCode::OK, &serde_json::json!({"status": "ok"})),
        Err(AppCheckError::Internal) => {
            json(StatusCode::INTERNAL_SERVER_ERROR, &serde_json::json!({"status": "error"}))
        }
        Err(e) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({"status": "unavailable", "reason": e.to_string()}),
        ),
    }
}

/// Why the app is not healthy.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppCheckError {
    /// It answered its health path with a failure.
    #[error("the app answered {0}")]
    Status(StatusCode),
    /// It could not be reached.
    #[error("the app does not answer: {0}")]
    Unreachable(#[source] hyper_util::client::legacy::Error),
    /// It took too long.
    #[error("the app did not answer within {} s", .0.as_secs())]
    Timeout(Duration),
    /// The request could not be made (the health path does not make a URI).
    #[error("the health request could not be made")]
    Internal,
}

/// Asks the app's health path, within `timeout`: `Ok` for a 2xx answer.
pub(crate) async fn app_check(ctx: &Context, timeout: Duration) -> Result<(), AppCheckError> {
    let uri = format!("http://127.0.0.1:{}{}", ctx.config.app_port, ctx.config.app_health_path);
    let request = Request::get(uri).body(empty()).map_err(|_| AppCheckError::Internal)?;
    match tokio::time::timeout(timeout, ctx.app.request(request)).await {
        Ok(Ok(r)) if r.status().is_success() => Ok(()),
        Ok(Ok(r)) => Err(AppCheckError::Status(r.status())),
        Ok(Err(e)) => Err(AppCheckError::Unreachable(e)),
        Err(_) => Err(AppCheckError::Timeout(timeout)),
    }
}

/// The hostname the client asked for: its TLS server name, else its `Host` (or HTTP/2
/// `:authority`) without the port.
fn asked_name<'a>(sni: Option<&'a str>, host: Option<&'a str>) -> Option<&'a str> {
    if let Some(sni) = sni {
        return Some(sni);
    }
    let host = host?;
    // An IPv6 literal (`[::1]:443`) is never one of the route's names.
    if host.starts_with('[') {
        return None;
    }
    Some(host.split_once(':').map_or(host, |(name, _)| name)).filter(|h| !h.is_empty())
}

/// The challenge answer for `asked`, when it is one of the route's hostnames; 404 otherwise:
/// the agent proves only names its route has.
fn challenge_answer(ctx: &Context, query: Option<&str>, asked: Option<&str>) -> Response<Body> {
    let Some(hostname) = asked.and_then(|a| ctx.hostnames.find(a)) else {
        return error(StatusCode::NOT_FOUND, HOSTNAME_UNKNOWN, "not a hostname of this route");
    };
    let nonce = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "nonce")
        .map(|(_, v)| percent_decode(v))
        .filter(|v| !v.is_empty());
    let Some(nonce) = nonce else {
        return error(StatusCode::BAD_REQUEST, NONCE_MISSING, "missing query parameter `nonce`");
    };
    let c = &ctx.config;
    let proof = c.route_key.proof(&c.route_id, &hostname, &nonce);
    let mut answer = serde_json::json!({"nonce": nonce, "routeId": c.route_id, "hostname": hostname, "proof": proof});
    // Which of the route's replicas answered: a validation of one replica checks it reached
    // that one (all of them hold the route's key, so the proof cannot tell).
    if let Some(replica) = &c.replica {
        answer["replica"] = serde_json::json!(replica);
    }
    json(StatusCode::OK, &answer)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
        match (bytes[i], hex) {
            (b'%', Some(h)) => {
                // Two ASCII hex digits always parse.
                out.push(u8::from_str_radix(std::str::from_utf8(h).unwrap_or("00"), 16).unwrap_or(0));
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `e` is the app closing a pooled connection under a request: it ended before an
/// answer (hyper's incomplete message) or was reset. Not a refused connection, a timeout or
/// a bad answer: sending those again would only load the app twice.
fn closed_under_request(e: &hyper_util::client::legacy::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    if e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message) {
            return true;
        }
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted))
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// Hop-by-hop headers, which a proxy must not forward (RFC 9110 section 7.6.1).
const HOP_BY_HOP: [&str; 7] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "proxy-authorization"];

/// Proxies `req` to the app. An upgraded connection is relayed until both sides end, or the
/// client's connection (`activity`) has been quiet too long.
async fn proxy(
    ctx: &Context,
    mut req: Request<Incoming>,
    client: Option<SocketAddr>,
    activity: Arc<Activity>,
) -> Response<Body> {
    let upgrade = req.headers().get(hyper::header::UPGRADE).cloned();
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .cloned()
        .or_else(|| req.uri().authority().and_then(|a| HeaderValue::from_str(a.as_str()).ok()));
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let uri = format!("http://127.0.0.1:{}{path}", ctx.config.app_port);
    let mut out = Request::builder().method(req.method().clone()).uri(uri);
    if let Some(headers) = out.headers_mut() {
        for (name, value) in req.headers() {
            if !HOP_BY_HOP.contains(&name.as_str()) && name != hyper::header::UPGRADE {
                headers.append(name.clone(), value.clone());
            }
        }
        if let Some(host) = host {
            headers.insert(hyper::header::HOST, host);
        }
        if let Some(upgrade) = &upgrade {
            headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(hyper::header::UPGRADE, upgrade.clone());
        }
        headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static("https"));
        if let Some(addr) = client
            && let Ok(v) = HeaderValue::from_str(&addr.ip().to_string())
        {
            headers.insert(HeaderName::from_static("x-forwarded-for"), v);
        }
    }
    let client_upgrade = upgrade.is_some().then(|| hyper::upgrade::on(&mut req));
    let Ok((parts, ())) = out.body(()).map(Request::into_parts) else {
        return full(StatusCode::BAD_REQUEST, "text/plain", "unreadable request\n");
    };
    // Only a request that may be sent twice is kept for a second try (RFC 9110 section 9.2.2):
    // idempotent, without a body, not an upgrade.
    let again =
        (upgrade.is_none() && parts.method.is_idempotent() && req.body().is_end_stream()).then(|| parts.clone());
    let first = ctx.app.request(Request::from_parts(parts, req.into_body().boxed())).await;
    let answered = match (first, again) {
        // A pooled connection the app closed just as the request went out on it (a keep-alive
        // timeout racing the request): one more try, on another connection.
        (Err(e), Some(parts)) if closed_under_request(&e) => {
            tracing::debug!("svc agent: the app closed a connection under a request ({e}); trying once more");
            ctx.app.request(Request::from_parts(parts, empty())).await
        }
        (first, _) => first,
    };
    let mut response = match answered {
        Ok(r) => r,
        Err(e) => {
            if e.is_connect() {
                ctx.app_refused();
            }
            return full(StatusCode::BAD_GATEWAY, "text/plain", format!("the app does not answer: {e}\n"));
        }
    };
    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let app_upgrade = hyper::upgrade::on(&mut response);
        let timeouts = ctx.limits.timeouts;
        tokio::spawn(async move {
            if let (Ok(client), Ok(app)) = (client_upgrade.await, app_upgrade.await) {
                let (mut client, mut app) = (TokioIo::new(client), TokioIo::new(app));
                // The client's side is the watched stream inside `client`.
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut client, &mut app) => {}
                    () = activity.expired(timeouts) => {}
                }
            }
        });
    }
    let (mut parts, body) = response.into_parts();
    if parts.status != StatusCode::SWITCHING_PROTOCOLS {
        for name in HOP_BY_HOP {
            parts.headers.remove(name);
        }
    }
    Response::from_parts(parts, body.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge;

    fn context() -> Arc<Context> {
        let config: AgentConfig = serde_json::from_value(serde_json::json!({
            "routeId": "r1", "hostname": "app.localhost", "credential": "c",
            "routeKey": challenge::RouteKey::generate().expect("a key"),
            "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": "/ca.pem",
            "appPort": 1, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:1", "validity_secs": 60},
        }))
        .expect("a configuration");
        let hostnames = Arc::new(Hostnames::new("app.localhost"));
        hostnames.replace(vec!["app.localhost".to_owned(), "shop.localhost".to_owned()]);
        Context::new(config, Arc::default(), hostnames)
    }

    async fn answer(ctx: &Context, asked: Option<&str>, query: &str) -> (StatusCode, serde_json::Value) {
        let response = challenge_answer(ctx, Some(query), asked);
        let status = response.status();
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        (status, serde_json::from_slice(&body).expect("JSON"))
    }

    #[tokio::test]
    async fn the_challenge_proves_each_route_hostname_asked_for_and_no_other() {
        let ctx = context();
        for asked in ["app.localhost", "Shop.Localhost"] {
            let (status, json) = answer(&ctx, Some(asked), "nonce=n1").await;
            assert_eq!(status, StatusCode::OK);
            let hostname = asked.to_ascii_lowercase();
            assert_eq!(json["hostname"], hostname.as_str());
            assert_eq!(json["routeId"], "r1");
            let proof = json["proof"].as_str().expect("a proof");
            let public = ctx.config.route_key.public_key();
            assert!(challenge::verify(&public, "r1", &hostname, "n1", proof));
        }
        for asked in [Some("other.localhost"), None] {
            let (status, json) = answer(&ctx, asked, "nonce=n1").await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{asked:?}");
            assert!(json.get("proof").is_none());
            assert_eq!(json["error"]["code"], HOSTNAME_UNKNOWN, "{json}");
            assert_eq!(json["error"]["message"], "not a hostname of this route", "{json}");
        }
        let (status, json) = answer(&ctx, Some("app.localhost"), "x=1").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(json["error"]["code"], NONCE_MISSING, "{json}");
        assert_eq!(json["error"]["message"], "missing query parameter `nonce`", "{json}");
    }

    #[test]
    fn the_asked_name_is_the_server_name_else_the_host_without_its_port() {
        assert_eq!(asked_name(Some("a.localhost"), Some("b.localhost")), Some("a.localhost"));
        assert_eq!(asked_name(None, Some("b.localhost:8443")), Some("b.localhost"));
        assert_eq!(asked_name(None, Some("b.localhost")), Some("b.localhost"));
        assert_eq!(asked_name(None, Some("[::1]:443")), None);
        assert_eq!(asked_name(None, Some(":443")), None);
        assert_eq!(asked_name(None, None), None);
    }

    #[test]
    fn nonces_are_percent_decoded() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("abc"), "abc");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
        assert_eq!(percent_decode("end%2"), "end%2");
    }
}
