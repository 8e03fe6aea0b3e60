//! The health route both services answer (`GET /api/health` at the publication service,
//! `GET /api/relay/health` at the relay API): whether the process serves and whether its store
//! answers, for load balancers and operators. It names the backend and how long the check
//! took, never where the database is or why it failed (that goes to the log).

use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// How long the store may take to answer before the check says it is unreachable (a load
/// balancer's probe has a deadline of its own, often a few seconds).
pub const STORE_CHECK_WAIT: Duration = Duration::from_secs(3);

/// Checks the store with `ping` (run off the async workers: it blocks) and answers 200
/// `{"status": "ok", "store": {...}}`, or 503 `"unavailable"` when the store did not answer
/// within [`STORE_CHECK_WAIT`]. `who` names the service in the log line of a failure.
pub async fn store_health<E: std::fmt::Display + Send + 'static>(
    who: &'static str,
    backend: &'static str,
    ping: impl FnOnce() -> Result<(), E> + Send + 'static,
) -> Response {
    let started = Instant::now();
    let checked = tokio::time::timeout(STORE_CHECK_WAIT, tokio::task::spawn_blocking(ping)).await;
    let reachable = match checked {
        Ok(Ok(Ok(()))) => true,
        Ok(Ok(Err(e))) => {
            tracing::warn!("{who}: health: the store does not answer: {e}");
            false
        }
        Ok(Err(e)) => {
            tracing::warn!("{who}: health: the store check failed: {e}");
            false
        }
        Err(_) => {
            tracing::warn!("{who}: health: the store did not answer within {STORE_CHECK_WAIT:?}");
            false
        }
    };
    let body = json!({
        "status": if reachable { "ok" } else { "unavailable" },
        "store": {
            "backend": backend,
            "reachable": reachable,
            "checkedInMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
    });
    let status = if reachable { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
    let mut response = (status, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // A probe's answer is about now: no cache keeps it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
