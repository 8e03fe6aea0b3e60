//! The relay API over HTTP (axum): bearer-token auth, the invitation gate, JSON bodies with
//! unknown fields refused, and one error envelope
//! (`{"error": {"code", "message", "hints"?, "diagnostics"?}}`). Handlers translate HTTP: the
//! use cases are `operations`' (whose errors become answers in `rejection`), the decisions
//! the engine's and the store's.
//!
//! Bodies are bounded: a deploy's (up to [`DEPLOY_LIMIT`]) is read after its token is checked,
//! under the listener's bounds on large bodies per organization and in all (`svc_http::Intake`,
//! 503 with `Retry-After` beyond them), and decoded as it arrives (`deploy`); every other route
//! takes at most [`SMALL_BODY_LIMIT`].

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::Engine;
use super::api::{
    BUNDLE_MAX_BYTES, ClaimResponse, FundRequest, HintsResponse, HostnameRequest, HostnameResponse, LedgerResponse,
    LogsResponse, PinRequest, PinsResponse, QuoteRequest, SessionsResponse, Status,
};
use super::model::Deployment;
use super::operations::{self, deployment_of};
use super::store::{Caller, StoreError, TokenRole, now_ms};
use crate::hint::Hint;
use relay_wire::wire;

/// The largest deploy request: the app's files travel in it as base64 (4 bytes for 3), with
/// room for their paths, the project and the secrets.
pub(super) const DEPLOY_LIMIT: usize = (BUNDLE_MAX_BYTES as usize) / 3 * 4 + 2 * 1024 * 1024;

/// The largest body of every other route (a quote, a fund, a hostname, a pin, an operator's
/// registration: each well under 1 KiB). Below the large size (`svc_http::LARGE_BODY_BYTES`), so
/// these never wait for the bounds on large bodies, and read before the token is checked they
/// cost at most this per connection.
const SMALL_BODY_LIMIT: usize = 64 * 1024;

mod deploy;
mod policy;
mod rejection;

use deploy::deploy;
use rejection::{BadRequest, Credentials, Rejection};

/// An API error: a [`Rejection`], a store's refusal or a 500.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    hints: Vec<Hint>,
    diagnostics: Option<serde_json::Value>,
    /// A refusal before the body was read, to be sent again later (`Retry-After`).
    retry_later: bool,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), hints: Vec::new(), diagnostics: None, retry_later: false }
    }

    /// A 500: the client sees only `internal_error` and the request id; the detail (a path,
    /// an SQLite message) goes to the server's log under that id (`svc_http`).
    fn internal(detail: &dyn std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", detail.to_string())
    }

    /// Its status (the console answers with a page of its own).
    pub(super) fn status(&self) -> StatusCode {
        self.status
    }

    /// What it says (the console shows it; never for a 500, whose detail is for the log).
    pub(super) fn message(&self) -> &str {
        &self.message
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::NotFound(what) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("{what} not found"))
            }
            StoreError::Refused { code, message } => ApiError::new(StatusCode::CONFLICT, code, message),
            StoreError::Transition(t) => ApiError::new(StatusCode::CONFLICT, "invalid_transition", t.to_string()),
            StoreError::Backend(m) => ApiError::internal(&m),
            // A sealed value that did not open, or a key file gone since the start: the
            // operator's to mend (the log has which), never a value served empty.
            StoreError::Keys(k) => ApiError::internal(&k),
            // Only the scheduler's writes ask for the lease; an API call never meets it.
            e @ StoreError::NotLeader(_) => ApiError::internal(&e),
            StoreError::Unavailable(why) => {
                // Where the database is and why it failed are for the log, not the caller.
                tracing::warn!("svc relay: the store is unavailable: {why}");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the relay's database cannot be reached just now; try again in a moment",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            return svc_http::internal_error(self.message);
        }
        let mut body = svc_http::ErrorBody::new(self.code, self.message);
        if !self.hints.is_empty() {
            body = body.with("hints", json!(self.hints));
        }
        if let Some(d) = self.diagnostics {
            body = body.with("diagnostics", d);
        }
        let mut response = svc_http::envelope_response(&body, self.status);
        if self.retry_later {
            svc_http::Busy::headers(&mut response);
        }
        response
    }
}

