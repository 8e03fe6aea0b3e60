//! The publication console at `/console/`: the organization's applications, each one's
//! overview and its executions updating live, for a member signed in with their API token.
//! Server-rendered HTML (`views`), with the shared layout, assets, session cookie and CSRF
//! checks of `svc-web`. It reads the store as the API does, with the same roles: the console
//! is another client of the same rules, not a second set of them.

mod diff;
mod output;
mod publish;
mod versions;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Extension, Form, Path, State as Extract};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use svc_web::console::{Console, Refusal};
use svc_web::page::{Nav, Page, html_response, see_other};
use svc_web::{Markup, session};

use super::State;
use super::auth::hash_token;
use super::http::rejection::ApiError;
use super::operations::OperationError;
use super::operations::applications;
use super::operations::refusal::Rejection;
use super::store::{Caller, ConsoleSession};
use svc_http::ClientAddr;

type Shared = Arc<State>;

/// This console: its name, its cookie, its home.
const CONSOLE: Console = Console {
    product: "svc console",
    cookie: session::PUBLICATION,
    home: ("/console/apps", "Back to the applications"),
    paste_token: "paste your API token (`svc admin token create` made it)",
    token_prefix: "svc_",
    attempts: &ATTEMPTS,
};

/// The publication console's sign-in attempts (per process).
static ATTEMPTS: svc_web::attempts::Attempts = svc_web::attempts::Attempts::new();

/// The console's routes (nested under `/console` by the service's router).
pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/", get(home))
        .route("/sign-in", get(sign_in_form).post(sign_in))
        .route("/sign-out", post(sign_out))
        .route("/apps", get(applications))
        .route("/apps/{id}", get(overview))
        .route("/apps/{id}/executions", get(executions))
        .route("/apps/{id}/executions/live", get(executions_live))
        .route("/apps/{id}/publish", get(publish::form).post(publish::submit))
        .route("/apps/{id}/versions", get(versions::list))
        .route("/apps/{id}/versions/{n}", get(versions::show))
        .route("/apps/{id}/resume", post(publish::resume))
        .route("/assets/{name}", get(svc_web::assets::serve))
        // Ids in the path checked first, answered with a page (named as the API names them).
        .route_layer(axum::middleware::from_fn_with_state(
            svc_http::PathIds {
                fields: super::PATH_ID_FIELDS,
                answer: |p| error_page(StatusCode::BAD_REQUEST, &p.to_string()),
            },
            svc_http::path_id_check,
        ))
        .fallback(|| async { not_found("no such page") })
        .layer(axum::middleware::map_response(svc_web::headers::secure))
}

/// A member signed in: who they are, and their session's CSRF token.
struct Member {
    caller: Caller,
    csrf: String,
}

impl Member {
    fn can_publish(&self) -> bool {
        self.caller.role.can_publish()
    }

    fn page(&self, title: impl Into<String>, nav: Vec<Nav>) -> Page {
        let who = format!(
            "{} ({}, organization {})",
            self.caller.name,
            self.caller.role.as_str(),
            self.caller.organization.name
        );
        CONSOLE.member_page(title, nav, who, &self.csrf)
    }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        if e.status == 500 {
            // The detail goes to the server log under the request id, never to the page.
            return Refusal::page(svc_http::internal_error(e.message));
        }
        Refusal::page(error_page(StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST), &e.message))
    }
}

impl From<super::store::StoreError> for Refusal {
    fn from(e: super::store::StoreError) -> Refusal {
        Refusal::from(ApiError::from(e))
    }
}

fn answer(result: Result<Response, Refusal>) -> Response {
    CONSOLE.answer(result)
}

/// The session the request's cookie names, if it is live: read on every request through its
/// token's row (a revoked token signs its sessions out at once), and recorded used at most
/// once a `TOUCH_MS`.
async fn session_of(state: &Shared, headers: &HeaderMap) -> Result<Option<(String, ConsoleSession)>, Refusal> {
    let Some(id) = session::PUBLICATION.session_id(headers) else { return Ok(None) };
    let hash = session::id_hash(&id);
    let state = state.clone();
    blocking(move || {
        let now = session::now_ms();
        let found = state.store.read_each()?.console_session(&hash, now)?;
        if let Some(s) = &found
            && session::needs_touch(s.last_seen_at, now)
        {
            let mut tx = state.store.write()?;
            tx.touch_console_session(&hash, now)?;
            tx.commit()?;
        }
        Ok(found.map(|s| (hash, s)))
    })
    .await
}

