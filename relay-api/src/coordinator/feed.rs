//! `GET /api/gateway/routes`: the route feed (issue 20, first step). An admitted gateway host
//! asks for the routes assigned to its operator, the request signed with its operator key
//! ([`relay_wire::feed`]); the answer is the table its gateway serves, the same one the
//! coordinator's own gateway is given ([`Engine::route_table`]), limited to the deployments
//! whose `gatewayOperator` is that operator. Any coordinator on the database answers it.
//!
//! A request naming the version its gateway serves (`?after=`) is held until the table
//! differs, for up to `FEED_WAIT_SECS`. It is woken by the change itself (issue 41): the
//! engine moves the feed's sequence (a row of the store) whenever what a host's table is made
//! of changes, and wakes the requests held on its coordinator at once; a coordinator holding
//! requests for a change another coordinator may make looks at that one row every
//! [`SEQ_LOOK`] (`docs/decisions.md`, "A redeploy switches after every gateway host has the
//! successor"). Each answer carries the sequence its table was read at. At most
//! [`MAX_WAITING`] requests are held at once (each holds one of the API's connections);
//! beyond, each is answered at once (and its gateway waits a second before the next). A
//! coordinator that stops answers the held ones.
//!
//! Each request is accepted once (issue 40): signed after the last request accepted from its
//! operator (the store's `feed_counters`, so on every coordinator of the database), at most
//! `FEED_AHEAD_MS` ahead of this clock, checked and recorded at its first read, before it is
//! held. The answer carries the coordinators' probe keys (public halves, `probeKeys`), which
//! the gateway checks probe tokens with.
//!
//! Each request may carry the gateway's report ([`Report`]: the sequence of the table it
//! applied, the routes with agents on it), recorded with its presence in one transaction
//! for the engine's switches to wait on, if the request was signed after the one whose
//! report is recorded (a request its gateway gave up may arrive after a newer one).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use relay_wire::feed::{
    FEED_AHEAD_MS, FEED_SKEW_MS, FEED_WAIT_SECS, FeedSignature, LAST_ACCEPTED_FIELD, Presence, REPLAYED_CODE, Report,
    SIGNATURE_HEADER, feed_message, read_query, read_report,
};

use super::Engine;
use super::store::{StoreError, now_ms};
use crate::gateway::RouteConfig;
pub use crate::gateway::feed::FeedAnswer;

/// Feed requests held at once, waiting for a change.
pub const MAX_WAITING: usize = 64;

/// How often a coordinator holding feed requests looks at the store's feed sequence, for a
/// change another coordinator made (its own wake the requests at once).
pub const SEQ_LOOK: Duration = Duration::from_millis(100);

static WAITING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_WAITING);

/// Wakes the look at the store's feed sequence when a request is held: it sleeps while none
/// is (issue 44, point 5: an idle coordinator does not wake ten times a second for nothing).
static HELD: tokio::sync::Notify = tokio::sync::Notify::const_new();

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
    /// The request's time is too far behind the coordinator's clock.
    #[error(
        "the request was signed {off_secs} s before the coordinator's clock (at most {} s): set the gateway \
         host's clock (`timedatectl set-ntp true`; `gateway-prep check` checks it)",
        FEED_SKEW_MS / 1000
    )]
    Skewed {
        /// How far off, seconds.
        off_secs: i64,
    },
    /// The request's time is ahead of the coordinator's clock by more than [`FEED_AHEAD_MS`].
    #[error(
        "the request was signed {ahead_ms} ms ahead of the coordinator's clock (at most {FEED_AHEAD_MS} ms): a \
         request dated later could be kept and used later; set the gateway host's clock (`timedatectl set-ntp \
         true`; `gateway-prep check` checks it)"
    )]
    Ahead {
        /// How far ahead, ms.
        ahead_ms: i64,
    },
    /// The request was signed no later than one accepted before from its operator.
    #[error(
        "the request was signed at {at_ms} (Unix ms), not after the last request accepted from this operator \
         ({last_ms}): a request is accepted once; sign the next one after {last_ms} (`svc gateway run` does)"
    )]
    Replayed {
        /// The request's signed time.
        at_ms: i64,
        /// The latest signed time accepted from the operator.
        last_ms: i64,
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
            FeedError::Ahead { .. } => (StatusCode::UNAUTHORIZED, "gateway_request_ahead"),
            FeedError::Replayed { .. } => (StatusCode::UNAUTHORIZED, REPLAYED_CODE),
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
            FeedError::Replayed { last_ms, .. } => {
                let body = svc_http::ErrorBody::new(code, self.to_string()).with(LAST_ACCEPTED_FIELD, last_ms);
                svc_http::envelope_response(&body, status)
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
    let report = read_report(query);
    let announced = ["public=", "tunnel=", "tunnelSha256="].iter().any(|p| query.contains(p));
    let (arrived, arrived_ms) = (Instant::now(), now_ms());
    let deadline = arrived + Duration::from_secs(FEED_WAIT_SECS);
    let held = match after {
        Some(_) => WAITING.try_acquire().ok(),
        None => None,
    };
    if held.is_some() {
        watch_the_store(&engine);
        HELD.notify_waiters();
    }
    let mut changes = engine.feed_changes();
    // Where the gateway is and what it reports: checked and recorded once per request, with
    // its first read.
    let mut announcement = Some(Announcement { announced, presence, report });
    loop {
        // Seen before the table is read: a change from here on wakes the wait below.
        changes.borrow_and_update();
        let (reader, signed, path) = (engine.clone(), signed.clone(), path.clone());
        let announcement = announcement.take();
        let reported = announcement.as_ref().is_some_and(|a| a.report.is_some() || a.presence.is_some());
        let answer =
            tokio::task::spawn_blocking(move || answer(&reader, &signed, &path, arrived_ms, announcement.as_ref()))
                .await
                .map_err(|e| FeedError::Store(StoreError::Backend(Box::new(e))))??;
        if reported {
            // A switch may be waiting for this host, and its presence is where the agents are
            // sent: the lease holder looks at once, not at its next periodic look.
            engine.wake();
        }
        let unchanged = after.as_deref() == Some(answer.version.as_str());
        if !unchanged || held.is_none() || Instant::now() >= deadline {
            return Ok(axum::Json(answer));
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return Ok(axum::Json(answer));
                }
            }
            () = tokio::time::sleep_until(deadline.into()) => return Ok(axum::Json(answer)),
            // The coordinator stops: the gateway asks the next one (or this one, back).
            () = engine.stopping() => return Ok(axum::Json(answer)),
        }
    }
}