/// A small request body: at most [`SMALL_BODY_LIMIT`] bytes, refused in the envelope beyond.
struct SmallBody(Bytes);

impl<S: Send + Sync> FromRequest<S> for SmallBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<SmallBody, ApiError> {
        use http_body_util::BodyExt as _;
        match http_body_util::Limited::new(request.into_body(), SMALL_BODY_LIMIT).collect().await {
            Ok(collected) => Ok(SmallBody(collected.to_bytes())),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                Err(Rejection::BodyTooLarge { max: SMALL_BODY_LIMIT }.into())
            }
            Err(e) => Err(Rejection::InvalidRequest(BadRequest::BodyIncomplete(e.to_string())).into()),
        }
    }
}

type ApiResult<T> = Result<(StatusCode, axum::Json<T>), ApiError>;

fn ok<T: Serialize>(value: T) -> ApiResult<T> {
    Ok((StatusCode::OK, axum::Json(value)))
}

/// The ids the routes take in their paths, as the API names them; a control character or an
/// over-long one is 400 `invalid_path_id` naming the field, on SQLite and PostgreSQL alike.
pub(super) const PATH_IDS: svc_http::PathIds = svc_http::PathIds {
    fields: &[
        ("project", "project"),
        ("hostname", "hostname"),
        ("session", "sessionId"),
        ("digest", "digest"),
        ("name", "asset"),
    ],
    answer: svc_http::PathIdProblem::response,
};

/// The API's routes: deploys under the intake's bounds (`api_http.intake` of the
/// configuration), every other route with at most [`SMALL_BODY_LIMIT`] of body (a larger
/// declared one is refused at once).
pub(super) fn router(engine: Arc<Engine>) -> Router {
    let intake = svc_http::Intake::new(engine.config().api_http.intake);
    let deploys =
        Router::new().route("/api/ingress/deployments", post(deploy).get(list)).layer(axum::Extension(intake));
    let small = Router::new()
        .route("/api/ingress/deployments/{project}", get(status))
        .route("/api/ingress/deployments/{project}/quotes", post(new_quote))
        .route("/api/ingress/deployments/{project}/fund", post(fund))
        .route("/api/ingress/deployments/{project}/ledger", get(ledger))
        .route("/api/ingress/deployments/{project}/logs", get(logs))
        .route("/api/ingress/deployments/{project}/hints", get(hints))
        .route("/api/ingress/deployments/{project}/executions", get(executions))
        .route("/api/ingress/deployments/{project}/policy", get(policy::policy))
        .route("/api/ingress/deployments/{project}/stop", post(stop))
        .route("/api/ingress/deployments/{project}/hostnames", post(add_hostname))
        .route("/api/ingress/deployments/{project}/hostnames/{hostname}", axum::routing::delete(remove_hostname))
        .route("/api/ingress/deployments/{project}/hostnames/{hostname}/verify", post(verify_hostname))
        .route("/api/ingress/deployments/{project}/sessions", get(sessions))
        .route("/api/ingress/deployments/{project}/sessions/{session}/refund", post(refund))
        .route("/api/ingress/deployments/{project}/pins", get(pins).post(add_pin))
        .route("/api/ingress/deployments/{project}/pins/{digest}", axum::routing::delete(remove_pin))
        .route("/api/ingress/rewards", get(rewards))
        .route("/api/ingress/rewards/claim", post(claim))
        .route("/api/relay/health", get(super::admission::health))
        .route("/api/operators/register", post(super::admission::register))
        .route(relay_wire::feed::FEED_PATH, get(super::feed::routes))
        // The registration's `Bytes` (the others read a `SmallBody`).
        .layer(DefaultBodyLimit::max(SMALL_BODY_LIMIT));
    // Every id in a path is checked before a handler sees it (the console checks its own).
    svc_http::limit_body(svc_http::check_path_ids(small, PATH_IDS), SMALL_BODY_LIMIT)
        .merge(deploys)
        .fallback(|| async { Rejection::NoRoute })
        .with_state(engine)
}