/// The member behind the request's session cookie.
async fn member(state: &Shared, headers: &HeaderMap) -> Result<Member, Refusal> {
    let (_, found) = session_of(state, headers).await?.ok_or(Refusal::SignIn)?;
    Ok(Member { caller: found.caller, csrf: found.csrf })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ApiError::internal(format!("a console task failed: {e}"))))
        .map_err(Refusal::from)
}

fn error_page(status: StatusCode, message: &str) -> Response {
    CONSOLE.error_page(status, message)
}

fn not_found(message: &str) -> Response {
    error_page(StatusCode::NOT_FOUND, message)
}

/// The navigation: the list, and for an application its views (Publish for a member who may).
fn nav(app: Option<&str>, current: &str, can_publish: bool) -> Vec<Nav> {
    let mut links = vec![Nav::new("/console/apps", "Applications", current == "apps")];
    if let Some(id) = app {
        links.push(Nav::new(format!("/console/apps/{id}"), "Overview", current == "overview"));
        links.push(Nav::new(format!("/console/apps/{id}/executions"), "Executions", current == "executions"));
        links.push(Nav::new(format!("/console/apps/{id}/versions"), "Versions", current == "versions"));
        if can_publish {
            links.push(Nav::new(format!("/console/apps/{id}/publish"), "Publish", current == "publish"));
        }
    }
    links
}

async fn home(Extract(state): Extract<Shared>, headers: HeaderMap) -> Response {
    match member(&state, &headers).await {
        Ok(_) => see_other("/console/apps"),
        Err(refusal) => answer(Err(refusal)),
    }
}

fn sign_in_page(status: StatusCode, problem: Option<&str>) -> Response {
    CONSOLE.sign_in_page(status, views::sign_in(problem))
}

async fn sign_in_form() -> Response {
    sign_in_page(StatusCode::OK, None)
}

#[derive(Deserialize)]
struct SignInForm {
    token: String,
}

/// Signs in: the token exchanged for a new session (its row stored, a few expired ones
/// collected), the session's id in the cookie. A wrong token counts against the client's
/// address.
async fn sign_in(
    Extract(state): Extract<Shared>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response {
    let client = client.map(|Extension(ClientAddr(ip))| ip);
    let (token, attempt) =
        match CONSOLE.sign_in_token(&headers, client, form.ok().map(|Form(f)| f.token), views::sign_in) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
    let made = blocking(move || {
        let Some(caller) = state.store.caller(&hash_token(&token))? else { return Ok(None) };
        let new = session::NewSession::generate()
            .map_err(|e| ApiError::internal(format!("no random numbers for a console session: {e}")))?;
        let now = session::now_ms();
        let mut tx = state.store.write()?;
        tx.collect_console_sessions(now, session::COLLECT_PER_SIGN_IN)?;
        tx.insert_console_session(&new.id_hash, &caller.token_id, &new.csrf, now)?;
        tx.commit()?;
        Ok(Some(new))
    })
    .await;
    match made {
        Ok(Some(new)) => session::PUBLICATION.signed_in(&new, "/console/apps", &headers),
        Ok(None) => CONSOLE.wrong_token(
            attempt,
            sign_in_page(StatusCode::UNAUTHORIZED, Some("no member has this token (it may have been revoked)")),
        ),
        Err(refusal) => answer(Err(refusal)),
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

/// Signs out: the session's row deleted (its cookie is worthless from now on, wherever it
/// was copied), then the cookie cleared.
async fn sign_out(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let found = match session_of(&state, &headers).await {
        Ok(found) => found,
        Err(refusal) => return answer(Err(refusal)),
    };
    let presented = form.ok().map(|Form(f)| f.csrf);
    let expected = found.as_ref().map(|(_, s)| s.csrf.as_str());
    if let Err(refused) = CONSOLE.sign_out_allowed(&headers, expected, presented.as_deref()) {
        return refused;
    }
    if let Some((hash, _)) = found {
        let ended = blocking(move || {
            let mut tx = state.store.write()?;
            tx.delete_console_session(&hash)?;
            Ok(tx.commit()?)
        })
        .await;
        if let Err(refusal) = ended {
            return answer(Err(refusal));
        }
    }
    session::PUBLICATION.signed_out(svc_web::console::SIGN_IN, &headers)
}

/// Applications one page of the list shows: each row reads its application's convergence, so
/// a page's work is bounded whatever the organization holds.
const APPS_PER_PAGE: usize = 50;

/// The list's page number (from 1).
#[derive(Deserialize)]
struct ListQuery {
    page: Option<usize>,
}

async fn applications(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    query: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            // Past the last page is an empty page; a number this large is one.
            let number = query.ok().and_then(|q| q.0.page).unwrap_or(1).clamp(1, 1_000_000);
            let (rows, total) = as_member(&state, &member, move |state, caller| {
                applications::page_of_applications(state, caller, number, APPS_PER_PAGE)
            })
            .await?;
            let page = member.page("Applications", nav(None, "apps", member.can_publish()));
            let list = views::ListPage { number, per_page: APPS_PER_PAGE, total };
            Ok(page.respond(StatusCode::OK, views::applications(&member.caller.organization.name, &rows, &list)))
        }
        .await,
    )
}

/// Runs an operation for the member, off the runtime; an application of none of the member's
/// organization is the console's 404 page.
async fn as_member<T: Send + 'static>(
    state: &Shared,
    member: &Member,
    f: impl FnOnce(&State, &Caller) -> Result<T, OperationError> + Send + 'static,
) -> Result<T, Refusal> {
    let (state, caller) = (state.clone(), member.caller.clone());
    match tokio::task::spawn_blocking(move || f(&state, &caller)).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(OperationError::Refused(Rejection::ApplicationNotFound { .. }))) => {
            Err(Refusal::page(not_found("no such application in your organization")))
        }
        Ok(Err(e)) => Err(Refusal::from(ApiError::from(e))),
        Err(e) => Err(Refusal::from(ApiError::internal(format!("a console task failed: {e}")))),
    }
}

