//! The HTTP surface: routes, authentication, the error envelope
//! (`{"error": {"code", "message", "diagnostics"?}}`; a 500 is only `internal_error` and the
//! request id, through `svc_http::internal_error`), the body limit (a declared length over it
//! is 413 at once; a body is read only after its token is checked, and a large one under the
//! listener's bounds per organization and in all: 503 with `Retry-After` beyond them), and the
//! `Svc-Read-Contract: 3` header on every response. Handlers only translate HTTP; the use
//! cases are `operations`, and store work runs off the async runtime (`spawn_blocking`).

mod applications;
mod artifacts;
mod logs;
pub(super) mod rejection;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State as Extract};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::json;
use svc_http::Received;

use crate::schema::SchemaKind;
use crate::service::State;
use crate::service::auth::{bearer, hash_token};
use crate::service::executions::projection;
use crate::service::operations::applications as application;
use crate::service::operations::{self, publish};
use crate::service::store::{Application, Caller, PolicyVersion};
use crate::tree::Value;
use rejection::{ApiError, BodyProblem, Rejection};

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest upload body: the bundle's bytes in base64 (4 characters for 3 bytes) and room
/// for its paths and JSON (as the relay's deploy limit).
pub(crate) const MAX_UPLOAD_BODY_BYTES: usize =
    (svc_execution::bundle::BUNDLE_MAX_BYTES as usize) / 3 * 4 + 2 * 1024 * 1024;

/// The read-contract version sent on every response.
const READ_CONTRACT: &str = "3";

type Shared = Arc<State>;

/// The ids the routes take in their paths, as the API names them; a control character or an
/// over-long one is 400 `invalid_path_id` naming the field, on SQLite and PostgreSQL alike.
const PATH_IDS: svc_http::PathIds =
    svc_http::PathIds { fields: super::PATH_ID_FIELDS, answer: svc_http::PathIdProblem::response };

/// The service's routes over a state.
pub(crate) fn router(state: Arc<State>) -> Router {
    let routes = Router::new()
        .route(
            "/api/application-manifest/schema",
            get(|h: HeaderMap| async move { schema(SchemaKind::ManifestV4, &h) }),
        )
        .route(
            "/api/application-manifest/v5/schema",
            get(|h: HeaderMap| async move { schema(SchemaKind::ManifestV5, &h) }),
        )
        .route("/api/application-policy/schema", get(|h: HeaderMap| async move { schema(SchemaKind::PolicyV4, &h) }))
        .route(
            "/api/execution-convergence/schema",
            get(|h: HeaderMap| async move { schema(SchemaKind::Executions, &h) }),
        )
        .route("/api/applications", post(create_application).get(applications::list))
        .route("/api/applications/{id}", get(show_application))
        .route("/api/applications/{id}/resume", post(applications::resume))
        .route("/api/applications/{id}/policy-versions", post(publish_version).get(list_versions))
        .route("/api/applications/{id}/policy-versions/{n}", get(show_version))
        .route("/api/applications/{id}/activity", get(activity))
        .route("/api/applications/{id}/executions", get(executions))
        .route("/api/applications/{id}/logs", get(logs::logs))
        .route("/api/capabilities", get(capabilities))
        .route("/api/health", get(health));
    // Every id in a path is checked before a handler sees it (the console checks its own).
    let routes = svc_http::check_path_ids(routes, PATH_IDS)
        .nest("/console", crate::service::console::router())
        // The console's own address, with its slash: `nest` serves `/console` only.
        .route("/console/", get(|| async { svc_web::page::see_other("/console") }))
        .fallback(|| async { error(Rejection::NoSuchRoute.into()) })
        .method_not_allowed_fallback(|| async { error(Rejection::MethodNotAllowed.into()) });
    // Uploads of an application's files: bodies up to a bundle's, read under the intake's
    // bounds like any large body.
    let uploads = Router::new().route("/api/applications/{id}/artifacts", post(artifacts::upload));
    let uploads = svc_http::check_path_ids(uploads, PATH_IDS)
        .method_not_allowed_fallback(|| async { error(Rejection::MethodNotAllowed.into()) });
    svc_http::limit_body(routes, MAX_BODY_BYTES)
        .merge(svc_http::limit_body(uploads, MAX_UPLOAD_BODY_BYTES))
        .layer(axum::middleware::map_response(|mut r: Response| async move {
            r.headers_mut().insert("svc-read-contract", HeaderValue::from_static(READ_CONTRACT));
            r
        }))
        .with_state(state)
}