/// Runs a handler's work on a blocking thread: it reads and writes the store, which waits
/// for the disk, and the async runtime's threads must stay free for other connections.
pub(super) async fn blocking<R: Send + 'static>(
    work: impl FnOnce() -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(&format!("a request's work did not finish: {e}")))?
}

/// The caller behind a customer token, whose organization must hold an invitation.
fn caller(engine: &Engine, headers: &HeaderMap) -> Result<Caller, ApiError> {
    invited(token_caller(engine, headers, TokenRole::Customer)?)
}

/// The caller behind an operator token.
fn operator(engine: &Engine, headers: &HeaderMap) -> Result<Caller, ApiError> {
    token_caller(engine, headers, TokenRole::Operator)
}

/// The caller behind the bearer token, which must have the role `role`.
fn token_caller(engine: &Engine, headers: &HeaderMap, role: TokenRole) -> Result<Caller, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(Rejection::Unauthenticated(Credentials::Missing))?;
    caller_of_token(engine, token, role)
}

/// Whoever a token speaks for, customer (invited) or operator: the console's session.
pub(super) fn member_of_token(engine: &Engine, token: &str) -> Result<Caller, ApiError> {
    let caller = token_owner(engine, token)?;
    match caller.role {
        TokenRole::Customer => invited(caller),
        TokenRole::Operator => Ok(caller),
    }
}

/// Whoever a token belongs to, whatever its role.
fn token_owner(engine: &Engine, token: &str) -> Result<Caller, ApiError> {
    Ok(engine
        .store()
        .caller(&wire::sha256_hex(token.trim().as_bytes()))?
        .ok_or(Rejection::Unauthenticated(Credentials::NotValid))?)
}

fn caller_of_token(engine: &Engine, token: &str, role: TokenRole) -> Result<Caller, ApiError> {
    let caller = token_owner(engine, token)?;
    if caller.role != role {
        return Err(match role {
            TokenRole::Customer => Rejection::CustomerTokenRequired,
            TokenRole::Operator => Rejection::OperatorTokenRequired,
        }
        .into());
    }
    Ok(caller)
}

fn invited(caller: Caller) -> Result<Caller, ApiError> {
    if !caller.invited {
        return Err(Rejection::InvitationRequired { org: caller.org_name }.into());
    }
    Ok(caller)
}

/// The request body as `T`; a refusal names the field at fault (`periods`, `bundle.x.js`).
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { bytes };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(body_refusal)
}

/// A body that does not read as the route's request, refused naming the field at fault.
fn body_refusal(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    // `?` stands for a key not read yet (the body ended inside an object): the place is the
    // object around it, or the body itself.
    let path = e.path().to_string();
    let at = path.trim_end_matches(".?").trim_end_matches('?').to_owned();
    let inner = e.into_inner();
    let why = if at == "." || at.is_empty() {
        BadRequest::Body(inner.to_string())
    } else {
        BadRequest::BodyAt { at, why: inner.to_string() }
    };
    Rejection::InvalidRequest(why).into()
}

async fn list(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> ApiResult<Vec<Deployment>> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        ok(engine.store().deployments_of(&caller.org_id)?.into_iter().map(|d| engine.with_url(d)).collect())
    })
    .await
}