/// What a redirect to the overview tells it to say.
#[derive(Deserialize)]
struct OverviewQuery {
    published: Option<u64>,
    resumed: Option<u8>,
}

async fn overview(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<OverviewQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let overview_id = id.clone();
            let overview = as_member(&state, &member, move |state, caller| {
                applications::overview(state, caller, &overview_id, 20)
            })
            .await?;
            let app = &overview.application;
            let page = member.page(app.application_id.clone(), nav(Some(&id), "overview", member.can_publish()));
            let notice = match query.ok().map(|q| q.0) {
                Some(OverviewQuery { published: Some(n), .. }) => Some(format!("Published version {n}.")),
                Some(OverviewQuery { resumed: Some(_), .. }) => Some("Resumed.".to_owned()),
                _ => None,
            };
            let resume = (app.status == super::store::Status::Paused && member.can_publish())
                .then(|| publish::resume_form(&id, &member));
            let content = views::overview(
                app,
                &overview.verdict,
                overview.active.as_ref(),
                &overview.activity,
                notice.as_deref(),
                resume,
            );
            Ok(page.respond(StatusCode::OK, content))
        }
        .await,
    )
}

async fn projection_of(state: &Shared, member: &Member, id: String) -> Result<Markup, Refusal> {
    let (convergence, recent) = as_member(state, member, move |state, caller| {
        applications::recent_executions(state, caller, &id, 20, output::LINES_SHOWN)
    })
    .await?;
    Ok(views::executions(&convergence, &output::shown(recent)))
}

async fn executions(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let live = projection_of(&state, &member, id.clone()).await?;
            let page = member.page(format!("{id}: executions"), nav(Some(&id), "executions", member.can_publish()));
            Ok(page.respond(StatusCode::OK, views::executions_page(&id, live)))
        }
        .await,
    )
}

/// The executions region alone, which the page's script swaps in every two seconds; 401 (not
/// a redirect) when signed out, so the script can go to the sign-in page.
async fn executions_live(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let member = match member(&state, &headers).await {
        Ok(m) => m,
        Err(Refusal::SignIn) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(Refusal::Page(r)) => return *r,
    };
    match projection_of(&state, &member, id).await {
        Ok(markup) => {
            let mut response = html_response(StatusCode::OK, markup);
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(Refusal::SignIn) => StatusCode::UNAUTHORIZED.into_response(),
        Err(Refusal::Page(r)) => *r,
    }
}
