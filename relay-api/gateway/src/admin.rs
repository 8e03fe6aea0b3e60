//! The admin port: `GET /metrics` (the Prometheus text exposition), nothing else. Plain
//! HTTP/1.1 on hyper, one task per connection, each bounded in time; accept errors back off.
//! Keep it on loopback.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use relay_wire::accept::Backoff;
use tokio::net::TcpListener;

use super::Gateway;

/// Time allowed for a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest an admin connection stays open.
const CONNECTION_LIMIT: Duration = Duration::from_secs(60);

/// Serves the admin port until the task is dropped.
pub(super) async fn serve(gw: Arc<Gateway>, listener: TcpListener) {
    let mut backoff = Backoff::default();
    loop {
        let stream = match backoff.accept(&listener).await {
            Ok((stream, _)) => stream,
            Err(_) => {
                gw.metrics.accept_error("admin");
                continue;
            }
        };
        let gw = gw.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answer = answer(&gw, &req);
                async move { Ok::<_, Infallible>(answer) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_LIMIT, connection).await;
        });
    }
}

/// The answer to one admin request.
fn answer(gw: &Gateway, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = content_type.parse() {
            response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
        }
        response
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => reply(StatusCode::OK, "text/plain; version=0.0.4", gw.render_metrics()),
        (_, "/metrics") => reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n".to_owned()),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "the admin port serves GET /metrics\n".to_owned()),
    }
}