fn json_response(status: u16, body: &impl Serialize) -> Response {
    let bytes = serde_json::to_vec_pretty(body).unwrap_or_default();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn error(e: ApiError) -> Response {
    if e.status == 500 {
        // The message is the detail: for the server log, under the request id.
        return svc_http::internal_error(e.message);
    }
    let retry_later = rejection::retry_later(e.code);
    let mut body = svc_http::ErrorBody::new(e.code, e.message);
    if let Some(d) = e.diagnostics {
        body = body.with("diagnostics", json!(d));
    }
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = svc_http::envelope_response(&body, status);
    if retry_later {
        svc_http::Busy::headers(&mut response);
    }
    response
}

fn respond(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(error)
}

/// Runs blocking store work off the runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ApiError::internal(format!("the store task failed: {e}"))))
}

/// The schema routes: exact bytes, their digest as the ETag, 304 when the client has them.
fn schema(kind: SchemaKind, headers: &HeaderMap) -> Response {
    let etag = kind.etag();
    let cached = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*");
    let status = if cached { StatusCode::NOT_MODIFIED } else { StatusCode::OK };
    let mut response = if cached { status.into_response() } else { (status, kind.bytes()).into_response() };
    let h = response.headers_mut();
    if !cached {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/schema+json"));
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// The caller of a request, from its bearer token. Read on every request: a token created or
/// revoked by `svc admin` counts at once.
async fn authenticate(state: &Shared, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let unauthorized = || ApiError::from(Rejection::Unauthenticated);
    let token =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer).ok_or_else(unauthorized)?;
    let hash = hash_token(token);
    let caller = match state.store.on_runtime() {
        // A database across a network: one statement, from this task.
        Some(statements) => statements.caller(&hash).await?,
        // An indexed read on a pooled local connection: short enough for the async runtime.
        None if state.store.is_local() => state.store.caller(&hash)?,
        // Round trips, off the async workers.
        None => {
            let state = state.clone();
            blocking(move || Ok(state.store.caller(&hash)?)).await?
        }
    };
    caller.ok_or_else(unauthorized)
}

/// Reads the body of a request of `caller` (authenticated first), at most 1 MiB (413 beyond).
/// A large one (over 64 KiB) is read only under a permit of the intake's bounds (503 with
/// `Retry-After` beyond them, before any of it is read, when its length is declared), which
/// comes with it: keep it while the body is in memory.
async fn read_body(state: &Shared, caller: &Caller, headers: &HeaderMap, body: Body) -> Result<Received, ApiError> {
    read_body_up_to(state, caller, headers, body, MAX_BODY_BYTES, || Rejection::BodyTooLarge { max: MAX_BODY_BYTES })
        .await
}

/// [`read_body`] with another bound, and the refusal of a body over it.
async fn read_body_up_to(
    state: &Shared,
    caller: &Caller,
    headers: &HeaderMap,
    body: Body,
    max: usize,
    too_large: impl FnOnce() -> Rejection,
) -> Result<Received, ApiError> {
    let tenant = caller.organization.id.to_string();
    let incoming = state.intake.body(&tenant, headers, body, max).map_err(Rejection::TooManyLargeBodies)?;
    incoming.bytes().await.map_err(|e| {
        match e {
            svc_http::IntakeError::Busy(busy) => Rejection::TooManyLargeBodies(busy),
            svc_http::IntakeError::TooLarge { .. } => too_large(),
            svc_http::IntakeError::Read(why) => Rejection::InvalidRequestBody(BodyProblem::Incomplete(why.to_string())),
        }
        .into()
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApplicationView {
    application_id: String,
    application_uid: String,
    status: &'static str,
    active_pointer_version: u64,
    pause_reason: Option<String>,
    settled: bool,
}

impl From<Application> for ApplicationView {
    fn from(a: Application) -> Self {
        ApplicationView {
            application_id: a.application_id,
            application_uid: a.application_uid,
            status: a.status.as_str(),
            active_pointer_version: a.active_pointer_version,
            pause_reason: a.pause_reason,
            settled: a.settled,
        }
    }
}

async fn create_application(Extract(state): Extract<Shared>, headers: HeaderMap, body: Body) -> Response {
    respond(
        async {
            let caller = authenticate(&state, &headers).await?;
            let body = read_body(&state, &caller, &headers, body).await?.bytes;
            let application_id = parse_create(&body)?;
            let state = state.clone();
            let app = blocking(move || Ok(application::create(&state, &caller, &application_id)?)).await?;
            Ok(json_response(
                201,
                &json!({
                    "applicationId": app.application_id,
                    "applicationUid": app.application_uid,
                    "status": app.status.as_str(),
                    "activePointerVersion": app.active_pointer_version,
                }),
            ))
        }
        .await,
    )
}

/// `{"applicationId": "..."}` and nothing else.
fn parse_create(body: &[u8]) -> Result<String, ApiError> {
    let bad = |problem: BodyProblem| ApiError::from(Rejection::InvalidRequestBody(problem));
    let text = std::str::from_utf8(body).map_err(|_| bad(BodyProblem::NotUtf8))?;
    let (root, problems) = crate::parse::json(text);
    if let Some(p) = problems.first() {
        return Err(bad(BodyProblem::NotJson(p.message.clone())));
    }
    let Some(Value::Object(members)) = root.map(|r| r.value) else {
        return Err(bad(BodyProblem::NotApplicationObject));
    };
    let mut id = None;
    for m in members {
        match (m.key.as_ref(), m.value.value) {
            ("applicationId", Value::String(s)) => id = Some(s.into_owned()),
            ("applicationId", _) => return Err(bad(BodyProblem::ApplicationIdType)),
            (other, _) => return Err(bad(BodyProblem::UnknownApplicationField(other.to_owned()))),
        }
    }
    let id = id.ok_or_else(|| bad(BodyProblem::ApplicationIdMissing))?;
    let format = &crate::formats::APPLICATION_ID_V4;
    if id.is_empty() || id.len() > 64 || !(format.check)(&id) {
        return Err(Rejection::InvalidApplicationId { id }.into());
    }
    Ok(id)
}

/// Runs a blocking operation for the request's caller, off the runtime.
async fn as_caller<T: Send + 'static>(
    state: &Shared,
    headers: &HeaderMap,
    f: impl FnOnce(&State, &Caller) -> Result<T, operations::OperationError> + Send + 'static,
) -> Result<T, ApiError> {
    let caller = authenticate(state, headers).await?;
    let state = state.clone();
    blocking(move || Ok(f(&state, &caller)?)).await
}

/// The application, with its executions' convergence state.
async fn show_application(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    respond(
        async {
            let (app, convergence) =
                as_caller(&state, &headers, move |state, caller| application::show(state, caller, &id)).await?;
            let mut view = serde_json::to_value(ApplicationView::from(app)).unwrap_or_default();
            view["convergence"] = serde_json::to_value(convergence.convergence).unwrap_or_default();
            Ok(json_response(200, &view))
        }
        .await,
    )
}

async fn publish_version(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    respond(
        async {
            let caller = authenticate(&state, &headers).await?;
            // The permit, if the body is large, is held to the answer: what is read from the
            // body lives until then.
            let Received { bytes, permit: _permit } = read_body(&state, &caller, &headers, body).await?;
            let published = publish::publish(&state, caller, id, publish::Asked::Body(bytes)).await?;
            Ok(json_response(if published.committed { 201 } else { 200 }, &published.response))
        }
        .await,
    )
}

fn version_view(v: &PolicyVersion, active: u64, full: bool) -> serde_json::Value {
    let mut view = json!({
        "policyVersion": v.version,
        "schemaVersion": v.schema_version,
        "authoredDigest": v.authored_digest,
        "policyDigest": v.policy_digest,
        "publishedBy": v.published_by,
        "active": v.version == active,
    });
    if full {
        view["policy"] = serde_json::from_str(&v.policy).unwrap_or_default();
        view["authored"] = serde_json::from_str(&v.authored).unwrap_or_default();
    }
    view
}

async fn list_versions(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    respond(
        async {
            let (app, versions) =
                as_caller(&state, &headers, move |state, caller| application::versions(state, caller, &id)).await?;
            let views: Vec<_> = versions.iter().map(|v| version_view(v, app.active_pointer_version, false)).collect();
            Ok(json_response(200, &json!({ "policyVersions": views })))
        }
        .await,
    )
}

async fn show_version(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, String)>,
) -> Response {
    respond(
        async {
            let (app, v) =
                as_caller(&state, &headers, move |state, caller| application::version(state, caller, &id, &n)).await?;
            Ok(json_response(200, &version_view(&v, app.active_pointer_version, true)))
        }
        .await,
    )
}

async fn activity(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    respond(
        async {
            let (app, activity) =
                as_caller(&state, &headers, move |state, caller| application::activity(state, caller, &id)).await?;
            let entries: Vec<_> = activity
                .into_iter()
                .map(|a| {
                    json!({
                        "at": a.at, "actor": a.actor, "action": a.action,
                        "policyVersion": a.policy_version, "status": a.status, "reason": a.reason,
                    })
                })
                .collect();
            Ok(json_response(200, &json!({ "applicationId": app.application_id, "activity": entries })))
        }
        .await,
    )
}

/// `svc.execution-convergence.v1` (any member, viewer and up): `?cursor=` pages older
/// executions, `?limit=` (1-100) sizes the page.
async fn executions(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    uri: axum::http::Uri,
) -> Response {
    respond(
        async {
            let page = page_query(uri.query().unwrap_or(""))?;
            let view =
                as_caller(&state, &headers, move |state, caller| application::executions(state, caller, &id, &page))
                    .await?;
            Ok(json_response(200, &view))
        }
        .await,
    )
}

/// `cursor` and `limit`, each at most once, and nothing else.
fn page_query(query: &str) -> Result<projection::Page, ApiError> {
    let mut page = projection::Page::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match key {
            "cursor" => &mut page.cursor,
            "limit" => &mut page.limit,
            other => {
                return Err(Rejection::InvalidQuery(format!(
                    "unknown query parameter \"{other}\"; the parameters are cursor and limit"
                ))
                .into());
            }
        };
        if slot.replace(value.to_owned()).is_some() {
            return Err(Rejection::InvalidQuery(format!("`{key}` is given twice")).into());
        }
    }
    Ok(page)
}

/// `GET /api/health`: whether the service serves and its store answers (200, or 503); no
/// token needed (load balancers ask it).
async fn health(Extract(state): Extract<Shared>) -> Response {
    let store = Arc::clone(&state.store);
    let runtime = tokio::runtime::Handle::current();
    svc_http::store_health(&state.health, "svc serve", state.store.kind(), move || {
        store.ping()?;
        // Both kinds of connection: the hot path's, on the runtime, answer most requests.
        match store.on_runtime() {
            Some(statements) => runtime.block_on(statements.caller("")).map(drop),
            None => Ok(()),
        }
    })
    .await
}

async fn capabilities(Extract(state): Extract<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let statement = as_caller(&state, &headers, application::capabilities).await?;
            Ok(json_response(200, &statement))
        }
        .await,
    )
}
