//! The HTTP serving library of `svc serve` (the publication service), `svc relay serve` (the
//! relay API) and the coordinator's agent-facing API: an [`axum::Router`] served over hyper's
//! HTTP/1.1 connections with every listener bounded.
//!
//! - **Timeouts** ([`Settings`]): a request head must arrive within the header timeout (the
//!   TLS handshake included), a request body within the body timeout of its head (else 408
//!   and the connection is closed), and a kept-alive connection may wait for its next
//!   request only the idle timeout.
//! - **Declared bodies** ([`limit_body`]): a `Content-Length` over a router's limit is
//!   answered 413 at once, before any of the body is read.
//! - **Large bodies bounded** ([`Intake`]): a body over 64 KiB is read only under a permit,
//!   a few per tenant and a few more in all ([`IntakeLimits`]); beyond them the request is
//!   answered 503 with `Retry-After` before its body is read.
//! - **A connection cap** ([`Server`]): at most [`Settings::max_connections`], lowered to fit
//!   the process's open-file limit. At the cap, the connection that has waited longest
//!   without a complete request head (or idle between requests) is closed to make room, so
//!   half-sent requests never starve a real client.
//! - **Accept errors backed off**: 10 ms doubling to 1 s (EMFILE and the like), reset on
//!   success.
//! - **Request ids and internal errors** ([`RequestId`], [`internal_error`]): every response
//!   carries `Svc-Request-Id`; every 500 says only `internal_error` and the id, and its detail
//!   goes to the server log (standard error) under that id.
//! - **TLS** ([`Tls`]): rustls on ring, from PEM files or a certificate issued in memory; a
//!   listener off loopback without TLS is refused.
//! - **Path ids** ([`check_path_ids`]): a control character or an over-long id in a route's
//!   path is 400 `invalid_path_id` naming the field, before any handler or store sees it.
//! - **Health** ([`store_health`]): whether the store answers, 200 or 503, bounded.
//! - **Graceful shutdown**: requests in flight finish (at most the drain timeout); idle and
//!   half-sent connections are closed at once.

mod access;
mod backoff;
mod body;
mod conn;
mod envelope;
mod error;
mod health;
mod intake;
mod limit;
mod path_ids;
mod request;
mod server;
mod settings;
mod tls;

pub use access::{MAX_LOGGED_PATH, Routine, loggable_path, routine};
pub use envelope::{ErrorBody, ErrorDetail, UNAUTHENTICATED, UNAVAILABLE_RETRY_AFTER_SECS, envelope_response};
pub use error::ServeError;
pub use health::{STORE_CHECK_FRESH, STORE_CHECK_WAIT, StoreCheck, store_health, store_health_with};
pub use intake::{Busy, Incoming, Intake, IntakeError, IntakeLimits, IntakePermit, LARGE_BODY_BYTES, Received};
pub use limit::limit_body;
pub use path_ids::{INVALID_PATH_ID, MAX_PATH_ID_BYTES, PathIdProblem, PathIds, check_path_ids, path_id_check};
pub use request::{InternalError, REQUEST_ID_HEADER, RequestId, error_response, internal_error};
pub use server::{ClientAddr, Server};
pub use settings::{Settings, SettingsError, connection_cap};
pub use tls::{Tls, TlsError};
