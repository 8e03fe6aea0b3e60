//! `GET /api/gateway/routes`: the route feed (issue 20, first step). An admitted gateway host
//! asks for the routes assigned to its operator, the request signed with its operator key
//! ([`relay_wire::feed`]); the answer is the table its gateway serves, the same one the
//! coordinator's own gateway is given ([`Engine::route_table`]), limited to the deployments
//! whose `gatewayOperator` is that operator. Any coordinator on the database answers it.
//!
//! A request naming the version its gateway serves (`?after=`) is held until the table
//! differs, looked at every second, for up to `FEED_WAIT_SECS`: gateways learn of a change
//! within a second without asking in a loop. At most [`MAX_WAITING`] requests are held at
//! once (each holds one of the API's connections); beyond, each is answered at once (and its
//! gateway waits a second before the next). A coordinator that stops answers the held ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use relay_wire::feed::{
    FEED_SKEW_MS, FEED_WAIT_SECS, FeedSignature, Presence, SIGNATURE_HEADER, feed_message, read_query,
};

use super::Engine;
use super::store::{StoreError, now_ms};
use crate::gateway::RouteConfig;
pub use crate::gateway::feed::FeedAnswer;

/// Feed requests held at once, waiting for a change.
pub const MAX_WAITING: usize = 64;

/// How often a held request looks at the table again.
const RECHECK: Duration = Duration::from_secs(1);

static WAITING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_WAITING);

/// Why a feed request was refused. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// No signature header, or one that does not read.
    #[error(
        "send `{SIGNATURE_HEADER}: op=<operator id>;at=<Unix ms>;sig=<base64>`, signed with the operator key \
         (`svc gateway run` does)"
    )]
    SignatureMissing,
    /// The operator is not admitted here.
    #[error("operator {0} is not admitted by this coordinator: register the host with `gateway-prep init`")]
    UnknownOperator(String),
    /// The request's time is too far from the coordinator's clock.
    #[error(
        "the request was signed {off_secs} s away from the coordinator's clock (at most {} s): set the gateway \
         host's clock (`timedatectl set-ntp true`; `gateway-prep check` checks it)",
        FEED_SKEW_MS / 1000
    )]
    Skewed {
        /// How far off, seconds.
        off_secs: i64,
    },
    /// The signature is not the operator key's over this request.
    #[error("the signature is not the registered operator key's over this request")]
    BadSignature,
    /// The gateway's announcement does not read.
    #[error(
        "`public`, `tunnel` and `tunnelSha256` go together: two addresses (HOST:PORT) and the tunnel certificate's \
         SHA-256 in lowercase hex"
    )]
    BadPresence,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl FeedError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            FeedError::SignatureMissing => (StatusCode::UNAUTHORIZED, "gateway_signature_missing"),
            FeedError::UnknownOperator(_) => (StatusCode::UNAUTHORIZED, "gateway_operator_unknown"),
            FeedError::Skewed { .. } => (StatusCode::UNAUTHORIZED, "gateway_clock_skewed"),
            FeedError::BadSignature => (StatusCode::UNAUTHORIZED, "gateway_signature_invalid"),
            FeedError::BadPresence => (StatusCode::BAD_REQUEST, "gateway_presence_invalid"),
            FeedError::Store(StoreError::Unavailable(_)) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            FeedError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        }
    }
}

impl IntoResponse for FeedError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        match self {
            // What failed is for the log, not the caller.
            FeedError::Store(e) => {
                tracing::warn!("svc relay: the route feed: {e}");
                let message = if status == StatusCode::SERVICE_UNAVAILABLE {
                    "the relay's database cannot be reached just now; try again in a moment"
                } else {
                    "the coordinator failed to answer; it is logged"
                };
                svc_http::envelope_response(&svc_http::ErrorBody::new(code, message), status)
            }
            other => svc_http::envelope_response(&svc_http::ErrorBody::new(code, other.to_string()), status),
        }
    }
}