async fn status(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<Status> {
    // The store's part off the runtime; the job's pids come from the engine's job table.
    let jobs = Arc::clone(&engine);
    let mut status = blocking(move || {
        let caller = caller(&engine, &headers)?;
        let id = deployment_of(&engine, &caller, &project)?.id;
        let store = engine.store();
        // The successor before the deployment: a successor promoted between two reads shows as
        // the deployment's revision, never as a deployment without its successor (chaos seed
        // 1796571478103223505: a redeploy that switched within 0.6 s read as replaced).
        let successor = store.successor(&id)?;
        let d = deployment_of(&engine, &caller, &project)?;
        Ok(Status {
            balance: store.balance(&d.id)?,
            funding: engine.funding(&d)?,
            latest_quote: store.quotes(&d.id)?.into_iter().next(),
            hostnames: store.hostnames(&d.id)?,
            validations: store.latest_validations(&d.id)?,
            transitions: store.transitions(&d.id)?,
            hints: engine.hints(&d)?,
            processes: Vec::new(),
            successor,
            deployment: d,
        })
    })
    .await?;
    status.processes = jobs.job_pids(&status.deployment).await.unwrap_or_default();
    ok(status)
}

async fn new_quote(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    SmallBody(bytes): SmallBody,
) -> ApiResult<super::model::Quote> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let req: QuoteRequest = body(&bytes)?;
        let d = deployment_of(&engine, &caller, &project)?;
        Ok((StatusCode::CREATED, axum::Json(operations::quote_for(&engine, &d, req.periods)?)))
    })
    .await
}

async fn fund(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    SmallBody(bytes): SmallBody,
) -> ApiResult<super::model::LedgerEntry> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let req: FundRequest = body(&bytes)?;
        let d = deployment_of(&engine, &caller, &project)?;
        Ok((StatusCode::CREATED, axum::Json(operations::fund(&engine, &d, &req.quote_id)?)))
    })
    .await
}

async fn ledger(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<LedgerResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        ok(LedgerResponse { entries: engine.store().ledger(&d.id)?, balance: engine.store().balance(&d.id)? })
    })
    .await
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    #[serde(default)]
    after: i64,
    #[serde(default)]
    limit: Option<u32>,
}

/// The most log entries one page carries.
const LOGS_PAGE_MAX: u32 = 5000;

async fn logs(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<LogsResponse> {
    blocking(move || {
        let bad = |why: BadRequest| ApiError::from(Rejection::InvalidRequest(why));
        let Query(q) = query.map_err(|e| bad(BadRequest::Query(e.body_text())))?;
        if q.after < 0 {
            return Err(bad(BadRequest::After(q.after)));
        }
        let limit = q.limit.unwrap_or(500);
        if !(1..=LOGS_PAGE_MAX).contains(&limit) {
            return Err(bad(BadRequest::Limit(limit)));
        }
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        let entries = engine.store().logs(&d.id, q.after, limit)?;
        let next = entries.last().map_or(q.after, |e| e.seq);
        ok(LogsResponse { entries, next })
    })
    .await
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecutionsQuery {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<String>,
}

/// The deployment's jobs as executions: `svc.execution-convergence.v1`, one page at a time.
async fn executions(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    query: Result<Query<ExecutionsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<manifest_core::projection::Convergence> {
    blocking(move || {
        let bad = |why: BadRequest| ApiError::from(Rejection::InvalidRequest(why));
        let Query(q) = query.map_err(|e| bad(BadRequest::Query(e.body_text())))?;
        let caller = caller(&engine, &headers)?;
        let id = deployment_of(&engine, &caller, &project)?.id;
        let store = engine.store();
        // The successor first, as `status` reads it.
        let successor = store.successor(&id)?;
        let d = deployment_of(&engine, &caller, &project)?;
        let built = super::executions::build(store, &d, successor.as_ref(), q.cursor.as_deref(), q.limit.as_deref());
        match built {
            Ok(projection) => ok(projection),
            Err(super::executions::ProjectionError::Store(e)) => Err(e.into()),
            Err(e @ super::executions::ProjectionError::Plan(_)) => Err(ApiError::internal(&e)),
            Err(e) => Err(bad(BadRequest::Page(e.to_string()))),
        }
    })
    .await
}

async fn hints(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<HintsResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        ok(HintsResponse { hints: engine.hints(&d)?, state: d.state })
    })
    .await
}

async fn stop(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<Deployment> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        let d = operations::stop(&engine, &caller, &d, &format!("stopped by {}", caller.token_name))?;
        ok(engine.with_url(d))
    })
    .await
}