/// Starts, once per engine, the look at the store's feed sequence that wakes the requests
/// held here for a change another coordinator made: every [`SEQ_LOOK`] while any request
/// is held, one row read; asleep while none is; it ends with the engine.
fn watch_the_store(engine: &Arc<Engine>) {
    if engine.feed_watched.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let engine = Arc::downgrade(engine);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SEQ_LOOK).await;
            // Until a request is held: listening before looking, so that one held in between
            // is not missed (every engine's look is woken: the held requests are counted for
            // the process).
            let held = HELD.notified();
            tokio::pin!(held);
            held.as_mut().enable();
            if WAITING.available_permits() == MAX_WAITING {
                held.await;
                continue;
            }
            let Some(engine) = engine.upgrade() else { return };
            let reader = engine.clone();
            if let Ok(Ok(seq)) = tokio::task::spawn_blocking(move || reader.store().feed_seq()).await {
                engine.feed_changed(seq);
            }
        }
    });
}

/// What a feed request's query says of where the gateway is.
struct Announcement {
    /// Whether it names any of `public`, `tunnel`, `tunnelSha256`.
    announced: bool,
    /// All three, when they read.
    presence: Option<Presence>,
    /// What the gateway reports (the table it applied, its routes' agents), if it does.
    report: Option<Report>,
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
    let behind = now.saturating_sub(signed.at_ms);
    if behind > FEED_SKEW_MS {
        return Err(FeedError::Skewed { off_secs: behind / 1000 });
    }
    if -behind > FEED_AHEAD_MS {
        return Err(FeedError::Ahead { ahead_ms: -behind });
    }
    let b64 = &base64::engine::general_purpose::STANDARD;
    let key = b64.decode(operator.public_key.as_bytes()).map_err(|_| FeedError::BadSignature)?;
    let signature = b64.decode(signed.signature.as_bytes()).map_err(|_| FeedError::BadSignature)?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key)
        .verify(&feed_message(&operator.id, signed.at_ms, path), &signature)
        .map_err(|_| FeedError::BadSignature)?;
    if let Some(Announcement { announced, presence, report }) = announcement {
        let presence = presence.as_ref().filter(|p| p.is_valid());
        if presence.is_none() && *announced {
            return Err(FeedError::BadPresence);
        }
        // Accepted once: at the request's first read, whichever coordinator it reaches.
        if let Err(last_ms) = engine.store().accept_feed_request(&operator.id, signed.at_ms)? {
            return Err(FeedError::Replayed { at_ms: signed.at_ms, last_ms });
        }
        if presence.is_some() || report.is_some() {
            engine.store().record_feed_request(&operator.id, presence, report.as_ref(), signed.at_ms, now)?;
        }
    }
    let (mut routes, seq) = engine.feed_table(Some(&operator))?;
    let mut probe_keys = engine.store().probe_keys()?;
    probe_keys.truncate(relay_wire::alpn::MAX_PROBE_KEYS);
    // In one order, so that the same table has the same version.
    routes.sort_by(|a, b| a.route_id.cmp(&b.route_id));
    Ok(FeedAnswer { operator: operator.id, version: version(&routes, &probe_keys), routes, seq, probe_keys })
}

/// The table's version: the first 16 bytes of the SHA-256 of its JSON (with the probe keys
/// after it, if any), hex.
fn version(routes: &[RouteConfig], probe_keys: &[String]) -> String {
    let mut json = serde_json::to_vec(routes).unwrap_or_default();
    if !probe_keys.is_empty() {
        json.extend_from_slice(b"\nprobeKeys:");
        json.extend_from_slice(probe_keys.join(",").as_bytes());
    }
    let mut version = relay_wire::wire::sha256_hex(&json);
    version.truncate(32);
    version
}