/// `GET /api/gateway/routes`.
pub(super) async fn routes(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<axum::Json<FeedAnswer>, FeedError> {
    let signed = headers
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(FeedSignature::parse)
        .ok_or(FeedError::SignatureMissing)?;
    let path = uri.path_and_query().map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let query = uri.query().unwrap_or_default();
    let (after, presence) = read_query(query);
    let announced = ["public=", "tunnel=", "tunnelSha256="].iter().any(|p| query.contains(p));
    let (arrived, arrived_ms) = (Instant::now(), now_ms());
    let held = match after {
        Some(_) => WAITING.try_acquire().ok(),
        None => None,
    };
    // Where the gateway is: checked and recorded once per request, with its first read.
    let mut announcement = Some(Announcement { announced, presence });
    loop {
        let (reader, signed, path) = (engine.clone(), signed.clone(), path.clone());
        let announcement = announcement.take();
        let answer =
            tokio::task::spawn_blocking(move || answer(&reader, &signed, &path, arrived_ms, announcement.as_ref()))
                .await
                .map_err(|e| FeedError::Store(StoreError::Backend(Box::new(e))))??;
        let unchanged = after.as_deref() == Some(answer.version.as_str());
        if !unchanged || held.is_none() || arrived.elapsed() + RECHECK > Duration::from_secs(FEED_WAIT_SECS) {
            return Ok(axum::Json(answer));
        }
        tokio::select! {
            () = tokio::time::sleep(RECHECK) => {}
            // The coordinator stops: the gateway asks the next one (or this one, back).
            () = engine.stopping() => return Ok(axum::Json(answer)),
        }
    }
}

/// What a feed request's query says of where the gateway is.
struct Announcement {
    /// Whether it names any of `public`, `tunnel`, `tunnelSha256`.
    announced: bool,
    /// All three, when they read.
    presence: Option<Presence>,
}

/// Checks `signed` over `path` at `now`; then, the request authenticated, checks and records
/// the gateway's `announcement` if given (a partial or unreadable one is refused), and reads
/// the operator's routes.
fn answer(
    engine: &Engine,
    signed: &FeedSignature,
    path: &str,
    now: i64,
    announcement: Option<&Announcement>,
) -> Result<FeedAnswer, FeedError> {
    let operator = engine
        .store()
        .admitted_gateways()?
        .into_iter()
        .find(|o| o.id == signed.operator_id)
        .ok_or_else(|| FeedError::UnknownOperator(signed.operator_id.clone()))?;
    let off = now.saturating_sub(signed.at_ms);
    if off.abs() > FEED_SKEW_MS {
        return Err(FeedError::Skewed { off_secs: off / 1000 });
    }
    let b64 = &base64::engine::general_purpose::STANDARD;
    let key = b64.decode(operator.public_key.as_bytes()).map_err(|_| FeedError::BadSignature)?;
    let signature = b64.decode(signed.signature.as_bytes()).map_err(|_| FeedError::BadSignature)?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key)
        .verify(&feed_message(&operator.id, signed.at_ms, path), &signature)
        .map_err(|_| FeedError::BadSignature)?;
    if let Some(Announcement { announced, presence }) = announcement {
        match presence.as_ref().filter(|p| p.is_valid()) {
            Some(presence) => engine.store().record_presence(&operator.id, presence, now)?,
            None if *announced => return Err(FeedError::BadPresence),
            None => {}
        }
    }
    let mut routes = engine.route_table(Some(&operator))?;
    // In one order, so that the same table has the same version.
    routes.sort_by(|a, b| a.route_id.cmp(&b.route_id));
    Ok(FeedAnswer { operator: operator.id, version: version(&routes), routes })
}

/// The table's version: the first 16 bytes of the SHA-256 of its JSON, hex.
fn version(routes: &[RouteConfig]) -> String {
    let json = serde_json::to_vec(routes).unwrap_or_default();
    let mut version = relay_wire::wire::sha256_hex(&json);
    version.truncate(32);
    version
}