async fn add_hostname(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    SmallBody(bytes): SmallBody,
) -> ApiResult<HostnameResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let req: HostnameRequest = body(&bytes)?;
        let added = operations::add_hostname_to(&engine, &caller, &project, &req.hostname)?;
        Ok((StatusCode::CREATED, axum::Json(added)))
    })
    .await
}

async fn verify_hostname(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath((project, hostname)): UrlPath<(String, String)>,
) -> ApiResult<HostnameResponse> {
    let reader = Arc::clone(&engine);
    let caller = blocking(move || caller(&reader, &headers)).await?;
    ok(operations::verify_hostname_of(engine, caller, project, hostname).await?)
}

async fn remove_hostname(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath((project, hostname)): UrlPath<(String, String)>,
) -> ApiResult<HostnameResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        ok(operations::remove_hostname_of(&engine, &caller, &project, &hostname)?)
    })
    .await
}

async fn sessions(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<SessionsResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        ok(SessionsResponse { sessions: engine.store().sessions(&d.id)?, balance: engine.store().balance(&d.id)? })
    })
    .await
}

async fn refund(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath((project, session)): UrlPath<(String, String)>,
) -> ApiResult<super::model::LedgerEntry> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        Ok((StatusCode::CREATED, axum::Json(operations::refund(&engine, &caller, &project, &session)?)))
    })
    .await
}

async fn rewards(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> ApiResult<super::model::RewardsSummary> {
    blocking(move || {
        let caller = operator(&engine, &headers)?;
        ok(engine.store().rewards(&caller.org_name, now_ms())?)
    })
    .await
}

async fn claim(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> ApiResult<ClaimResponse> {
    blocking(move || {
        let caller = operator(&engine, &headers)?;
        Ok((StatusCode::CREATED, axum::Json(operations::claim_rewards(&engine, &caller)?)))
    })
    .await
}

async fn pins(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
) -> ApiResult<PinsResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        ok(operations::pins_of(&engine, &caller, &project)?)
    })
    .await
}

async fn add_pin(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    SmallBody(bytes): SmallBody,
) -> ApiResult<PinsResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        let req: PinRequest = body(&bytes)?;
        Ok((StatusCode::CREATED, axum::Json(operations::pin(&engine, &caller, &project, &req.digest)?)))
    })
    .await
}

async fn remove_pin(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath((project, digest)): UrlPath<(String, String)>,
) -> ApiResult<PinsResponse> {
    blocking(move || {
        let caller = caller(&engine, &headers)?;
        ok(operations::unpin(&engine, &caller, &project, &digest)?)
    })
    .await
}

/// `GET /api/ingress/catalog`: the signed service catalog (as every route, for an invited
/// organization's token), listing the admitted gateways.
pub(super) fn catalog_router(engine: Arc<Engine>) -> Router {
    Router::new().route("/api/ingress/catalog", get(catalog)).with_state(engine)
}

async fn catalog(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> ApiResult<crate::catalog::SignedCatalog> {
    blocking(move || {
        caller(&engine, &headers)?;
        ok(operations::signed_catalog(&engine)?)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body_text: &str) -> String {
        body::<QuoteRequest>(&Bytes::from(body_text.to_owned())).expect_err("refused").message
    }

    /// Found by hand: a body cut inside an object was refused "at `?`", a place no one can find.
    #[test]
    fn a_body_cut_short_is_refused_as_the_body_not_at_a_question_mark() {
        let cut = refusal("{\"periods\": 5");
        assert!(cut.starts_with("the request body: EOF"), "{cut}");
        let field = refusal("{\"periods\": \"five\"}");
        assert!(field.starts_with("the request body at `periods`: "), "{field}");
    }
}
